"""The cost model's rules a mutation run found unpinned (scripts/mutation): each test names the rule it pins.

Written against the mutants of ``runtime/fold/cost.py`` that test_fold_cost and
test_bench_cost_strategy let through: which argument a refusal names, the
boundaries of the accepted ranges, the decision's reasons and its JSON record.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from runtime.fold.cost import (
    Candidate,
    CostDecision,
    CostPrices,
    CostState,
    GrowthMeter,
    choose,
    fixed_fraction_line,
    prices_for,
    realised,
    target_candidate,
)
from runtime.models.pricing import PriceTier

PRICES = CostPrices()


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: CostPrices(read=0), "CostPrices.read: 0 is not a positive finite number"),
        (lambda: CostPrices(write=0), "CostPrices.write: 0 is not a positive finite number"),
        (lambda: CostPrices(output=-1), "CostPrices.output: -1 is not a non-negative finite number"),
        (lambda: CostState(-1, 1.0, 100), "CostState.tokens: -1 is not a non-negative finite number"),
        (lambda: CostState(1, 0.0, 100), "CostState.growth: 0.0 is not a positive finite number"),
        (lambda: CostState(1, True, 100), "CostState.growth: True is not a positive finite number"),
        (lambda: CostState(1, 1.0, 0), "CostState.ceiling: 0 is not a positive finite number"),
        (lambda: Candidate("a", -1, 0), "Candidate.tokens_after: -1 is not a non-negative finite number"),
        (lambda: Candidate("a", True, 0), "Candidate.tokens_after: True is not a non-negative finite number"),
        (lambda: Candidate("a", 5, -1), "Candidate.rewrite_tokens: -1 is not a non-negative finite number"),
        (lambda: Candidate("a", 5, 1, -1), "Candidate.summary_output_tokens: -1 is not a non-negative finite number"),
        (lambda: Candidate("a", 5, 1, "2"), "Candidate.summary_output_tokens: '2' is not a non-negative finite number"),
        (lambda: realised(-1, 0, 0, PRICES), "read_tokens: -1 is not a non-negative finite number"),
        (lambda: realised(0, -1, 0, PRICES), "write_tokens: -1 is not a non-negative finite number"),
        (lambda: realised(0, 0, -1, PRICES), "output_tokens: -1 is not a non-negative finite number"),
        (lambda: fixed_fraction_line(0, 0.5), "ceiling: 0 is not a positive finite number"),
        (lambda: fixed_fraction_line(100, 1.5), "fold_at: 1.5 is not in (0, 1]"),
        (lambda: target_candidate(0, 0.5, 0, 0), "ceiling: 0 is not a positive finite number"),
        (lambda: target_candidate(100, 0, 0, 0), "target: 0 is not in (0, 1)"),
        (lambda: GrowthMeter().observe(-1), "GrowthMeter.observe estimate: -1 is not a non-negative finite number"),
    ],
)
def test_a_refusal_names_the_argument_and_the_value(build: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError) as refused:
        build()
    assert str(refused.value) == message


def test_the_boundaries_of_the_accepted_ranges() -> None:
    assert fixed_fraction_line(100, 1) == 100  # a fold line at the ceiling itself
    assert CostState(1, 1.0, 100, margin=0).hard == 99.0  # no margin at all


@pytest.mark.parametrize(
    ("tier", "message"),
    [
        (
            PriceTier(None, input=0.0, output=15.0, cache_read=0.3, cache_write_5m=3.75),
            "prices_for: the tier has no input price, so no relative price can be formed",
        ),
        (
            PriceTier(None, input=3.0, output=None, cache_read=None, cache_write_5m=3.75),
            "prices_for: the tier has no cache_read, output price; the cost policy needs it",
        ),
    ],
)
def test_prices_for_refuses_a_tier_it_cannot_use(tier: PriceTier, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        prices_for(tier)
    assert str(refused.value) == message


def test_an_unchanged_size_is_an_increment_of_zero_not_a_new_cycle() -> None:
    assert GrowthMeter().observe(100).observe(100).increments == (0,)
    assert GrowthMeter().observe(100).observe(90).increments == ()


def test_the_decision_records_its_figures_rounded_to_three_places() -> None:
    decision = CostDecision(
        True,
        "why",
        choice=Candidate("deep", 10, 5),
        line=12.34567,
        predicted_per_request=1.23456,
        predicted_commit_cost=2.34567,
        horizon_requests=3.45678,
    )
    assert decision.to_json() == {
        "commit": True,
        "reason": "why",
        "choice": "deep",
        "line": 12.346,
        "predicted_per_request_bit": 1.235,
        "predicted_commit_bit": 2.346,
        "horizon_requests": 3.457,
    }
    assert CostDecision(False, "none").to_json() == {
        "commit": False,
        "reason": "none",
        "choice": None,
        "line": None,
        "predicted_per_request_bit": None,
        "predicted_commit_bit": None,
        "horizon_requests": None,
    }


GROWTH, CEILING = 1000.0, 100_000  # hard = 100,000 x 0.955 - 1,000 = 94,500
ROOMY = Candidate("roomy", 20_000, 10_000)


def test_the_reasons_and_the_boundaries_of_each_decision() -> None:
    line = choose([ROOMY], CostState(0, GROWTH, CEILING), PRICES).line
    assert line is not None and line < 94_500
    under = choose([ROOMY], CostState(int(line) - 1, GROWTH, CEILING), PRICES)
    assert (under.commit, under.reason) == (False, "under the cost line: carrying is cheaper than the rewrite")
    at = choose([ROOMY], CostState(int(line) + 1, GROWTH, CEILING), PRICES)
    assert (at.commit, at.reason) == (True, "past the cost line: carrying costs more than the rewrite")
    assert at.horizon_requests == pytest.approx((at.line - ROOMY.tokens_after) / GROWTH)
    assert CostState(0, GROWTH, CEILING).hard == 94_500
    over = choose([ROOMY], CostState(94_501, GROWTH, CEILING), PRICES)
    assert (over.commit, over.reason) == (True, "the next round would cross the ceiling's hard limit")


def test_exactly_at_a_line_that_is_the_hard_limit_the_commit_is_for_cost() -> None:
    costly = Candidate("costly", 20_000, 20_000, 200_000)  # a rewrite so dear that its best line is the hard limit
    decision = choose([costly], CostState(94_500, GROWTH, CEILING), PRICES)
    assert decision.line == 94_500
    assert (decision.commit, decision.reason) == (True, "past the cost line: carrying costs more than the rewrite")


def test_with_no_candidate_that_leaves_room_the_decision_waits_until_the_hard_limit() -> None:
    cramped = Candidate("cramped", 94_000, 1_000)  # after it, not one round of growth fits under the hard limit
    at_hard = choose([cramped], CostState(94_500, GROWTH, CEILING), PRICES)
    assert (at_hard.commit, at_hard.reason) == (False, "no candidate leaves room under the hard limit")
    assert at_hard.choice is None
    over = choose([cramped], CostState(94_501, GROWTH, CEILING), PRICES)
    assert (over.commit, over.reason) == (
        True,
        "over the hard limit and no candidate leaves room to run: the deepest fold",
    )


def test_prices_for_gives_each_price_relative_to_fresh_input() -> None:
    tier = PriceTier(None, input=2.0, output=8.0, cache_read=1.0, cache_write_5m=3.0)
    assert prices_for(tier) == CostPrices(read=0.5, write=1.5, output=4.0)
