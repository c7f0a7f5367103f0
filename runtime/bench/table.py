"""The benchmark's outputs: the table, the JSON document and the targets (pure).

Ratios: ``x bound`` is a run's cost over its workload's lower bound;
``x compaction`` is its cost over the ``compaction`` run of the same
workload. Costs are in base-input-token units (BIT); dollars only where the
pricing table knows every price the usage needs.

The targets are the issue's, checked against the figures as they are;
a target whose runs are missing is reported as not measured, never as met.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runtime.bench.harness import ProbeTally, RunMetrics, WorkloadResult
from runtime.bench.peers import HEADLINE, PeerFigures
from runtime.bench.targets import FOLDLINE, Target, context_targets, floor_ratio, share
from runtime.bench.targets import by_workload as _runs
from runtime.bench.targets import fmt_x as _x
from runtime.bench.targets import missing_run as _missing
from runtime.bench.targets import ratio_of as _ratio

SCHEMA = "foldline.bench/v1"

COMPACTION = "compaction"
FOLD_IMMEDIATE = "fold-immediate"
FOLDLINE_COST = "foldline-cost"
FITS_BOUND_LIMIT = 1.02
CHILD_SHARE_TARGET = 0.9
"""A spawned child's first request: the least share of its input read from the cache (issue 31)."""
COMPACTION_LIMIT = 0.5
FRESH_FACTOR = 5.0
RECOVERY_WORKLOADS = ("reading-20k", "reading-40k", "staged-64")


def peer(result: WorkloadResult, label: str = HEADLINE) -> PeerFigures | None:
    """The peer compaction variant ``label`` of ``result`` when it was replayed and is feasible."""
    for figures in result.peers:
        if figures.params.label == label and figures.feasible:
            return figures
    return None


def ratios(result: WorkloadResult, run: RunMetrics) -> dict[str, float | None]:
    """``to_bound``, ``to_compaction`` (the runtime's own compaction run) and ``to_peer`` (the headline variant)."""
    compaction = result.runs.get(COMPACTION)
    headline = peer(result)
    return {
        "to_bound": _ratio(run.cost_bit, result.bound.bit),
        "to_floor": floor_ratio(result, run),
        "to_compaction": _ratio(run.cost_bit, compaction.cost_bit if compaction is not None else None),
        "to_peer": _ratio(run.cost_bit, headline.bit if headline is not None else None),
    }


def peer_ratios(result: WorkloadResult, strategy: str = FOLDLINE) -> dict[str, float | None]:
    """``strategy``'s cost over every peer variant's (None where the variant is infeasible or missing)."""
    run = result.runs.get(strategy)
    return {
        f.params.label: (_ratio(run.cost_bit, f.bit) if run is not None and f.feasible else None) for f in result.peers
    }


# -- targets ------------------------------------------------------------------------------


def _recalls(run: RunMetrics) -> ProbeTally:
    p, k = run.probes, run.keys
    return ProbeTally(
        p.view + k.view, p.read_result + k.read_result, p.rerun + k.rerun, p.failed + k.failed, p.wrong + k.wrong
    )


def evaluate_targets(results: Sequence[WorkloadResult]) -> list[Target]:
    """The issue's targets against ``results``."""
    by_name = _runs(results)
    targets: list[Target] = []
    _fits_target(by_name, targets)
    _recovery_targets(by_name, targets)
    _staged_target(by_name, targets)
    _run_wide_targets(results, targets)
    context_targets(results, targets)
    _child_cache_target(by_name, targets)
    return targets


def _child_cache_target(by_name: Mapping[str, WorkloadResult], targets: list[Target]) -> None:
    """Every spawned child's first request on the emitter workload reads >= 0.9 of itself from the cache."""
    name = f"emitter: each spawned child's first request reads >= {CHILD_SHARE_TARGET} of its input from the cache"
    missing = _missing("emitter", FOLDLINE, by_name)
    shares = {} if missing else dict(by_name["emitter"].runs[FOLDLINE].children_first_cached_share)
    if missing or not shares:
        targets.append(Target(name, None, missing or "no spawned child sent a request"))
        return
    detail = ", ".join(f"{child} {share:.3f}" for child, share in sorted(shares.items()))
    targets.append(Target(name, min(shares.values()) >= CHILD_SHARE_TARGET, detail))


