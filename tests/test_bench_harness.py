"""The harness on the small workloads: every workload under every strategy, measured from the run itself."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runtime.bench import workloads
from runtime.bench.facts import fact_value
from runtime.bench.harness import (
    ProbeTally,
    RunMetrics,
    WorkloadResult,
    run_workload_set,
    strategies_named,
)
from runtime.bench.lower_bound import BoundFigures
from runtime.bench.peers import VARIANTS, PeerFigures, PeerParams
from runtime.bench.reader import RecallOutcome
from runtime.bench.strategies import STRATEGIES
from runtime.bench.table import bench_json, evaluate_targets, format_table, ratios
from runtime.errors import ConfigError

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("name", list(workloads.WORKLOADS))
async def test_each_small_workload_runs_under_every_strategy(name: str) -> None:
    scenario = workloads.build(name, workloads.SMALL)
    result = await run_workload_set(scenario, strategies_named(None), provider_kind="scripted")
    assert set(result.runs) | set(result.not_run) == set(STRATEGIES)
    assert "naive" in result.runs and result.bound.bit > 0 and result.bound.requests == result.runs["naive"].requests

    naive, cached = result.runs["naive"], result.runs["cache-only"]
    # priced as users pay: claude-opus-5's output is 5x its input, and every price is known
    assert naive.output_priced and naive.cost_usd is not None
    output = naive.usage["output_tokens"]
    assert naive.cached_share == 0 and naive.fresh_input == naive.new_input
    assert naive.cost_bit == pytest.approx(naive.fresh_input + 5 * output)
    assert naive.cost_usd == pytest.approx(naive.cost_bit * 5 / 1_000_000)
    assert result.bound.output_priced
    assert 0 < cached.cost_bit < naive.cost_bit and cached.cached_share > 0.5
    for run in (naive, cached):  # nothing folds: every recall is in view
        recalls = run.probes.total + run.keys.total
        assert recalls > 0 and run.probes.view + run.keys.view == recalls
        assert run.folds == run.fold_commits == 0

    for run in result.runs.values():
        assert run.probes.wrong == run.keys.wrong == 0, f"{run.strategy} answered a recall wrongly"
        assert run.rewrites_unexplained == 0, f"{run.strategy} rewrote a prefix without a cause"
        assert run.over_ceiling_estimate == 0, f"{run.strategy} sent a request over its ceiling"
        assert run.requests > 0 and run.wall_s >= 0
    if "foldline" in result.runs:
        run = result.runs["foldline"]
        assert run.bytes_unrecoverable == 0
        assert run.probes.rerun + run.keys.rerun + run.probes.failed + run.keys.failed == 0
    if name == "fanout":
        for run in result.runs.values():
            assert sum(run.nodes.values()) == 9
        assert naive.nodes == {"ok": 6, "failed": 3, "skipped": 0} and naive.refusals == 3
    if name == "emitter":
        for run in result.runs.values():
            # At the small sizes a worker's 5,000-token ceiling leaves little room for what its model reads
            # back after a fold that stops at its target: a worker may be refused (never sent over its
            # ceiling). At full size every worker finishes (foldline bench). A node fails only refused.
            assert run.nodes["ok"] >= 2 and run.nodes["failed"] <= run.refusals, (run.strategy, run.nodes)
            assert run.over_ceiling_estimate == 0
        # Without folding the bounded checker fails as its own node, refused with nothing sent; under
        # foldline it folds the round its emitter carried fresh (actors.inherit_fold) and every node finishes.
        assert naive.nodes["failed"] >= 1 and result.runs["cache-only"].nodes["failed"] >= 1
        assert result.runs["foldline"].nodes == {"ok": 5, "failed": 0, "skipped": 0}
    # compaction as the peers run it, every variant of the sensitivity table, from the naive requests
    assert [f.params.label for f in result.peers] == [v.label for v in VARIANTS]
    assert any(f.feasible for f in result.peers)
    for figures in result.peers:
        if figures.feasible:
            assert figures.output >= naive.usage["output_tokens"] and figures.bit > 0 and figures.usd is not None


async def test_compaction_loses_what_it_summarized_and_the_probes_show_it() -> None:
    result = await run_workload_set(
        workloads.build("reading-20k", workloads.SMALL), strategies_named(["compaction"]), provider_kind="scripted"
    )
    run = result.runs["compaction"]
    assert run.summaries > 0  # it compacted
    assert run.probes.rerun + run.probes.failed > 0 and run.probes.read_result == 0


def test_unknown_strategy_names_are_bad_input() -> None:
    with pytest.raises(ConfigError, match="unknown strategy 'fold'; strategies: naive, cache-only"):
        strategies_named(["naive", "fold"])
    assert [s.name for s in strategies_named(["foldline", "naive"])] == ["naive", "foldline"]


def test_recalls_are_judged_against_the_facts_real_values() -> None:
    def outcome(fact: str, how: str, value: str | None) -> RecallOutcome:
        return RecallOutcome("n", 0, fact, "probe", how, value, 0)  # type: ignore[arg-type]

    tally = ProbeTally.judge(
        [
            outcome("A", "view", fact_value("A")),
            outcome("B", "read_result", fact_value("B")),
            outcome("C", "rerun", "0000000000000000"),
            outcome("D", "failed", None),
        ]
    )
    assert tally == ProbeTally(view=1, read_result=1, rerun=0, failed=2, wrong=1)


# -- the table and the targets, on figures made up for the purpose -----------------------------


def metrics(workload: str, strategy: str, bit: float, **changes: Any) -> RunMetrics:
    values: dict[str, Any] = {
        "workload": workload,
        "strategy": strategy,
        "status": "ok",
        "nodes": {"ok": 1, "failed": 0, "skipped": 0},
        "requests": 10,
        "usage": {
            "input_tokens": 100,
            "cache_read_input_tokens": 900,
            "cache_write_5m_tokens": 50,
            "cache_write_1h_tokens": 0,
            "output_tokens": 20,
        },
        "cost_bit": bit,
        "cost_usd": None,
        "output_priced": False,
        "cached_share": 0.9,
        "peak_request_tokens": 1000,
        "refusals": 0,
        "notices": 0,
        "folds": 0,
        "fold_commits": 0,
        "rewrites_explained": 0,
        "rewrites_unexplained": 0,
        "bytes_unrecoverable": 0,
        "over_ceiling_estimate": 0,
        "over_ceiling_reported": 0,
        "probes": ProbeTally(view=2),
        "keys": ProbeTally(),
        "summaries": 0,
        "wall_s": 0.1,
    }
    values.update(changes)
    return RunMetrics(**values)


def result(
    workload: str,
    bound: float,
    runs: list[RunMetrics],
    not_run: dict[str, str] | None = None,
    peer_bit: float | None = None,
) -> WorkloadResult:
    figures = BoundFigures(requests=3, write_tokens=100, read_tokens=200, output_tokens=5, output_ratio=None, bit=bound)
    peers = (
        ()
        if peer_bit is None
        else (
            PeerFigures(PeerParams(4_000, "hit"), feasible=True, bit=peer_bit, summaries=1),
            PeerFigures(PeerParams(16_000, "hit"), feasible=False, note="the kept context crosses the trigger"),
        )
    )
    return WorkloadResult(workload, "made up", figures, {r.strategy: r for r in runs}, not_run or {}, peers)


def test_targets_are_met_missed_or_not_measured_from_the_figures() -> None:
    results = [
        result("fits", 1000, [metrics("fits", "foldline", 1015)]),
        result(
            "reading-20k",
            1000,
            [
                metrics("reading-20k", "compaction", 2000),
                metrics("reading-20k", "foldline", 900, probes=ProbeTally(read_result=3, rerun=1)),
            ],
            peer_bit=1800,
        ),
        result("reading-40k", 1000, [metrics("reading-40k", "foldline", 900)], peer_bit=1000),
        result(
            "staged-64",
            1000,
            [
                metrics("staged-64", "compaction", 2000),
                metrics("staged-64", "foldline", 1000),
                metrics(
                    "staged-64",
                    "fold-immediate",
                    3000,
                    usage={
                        "input_tokens": 0,
                        "cache_read_input_tokens": 0,
                        "cache_write_5m_tokens": 250,
                        "cache_write_1h_tokens": 0,
                        "output_tokens": 0,
                    },
                ),
            ],
        ),
    ]
    states = [(t.name, t.met) for t in evaluate_targets(results)]
    assert ("fits: foldline <= 1.02 x lower bound", True) in states
    assert ("reading-20k: foldline <= 0.5 x peer compaction (hit/4k)", True) in states
    assert any(n.startswith("reading-20k: foldline loses 0 bytes") and m is False for n, m in states)
    assert ("reading-40k: foldline <= 0.5 x peer compaction (hit/4k)", False) in states  # 0.9 x
    assert ("staged-64: foldline <= 0.5 x peer compaction (hit/4k)", None) in states  # no peer figures
    details = {t.name: t.detail for t in evaluate_targets(results)}
    assert details["reading-20k: foldline <= 0.5 x peer compaction (hit/4k)"].startswith("0.50 x peer compaction")
    assert "hit/16k -" in details["reading-20k: foldline <= 0.5 x peer compaction (hit/4k)"]
    assert any(n.startswith("staged-64: foldline's new input") and m is False for n, m in states)  # 150 x 5 > 250
    assert ("0 unexplained rewrites in every run", True) in states


def test_a_run_over_its_ceiling_or_with_an_unexplained_rewrite_misses_its_target() -> None:
    results = [
        result("fits", 1000, [metrics("fits", "cache-only", 1000, rewrites_unexplained=2, over_ceiling_reported=1)])
    ]
    states = {t.name: (t.met, t.detail) for t in evaluate_targets(results)}
    assert states["0 unexplained rewrites in every run"] == (False, "unexplained rewrites: fits/cache-only 2")
    met, detail = states["every request under its ceiling (our estimate and the server's count)"]
    assert met is False and "fits/cache-only 0 by estimate, 1 by server" in detail
    assert states["fits: foldline <= 1.02 x lower bound"][0] is None


def test_a_run_that_failed_nodes_the_naive_run_completed_is_not_judged() -> None:
    """A failed run did less work (it may cost nothing): its figures neither meet nor miss a target."""
    failed = {"ok": 0, "failed": 1, "skipped": 0}
    results = [
        result(
            "reading-40k",
            1000,
            [metrics("reading-40k", "naive", 5000), metrics("reading-40k", "foldline", 0, nodes=failed, requests=0)],
            peer_bit=1000,
        ),
        result(
            "fits",
            1000,
            [metrics("fits", "naive", 5000, nodes=failed), metrics("fits", "foldline", 1010, nodes=failed)],
        ),
    ]
    states = {t.name: (t.met, t.detail) for t in evaluate_targets(results)}
    assert states["fits: foldline <= 1.02 x lower bound"][0] is True  # the naive run failed that node too
    met, detail = states["reading-40k: foldline <= 0.5 x peer compaction (hit/4k)"]
    assert met is None and detail == "foldline on reading-40k failed 1 node(s), the naive run 0"


def test_a_workload_where_foldline_loses_bytes_misses_the_every_workload_target() -> None:
    results = [
        result("fits", 1000, [metrics("fits", "foldline", 1000)]),
        result("emitter", 1000, [metrics("emitter", "foldline", 1000, bytes_unrecoverable=12)]),
    ]
    states = {t.name: (t.met, t.detail) for t in evaluate_targets(results)}
    assert states["foldline loses 0 bytes on every workload"] == (False, "lost: emitter 12 bytes")


def test_the_table_and_the_json_carry_every_run_and_the_targets() -> None:
    results = [
        result(
            "reading-20k",
            1000,
            [metrics("reading-20k", "naive", 5000), metrics("reading-20k", "compaction", 2000)],
            {"foldline": "strategy 'foldline' is not built yet"},
            peer_bit=2500,
        ),
    ]
    table = format_table(results, wall_s=1.5)
    assert "== reading-20k: lower bound 1,000 BIT" in table
    assert "naive" in table and "compaction" in table and "foldline: strategy 'foldline' is not built yet" in table
    assert "targets:" in table and "[not measured]" in table and "wall time: 1.5 s" in table
    assert "hit/4k" in table and "hit/16k   infeasible: the kept context crosses the trigger" in table
    assert ratios(results[0], results[0].runs["naive"]) == {
        "to_bound": 5.0,
        "to_floor": None,
        "to_compaction": 2.5,
        "to_peer": 2.0,
    }
    document = json.loads(
        json.dumps(
            bench_json(results, provider="scripted", model="m", wall_s=1.5, sizes="small", pricing_note="m: somewhere")
        )
    )
    (workload,) = document["workloads"]
    assert workload["runs"]["naive"]["ratios"] == {
        "to_bound": 5.0,
        "to_floor": None,
        "to_compaction": 2.5,
        "to_peer": 2.0,
    }
    assert workload["floor"] is None and workload["runs"]["naive"]["cost"]["floor_ratio"] is None
    peers = workload["peer_compaction"]
    assert peers["headline"] == "hit/4k" and [v["variant"] for v in peers["variants"]] == ["hit/4k", "hit/16k"]
    assert peers["foldline_ratio"] == {"hit/4k": None, "hit/16k": None}  # foldline did not run
    assert document["pricing"] == "m: somewhere"
    assert workload["not_run"] == {"foldline": "strategy 'foldline' is not built yet"}
    assert document["schema"] == "foldline.bench/v1" and document["targets"]


def test_the_default_table_fits_100_columns_and_wide_shows_every_column() -> None:
    from runtime.bench.table import COLUMNS

    runs = [metrics("staged-64", name, 1_234_567) for name in ("naive", "cache-only", "foldline", "foldline-cost")]
    results = [result("staged-64", 9_876_543, runs, {}, peer_bit=2_500_000)]
    narrow, wide = format_table(results, wall_s=1.5), format_table(results, wall_s=1.5, wide=True)
    assert max(len(line) for line in narrow.splitlines()) <= 100, max(narrow.splitlines(), key=len)
    header = next(line for line in narrow.splitlines() if line.startswith("strategy"))
    assert "cached" not in header and "probes v/r/x/f" not in header and "--wide shows every column" in narrow
    wide_header = next(line for line in wide.splitlines() if line.startswith("strategy"))
    assert all(name in wide_header for name, _ in COLUMNS)
    # which of the two foldline rows runs the runtime's defaults is said under the table
    assert 'foldline runs the runtime\'s defaults (fold_policy = "cost"' in " ".join(narrow.split())


def test_the_child_cache_target_judges_every_spawned_childs_first_request_on_the_emitter_workload() -> None:
    name = "emitter: each spawned child's first request reads >= 0.9 of its input from the cache"
    shares = {"worker-1": 0.554, "worker-2": 0.988}
    run = metrics("emitter", "foldline", 1000, children_first_cached_share=shares)
    states = {t.name: (t.met, t.detail) for t in evaluate_targets([result("emitter", 1000, [run])])}
    assert states[name] == (False, "worker-1 0.554, worker-2 0.988")
    run = metrics("emitter", "foldline", 1000, children_first_cached_share={"worker-1": 0.95})
    assert {t.name: t.met for t in evaluate_targets([result("emitter", 1000, [run])])}[name] is True
    states = {
        t.name: (t.met, t.detail)
        for t in evaluate_targets([result("emitter", 1000, [metrics("emitter", "foldline", 1000)])])
    }
    assert states[name] == (None, "no spawned child sent a request")
