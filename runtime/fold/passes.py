"""The fold's passes, in order, as generators over a :class:`~runtime.fold.state.FoldState`.

:func:`fold_passes` runs the stages the :mod:`runtime.fold.planner` docstring
lists (marks, reset, tool_io, clip, all, reset); :func:`compaction_pass` is the
compaction baseline. Each yields a :class:`~runtime.fold.steps.NeedSummary`
when it needs a summary request sent and returns the :class:`~runtime.fold.steps.FoldPlan`.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence

from runtime.fold.clip import clip_stage
from runtime.fold.marks import resolve_marks
from runtime.fold.notes import build_note, transcript
from runtime.fold.projection import CLIP_FLOOR, project
from runtime.fold.settings import ALL_TAILS, FLOOR_TAIL, MIN_COMMIT_SHARE, RESET_SHARE, TOOL_IO_TAILS
from runtime.fold.state import FoldState, rebuild
from runtime.fold.steps import FoldPlan, NeedSummary, SummaryResult
from runtime.fold.units import Unit, task_instruction
from runtime.messages import Note, ToolResult

SUMMARY_SYSTEM = (
    "You summarize a span of an agent's conversation that is being folded out of its context window. "
    "Keep every fact, number, file path, decision and open question the agent may need later; drop "
    "pleasantries. The originals stay recoverable by their #index, so name indices when you cite them. "
    "Write plain text, at most 300 words."
)
"""The instructions that open every summary request (a ``side`` request shares nothing with the conversation)."""

SUMMARY_SOURCE_SHARE = 0.5
"""A summary request's span text is budgeted at about this share of the ceiling."""

_CHARS_PER_TOKEN = 4



def _marks_pass(run: FoldState) -> None:
    if not run.inp.marks:
        return
    units = run.units()
    never = run.never(units)
    not_now = run.not_now(units, FLOOR_TAIL)
    resolution = resolve_marks(run.inp.marks, units, run.inp.record, never=never, not_now=not_now)
    run.held = resolution.held
    run.skipped_marks = tuple((units[i].ids[0], why) for i, why in resolution.skipped)
    if not resolution.units:
        return
    candidate, notes = run.replace_runs(units, resolution.units, "marks")
    left = [mid for i in resolution.units for mid in units[i].ids]
    if run.attempt("marks", candidate, notes, left):
        run.agent_marks = len(resolution.landing)
    else:
        run.held = run.inp.marks


def _tool_io(run: FoldState, tail: int) -> None:
    units = run.units()
    blocked = set(run.never(units)) | run.not_now(units, tail) | run.before_newest_note(units)
    take = [i for i, unit in enumerate(units) if unit.kind == "round" and i not in blocked]
    if not take:
        return
    candidate, notes = run.replace_runs(units, take, "tool_io")
    left = [mid for i in take for mid in units[i].ids]
    run.attempt("tool_io", candidate, notes, left, detail=f"tail {tail}")


def _clip(run: FoldState) -> None:
    units = run.units()
    blocked_ids: set[str] = set(run.inp.protected) | set(run.inp.recovered)
    for i in run.before_newest_note(units):
        blocked_ids.update(units[i].ids)

    def eligible(result: ToolResult) -> bool:
        original = result.clipped_from or result.id
        return result.id not in blocked_ids and original not in run.inp.recovered

    outcome = clip_stage(
        run.view,
        estimate=run.estimate,
        target=run.settings.target_tokens,
        eligible=eligible,
        record=run.inp.record,
        measurer=run.measurer,
        bound=run.settings.result_bound,
    )
    if not outcome.copies:
        return
    detail = "; ".join(f"#{index} {chars} chars kept {kept}" for index, chars, kept in outcome.cuts)
    run.attempt("clip", list(outcome.view), outcome.copies, outcome.replaced, detail=detail)


def _span_units(run: FoldState, tail: int, *, reset: bool) -> tuple[tuple[Unit, ...], list[int]]:
    units = run.units()
    blocked = set(run.never(units)) | run.not_now(units, tail)
    if not reset:
        blocked |= run.before_newest_note(units)
    return units, [i for i in range(len(units)) if i not in blocked]


