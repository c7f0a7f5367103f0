"""The Branch actor: one conversation branch and everything it owns.

A branch owns its append-only record, its view (the ordered message ids the
model sees), a lock (one turn at a time), its prompt-cache ledger and its
context state (scale, delivered ids, sticky refusal, protected first round,
pending fold marks). Nothing outside reaches into those fields: reads go
through the read-only accessors, and every change happens inside
``async with branch.turn() as turn:``, whose :class:`Turn` handle is the only
object with mutating methods and is valid only while the lock is held.

``clone()`` shares the immutable messages (the record is forked in O(1)) and
copies only the view's id list, so it costs O(view length) at most. A clone
keeps the scale and the protected-round decision, gets its own refusal state,
and takes the cache ledger only when it keeps this branch's stable segment
(:meth:`Branch.clone`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Protocol

import anyio
import attrs

from actors.context_state import ContextState
from actors.record import Record
from actors.request_record import RequestRecord
from runtime.cache import CacheLedger
from runtime.errors import InputCeilingExceeded
from runtime.fold.marks import FoldMark
from runtime.fold.protected import ProtectedRound
from runtime.measuring.calibration import Calibration
from runtime.measuring.model_calibration import CalibrationBook, shared_evidence
from runtime.request.compiler import ToolSpec
from runtime.values.ids import current_ids
from runtime.values.messages import Instruction, Message, SystemMessage
from runtime.values.usage import Usage


def _tool_tuple(tools: Iterable[ToolSpec]) -> tuple[ToolSpec, ...]:
    return tuple(tools)


def new_branch_id() -> str:
    """A fresh branch id from the id source in force (:mod:`runtime.values.ids`)."""
    return current_ids().branch_id()


class BranchBusy(RuntimeError):
    """A mutation was attempted through a turn handle that is no longer current."""


@attrs.frozen
class MessageAdded:
    """A message entered the record at ``index`` (and the view's end when ``in_view``)."""

    index: int
    message: Message
    in_view: bool


@attrs.frozen
class ViewSet:
    """The view became exactly ``ids``."""

    ids: tuple[str, ...]


@attrs.frozen
class StateSet:
    state: ContextState


@attrs.frozen
class LedgerSet:
    ledger: CacheLedger


@attrs.frozen
class SetupSet:
    """The branch's setup changed: its system message (an id in its record) and tool definitions."""

    system_id: str | None
    tools_json: tuple[str, ...]


Change = MessageAdded | ViewSet | StateSet | LedgerSet | RequestRecord | SetupSet


class BranchJournal(Protocol):
    """Where a branch reports its changes (a store). Calls must not block.

    ``changes`` arrive in batches: every change of one batch belongs
    together (a fold commit's notes, copies and new view are one batch) and a
    durable journal writes a batch in one transaction.
    """

    def branch_created(self, branch: Branch) -> None: ...

    def changed(self, branch: Branch, changes: Sequence[Change]) -> None: ...


@attrs.define(eq=False)
class Branch:
    """One conversation branch (an actor). See the module docstring."""

    _id: str = attrs.field(factory=new_branch_id, alias="branch_id")
    _system: SystemMessage | None = attrs.field(default=None, alias="system")
    _tools: tuple[ToolSpec, ...] = attrs.field(default=(), converter=_tool_tuple, alias="tools")
    _record: Record = attrs.field(factory=Record, alias="record")
    _view: list[str] = attrs.field(factory=list, alias="view")
    _state: ContextState = attrs.field(factory=ContextState, alias="state")
    _ledger: CacheLedger | None = attrs.field(default=None, alias="ledger")
    _lock: anyio.Lock | None = attrs.field(default=None, init=False)
    """Held by the turn in progress; None at rest (made by the first turn that needs it, let go when no turn
    holds or waits for it: a run of thousands of branches keeps none)."""
    _turn_serial: int = attrs.field(default=0, init=False)
    parent_id: str | None = attrs.field(default=None)
    fork_length: int = attrs.field(default=0)
    """For a clone: how many of the parent's record messages it shares."""
    _journal: BranchJournal | None = attrs.field(default=None, alias="journal")

    def attach_journal(self, journal: BranchJournal) -> None:
        """Report this branch's creation and every later change to ``journal``."""
        self._journal = journal
        journal.branch_created(self)

    @property
    def journal(self) -> BranchJournal | None:
        return self._journal

    @classmethod
    def create(
        cls,
        *,
        system: str | None = None,
        tools: Iterable[ToolSpec] = (),
        branch_id: str | None = None,
    ) -> Branch:
        """A new, empty branch with an optional system text and tool set."""
        record = Record()
        system_message = None
        if system is not None:
            system_message = SystemMessage(system)
            record.append(system_message)
        kwargs: dict[str, Any] = {"system": system_message, "tools": tuple(tools), "record": record}
        if branch_id is not None:
            kwargs["branch_id"] = branch_id
        return cls(**kwargs)

    # -- read-only accessors ------------------------------------------------------

    @property
    def id(self) -> str:
        return self._id

    @property
    def system(self) -> SystemMessage | None:
        return self._system

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        return self._tools

    @property
    def state(self) -> ContextState:
        return self._state

    @property
    def scale(self) -> float:
        return self._state.scale

    @property
    def calibrations(self) -> CalibrationBook:
        return self._state.calibrations

    @property
    def refusal(self) -> InputCeilingExceeded | None:
        return self._state.refusal

    @property
    def ledger(self) -> CacheLedger | None:
        return self._ledger

    @property
    def busy(self) -> bool:
        """True while a turn holds the branch."""
        return self._lock is not None and self._lock.locked()

    def view_ids(self) -> tuple[str, ...]:
        return tuple(self._view)

    def view(self) -> tuple[Message, ...]:
        """The messages the model sees, in order (a snapshot)."""
        record = self._record
        return tuple(record.get(mid) for mid in self._view)

    def record_length(self) -> int:
        return len(self._record)

    def message_at(self, index: int) -> Message:
        """The message at a full-record index."""
        return self._record[index]

    def index_of(self, message_id: str) -> int | None:
        return self._record.index_of(message_id)

    def record_messages(self) -> tuple[Message, ...]:
        return tuple(self._record)

    # -- structure ------------------------------------------------------------------

    def clone(self, *, branch_id: str | None = None, upto: int | None = None, cache: bool = False) -> Branch:
        """A branch starting from this one's view. O(view length); no message copied.

        ``upto`` keeps only the view's first ``upto`` messages (the flow uses it
        to leave out a round whose calls have no results yet). The clone keeps
        the scale and its calibration evidence, the protected-round decision (pending again when the clone's
        view lacks a member of the round) and the delivered marks of the
        messages it sees; it gets no refusal and no pending fold marks. Its
        cache ledger is empty unless ``cache``: a clone that keeps this
        branch's stable segment byte for byte (:mod:`actors.inherit`) takes the
        ledger, so its first request marks and reads what this branch cached. Message ids are
        shared with the emitter, so notes, copies and recovery indices keep
        their meaning in the clone.
        """
        view = self._view[:upto] if upto is not None else list(self._view)
        seen = set(view)
        protected = self._state.protected_round
        if protected is not None and not set(protected.member_ids) <= seen:
            protected = None  # a clone missing a member of the round starts with its round pending
        state = ContextState(
            scale=self._state.scale,
            calibrations=self._state.calibrations,
            delivered=frozenset(d for d in self._state.delivered if d in seen),
            protected_round=protected,
            fold_next=frozenset(d for d in self._state.fold_next if d in seen),
        )
        return Branch(
            branch_id=branch_id or new_branch_id(),
            system=self._system,
            tools=self._tools,
            record=self._record.fork(),
            view=view,
            state=state,
            ledger=self._ledger if cache else None,
            parent_id=self._id,
            fork_length=len(self._record),
        )

    def configure(
        self, *, system: str | None = None, tools: Sequence[ToolSpec] | None = None, setup: str | None = None
    ) -> None:
        """Set up the branch (a child's own system text and tools) before any turn.

        Refused while a turn holds the branch. A new system text is appended to
        the record (the old one stays there) and becomes the stable segment.
        ``setup``: a child's setup delivered as an instruction at the view's end
        instead (:mod:`actors.inherit`), so the stable segment stays its emitter's.
        """
        if self.busy:
            raise BranchBusy(f"branch {self._id} is in a turn; configure it before or after")
        changes: list[Change] = []
        if system is not None and (self._system is None or self._system.text != system):
            message = SystemMessage(system)
            index = self._record.append(message)
            self._system = message
            changes.append(MessageAdded(index, message, False))
        if tools is not None and tuple(tools) != self._tools:
            self._tools = tuple(tools)
        if setup is not None:
            instruction = Instruction(setup)
            changes.append(MessageAdded(self._record.append(instruction), instruction, True))
            self._view.append(instruction.id)
        if changes or tools is not None:
            changes.append(SetupSet(self._system.id if self._system else None, tuple(t.piece() for t in self._tools)))
        if changes and self._journal is not None:
            self._journal.changed(self, tuple(changes))

    def clear_refusal(self) -> None:
        """Clear the sticky refusal (the caller decided to go on)."""
        if self.busy:
            raise BranchBusy(f"branch {self._id} is in a turn; clear its refusal before or after")
        self._state = attrs.evolve(self._state, refusal=None)
        if self._journal is not None:
            self._journal.changed(self, (StateSet(self._state),))

    def take_evidence(self, evidence: CalibrationBook) -> None:
        """Join ``evidence`` (at a node's start, its dependencies') into the branch's own, as
        :func:`runtime.measuring.model_calibration.shared_evidence` does (taken again: no change). Not inside a turn."""
        calibrations = shared_evidence((self._state.calibrations, evidence))
        if calibrations == self._state.calibrations:
            return
        if self.busy:
            raise BranchBusy(f"branch {self._id} is in a turn; give it evidence before or after")
        self._state = attrs.evolve(self._state, calibrations=calibrations)
        if self._journal is not None:
            self._journal.changed(self, (StateSet(self._state),))

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[Turn]:
        """Hold the branch for one turn; yields the only handle that can change it."""
        lock = self._lock
        if lock is None:
            lock = self._lock = anyio.Lock()
        try:
            async with lock:
                self._turn_serial += 1
                handle = Turn(self, self._turn_serial)
                try:
                    yield handle
                finally:
                    handle._closed = True
        finally:
            # Let the lock go when no turn holds it or waits for it. A task that read ``self._lock`` starts its
            # acquire (or joins the waiters) with no checkpoint between, so none can be left holding this one.
            if self._lock is lock and not lock.locked() and lock.statistics().tasks_waiting == 0:
                self._lock = None


@attrs.define(eq=False)
class Turn:
    """The mutation handle of one turn. Valid only inside ``branch.turn()``."""

    _branch: Branch
    _serial: int
    _closed: bool = False
    _pending: list[Change] | None = None

    def _emit(self, change: Change) -> None:
        if self._pending is not None:
            if isinstance(change, StateSet) and self._pending and isinstance(self._pending[-1], StateSet):
                # A state is stored whole: of two state changes in a row the later one says it all.
                self._pending[-1] = change
                return
            self._pending.append(change)
        elif self._branch._journal is not None:
            self._branch._journal.changed(self._branch, (change,))

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Group the changes made inside into one journal batch (one transaction)."""
        if self._pending is not None:
            yield
            return
        self._pending = []
        try:
            yield
        finally:
            changes, self._pending = self._pending, None
            if changes and self._branch._journal is not None:
                self._branch._journal.changed(self._branch, tuple(changes))

    @property
    def branch(self) -> Branch:
        return self._branch

    def _check(self) -> Branch:
        if self._closed:
            raise BranchBusy(f"turn {self._serial} of branch {self._branch.id} has ended")
        return self._branch

    def append(self, message: Message) -> int:
        """Append a message to the record and the end of the view; returns its index."""
        branch = self._check()
        index = branch._record.append(message)
        branch._view.append(message.id)
        self._emit(MessageAdded(index, message, True))
        return index

    def add_to_record(self, message: Message) -> int:
        """Append a message to the record only (a note or copy not yet in the view)."""
        index = self._check()._record.append(message)
        self._emit(MessageAdded(index, message, False))
        return index

    def set_view(self, ids: Sequence[str]) -> None:
        """Replace the view (a fold commit or a restore). Every id must be in the record."""
        branch = self._check()
        for mid in ids:
            if branch._record.index_of(mid) is None:
                raise KeyError(f"view id {mid} is not in branch {branch.id}'s record")
        branch._view = list(ids)
        self._emit(ViewSet(tuple(ids)))

    def _set_state(self, **changes: Any) -> ContextState:
        branch = self._check()
        branch._state = attrs.evolve(branch._state, **changes)
        self._emit(StateSet(branch._state))
        return branch._state

    # -- the context state, one named change each (the branch keeps its invariants) -----

    def open_turn(self, appended: int, completed: int) -> None:
        """An operation runs: its progress (instructions appended, requests completed) so far."""
        if appended < 0 or completed < 0:
            raise ValueError(f"turn progress ({appended}, {completed}) must not be negative")
        self._set_state(open_turn=(appended, completed))

    def close_turn(self) -> None:
        """The operation finished: no turn is open any more."""
        self._set_state(open_turn=None)

    def next_request_serial(self) -> int:
        """Number the next request of this branch (serials are never reused, across resumes too)."""
        serial = self._check()._state.request_serial + 1
        self._set_state(request_serial=serial)
        return serial

    def calibrate(self, counted: int, usage: Usage) -> float:
        """Calibrate the scale from a completed response; the scale never falls. Returns it."""
        scale = Calibration(self._check()._state.scale).after_response(counted, usage).scale
        self._set_state(scale=scale)
        return scale

    def observe_count(self, model: str, counted: int, provider_count: int, digests: Sequence[str] = ()) -> None:
        """The provider counted ``provider_count`` for what this branch counted at ``counted`` (its own evidence),
        a request of the message ``digests``."""
        book = self._check()._state.calibrations.observe(model, counted, provider_count)
        self._set_state(calibrations=book, calibrated_digests=tuple(digests))

    def raise_scale(self, scale: float) -> None:
        """Take the run's scale for this branch's model when it is larger (the scale never falls)."""
        if scale > self._check()._state.scale:
            self._set_state(scale=Calibration(scale).scale)

    def deliver(self, ids: Iterable[str]) -> None:
        """A main request carrying ``ids`` completed: they may fold from now on, and nothing is recovered any more."""
        state = self._check()._state
        self._set_state(delivered=state.delivered | frozenset(ids), recovered=frozenset())

    def carried_fresh(self, ids: Iterable[str]) -> None:
        """The main request that completed carried ``ids`` fresh for the next to fold (empty: nothing pending)."""
        fresh = frozenset(ids)
        if fresh != self._check()._state.fold_next:
            self._set_state(fold_next=fresh)

    def recover(self, ids: Iterable[str]) -> None:
        """Originals restored or read (and recovery answers): no fold takes them before the next delivery."""
        state = self._check()._state
        self._set_state(recovered=state.recovered | frozenset(ids))

    def refuse(self, error: InputCeilingExceeded) -> None:
        """Refuse the branch: sticky, every later send raises it until ``branch.clear_refusal()``."""
        if not isinstance(error, InputCeilingExceeded):
            raise TypeError(f"a refusal is an InputCeilingExceeded, not a {type(error).__name__}")
        if self._check()._state.refusal is None:
            self._set_state(refusal=error)

    def protect_first_round(self, decision: ProtectedRound) -> None:
        """Record the first-round decision: taken once, revisited only to release it (runtime.fold.protected)."""
        current = self._check()._state.protected_round
        if current is not None and not current.releases_to(decision):
            raise ValueError(f"branch {self._branch.id} already decided its protected first round")
        self._set_state(protected_round=decision)

    def hold_marks(self, marks: Sequence[FoldMark]) -> None:
        """The model's fold marks waiting for the next commit (replacing those held)."""
        marks = tuple(marks)
        if marks != self._check()._state.pending_marks:
            self._set_state(pending_marks=marks)

    def explain_rewrite(self, cause: str) -> None:
        """Record why the next request rewrites an earlier prefix (causes add up until a send)."""
        previous = self._check()._state.rewrite_cause
        self._set_state(rewrite_cause=f"{previous}; {cause}" if previous else cause)

    def commit_fold(
        self, added: Sequence[Message], view_ids: Sequence[str], held_marks: Sequence[FoldMark], cause: str
    ) -> None:
        """Land a fold in one batch: its notes and copies, the new view, the held marks and its rewrite cause."""
        with self.batch():
            for message in added:
                self.add_to_record(message)
            self.set_view(view_ids)
            self.hold_marks(held_marks)
            self.explain_rewrite(cause)

    def sent_prefix(self, stable: tuple[str, str, str], message_digests: Sequence[str]) -> None:
        """Remember what the request being sent is made of (the next is checked against it); spends the cause."""
        self._set_state(last_stable=stable, last_request_digests=tuple(message_digests), rewrite_cause=None)

    def record_request(self, record: RequestRecord) -> None:
        """Report a completed (or refused) send to the journal."""
        self._check()
        self._emit(record)

    def set_ledger(self, ledger: CacheLedger) -> None:
        self._check()._ledger = ledger
        self._emit(LedgerSet(ledger))
