"""The fold planner: which passes land, in order, as a sans-IO state machine.

The planner never calls a provider. Like h11, it returns values that say what
it needs: :class:`NeedSummary` ("send a ``side`` request summarizing this
span") or, when it is done, a :class:`FoldPlan`. The engine sends the summary
request, feeds back a :class:`SummaryResult` (the text, or the failure) with a
measurer at the scale in force afterwards, and the planner continues::

    planner = FoldPlanner(fold_input, measurer)
    step = planner.start()
    while isinstance(step, NeedSummary):
        step = planner.resume(await send_summary(step), measurer_now)
    plan = step   # land plan.added, plan.view_ids, plan.held_marks in one batch

Passes, each landing only if it strictly lowers the measured estimate and
rolled back exactly otherwise (the snapshot of the view restored; a rejected
summary note is kept in the record outside the view, nothing else is):

1. ``marks``: the model's pending marks (:mod:`runtime.fold.marks`);
   then, on a child's first fold with its emitter's cache (``FoldInput.inherited``),
   ``inherited``: the newest inherited rounds, as few as reach the target, become
   one note, so the prefix the emitter cached stays;
2. ``reset`` first and alone when caching is on and the notes in the view are
   over 15% of the ceiling (it keeps going if still over the target);
3. ``tool_io`` with tails 6, then 2: delivered rounds older than the tail
   become one note per contiguous run, listing every call;
4. ``clip`` (:mod:`runtime.fold.clip`);
5. ``all``: before it the floor view (task, head, undelivered, tail of two,
   clips made) is measured: over the ceiling, no summary is asked for; over
   the target, one pass with tail two; else tails six, then two. Everything
   older than the tail except the task and the view's head becomes one note
   with a summary (or the call lists alone when the summary failed);
6. ``reset`` after the ordinary stages when caching is on and the view is
   still over the target: everything after the protected first round
   (earlier notes included) becomes one note.

The full fold stops at the first landed pass that reaches the target. Never
taken by any pass: the task instruction, the view's first message, the
protected first round. Taken by no folding pass (clip only): undelivered
units, just-recovered originals, the kept tail. With caching on, the
ordinary stages take only what follows the newest note.

The ``light`` mode (immediate scheduling, below the fold line) runs only the
marks and ``tool_io`` with tail six. The ``read`` mode (fold after read,
:mod:`runtime.fold.after_read`) runs the marks and ``tool_io`` with no tail:
every delivered round after the newest note, each read by the model already. The ``compaction`` strategy replaces all
of this with one summary of the whole conversation (:func:`_compaction`).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence

from runtime.fold.clip import clip_stage
from runtime.fold.marks import resolve_marks
from runtime.fold.measurer import Measurer
from runtime.fold.notes import build_note, transcript
from runtime.fold.plan_run import PlanRun, rebuild_view
from runtime.fold.plan_values import (
    FoldInput,
    FoldPlan,
    NeedSummary,
    PassRecord,
    Step,
    SummaryResult,
)
from runtime.fold.projection import CLIP_FLOOR, project
from runtime.fold.settings import (
    ALL_TAILS,
    FLOOR_TAIL,
    MIN_COMMIT_SHARE,
    RESET_SHARE,
    TOOL_IO_TAILS,
)
from runtime.fold.target import TARGET_LOW, needed_prefix
from runtime.fold.units import (
    Unit,
    task_instruction,
)
from runtime.values.messages import Note, ToolResult

__all__ = ["TARGET_LOW", "FoldInput", "FoldPlan", "FoldPlanner", "NeedSummary", "PassRecord", "Step", "SummaryResult"]

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

SUMMARY_ALLOWANCE_TOKENS = 600
"""Room kept under the target for a summary still to come (at most 300 words, SUMMARY_SYSTEM)."""


class FoldPlanner:
    """Runs one fold over a :class:`FoldInput` (see the module docstring)."""

    def __init__(self, fold_input: FoldInput, measurer: Measurer) -> None:
        self._run = PlanRun(fold_input, measurer)
        program = _compaction if fold_input.settings.strategy == "compaction" else _fold
        self._gen: Generator[NeedSummary, SummaryResult, FoldPlan] = program(self._run)
        self._started = False
        self._waiting = False

    @property
    def measurer(self) -> Measurer:
        """The measurer in force (the one last handed in)."""
        return self._run.measurer

    def start(self) -> Step:
        if self._started:
            raise RuntimeError("FoldPlanner.start: the planner has already started")
        self._started = True
        return self._advance(None)

    def resume(self, result: SummaryResult, measurer: Measurer) -> Step:
        """Feed back the summary request's outcome; ``measurer`` is at the scale in force now."""
        if not self._waiting:
            raise RuntimeError("FoldPlanner.resume: the planner is not waiting for a summary")
        if not isinstance(result, SummaryResult):
            raise TypeError(f"FoldPlanner.resume: expected a SummaryResult, got {type(result).__name__}")
        self._run.measurer = measurer
        return self._advance(result)

    def _advance(self, value: SummaryResult | None) -> Step:
        try:
            step = self._gen.send(value)  # type: ignore[arg-type]
        except StopIteration as stop:
            self._waiting = False
            return stop.value
        self._waiting = True
        return step


