"""Targets: the shared pieces, and the floor's and Anthropic context management's targets (pure).

:class:`Target` and the helpers every target uses live here;
:mod:`runtime.bench.table` checks the older targets and calls
:func:`context_targets` for issue 31's:

- every workload: foldline <= :data:`FLOOR_LIMIT` x the floor of a lossless
  policy (:func:`runtime.bench.floor.lossless_floor`);
- every workload and every ``api-*`` variant (:data:`runtime.bench.strategies.API_STRATEGIES`):
  foldline costs less, and loses 0 bytes;
- recall probes answered without re-running a tool: foldline 100% on every
  workload (the other strategies' shares are reported in the detail).

A target whose runs are missing is reported as not measured, never as met.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from runtime.bench.harness import RunMetrics, WorkloadResult
from runtime.bench.strategies import API_CLEAR, API_COMPACTION, API_STRATEGIES, BASELINE

FOLDLINE = "foldline"
FLOOR_LIMIT = 1.2
API_FAMILIES = (API_CLEAR, API_COMPACTION)


@attrs.frozen
class Target:
    """One target: what it asks, the measured value, whether it is met (None: not measured), and why."""

    name: str
    met: bool | None
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"target": self.name, "met": self.met, "detail": self.detail}


def ratio_of(value: float, base: float | None) -> float | None:
    """``value / base``, None when ``base`` is missing or not positive."""
    if base is None or base <= 0:
        return None
    return value / base


def fmt_x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def by_workload(results: Sequence[WorkloadResult]) -> dict[str, WorkloadResult]:
    return {r.workload: r for r in results}


def missing_run(workload: str, strategy: str, by_name: Mapping[str, WorkloadResult]) -> str | None:
    """Why ``strategy`` on ``workload`` cannot be judged (None: it can)."""
    result = by_name.get(workload)
    if result is None:
        return f"workload {workload} was not run"
    if strategy not in result.runs:
        why = result.not_run.get(strategy, "not selected")
        return f"{strategy} on {workload} did not run: {why}"
    baseline = result.runs.get(BASELINE)
    failed = result.runs[strategy].nodes.get("failed", 0)
    if baseline is not None and failed > baseline.nodes.get("failed", 0):
        # A run that failed nodes the naive run completed did less work: its figures are not judged.
        return f"{strategy} on {workload} failed {failed} node(s), the naive run {baseline.nodes.get('failed', 0)}"
    return None


def floor_ratio(result: WorkloadResult, run: RunMetrics) -> float | None:
    """``run``'s cost over its workload's floor (None without a floor)."""
    return ratio_of(run.cost_bit, result.floor.bit if result.floor is not None else None)


def share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def context_targets(results: Sequence[WorkloadResult], targets: list[Target]) -> None:
    """Append issue 31's floor, API and recall targets for ``results``."""
    by_name = by_workload(results)
    for result in results:
        _floor_target(result, by_name, targets)
    for result in results:
        for family in API_FAMILIES:
            _api_target(result, family, by_name, targets)
    _recall_target(results, by_name, targets)


def _floor_target(result: WorkloadResult, by_name: Mapping[str, WorkloadResult], targets: list[Target]) -> None:
    name = f"{result.workload}: foldline <= {FLOOR_LIMIT} x the floor of a lossless policy"
    missing = missing_run(result.workload, FOLDLINE, by_name)
    if missing is None and result.floor is None:
        missing = "no floor was computed"
    if missing:
        targets.append(Target(name, None, missing))
        return
    assert result.floor is not None
    ratio = floor_ratio(result, result.runs[FOLDLINE])
    detail = f"{fmt_x(ratio)} x floor ({result.runs[FOLDLINE].cost_bit:,.0f} against {result.floor.bit:,.0f} BIT)"
    targets.append(Target(name, ratio is not None and ratio <= FLOOR_LIMIT, detail))


def _api_target(
    result: WorkloadResult, family: str, by_name: Mapping[str, WorkloadResult], targets: list[Target]
) -> None:
    variants = [s.name for s in API_STRATEGIES if s.name == family or s.name.startswith(family + "/")]
    name = f"{result.workload}: foldline cheaper than every {family} variant, 0 bytes lost"
    missing = missing_run(result.workload, FOLDLINE, by_name)
    if missing:
        targets.append(Target(name, None, missing))
        return
    ours = result.runs[FOLDLINE]
    cells: list[str] = []
    met: bool | None = ours.bytes_lost == 0
    for variant in variants:
        theirs = result.runs.get(variant)
        if theirs is None:
            why = result.not_run.get(variant, "not selected")
            cells.append(f"{variant} not run" + ("" if why == "not selected" else f" ({why})"))
            if met is True:
                met = None
            continue
        ratio = ratio_of(ours.cost_bit, theirs.cost_bit)
        if ratio is None or ratio >= 1:
            met = False
        cells.append(f"{variant} {fmt_x(ratio)}x ({theirs.bytes_lost:,} B lost{_shortfall(result, theirs)})")
    detail = f"foldline {ours.cost_bit:,.0f} BIT, {ours.bytes_lost:,} B lost; foldline x " + "; ".join(cells)
    targets.append(Target(name, met, detail))


def _shortfall(result: WorkloadResult, run: RunMetrics) -> str:
    """What ``run`` left undone that the naive run did: failed nodes and recalls answered "unknown"."""
    baseline = result.runs.get(BASELINE)
    failed = run.nodes.get("failed", 0) - (baseline.nodes.get("failed", 0) if baseline is not None else 0)
    recalls = run.probes.failed + run.keys.failed
    out = f"; {failed} more node(s) failed than naive" if failed > 0 else ""
    return out + (f"; {recalls} recall(s) failed" if recalls else "")


def _recall_target(
    results: Sequence[WorkloadResult], by_name: Mapping[str, WorkloadResult], targets: list[Target]
) -> None:
    name = "recall probes answered without re-running a tool: foldline 100% on every workload"
    shares: list[str] = []
    met: bool | None = True
    for result in results:
        missing = missing_run(result.workload, FOLDLINE, by_name)
        if missing:
            if met is True:
                met = None
            shares.append(f"{result.workload}: {missing}")
            continue
        ours = result.runs[FOLDLINE].probes
        if ours.without_rerun is not None and ours.without_rerun < 1:
            met = False
        others = ", ".join(
            f"{run.strategy} {share(run.probes.without_rerun)}"
            for run in result.runs.values()
            if run.strategy != FOLDLINE
        )
        shares.append(f"{result.workload}: foldline {share(ours.without_rerun)} ({others})")
    if not results:
        met = None
    targets.append(Target(name, met, "; ".join(shares)))
