"""The model's fold marks: spans it is done with, landing at the next commit.

A mark moves no byte. It names full-record indices ``start..end``
(inclusive); at the next fold commit every unit of the view with a member in
that range folds into a note, together with the host's own stages (epoch
scheduling). A unit the fold may not take now (the tail, an undelivered
result, a just-recovered original) holds its mark for a later commit; a unit
it may never take (the task, the view's first message, the protected first
round) is skipped with that reason.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from runtime.fold.units import RecordAccess, Unit
from runtime.values.messages import Note, ToolResult


@attrs.frozen
class FoldMark:
    """A pending mark over full-record indices ``start..end`` (inclusive).

    ``made_at`` is the number of main requests the branch had completed when
    the model made it (for the record only).
    """

    start: int
    end: int
    made_at: int = 0

    def __attrs_post_init__(self) -> None:
        for name in ("start", "end", "made_at"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"FoldMark.{name}: {value!r} is not a non-negative integer")
        if self.end < self.start:
            raise ValueError(f"FoldMark: end {self.end} is before start {self.start}")

    def covers(self, unit: Unit, record: RecordAccess) -> bool:
        """Whether any member of ``unit`` (by its record index or the original it stands for) is in the span."""
        for member in unit.members:
            own = record.index_of(member.id)
            if own is not None and self.start <= own <= self.end:
                return True
            if isinstance(member, ToolResult) and member.clip is not None:
                if self.start <= member.clip.original_index <= self.end:
                    return True
            if isinstance(member, Note) and self.start <= member.first_index <= self.end:
                return True
        return False


@attrs.frozen
class MarkResolution:
    """What the pending marks ask for at one commit.

    ``units``: indices of the units to fold; ``landing``: the marks that take
    at least one unit; ``held``: marks still pending after the commit (they
    cover units the fold may take later); ``skipped``: (unit index, reason)
    pairs the fold may never take.
    """

    units: tuple[int, ...]
    landing: tuple[FoldMark, ...]
    held: tuple[FoldMark, ...]
    skipped: tuple[tuple[int, str], ...]


def resolve_marks(
    marks: Sequence[FoldMark],
    units: Sequence[Unit],
    record: RecordAccess,
    *,
    never: dict[int, str],
    not_now: set[int],
) -> MarkResolution:
    """Resolve ``marks`` over ``units``; ``never`` maps unit indices to why they may never fold."""
    take: set[int] = set()
    landing: list[FoldMark] = []
    held: list[FoldMark] = []
    skipped: dict[int, str] = {}
    for mark in marks:
        waiting = taking = False
        for i, unit in enumerate(units):
            if not mark.covers(unit, record):
                continue
            if i in never:
                skipped[i] = never[i]
            elif i in not_now:
                waiting = True
            else:
                take.add(i)
                taking = True
        if taking:
            landing.append(mark)
        if waiting:
            held.append(mark)
    return MarkResolution(tuple(sorted(take)), tuple(landing), tuple(held), tuple(sorted(skipped.items())))