def _fits_target(by_name: Mapping[str, WorkloadResult], targets: list[Target]) -> None:
    missing = _missing("fits", FOLDLINE, by_name)
    name = f"fits: foldline <= {FITS_BOUND_LIMIT} x lower bound"
    if missing:
        targets.append(Target(name, None, missing))
    else:
        result = by_name["fits"]
        ratio = ratios(result, result.runs[FOLDLINE])["to_bound"]
        targets.append(Target(name, ratio is not None and ratio <= FITS_BOUND_LIMIT, f"{_x(ratio)} x bound"))


def _recovery_targets(by_name: Mapping[str, WorkloadResult], targets: list[Target]) -> None:
    for workload in RECOVERY_WORKLOADS:
        name = f"{workload}: foldline <= {COMPACTION_LIMIT} x peer compaction ({HEADLINE})"
        missing = _missing(workload, FOLDLINE, by_name)
        if missing is None and peer(by_name[workload]) is None:
            missing = f"peer compaction {HEADLINE} was not replayed or is infeasible on {workload}"
        if missing:
            targets.append(Target(name, None, missing))
        else:
            result = by_name[workload]
            ratio = ratios(result, result.runs[FOLDLINE])["to_peer"]
            others = ", ".join(f"{label} {_x(v)}" for label, v in peer_ratios(result).items() if label != HEADLINE)
            own = ratios(result, result.runs[FOLDLINE])["to_compaction"]
            detail = (
                f"{_x(ratio)} x peer compaction; other variants: {others}; "
                f"x the runtime's own compaction run: {_x(own)}"
            )
            if FOLDLINE_COST in result.runs:
                by_cost = peer_ratios(result, FOLDLINE_COST)
                rest = ", ".join(f"{k} {_x(v)}" for k, v in by_cost.items() if k != HEADLINE)
                detail += f"; foldline-cost: {_x(by_cost.get(HEADLINE))} ({rest})"
            targets.append(Target(name, ratio is not None and ratio <= COMPACTION_LIMIT, detail))
        name = f"{workload}: foldline loses 0 bytes and answers every recall without re-running a tool"
        missing = _missing(workload, FOLDLINE, by_name)
        if missing:
            targets.append(Target(name, None, missing))
        else:
            run = by_name[workload].runs[FOLDLINE]
            recalls = _recalls(run)
            met = run.bytes_unrecoverable == 0 and recalls.rerun == 0 and recalls.failed == 0
            targets.append(
                Target(
                    name,
                    met,
                    f"{run.bytes_unrecoverable} bytes unrecoverable; recalls {recalls.view} from view, "
                    f"{recalls.read_result} after read_result, {recalls.rerun} after a re-run, {recalls.failed} failed",
                )
            )


def _staged_target(by_name: Mapping[str, WorkloadResult], targets: list[Target]) -> None:
    name = (
        f"staged-64: foldline's new input (not read from cache: fresh + cache writes) "
        f"<= fold-immediate's / {FRESH_FACTOR:g}"
    )
    missing = _missing("staged-64", FOLDLINE, by_name) or _missing("staged-64", FOLD_IMMEDIATE, by_name)
    if missing:
        targets.append(Target(name, None, missing))
    else:
        runs = by_name["staged-64"].runs
        ours, theirs = runs[FOLDLINE], runs[FOLD_IMMEDIATE]
        factor = theirs.new_input / ours.new_input if ours.new_input else None
        met = ours.new_input * FRESH_FACTOR <= theirs.new_input
        shown = f"{factor:.2f}x less" if factor is not None else "foldline had no new input"
        targets.append(
            Target(
                name,
                met,
                f"foldline {ours.new_input:,} vs fold-immediate {theirs.new_input:,} new tokens ({shown}); "
                f"fresh alone {ours.fresh_input:,} vs {theirs.fresh_input:,}",
            )
        )


