"""``foldline-cost``: the cost model's fold line and target, applied per profile from the naive run."""

from __future__ import annotations

import pytest

from runtime.bench import workloads
from runtime.bench.cost_strategy import TARGETS, choose_profile, cost_strategy
from runtime.bench.harness import run_workload_set, strategies_named
from runtime.bench.peers import Step
from runtime.bench.strategies import FOLDLINE_COST
from runtime.fold.cost import CostPrices

PRICES = CostPrices()


def steps(node: str, sizes: list[int]) -> list[Step]:
    return [Step("b-" + node, node, size, 10) for size in sizes]


def test_the_line_sits_at_the_hard_limit_when_the_ceiling_is_small_and_the_fold_goes_deepest() -> None:
    choice = choose_profile("default", 20_000, 5_000, 1_000, PRICES)
    assert choice is not None
    assert choice.target == min(TARGETS)
    assert choice.fold_at == pytest.approx((20_000 * 0.955 - 5_000) / 20_000, abs=1e-3)
    assert choice.reason == "the line is the ceiling's hard limit: b* is past it"
    roomy = choose_profile("default", 200_000, 2_000, 1_000, PRICES)
    assert roomy is not None and roomy.reason == "the line is b*, under the hard limit" and roomy.fold_at < 0.9


def test_growth_too_large_for_any_candidate_keeps_the_fixed_fractions() -> None:
    assert choose_profile("default", 20_000, 15_000, 1_000, PRICES) is None
    scenario = workloads.build("reading-20k", workloads.SMALL)
    strategy, choices = cost_strategy(scenario, steps("reader", [1_000, 20_000, 39_000]), PRICES)
    assert choices == [] and strategy.per_profile == {}
    assert strategy.apply(scenario).profiles["default"].context_fold_at == 0.8


def test_each_profile_gets_its_own_line_and_a_profile_without_a_ceiling_is_left_alone() -> None:
    scenario = workloads.build("emitter", workloads.SMALL)
    runs = steps("emitter", [600, 1_800, 3_000]) + steps("worker-1", [3_000, 3_400, 3_800])
    strategy, choices = cost_strategy(scenario, runs, PRICES)
    assert [c.profile for c in choices] == ["default"]  # the emitter's profile has no ceiling
    applied = strategy.apply(scenario)
    default = applied.profiles["default"]
    assert default.context_fold_target == choices[0].target and default.context_fold_at == choices[0].fold_at
    assert applied.profiles["emitter"].context_fold_at == 0.8
    assert choices[0].growth == pytest.approx(400)
    assert strategy.name == FOLDLINE_COST.name and FOLDLINE_COST.derived


@pytest.mark.anyio
async def test_the_harness_derives_it_from_the_naive_run_and_reports_the_choice() -> None:
    scenario = workloads.build("reading-20k", workloads.SMALL)
    result = await run_workload_set(scenario, strategies_named(["foldline-cost"]), provider_kind="scripted")
    run = result.runs["foldline-cost"]
    assert run.bytes_unrecoverable == 0 and run.over_ceiling_estimate == 0
    (choice,) = result.cost_choices
    assert choice.profile == "default" and choice.ceiling == 6_000 and choice.target in TARGETS
    assert 0 < choice.target < choice.fold_at <= 1
