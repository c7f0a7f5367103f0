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
and starts with no cache evidence.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import attrs

from actors.record import Record
from runtime.compiler import ToolSpec
from runtime.messages import Message, SystemMessage


def new_branch_id() -> str:
    return "br-" + secrets.token_hex(6)


class BranchBusy(RuntimeError):
    """A mutation was attempted through a turn handle that is no longer current."""


@attrs.frozen
class ContextState:
    """A branch's context state: a frozen value replaced whole on each change."""

    scale: float = 1.0
    delivered: frozenset[str] = frozenset()
    refusal: BaseException | None = None
    protected_round: Any = None
    pending_marks: tuple[Any, ...] = ()
    last_request_digests: tuple[str, ...] = ()
    rewrite_cause: str | None = None


@attrs.define(eq=False)
class Branch:
    """One conversation branch (an actor). See the module docstring."""

    _id: str = attrs.field(factory=new_branch_id, alias="branch_id")
    _system: SystemMessage | None = attrs.field(default=None, alias="system")
    _tools: tuple[ToolSpec, ...] = attrs.field(default=(), converter=tuple, alias="tools")
    _record: Record = attrs.field(factory=Record, alias="record")
    _view: list[str] = attrs.field(factory=list, alias="view")
    _state: ContextState = attrs.field(factory=ContextState, alias="state")
    _ledger: Any = attrs.field(default=None, alias="ledger")
    _lock: anyio.Lock = attrs.field(factory=anyio.Lock, init=False)
    _turn_serial: int = attrs.field(default=0, init=False)
    parent_id: str | None = attrs.field(default=None)

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
    def refusal(self) -> BaseException | None:
        return self._state.refusal

    @property
    def ledger(self) -> Any:
        return self._ledger

    @property
    def busy(self) -> bool:
        """True while a turn holds the branch."""
        return self._lock.locked()

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

    def clone(self, *, branch_id: str | None = None, upto: int | None = None) -> Branch:
        """A branch starting from this one's view. O(view length); no message copied.

        ``upto`` keeps only the view's first ``upto`` messages (the flow uses it
        to leave out a round whose calls have no results yet). The clone keeps
        the scale, the protected-round decision and the delivered marks of the
        messages it sees; it gets no refusal and an empty cache ledger (cache
        evidence does not transfer).
        """
        view = self._view[:upto] if upto is not None else list(self._view)
        seen = set(view)
        state = ContextState(
            scale=self._state.scale,
            delivered=frozenset(d for d in self._state.delivered if d in seen),
            protected_round=self._state.protected_round,
        )
        return Branch(
            branch_id=branch_id or new_branch_id(),
            system=self._system,
            tools=self._tools,
            record=self._record.fork(),
            view=view,
            state=state,
            ledger=None,
            parent_id=self._id,
        )

    def configure(self, *, system: str | None = None, tools: Sequence[ToolSpec] | None = None) -> None:
        """Set up the branch (a child's own system text and tools) before any turn.

        Refused while a turn holds the branch. A new system text is appended to
        the record (the old one stays there) and becomes the stable segment.
        """
        if self.busy:
            raise BranchBusy(f"branch {self._id} is in a turn; configure it before or after")
        if system is not None and (self._system is None or self._system.text != system):
            message = SystemMessage(system)
            self._record.append(message)
            self._system = message
        if tools is not None:
            self._tools = tuple(tools)

    def clear_refusal(self) -> None:
        """Clear the sticky refusal (the caller decided to go on)."""
        self._state = attrs.evolve(self._state, refusal=None)

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[Turn]:
        """Hold the branch for one turn; yields the only handle that can change it."""
        async with self._lock:
            self._turn_serial += 1
            handle = Turn(self, self._turn_serial)
            try:
                yield handle
            finally:
                handle._closed = True


@attrs.define(eq=False)
class Turn:
    """The mutation handle of one turn. Valid only inside ``branch.turn()``."""

    _branch: Branch
    _serial: int
    _closed: bool = False

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
        return index

    def add_to_record(self, message: Message) -> int:
        """Append a message to the record only (a note or copy not yet in the view)."""
        return self._check()._record.append(message)

    def set_view(self, ids: Sequence[str]) -> None:
        """Replace the view (a fold commit or a restore). Every id must be in the record."""
        branch = self._check()
        for mid in ids:
            if branch._record.index_of(mid) is None:
                raise KeyError(f"view id {mid} is not in branch {branch.id}'s record")
        branch._view = list(ids)

    def update_state(self, **changes: Any) -> ContextState:
        branch = self._check()
        branch._state = attrs.evolve(branch._state, **changes)
        return branch._state

    def set_ledger(self, ledger: Any) -> None:
        self._check()._ledger = ledger