def _summary_need(run: FoldState, stage: str, span: Sequence[Unit]) -> NeedSummary:
    results = sum(len(u.results) for u in span)
    budget = int(run.settings.ceiling * SUMMARY_SOURCE_SHARE * _CHARS_PER_TOKEN)
    per_body = max(CLIP_FLOOR, budget // max(1, results))
    bound = run.settings.result_bound
    per_body = per_body if bound is None else min(per_body, bound)

    def render(original: ToolResult, index: int) -> str:
        return project(original, index=index, allowance=None, bound=per_body).output

    first = min(u.key for u in span)
    text = transcript(span, run.inp.record, render)
    prompt = (
        f"Summarize this span of the conversation, from #{first}, which is being folded out of the agent's "
        f"context. The originals stay recoverable by index.\n\n{text}"
    )
    return NeedSummary(stage, tuple(m.id for u in span for m in u.members), SUMMARY_SYSTEM, prompt)


def _summarized_pass(
    run: FoldState, stage: str, tail: int, *, reset: bool
) -> Generator[NeedSummary, SummaryResult, None]:
    units, take = _span_units(run, tail, reset=reset)
    if reset:
        # Nothing to gain from summarizing a lone note into another note.
        if len(take) == 1 and units[take[0]].kind == "note":
            return
    if not take:
        return
    span = [units[i] for i in take]
    result = yield _summary_need(run, stage, span)
    run.summaries += 1
    if result.text is not None:
        note = build_note(stage, span, run.inp.record, summary=result.text)
    else:
        note = build_note(stage, span, run.inp.record, summary_note=f"(No summary: {result.failure}.)")
    candidate = rebuild(run.view, units, set(take), {take[0]: note})
    left = [mid for i in take for mid in units[i].ids]
    run.attempt(
        stage,
        candidate,
        [note],
        left,
        summary_usage=result.usage,
        remeasure=True,
        keep_rejected=[note] if result.text is not None else [],
        detail=f"tail {tail}" + ("" if result.text is not None else f"; summary failed: {result.failure}"),
    )


def _notes_tokens(run: FoldState) -> float:
    total = 0
    for message in run.view:
        if isinstance(message, Note):
            total += run.measurer.block_tokens(message)[0]
    return total * run.measurer.scale


def _floor_estimate(run: FoldState) -> int:
    units, take = _span_units(run, FLOOR_TAIL, reset=False)
    return run.measurer.estimate(rebuild(run.view, units, set(take), {}))


def fold_passes(run: FoldState) -> Generator[NeedSummary, SummaryResult, FoldPlan]:
    settings = run.settings
    _marks_pass(run)
    if run.inp.mode == "light":
        _tool_io(run, TOOL_IO_TAILS[0])
        return run.plan()

    reset_done = False
    if settings.caching and _notes_tokens(run) > RESET_SHARE * settings.ceiling:
        yield from _summarized_pass(run, "reset", FLOOR_TAIL, reset=True)
        reset_done = True

    def done() -> bool:
        return run.reached()

    if not done():
        for tail in TOOL_IO_TAILS:
            _tool_io(run, tail)
            if done():
                break
    if not done():
        _clip(run)
    if not done():
        floor = _floor_estimate(run)
        if floor <= settings.ceiling:
            tails = (FLOOR_TAIL,) if not settings.reached(floor) else ALL_TAILS
            for tail in tails:
                yield from _summarized_pass(run, "all", tail, reset=False)
                if done():
                    break
    if not done() and settings.caching and not reset_done:
        yield from _summarized_pass(run, "reset", FLOOR_TAIL, reset=True)

    freed = run.before - run.estimate
    if (
        settings.scheduling == "epoch"
        and not run.inp.refusal
        and run.summaries == 0
        and run.stages
        and freed < MIN_COMMIT_SHARE * settings.ceiling
    ):
        return run.plan(deferred=True)
    return run.plan()


def compaction_pass(run: FoldState) -> Generator[NeedSummary, SummaryResult, FoldPlan]:
    """The compaction baseline: one summary of the whole conversation; originals leave for good.

    The view becomes the task instruction, one note with the summary, and
    whatever must stay for pairing and delivery (the undelivered round).
    """
    units = run.units()
    task = task_instruction(run.view)
    keep: set[int] = set()
    for i, unit in enumerate(units):
        ids = set(unit.ids)
        if (task is not None and task.id in ids) or not ids <= run.inp.delivered:
            keep.add(i)
    take = [i for i in range(len(units)) if i not in keep]
    if not take:
        return run.plan()
    span = [units[i] for i in take]
    result = yield _summary_need(run, "compaction", span)
    run.summaries += 1
    if result.text is not None:
        note = build_note("compaction", span, run.inp.record, summary=result.text)
    else:
        note = build_note("compaction", span, run.inp.record, summary_note=f"(No summary: {result.failure}.)")
    task_members = [m for i in sorted(keep) for m in units[i].members if task is not None and m.id == task.id]
    rest = [m for i in sorted(keep) for m in units[i].members if task is None or m.id != task.id]
    candidate = task_members + [note] + rest
    left = [mid for i in take for mid in units[i].ids]
    run.attempt("compaction", candidate, [note], left, summary_usage=result.usage, remeasure=True)
    return run.plan()
