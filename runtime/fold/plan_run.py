"""The working state of one fold: the view as it is being folded, and how a pass lands (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from runtime.fold.marks import FoldMark
from runtime.fold.measurer import Measurer
from runtime.fold.notes import CALLS_HEADING, build_note, unit_lines
from runtime.fold.plan_values import FoldInput, FoldPlan, PassRecord
from runtime.fold.settings import (
    FoldSettings,
)
from runtime.fold.units import (
    Unit,
    is_complete_round,
    tail_units,
    task_instruction,
    units_of,
)
from runtime.values.messages import Message, Note
from runtime.values.usage import Usage


@attrs.define(eq=False)
class PlanRun:
    """The working state of one fold (private to the planner)."""

    inp: FoldInput
    measurer: Measurer
    view: list[Message] = attrs.field(init=False)
    estimate: int = attrs.field(init=False)
    before: int = attrs.field(init=False)
    added: dict[str, Message] = attrs.field(factory=dict)
    outside: list[Message] = attrs.field(factory=list)
    stages: list[str] = attrs.field(factory=list)
    passes: list[PassRecord] = attrs.field(factory=list)
    folded: list[str] = attrs.field(factory=list)
    agent_marks: int = 0
    held: tuple[FoldMark, ...] = ()
    skipped_marks: tuple[tuple[str, str], ...] = ()
    summaries: int = 0
    held_back: bool = False
    """A tool_io pass left a round that would overshoot far for the clip stage."""
    _lines: dict[int, tuple[Unit, list[str]]] = attrs.field(factory=dict, init=False)
    """Each unit's listing lines, by the unit's identity (the unit is kept, so its id is not reused)."""

    def __attrs_post_init__(self) -> None:
        self.view = list(self.inp.view)
        self.estimate = self.measurer.estimate(self.view)
        self.before = self.estimate
        self.held = self.inp.marks

    @property
    def settings(self) -> FoldSettings:
        return self.inp.settings

    def units(self) -> tuple[Unit, ...]:
        return units_of(self.view, self.inp.record)

    def reached(self) -> bool:
        return self.settings.reached(self.estimate)

    # -- keep sets ----------------------------------------------------------------------

    def never(self, units: Sequence[Unit]) -> dict[int, str]:
        """Units no pass may take, with why."""
        out: dict[int, str] = {}
        head = self.view[0].id if self.view else None
        task = task_instruction(self.view)
        for i, unit in enumerate(units):
            ids = set(unit.ids)
            if head in ids:
                out[i] = "the view's first message"
            elif task is not None and task.id in ids:
                out[i] = "the task instruction"
            elif ids & self.inp.protected:
                out[i] = "the protected first round"
        return out

    def not_now(self, units: Sequence[Unit], tail: int) -> set[int]:
        """Units no folding pass may take yet: undelivered, just recovered, or in the kept tail."""
        out = tail_units(units, len(self.view), tail)
        for i, unit in enumerate(units):
            ids = set(unit.ids)
            if not ids <= self.inp.delivered or ids & self.inp.recovered or not is_complete_round(unit):
                out.add(i)
        return out

    def before_newest_note(self, units: Sequence[Unit]) -> set[int]:
        """With caching on, the units at or before the newest note (the ordinary stages leave them)."""
        if not self.settings.caching:
            return set()
        newest = max((i for i, u in enumerate(units) if u.kind == "note"), default=None)
        return set(range(newest + 1)) if newest is not None else set()

    # -- landing ------------------------------------------------------------------------

    def attempt(
        self,
        stage: str,
        candidate: list[Message],
        new: Sequence[Message],
        left: Sequence[str],
        *,
        summary_usage: Usage | None = None,
        remeasure: bool = False,
        keep_rejected: Sequence[Message] = (),
        detail: str = "",
    ) -> bool:
        """Land ``candidate`` if it strictly lowers the estimate; otherwise roll back exactly.

        ``remeasure``: measure the current view again first (after a summary
        request, whose response may have raised the scale).
        """
        before = self.measurer.estimate(self.view) if remeasure else self.estimate
        after = self.measurer.estimate(candidate)
        if after < before:
            self.view = candidate
            self.estimate = after
            # A note or copy that lands stays in the record even when a later
            # pass of this fold folds it again: the later note names it.
            for message in new:
                self.added[message.id] = message
            self.folded.extend(left)
            self.stages.append(stage)
            self.passes.append(PassRecord(stage, "landed", before, after, summary_usage, detail))
            return True
        self.estimate = before
        self.outside.extend(keep_rejected)
        self.passes.append(PassRecord(stage, "rolled_back", before, after, summary_usage, detail))
        return False

    def unit_lines(self, unit: Unit) -> list[str]:
        """``unit``'s listing lines, built once per fold (a pass builds notes over the same units many times)."""
        entry = self._lines.get(id(unit))
        if entry is None:
            entry = (unit, unit_lines(unit, self.inp.record))
            self._lines[id(unit)] = entry
        return entry[1]

    def replace_runs(self, units: Sequence[Unit], take: Sequence[int], stage: str) -> tuple[list[Message], list[Note]]:
        """The view with each contiguous run of the taken units replaced by one note."""
        chosen = set(take)
        runs: list[list[int]] = []
        for i in range(len(units)):
            if i in chosen:
                if runs and runs[-1][-1] == i - 1:
                    runs[-1].append(i)
                else:
                    runs.append([i])
        notes: list[Note] = []
        note_at: dict[int, Note] = {}
        # The full instructions once: a note kept in the view already shows them.
        shown = any(
            isinstance(m, Note) and CALLS_HEADING in m.text
            for i, unit in enumerate(units)
            if i not in chosen
            for m in unit.members
        )
        for run in runs:
            heading = None if shown else CALLS_HEADING
            note = build_note(
                stage, [units[i] for i in run], self.inp.record, lines_of=self.unit_lines, heading=heading
            )
            shown = True
            notes.append(note)
            note_at[run[0]] = note
        return rebuild_view(self.view, units, chosen, note_at), notes

    def plan(self, deferred: bool = False) -> FoldPlan:
        if deferred:
            return FoldPlan(
                view_ids=tuple(m.id for m in self.inp.view),
                added=(),
                stages=(),
                passes=tuple(self.passes),
                folded_ids=(),
                estimate_before=self.before,
                estimate_after=self.before,
                target_reached=self.settings.reached(self.before),
                agent_marks=0,
                held_marks=self.inp.marks,
                summaries=self.summaries,
                deferred=True,
            )
        added = list(self.added.values()) + [m for m in self.outside if m.id not in self.added]
        return FoldPlan(
            view_ids=tuple(m.id for m in self.view),
            added=tuple(added),
            stages=tuple(self.stages),
            passes=tuple(self.passes),
            folded_ids=tuple(dict.fromkeys(self.folded)),
            estimate_before=self.before,
            estimate_after=self.estimate,
            target_reached=self.reached(),
            agent_marks=self.agent_marks,
            held_marks=self.held,
            summaries=self.summaries,
            skipped_marks=self.skipped_marks,
        )


def rebuild_view(
    view: Sequence[Message], units: Sequence[Unit], taken: set[int], note_at: Mapping[int, Message]
) -> list[Message]:
    """``view`` without the taken units' members, each replacing note placed at its run's first position."""
    drop: set[int] = set()
    insert: dict[int, Message] = {}
    for i in taken:
        drop.update(units[i].positions)
    for i, note in note_at.items():
        insert[units[i].position] = note
    out: list[Message] = []
    for position, message in enumerate(view):
        if position in insert:
            out.append(insert[position])
        if position not in drop:
            out.append(message)
    return out