# -- the passes ---------------------------------------------------------------------------


def _marks_pass(run: PlanRun) -> None:
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


def _tool_io(run: PlanRun, tail: int, *, exact: bool, needed_only: bool = True) -> None:
    """Fold the oldest delivered rounds older than the tail, only as many as reach the target.

    ``exact``: when the last round needed would carry the estimate far under the
    target (below :data:`TARGET_LOW` of it), take one round fewer and leave the
    rest to the clip stage, which cuts just enough; a later non-exact pass takes
    it should the clip not reach.
    """
    units = run.units()
    blocked = set(run.never(units)) | run.not_now(units, tail) | run.before_newest_note(units)
    take = [i for i, unit in enumerate(units) if unit.kind == "round" and i not in blocked]
    if not take:
        return

    def estimate_of(chosen: Sequence[int]) -> int:
        return run.measurer.estimate(run.replace_runs(units, chosen, "tool_io")[0])

    count, value = needed_prefix(take, estimate_of, run.settings.target_tokens) if needed_only else (len(take), 0)
    if needed_only and exact and run.settings.reached(value) and value < TARGET_LOW * run.settings.target_tokens:
        count -= 1
        run.held_back = True
    if count == 0:
        return
    chosen = take[:count]
    candidate, notes = run.replace_runs(units, chosen, "tool_io")
    left = [mid for i in chosen for mid in units[i].ids]
    detail = f"tail {tail}" if count == len(take) else f"tail {tail}, the oldest {count} of {len(take)} rounds"
    run.attempt("tool_io", candidate, notes, left, detail=detail)


def _inherited(run: PlanRun) -> None:
    """A child's first fold: the newest inherited rounds become one note, as few as reach the target.

    The oldest rounds stay as the emitter sent them, so the child's request
    reads the prefix the emitter cached (:mod:`actors.inherit`); the kept tail
    does not apply to them (the child's own newest messages are its setup and
    instruction, which no pass takes).
    """
    units = run.units()
    blocked = set(run.never(units)) | run.not_now(units, 0)
    inherited = run.inp.inherited
    take = [
        i for i, unit in enumerate(units) if unit.kind == "round" and i not in blocked and set(unit.ids) <= inherited
    ][::-1]
    if not take:
        return

    def estimate_of(chosen: Sequence[int]) -> int:
        return run.measurer.estimate(run.replace_runs(units, chosen, "inherited")[0])

    count, _ = needed_prefix(take, estimate_of, run.settings.target_tokens)
    chosen = sorted(take[:count])
    candidate, notes = run.replace_runs(units, chosen, "inherited")
    left = [mid for i in chosen for mid in units[i].ids]
    run.attempt("inherited", candidate, notes, left, detail=f"the newest {count} of {len(take)} inherited rounds")


def _clip(run: PlanRun) -> None:
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


def _span_units(run: PlanRun, tail: int, *, reset: bool) -> tuple[tuple[Unit, ...], list[int]]:
    units = run.units()
    blocked = set(run.never(units)) | run.not_now(units, tail)
    if not reset:
        blocked |= run.before_newest_note(units)
    return units, [i for i in range(len(units)) if i not in blocked]


