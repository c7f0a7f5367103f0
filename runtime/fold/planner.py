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
marks and ``tool_io`` with tail six. The ``compaction`` strategy replaces all
of this with one summary of the whole conversation.

Modules: the values crossing the boundary are in :mod:`runtime.fold.steps`,
the working state in :mod:`runtime.fold.state`, the passes in
:mod:`runtime.fold.passes`; this module drives them.
"""

from __future__ import annotations

from collections.abc import Generator

from runtime.fold.measurer import Measurer
from runtime.fold.passes import SUMMARY_SOURCE_SHARE, SUMMARY_SYSTEM, compaction_pass, fold_passes
from runtime.fold.state import FoldState
from runtime.fold.steps import FoldInput, FoldPlan, NeedSummary, PassRecord, Step, SummaryResult

__all__ = [
    "SUMMARY_SOURCE_SHARE",
    "SUMMARY_SYSTEM",
    "FoldInput",
    "FoldPlan",
    "FoldPlanner",
    "NeedSummary",
    "PassRecord",
    "Step",
    "SummaryResult",
]


class FoldPlanner:
    """Runs one fold over a :class:`FoldInput` (see the module docstring)."""

    def __init__(self, fold_input: FoldInput, measurer: Measurer) -> None:
        self._run = FoldState(fold_input, measurer)
        program = compaction_pass if fold_input.settings.strategy == "compaction" else fold_passes
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

