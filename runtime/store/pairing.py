"""Commit order for a store: a response's usage event and its batch land together.

The engine records a response's batch (the assistant message, the state with
its ``open_turn``, the :class:`~actors.branch.RequestRecord`) and then, with
no checkpoint between, publishes ``ResponseReceived`` (the usage the report
counts), so a cancellation never lands between the two in the engine's task
(the sink's task may still take it first; see below). The event reaches
the store through the signal bus a little later than the batch reaches it
through the journal, or, when the bus makes the publisher wait, a little
earlier. If they were committed apart, a crash between the two would either
count a response whose conversation was lost (and count it again when the
resumed run sends it again) or lose the usage of a response the conversation
kept. :class:`ResponsePairing` orders units so that cannot happen:

- A batch carrying a sent request whose event has not come yet is held, and
  everything submitted after it waits behind it (commit order is submission
  order), until the event comes; the two then go in one unit.
- An event that comes before its batch is held until its branch's next batch
  and joins it.
- Once a sink has fed the store, a batch is held for its event even after the
  event stream ended (``capture_events`` stays true): a run cancelled while an
  engine task is between checkpoints can record a response after the sink's
  task has already stopped, and that response's event is never stored. Letting
  such a batch commit alone would store a request whose usage the report never
  counts, while the resumed run, seeing the response, would not send it again.
- Nothing is held without bound: ``max_held`` units at most wait behind one
  batch. When the run ends normally every event has arrived and nothing is
  held; :meth:`release_all` lets anything still held go as it is. When the
  run is cancelled or fails, events may never come: :meth:`drop_held` then
  discards every unit still waiting and everything behind it, exactly as if
  the process had stopped there (the resumed run sends that request again,
  and its usage is counted once).

Pure bookkeeping: no I/O and no clock; ``submit`` is the writer's.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Sequence
from typing import Any

import attrs

Statement = tuple[str, Sequence[Any]]


@attrs.define(eq=False)
class _Held:
    statements: list[Statement]
    awaits: str | None


@attrs.define(eq=False)
class ResponsePairing:
    """Orders store units; see the module docstring."""

    submit: Callable[[Sequence[Statement]], None]
    max_held: int = 4096
    capture_events: bool = False
    """True once a signal sink feeds this store (only then is a batch held for its event);
    it stays true after the stream ends (see the module docstring)."""
    _waiting: deque[_Held] = attrs.field(factory=deque, init=False)
    _early: dict[str, list[tuple[str, list[Statement]]]] = attrs.field(factory=dict, init=False)
    _passed: Counter[str] = attrs.field(factory=Counter, init=False)
    _released: Counter[str] = attrs.field(factory=Counter, init=False)

    @property
    def held(self) -> int:
        """Units waiting (behind a batch, or early events waiting for their batch)."""
        return len(self._waiting) + sum(len(v) for v in self._early.values())

    def batch(self, branch_id: str, statements: Sequence[Statement], awaits: str | None) -> None:
        """A journal batch of ``branch_id``; ``awaits`` names the sent request whose event it needs."""
        unit = list(statements)
        for request_id, event_statements in self._early.pop(branch_id, []):
            unit.extend(event_statements)
            if request_id == awaits:
                awaits = None
            else:
                self._passed[request_id] += 1
        if awaits is not None and self._passed[awaits]:
            self._passed[awaits] -= 1
            awaits = None
        if not self.capture_events:
            awaits = None
        self._enqueue(_Held(unit, awaits))

    def event(
        self, event_type: str, branch_id: str | None, request_id: str | None, statements: Sequence[Statement]
    ) -> None:
        """One signal's statements."""
        unit = list(statements)
        if event_type == "ResponseReceived" and request_id is not None:
            for held in self._waiting:
                if held.awaits == request_id:
                    held.statements.extend(unit)
                    held.awaits = None
                    self._drain()
                    return
            if self._released[request_id]:
                self._released[request_id] -= 1
            elif branch_id is not None and self.capture_events:
                self._early.setdefault(branch_id, []).append((request_id, unit))
                return
        self._enqueue(_Held(unit, None))

    def release_all(self) -> None:
        """Submit everything held, as it is, in order."""
        for held in self._waiting:
            if held.awaits is not None:
                self._released[held.awaits] += 1
            held.awaits = None
        self._drain()
        early, self._early = self._early, {}
        for entries in early.values():
            for _request_id, statements in entries:
                self.submit(statements)

    def drop_held(self) -> int:
        """Discard the units waiting for a partner and all behind them; return how many."""
        dropped = len(self._waiting) + sum(len(v) for v in self._early.values())
        self._waiting.clear()
        self._early.clear()
        return dropped

    def _enqueue(self, held: _Held) -> None:
        if self._waiting or held.awaits is not None:
            self._waiting.append(held)
            if len(self._waiting) > self.max_held:
                head = self._waiting[0]
                if head.awaits is not None:
                    self._released[head.awaits] += 1
                head.awaits = None
            self._drain()
        else:
            self.submit(held.statements)

    def _drain(self) -> None:
        waiting = self._waiting
        while waiting and waiting[0].awaits is None:
            self.submit(waiting.popleft().statements)