def _summary_need(run: PlanRun, stage: str, span: Sequence[Unit]) -> NeedSummary:
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
    run: PlanRun, stage: str, tail: int, *, reset: bool
) -> Generator[NeedSummary, SummaryResult, None]:
    units, take = _span_units(run, tail, reset=reset)
    if reset:
        # Nothing to gain from summarizing a lone note into another note.
        if len(take) == 1 and units[take[0]].kind == "note":
            return
        if take and not _reset_can_land(run, stage, units, take):
            return
    if not take:
        return
    if not reset:
        # Only the oldest span needed to reach the target, room left for the summary.
        def estimate_of(chosen: Sequence[int]) -> int:
            note = build_note(stage, [units[i] for i in chosen], run.inp.record, summary_note="(summary)")
            return run.measurer.estimate(rebuild_view(run.view, units, set(chosen), {chosen[0]: note}))

        count, _ = needed_prefix(
            take, estimate_of, run.settings.target_tokens - SUMMARY_ALLOWANCE_TOKENS * run.measurer.scale
        )
        take = take[:count]
    span = [units[i] for i in take]
    result = yield _summary_need(run, stage, span)
    run.summaries += 1
    if result.text is not None:
        note = build_note(stage, span, run.inp.record, summary=result.text)
    else:
        note = build_note(stage, span, run.inp.record, summary_note=f"(No summary: {result.failure}.)")
    candidate = rebuild_view(run.view, units, set(take), {take[0]: note})
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


def _reset_can_land(run: PlanRun, stage: str, units: Sequence[Unit], take: Sequence[int]) -> bool:
    """Whether a reset note could lower the estimate with a summary of its allowance: a reset lists every
    call it absorbs under one header, so it gains only the headers of the notes it merges and the rounds
    it takes; when that is less than a summary adds, the summary is not asked for (it would be rolled back)."""
    note = build_note(stage, [units[i] for i in take], run.inp.record, summary_note="(summary)")
    estimate = run.measurer.estimate(rebuild_view(run.view, units, set(take), {take[0]: note}))
    return estimate + SUMMARY_ALLOWANCE_TOKENS * run.measurer.scale < run.estimate


def _notes_tokens(run: PlanRun) -> float:
    total = 0
    for message in run.view:
        if isinstance(message, Note):
            total += run.measurer.block_tokens(message)[0]
    return total * run.measurer.scale


def _floor_estimate(run: PlanRun) -> int:
    units, take = _span_units(run, FLOOR_TAIL, reset=False)
    return run.measurer.estimate(rebuild_view(run.view, units, set(take), {}))


def _fold(run: PlanRun) -> Generator[NeedSummary, SummaryResult, FoldPlan]:
    settings = run.settings
    _marks_pass(run)
    if run.inp.mode != "full":
        _tool_io(run, TOOL_IO_TAILS[0] if run.inp.mode == "light" else 0, exact=False, needed_only=False)
        return run.plan()

    reset_done = False
    if settings.caching and _notes_tokens(run) > RESET_SHARE * settings.ceiling:
        yield from _summarized_pass(run, "reset", FLOOR_TAIL, reset=True)
        reset_done = True

    def done() -> bool:
        return run.reached()

    if run.inp.inherited and not done():
        _inherited(run)

    # Each stage takes only what it needs (issue 11): the oldest rounds first, clipping
    # only the bodies needed; a round that would overshoot far is left to the clip first.
    if not done():
        for tail in TOOL_IO_TAILS:
            _tool_io(run, tail, exact=True)
            if done():
                break
    if not done():
        _clip(run)
    if not done() and run.held_back:  # the clip did not reach: take the round held back after all
        for tail in TOOL_IO_TAILS:
            _tool_io(run, tail, exact=False)
            if done():
                break
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


def _compaction(run: PlanRun) -> Generator[NeedSummary, SummaryResult, FoldPlan]:
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
        note = build_note("compaction", span, run.inp.record, summary=result.text, salient=False)
    else:
        note = build_note(
            "compaction", span, run.inp.record, summary_note=f"(No summary: {result.failure}.)", salient=False
        )
    task_members = [m for i in sorted(keep) for m in units[i].members if task is not None and m.id == task.id]
    rest = [m for i in sorted(keep) for m in units[i].members if task is None or m.id != task.id]
    candidate = task_members + [note] + rest
    left = [mid for i in take for mid in units[i].ids]
    run.attempt("compaction", candidate, [note], left, summary_usage=result.usage, remeasure=True)
    return run.plan()