def _run_wide_targets(results: Sequence[WorkloadResult], targets: list[Target]) -> None:
    lost = [(r.workload, r.runs[FOLDLINE].bytes_unrecoverable) for r in results if FOLDLINE in r.runs]
    if lost:
        bad_lost = [f"{w} {n:,} bytes" for w, n in lost if n]
        targets.append(
            Target(
                "foldline loses 0 bytes on every workload",
                not bad_lost,
                f"0 on {len(lost)} workload(s)" if not bad_lost else "lost: " + ", ".join(bad_lost),
            )
        )

    all_runs = [run for result in results for run in result.runs.values()]
    if all_runs:
        bad = [f"{r.workload}/{r.strategy} {r.rewrites_unexplained}" for r in all_runs if r.rewrites_unexplained]
        targets.append(
            Target(
                "0 unexplained rewrites in every run",
                not bad,
                "none" if not bad else "unexplained rewrites: " + ", ".join(bad),
            )
        )
        over = [
            f"{r.workload}/{r.strategy} {r.over_ceiling_estimate} by estimate, {r.over_ceiling_reported} by server"
            for r in all_runs
            if r.over_ceiling_estimate or r.over_ceiling_reported
        ]
        targets.append(
            Target(
                "every request under its ceiling (our estimate and the server's count)",
                not over,
                "none over" if not over else "over: " + "; ".join(over),
            )
        )


# -- JSON ---------------------------------------------------------------------------------


def bench_json(
    results: Sequence[WorkloadResult],
    *,
    provider: str,
    model: str,
    wall_s: float,
    sizes: str,
    pricing_note: str = "",
) -> dict[str, Any]:
    """The whole benchmark as one JSON document (what ``--json`` writes)."""
    workloads = []
    for result in results:
        runs = {}
        for name, run in result.runs.items():
            entry = run.to_json()
            entry["ratios"] = {k: (round(v, 4) if v is not None else None) for k, v in ratios(result, run).items()}
            to_floor = floor_ratio(result, run)
            entry["cost"]["floor_ratio"] = round(to_floor, 4) if to_floor is not None else None
            runs[name] = entry
        workloads.append(
            {
                "workload": result.workload,
                "description": result.description,
                "lower_bound": result.bound.to_json(),
                "floor": result.floor.to_json() if result.floor is not None else None,
                "runs": runs,
                "not_run": dict(result.not_run),
                "cost_model_choices": [c.to_json() for c in result.cost_choices],
                "peer_compaction": {
                    "headline": HEADLINE,
                    "note": result.peers_note,
                    "variants": [f.to_json() for f in result.peers],
                    "foldline_ratio": {
                        k: (round(v, 4) if v is not None else None) for k, v in peer_ratios(result).items()
                    },
                },
            }
        )
    return {
        "schema": SCHEMA,
        "provider": provider,
        "model": model,
        "pricing": pricing_note,
        "sizes": sizes,
        "wall_s": round(wall_s, 3),
        "workloads": workloads,
        "targets": [t.to_json() for t in evaluate_targets(results)],
    }


# -- the table ----------------------------------------------------------------------------


