"""Compaction as the peers run it: the replay's arithmetic, its variants and their failure paths."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.bench.peers import (
    HEADLINE,
    TRIGGER_SHARE,
    VARIANTS,
    PeerParams,
    Step,
    replay,
    replay_all,
)
from runtime.models.pricing import PricingTable

PRICING = PricingTable.load_default()
MODEL = "claude-opus-5"  # $5 in, $25 out, $6.25 5m write, $0.50 read: output ratio 5


def steps(sizes: list[int], output: int = 10, node: str = "n") -> list[Step]:
    return [Step("b1", node, size, output) for size in sizes]


def test_trigger_is_claude_codes_share_of_a_200k_window() -> None:
    assert TRIGGER_SHARE == pytest.approx(167_000 / 200_000)


def test_variants_cover_the_sensitivity_grid_and_name_the_headline() -> None:
    labels = [v.label for v in VARIANTS]
    assert labels == ["hit/1k", "hit/4k", "hit/16k", "miss/1k", "miss/4k", "miss/16k"]
    assert HEADLINE in labels


def test_without_a_trigger_the_replay_is_the_append_only_bound_plus_output() -> None:
    sizes = [1_000, 1_500, 2_500]
    figures = replay(steps(sizes), {"n": 100_000}, VARIANTS[0], PRICING, MODEL)
    assert figures.feasible and figures.summaries == 0 and figures.requests == 3
    # each request reads what the previous carried and writes the rest
    assert figures.cache_read == 1_000 + 1_500
    assert figures.cache_write == 1_000 + 500 + 1_000
    expected = 0.1 * 2_500 + 1.25 * 2_500 + 5 * 30
    assert figures.bit == pytest.approx(expected)
    assert figures.usd == pytest.approx(expected * 5 / 1_000_000)


def test_a_hit_summary_reads_the_prefix_and_a_miss_writes_it_all() -> None:
    sizes = [1_000, 5_000, 9_000]  # ceiling 10,000: trigger 8,350, crossed by the third
    hit = replay(steps(sizes), {"n": 10_000}, PeerParams(1_000, "hit"), PRICING, MODEL)
    miss = replay(steps(sizes), {"n": 10_000}, PeerParams(1_000, "miss"), PRICING, MODEL)
    assert hit.summaries == miss.summaries == 1 and hit.requests == 4
    # the summary request carries 9,000 tokens: hit reads the 5,000 the previous request cached
    assert miss.cache_read == hit.cache_read - 5_000
    assert miss.bit - hit.bit == pytest.approx(5_000 * (1.25 - 0.1))
    # after it the session restarts from the base (1,000) and the summary (1,000): 1,000 read, 1,000 written
    assert hit.peak_request_tokens == 9_000


def test_longer_summaries_cost_their_output_and_their_carrying() -> None:
    sizes = [1_000, 5_000, 9_000, 9_500]
    short = replay(steps(sizes), {"n": 10_000}, PeerParams(1_000, "hit"), PRICING, MODEL)
    long = replay(steps(sizes), {"n": 10_000}, PeerParams(4_000, "hit"), PRICING, MODEL)
    assert long.bit - short.bit >= 3_000 * 5  # output alone


def test_a_summary_that_crosses_the_trigger_is_infeasible_and_unpriced() -> None:
    figures = replay(steps([1_000, 9_000]), {"n": 10_000}, PeerParams(16_000, "hit"), PRICING, MODEL)
    assert not figures.feasible and figures.bit == 0
    assert "crosses the trigger" in figures.note and "16,000-token summary" in figures.note


def test_the_summary_request_carries_at_most_the_ceiling() -> None:
    figures = replay(steps([1_000, 30_000]), {"n": 10_000}, PeerParams(1_000, "miss"), PRICING, MODEL)
    assert figures.feasible and figures.summaries == 1
    assert figures.peak_request_tokens == 10_000


def test_a_node_without_a_ceiling_never_compacts_and_an_unknown_node_is_refused() -> None:
    figures = replay(steps([1_000, 90_000]), {"n": None}, PeerParams(1_000, "hit"), PRICING, MODEL)
    assert figures.feasible and figures.summaries == 0
    with pytest.raises(ValueError, match="no ceiling given for node"):
        replay(steps([1_000], node="other"), {"n": 10}, PeerParams(1_000, "hit"), PRICING, MODEL)
    with pytest.raises(ValueError, match="is not positive"):
        replay(steps([1_000]), {"n": 0}, PeerParams(1_000, "hit"), PRICING, MODEL)


def test_no_requests_is_reported_not_priced() -> None:
    figures = replay([], {}, PeerParams(1_000, "hit"), PRICING, MODEL)
    assert not figures.feasible and "no requests" in figures.note


def test_a_later_branch_reads_the_shared_base_from_the_cache() -> None:
    two = [Step("b1", "n", 1_000, 0), Step("b2", "n", 1_000, 0)]
    figures = replay(two, {"n": 100_000}, PeerParams(1_000, "hit"), PRICING, MODEL)
    assert figures.cache_read == 1_000 and figures.cache_write == 1_000


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"summary_tokens": 0, "summary_cache": "hit"}, "summary_tokens"),
        ({"summary_tokens": 10, "summary_cache": "warm"}, "summary_cache"),
        ({"summary_tokens": 10, "summary_cache": "hit", "trigger_share": 1.5}, "trigger_share"),
        ({"summary_tokens": 10, "summary_cache": "hit", "kept_tokens": -1}, "kept_tokens"),
    ],
)
def test_bad_parameters_are_named(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        PeerParams(**kwargs)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(
    growth=st.lists(st.integers(min_value=0, max_value=4_000), min_size=1, max_size=40),
    base=st.integers(min_value=200, max_value=2_000),
)
def test_a_miss_never_costs_less_than_a_hit_and_summaries_cost_at_least_their_output(
    growth: list[int], base: int
) -> None:
    sizes = [base]
    for g in growth:
        sizes.append(sizes[-1] + g)
    for n in (1_000, 4_000):
        hit = replay(steps(sizes, output=5), {"n": 20_000}, PeerParams(n, "hit"), PRICING, MODEL)
        miss = replay(steps(sizes, output=5), {"n": 20_000}, PeerParams(n, "miss"), PRICING, MODEL)
        assert hit.feasible == miss.feasible
        if hit.feasible:
            assert miss.bit >= hit.bit - 1e-6
            assert hit.summaries == miss.summaries
            assert hit.output == 5 * len(sizes) + n * hit.summaries
            assert hit.peak_request_tokens <= max(20_000, sizes[0])


def test_replay_all_runs_every_variant() -> None:
    figures = replay_all(steps([1_000, 2_000]), {"n": 100_000}, PRICING, MODEL)
    assert [f.params.label for f in figures] == [v.label for v in VARIANTS]
    assert all(f.to_json()["variant"] == f.params.label for f in figures)


def test_each_node_compacts_under_its_own_ceiling_and_a_scenario_without_one_has_no_peer_figures() -> None:
    from runtime.bench import workloads
    from runtime.bench.harness import RunMetrics, node_ceilings, peer_figures
    from runtime.bench.strategies import NAIVE

    fanout = node_ceilings(workloads.build("fanout", workloads.SMALL))
    assert fanout["lead"] == 30_000 and fanout["worker-1"] == 6_000 and fanout["checker-1"] == 4_000
    emitter = node_ceilings(workloads.build("emitter", workloads.SMALL))
    assert emitter["emitter"] is None and emitter["worker-1"] == 5_000 and emitter["checker"] == 3_000

    uncapped = NAIVE.apply(workloads.build("fits", workloads.SMALL))  # naive lifts every ceiling
    baseline = RunMetrics(
        workload="fits",
        strategy="naive",
        status="ok",
        nodes={},
        requests=0,
        usage={},
        cost_bit=0.0,
        cost_usd=None,
        output_priced=True,
        cached_share=0.0,
        peak_request_tokens=0,
        refusals=0,
        notices=0,
        folds=0,
        fold_commits=0,
        rewrites_explained=0,
        rewrites_unexplained=0,
        bytes_unrecoverable=0,
        over_ceiling_estimate=0,
        over_ceiling_reported=0,
        probes=None,
        keys=None,
        summaries=0,
        wall_s=0.0,  # type: ignore[arg-type]
    )
    figures, note = peer_figures(uncapped, baseline, PRICING)
    assert figures == () and note == "no node has a numeric ceiling: nothing to compact under"
