"""The fold planner's values: what a fold reads, what it asks for, what it returns (pure)."""

from __future__ import annotations

from typing import Literal

import attrs

from runtime.fold.marks import FoldMark
from runtime.fold.settings import (
    FoldSettings,
)
from runtime.fold.units import (
    RecordAccess,
)
from runtime.values.canonical import sha256_hex
from runtime.values.messages import Message
from runtime.values.usage import Usage


@attrs.frozen(eq=False)
class FoldInput:
    """Everything one fold reads: a snapshot of the branch and the policy."""

    record: RecordAccess
    view: tuple[Message, ...]
    delivered: frozenset[str]
    recovered: frozenset[str]
    protected: frozenset[str]
    marks: tuple[FoldMark, ...]
    settings: FoldSettings
    mode: Literal["full", "light", "read"] = "full"
    refusal: bool = False
    """The fold runs because the request is over the ceiling (a commit is never deferred then)."""
    inherited: frozenset[str] = frozenset()
    """View ids a child inherited with its emitter's cache, before its first request: the ``inherited``
    pass folds the newest of them first, so the prefix its emitter cached stays (empty: no such pass)."""


@attrs.frozen
class NeedSummary:
    """Send one ``side`` request carrying only the folded span: the summarizer's instructions
    (``system``) and the ``prompt`` holding the span."""

    stage: str
    span_ids: tuple[str, ...]
    system: str
    prompt: str


@attrs.frozen
class SummaryResult:
    """What came of a summary request: its ``text``, or why there is none (``failure``)."""

    text: str | None = None
    failure: str | None = None
    usage: Usage | None = None

    def __attrs_post_init__(self) -> None:
        if (self.text is None) == (self.failure is None):
            raise ValueError("SummaryResult: give exactly one of text and failure")


@attrs.frozen
class PassRecord:
    """One pass as the fold record lists it."""

    stage: str
    outcome: Literal["landed", "rolled_back"]
    estimate_before: int
    estimate_after: int
    summary_usage: Usage | None = None
    detail: str = ""


@attrs.frozen
class FoldPlan:
    """What one fold decided. Land it in one batch: ``added`` into the record, then the view.

    ``added`` holds the kept notes and copies and any rejected summary note
    (outside the view), in order. ``folded_ids`` are the ids that left the
    view. ``held_marks`` stay pending. ``deferred`` says an epoch commit was
    put off because it would free too little.
    """

    view_ids: tuple[str, ...]
    added: tuple[Message, ...]
    stages: tuple[str, ...]
    passes: tuple[PassRecord, ...]
    folded_ids: tuple[str, ...]
    estimate_before: int
    estimate_after: int
    target_reached: bool
    agent_marks: int
    held_marks: tuple[FoldMark, ...]
    summaries: int
    deferred: bool = False
    skipped_marks: tuple[tuple[str, str], ...] = ()
    """(unit's first member id, reason) for marked units the fold may never take."""

    @property
    def landed(self) -> bool:
        return bool(self.stages)

    @property
    def host_stages(self) -> int:
        return sum(1 for s in self.stages if s != "marks")

    @property
    def fold_id(self) -> str | None:
        """The commit's id, deterministic from the stages and what left the view."""
        if not self.landed:
            return None
        return "f-" + sha256_hex("+".join(self.stages) + "\n" + "\n".join(self.folded_ids))[:12]


Step = NeedSummary | FoldPlan