def _usd(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _tally(t: ProbeTally) -> str:
    return f"{t.view}/{t.read_result}/{t.rerun}/{t.failed}"


COLUMNS = (
    ("strategy", "<"),
    ("cost BIT", ">"),
    ("$", ">"),
    ("x bound", ">"),
    ("x floor", ">"),
    ("x compact", ">"),
    ("x peer", ">"),
    ("cached", ">"),
    ("fresh in", ">"),
    ("new in", ">"),
    ("reqs", ">"),
    ("peak", ">"),
    ("refused", ">"),
    ("folds/commits", ">"),
    ("rewrites e/u", ">"),
    ("probes v/r/x/f", ">"),
    ("keys v/r/x/f", ">"),
    ("unrec B", ">"),
    ("lost B", ">"),
    ("probes w/o rerun", ">"),
    ("nodes ok/fail", ">"),
    ("over est/srv", ">"),
)


def _row(result: WorkloadResult, run: RunMetrics) -> list[str]:
    r = ratios(result, run)
    return [
        run.strategy,
        f"{run.cost_bit:,.0f}",
        _usd(run.cost_usd),
        _x(r["to_bound"]),
        _x(r["to_floor"]),
        _x(r["to_compaction"]),
        _x(r["to_peer"]),
        f"{run.cached_share:.3f}",
        f"{run.fresh_input:,}",
        f"{run.new_input:,}",
        str(run.requests),
        f"{run.peak_request_tokens:,}",
        str(run.refusals),
        f"{run.folds}/{run.fold_commits}",
        f"{run.rewrites_explained}/{run.rewrites_unexplained}",
        _tally(run.probes),
        _tally(run.keys),
        f"{run.bytes_unrecoverable:,}",
        f"{run.bytes_lost:,}",
        share(run.probes.without_rerun),
        f"{run.nodes.get('ok', 0)}/{run.nodes.get('failed', 0) + run.nodes.get('skipped', 0)}",
        f"{run.over_ceiling_estimate}/{run.over_ceiling_reported}",
    ]


def peer_lines(result: WorkloadResult) -> list[str]:
    """The sensitivity table of one workload: each peer compaction variant's cost and foldline's ratio to it."""
    if not result.peers:
        return [f"  peer compaction: {result.peers_note}"] if result.peers_note else []
    lines = ["  peer compaction (replayed; summary cache/length): cost BIT, $, summaries, foldline x"]
    ratios_by = peer_ratios(result)
    for f in result.peers:
        if not f.feasible:
            lines.append(f"    {f.params.label:<9} infeasible: {f.note}")
            continue
        lines.append(
            f"    {f.params.label:<9} {f.bit:>14,.0f}  {_usd(f.usd):>9}  {f.summaries:>3}  "
            f"{_x(ratios_by.get(f.params.label))}"
        )
    return lines


NARROW_COLUMNS = (
    "strategy",
    "cost BIT",
    "$",
    "x bound",
    "x floor",
    "x peer",
    "reqs",
    "peak",
    "folds/commits",
    "lost B",
)
"""The columns the table shows by default (it fits 100 columns); ``--wide`` shows every column, the JSON has all."""
TABLE_WIDTH = 100


def format_table(results: Sequence[WorkloadResult], *, wall_s: float | None = None, wide: bool = False) -> str:
    """The benchmark table: one block per workload, one row per strategy, then the targets.

    By default only :data:`NARROW_COLUMNS` and prose wrapped at :data:`TABLE_WIDTH`; ``wide``: every column.
    """
    keep = [i for i, (name, _) in enumerate(COLUMNS) if wide or name in NARROW_COLUMNS]
    columns = [COLUMNS[i] for i in keep]
    rows: list[list[str]] = [[name for name, _ in columns]]
    blocks: list[tuple[WorkloadResult, list[list[str]]]] = []
    for result in results:
        block = [[cells[i] for i in keep] for cells in (_row(result, run) for run in result.runs.values())]
        blocks.append((result, block))
        rows.extend(block)
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.ljust(w) if align == "<" else cell.rjust(w)
            for cell, w, (_, align) in zip(cells, widths, columns, strict=True)
        ).rstrip()

    out = _blocks(blocks, line, [name for name, _ in columns])
    out.extend(_footnotes(results, blocks, wide=wide))
    if wall_s is not None:
        out.append("")
        out.append(f"wall time: {wall_s:.1f} s")
    return "\n".join(out)


