"""Subscriptions to the signal bus: each with its own bounded buffer and policy.

A :class:`Subscription` is what :meth:`signals.bus.SignalBus.subscribe` and
``add_handler`` hand out; see :mod:`signals.bus` for how events reach it. A
``block`` subscription holds every event (the publisher waits for room); a
``drop_oldest`` one drops the oldest buffered event when full and tells its
reader with a :class:`Gap` carrying the count.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Collection
from typing import Any

import anyio
import attrs

from signals.envelope import Event

BLOCK = "block"
DROP_OLDEST = "drop_oldest"
POLICIES = (BLOCK, DROP_OLDEST)

# The hot paths (every event, every subscriber) set private counters with
# object.__setattr__: attrs' own __setattr__ (these classes freeze some fields
# after creation) costs more than the rest of a delivery.
set_slot = object.__setattr__


@attrs.frozen
class Gap:
    """``count`` events were dropped (``drop_oldest``) between the previous item and the next event."""

    count: int

    def __attrs_post_init__(self) -> None:
        if type(self.count) is not int or self.count < 1:
            raise ValueError(f"Gap.count: {self.count!r} is not a positive integer")


@attrs.frozen
class SubscriptionStatistics:
    """A snapshot of one subscription.

    ``buffered`` events wait to be read, ``delivered`` events were read,
    ``dropped`` were dropped by ``drop_oldest``. ``closed`` is true once no
    more events will arrive (the bus closed, the reader left, or the handler
    failed); ``error`` names the handler's error, if it failed.
    """

    policy: str
    maxsize: int
    buffered: int
    delivered: int
    dropped: int
    closed: bool
    error: str | None


Item = Event | Gap
Handler = Callable[[Item], Awaitable[Any] | Any]


@attrs.define(eq=False)
class Subscription:
    """One subscriber's buffer and counters; an async iterator of :class:`Event` | :class:`Gap`.

    Made by :meth:`SignalBus.subscribe` or :meth:`SignalBus.add_handler`, not
    directly. One task reads it at a time. Iteration ends once the
    subscription is closed and its buffer is empty.
    """

    name: str = attrs.field(on_setattr=attrs.setters.frozen)
    policy: str = attrs.field(on_setattr=attrs.setters.frozen)
    maxsize: int = attrs.field(on_setattr=attrs.setters.frozen)
    types: frozenset[str] | None = attrs.field(on_setattr=attrs.setters.frozen)
    _buffer: deque[Event] = attrs.field(init=False)
    # Events of block publishers that found the buffer full, in seq order, each
    # with the anyio.Event its publisher waits on until the event is buffered.
    _overflow: deque[tuple[Event, anyio.Event]] = attrs.field(init=False, factory=deque)
    _drop_oldest: bool = attrs.field(init=False)
    _gap: int = attrs.field(init=False, default=0)
    _delivered: int = attrs.field(init=False, default=0)
    _dropped: int = attrs.field(init=False, default=0)
    _closed: bool = attrs.field(init=False, default=False)
    _error: str | None = attrs.field(init=False, default=None)
    _wakeup: anyio.Event | None = attrs.field(init=False, default=None)
    _reading: bool = attrs.field(init=False, default=False)
    # block policy and no type filter: what the publisher may buffer inline.
    _plain: bool = attrs.field(init=False, default=False)

    def __attrs_post_init__(self) -> None:
        self._drop_oldest = self.policy == DROP_OLDEST
        self._plain = not self._drop_oldest and self.types is None
        self._buffer = deque(maxlen=self.maxsize) if self._drop_oldest else deque()

    @property
    def closed(self) -> bool:
        """True once no more events will arrive."""
        return self._closed

    def statistics(self) -> SubscriptionStatistics:
        """A snapshot of this subscription's counters."""
        return SubscriptionStatistics(
            policy=self.policy,
            maxsize=self.maxsize,
            buffered=len(self._buffer),
            delivered=self._delivered,
            dropped=self._dropped,
            closed=self._closed,
            error=self._error,
        )

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Item:
        """The next :class:`Gap` or event; waits only when nothing is buffered."""
        buffer = self._buffer
        if buffer and not self._gap:
            # The common case, kept short: an event is buffered and no gap precedes it.
            event = buffer.popleft()
            if self._overflow:
                self._refill()
            set_slot(self, "_delivered", self._delivered + 1)
            return event
        while True:
            if self._gap:
                count, self._gap = self._gap, 0
                return Gap(count)
            buffer = self._buffer
            if buffer:
                event = buffer.popleft()
                if self._overflow:
                    self._refill()
                set_slot(self, "_delivered", self._delivered + 1)
                return event
            if self._closed:
                raise StopAsyncIteration
            if self._reading:
                raise RuntimeError(f"subscription {self.name!r} is already being read by another task")
            wakeup = self._wakeup = anyio.Event()
            self._reading = True
            try:
                await wakeup.wait()
            finally:
                self._reading = False
                if self._wakeup is wakeup:
                    self._wakeup = None

    def _offer(self, event: Event) -> anyio.Event | None:
        """Buffer ``event``; return what a block publisher must wait on when the buffer is full."""
        if self._closed:
            return None
        types = self.types
        if types is not None and event.type not in types:
            return None
        buffer = self._buffer
        waiter = None
        if self._drop_oldest:
            if len(buffer) == self.maxsize:
                # The deque's maxlen drops the oldest on append.
                self._dropped += 1
                self._gap += 1
            buffer.append(event)
        elif len(buffer) < self.maxsize and not self._overflow:
            buffer.append(event)
        else:
            waiter = anyio.Event()
            self._overflow.append((event, waiter))
        wakeup = self._wakeup
        if wakeup is not None:
            self._wakeup = None
            wakeup.set()
        return waiter

    def _refill(self) -> None:
        buffer, overflow = self._buffer, self._overflow
        while overflow and len(buffer) < self.maxsize:
            event, waiter = overflow.popleft()
            buffer.append(event)
            waiter.set()

    def _wake_reader(self) -> None:
        wakeup = self._wakeup
        if wakeup is not None:
            self._wakeup = None
            wakeup.set()

    def _end(self) -> None:
        """No more events will arrive: release waiting publishers, let the reader drain what is queued."""
        self._closed = True
        for _event, waiter in self._overflow:
            waiter.set()
        self._wake_reader()

    def _discard(self, error: str | None = None) -> None:
        """The reader is gone: close, drop what is queued, release waiting publishers."""
        self._closed = True
        if error is not None and self._error is None:
            self._error = error
        self._buffer.clear()
        self._gap = 0
        overflow, self._overflow = self._overflow, deque()
        for _event, waiter in overflow:
            waiter.set()
        self._wake_reader()


def check_subscription_options(maxsize: Any, policy: Any, types: Any) -> frozenset[str] | None:
    if type(maxsize) is not int or maxsize < 1:
        raise ValueError(f"maxsize: {maxsize!r} is not a positive integer")
    if policy not in POLICIES:
        raise ValueError(f"policy: {policy!r} is not one of {', '.join(repr(p) for p in POLICIES)}")
    if types is None:
        return None
    if isinstance(types, (str, bytes)) or not isinstance(types, Collection):
        raise ValueError(f"types: {types!r} is not a collection of event type names (e.g. ['RunStarted'])")
    for name in types:
        if not isinstance(name, str) or not name:
            raise ValueError(f"types: {name!r} is not a non-empty event type name")
    return frozenset(types)
