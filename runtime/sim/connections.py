"""The simulated server's connection cap, and an accept loop that survives ``accept()`` errors.

:class:`ConnectionTable` admits at most ``cap`` connections. When a new one
arrives at the cap, the connection idle for longest (no request under way, or
only the head of one arriving, so slow heads cannot hold the slots) is
closed to make room, the way a server with keep-alive reclaims idle sockets;
when every connection is busy the newcomer is closed at once. So a flood of
idle connections never keeps a real request out.

:func:`accept_forever` accepts on an anyio listener until cancelled. An
``OSError`` from ``accept()`` (out of descriptors, a connection aborted before
it was accepted, ...) is logged and retried after a short, growing pause
instead of ending the server.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc
import attrs

from runtime.logs import get_logger
from runtime.sim.http import ActivityMarker

log = get_logger("foldline.sim")

ACCEPT_RETRY_FIRST_S = 0.01
ACCEPT_RETRY_MAX_S = 0.5


@attrs.define(eq=False)
class ConnectionSlot(ActivityMarker):
    """One admitted connection: its cancel scope and whether it is idle."""

    table: ConnectionTable
    number: int
    scope: anyio.CancelScope = attrs.field(factory=anyio.CancelScope)

    def idle(self) -> None:
        self.table.mark_idle(self)

    def busy(self) -> None:
        self.table.mark_busy(self)


@attrs.define(eq=False)
class ConnectionTable:
    """Admits connections up to ``cap``; evicts the longest-idle one to admit another."""

    cap: int
    _open: dict[int, ConnectionSlot] = attrs.field(factory=dict, init=False)
    _idle: OrderedDict[int, ConnectionSlot] = attrs.field(factory=OrderedDict, init=False)
    _next: int = attrs.field(default=0, init=False)
    evicted: int = attrs.field(default=0, init=False)
    refused: int = attrs.field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        if isinstance(self.cap, bool) or not isinstance(self.cap, int) or self.cap < 1:
            raise ValueError(f"ConnectionTable.cap: {self.cap!r} is not a positive integer")

    @property
    def open_count(self) -> int:
        return len(self._open)

    def admit(self) -> ConnectionSlot | None:
        """A slot for a new connection, evicting the longest-idle one at the cap; None when all are busy."""
        if len(self._open) >= self.cap:
            if not self._idle:
                self.refused += 1
                return None
            _, oldest = self._idle.popitem(last=False)
            oldest.scope.cancel()
            self._open.pop(oldest.number, None)
            self.evicted += 1
        self._next += 1
        slot = ConnectionSlot(self, self._next)
        self._open[slot.number] = slot
        self._idle[slot.number] = slot
        return slot

    def release(self, slot: ConnectionSlot) -> None:
        self._open.pop(slot.number, None)
        self._idle.pop(slot.number, None)

    def mark_idle(self, slot: ConnectionSlot) -> None:
        if slot.number in self._open:
            self._idle[slot.number] = slot
            self._idle.move_to_end(slot.number)

    def mark_busy(self, slot: ConnectionSlot) -> None:
        self._idle.pop(slot.number, None)


ConnectionHandler = Callable[[anyio.abc.SocketStream, ConnectionSlot], Awaitable[None]]


async def accept_forever(
    listener: anyio.abc.SocketListener,
    table: ConnectionTable,
    handle: ConnectionHandler,
    task_group: anyio.abc.TaskGroup,
) -> None:
    """Accept connections until cancelled; each admitted one is served by ``handle`` in ``task_group``."""
    pause = ACCEPT_RETRY_FIRST_S
    while True:
        try:
            stream = await listener.accept()
        except OSError as exc:
            log.warning("sim.accept_failed", errno=exc.errno, error=str(exc), retry_in_s=pause)
            await anyio.sleep(pause)
            pause = min(pause * 2, ACCEPT_RETRY_MAX_S)
            continue
        pause = ACCEPT_RETRY_FIRST_S
        slot = table.admit()
        if slot is None:
            log.warning("sim.connection_refused", reason="every connection is busy", cap=table.cap)
            await stream.aclose()
            continue
        task_group.start_soon(_serve_slot, stream, slot, table, handle)


async def _serve_slot(
    stream: anyio.abc.SocketStream, slot: ConnectionSlot, table: ConnectionTable, handle: ConnectionHandler
) -> None:
    try:
        with slot.scope:
            await handle(stream, slot)
    finally:
        table.release(slot)
        with anyio.CancelScope(shield=True):
            await stream.aclose()