def _blocks(
    blocks: Sequence[tuple[WorkloadResult, list[list[str]]]], line: Callable[[Sequence[str]], str], head: list[str]
) -> list[str]:
    """One block per workload: its bound, the header, a row per strategy, what did not run, peers and choices."""

    out: list[str] = []
    for result, block in blocks:
        b = result.bound
        out.append(
            f"== {result.workload}: lower bound {b.bit:,.0f} BIT "
            f"({b.write_tokens:,} tokens written once, {b.read_tokens:,} read, {b.requests} requests)"
        )
        if result.floor is not None:
            f = result.floor
            out.extend(
                _wrapped(
                    f"floor of a lossless policy {f.bit:,.0f} BIT: {f.first_written_tokens:,} written and "
                    f"{f.first_read_tokens:,} read by first requests, heads read {f.head_read_tokens:,}, "
                    f"{f.fresh_tokens:,} fresh, {f.needed_lines} lines needed again ({f.needed_written_tokens:,} "
                    f"written, {f.needed_read_tokens:,} read), {f.output_tokens:,} output"
                )
            )
        out.append(line(head))
        out.extend(line(row) for row in block)
        for strategy, why in result.not_run.items():
            out.extend(_wrapped(f"{strategy}: {why}"))
        out.extend(peer_lines(result))
        for choice in result.cost_choices:
            out.extend(
                _wrapped(
                    f"foldline-cost, profile {choice.profile}: growth {choice.growth:,.0f} tokens a request, fold at "
                    f"{choice.fold_at:g}, target {choice.target:g} x ceiling {choice.ceiling:,} ({choice.reason})"
                )
            )
        out.append("")
    return out


def _wrapped(text: str) -> list[str]:
    """A prose line under a workload's rows, indented and wrapped at the table's width."""
    return textwrap.wrap(text, TABLE_WIDTH, initial_indent="  ", subsequent_indent="    ")


def _footnotes(
    results: Sequence[WorkloadResult], blocks: Sequence[tuple[WorkloadResult, list[list[str]]]], *, wide: bool
) -> list[str]:
    """What the columns and the strategies mean, wrapped at the table's width, then the targets."""
    notes = [
        'foldline runs the runtime\'s defaults (fold_policy = "cost": the cost model moves the fold line live); '
        "foldline-cost applies the cost model once per profile, offline, as fixed settings.",
        "folds/commits: fold decisions / fold commits; lost B: bytes the model can no longer see or read back "
        "(the runtime's unrecoverable plus what Anthropic's server-side context management cleared); x floor: "
        "over the floor of a lossless policy that shows every result once (runtime/bench/floor.py).",
    ]
    if wide:
        notes.append(
            "fresh in: input after the last cache mark (the API's input_tokens); new in: input not read from "
            "the cache (fresh + cache writes); probes/keys v/r/x/f: answered from view / after read_result / "
            "after a re-run tool call / failed; probes w/o rerun: the share answered from view or read_result; "
            "unrec B: the runtime's unrecoverable bytes; over est/srv: requests sent over their ceiling by our estimate / "
            "by the server's count; x compact: over the runtime's own compaction run."
        )
    else:
        notes.append(
            "--wide shows every column (cached share, fresh and new input, probes, keys, ...); --json has all."
        )
    if any(not r.bound.output_priced or any(not m.output_priced for m in r.runs.values()) for r, _ in blocks):
        notes.append("cost excludes output tokens where the pricing table has no output price for the model")
    notes.append(
        f"x peer: over compaction as the peers run it, replayed over the naive requests (variant {HEADLINE}: the "
        "summary request reads the cache, 4k-token summaries; see runtime/bench/peers.py for each parameter's source)"
    )
    out = [wrapped for note in notes for wrapped in textwrap.wrap(note, TABLE_WIDTH, subsequent_indent="  ")]
    out += ["", "targets:"]
    for target in evaluate_targets(results):
        state = "not measured" if target.met is None else ("met" if target.met else "MISSED")
        text = f"[{state}] {target.name}: {target.detail}"
        out.extend(textwrap.wrap(text, TABLE_WIDTH, initial_indent="  ", subsequent_indent="    "))
    return out
