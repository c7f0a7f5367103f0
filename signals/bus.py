"""The signal bus: publish typed events to subscribers with their own bounded buffers.

One :class:`SignalBus` serves one run. ``publish`` numbers each event (``seq``,
strictly increasing, assigned before any await), stamps it with the injected
clock and offers it to every live subscription. Each subscription has its own
buffer of at most ``maxsize`` events and its own policy:

- ``block``: when the buffer is full the publisher waits until the reader
  takes an event (backpressure). Every event arrives, in ``seq`` order.
- ``drop_oldest``: when the buffer is full the oldest buffered event is
  dropped and counted; the reader gets a :class:`Gap` with the count before
  the next event, so no event is ever lost silently.

A subscription is read either by the caller (``async with bus.subscribe() as
events: async for item in events``) or by a handler the bus runs in its own
task (``bus.add_handler``). A handler that raises closes only its own
subscription (the error is kept in its statistics and logged); the publisher
and the other subscriptions carry on. Cancellation is never caught.

The bus keeps no history: an event lives in the buffers of the subscriptions
that have not read it yet, and nowhere else.

Low-priority events (:data:`signals.events.LOW_PRIORITY_TYPES`: the
streamed pieces of a reply, :class:`signals.events.ReplyDelta`) are
published with :meth:`SignalBus.publish_progress`, never ``publish``. They
reach only subscriptions that name their type in ``types`` (a subscription of
every type, such as a sink, never sees one), and such a subscription must be
``drop_oldest``: the publisher never waits for it, so a slow subscriber drops
deltas (and its reader gets a :class:`Gap`) but never slows the stream. With
no such subscription, ``publish_progress`` returns at once, building nothing
and taking no number. A delta does take the next ``seq`` when it is
published, so the events other subscribers see (and a store keeps) then skip
the numbers the deltas took; their order is unchanged.

Cost: ``publish`` does not yield to the event loop unless a ``block``
subscription is full, and it creates no task per event; a reader takes every
buffered event without yielding either. Readers therefore run in bursts while
the publisher awaits something else (or waits for room).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection
from types import TracebackType
from typing import Any

import anyio
import attrs
from anyio.abc import TaskGroup

from runtime.errors import FoldlineError
from runtime.logs import get_logger
from signals.envelope import SCHEMA_VERSION, Event, event_id
from signals.events import LOW_PRIORITY_TYPES
from signals.subscription import (
    BLOCK,
    DROP_OLDEST,
    POLICIES,
    Gap,
    Handler,
    Subscription,
    SubscriptionStatistics,
    check_subscription_options,
    set_slot,
)

_log = get_logger("signals.bus")


class BusClosedError(FoldlineError, RuntimeError):
    """The bus is not open: used before ``async with`` entered it, or after it exited."""


def _check_run_id(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"SignalBus.run_id: {value!r} is not a non-empty string")


def _check_clock(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not callable(value):
        raise ValueError(f"SignalBus.clock: {value!r} is not callable (expected a function returning seconds)")


def _check_first_seq(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if type(value) is not int or value < 0:
        raise ValueError(f"SignalBus.first_seq: {value!r} is not a non-negative integer")


_NEW, _OPEN, _CLOSED = "new", "open", "closed"

# What publish needs to know of an event's class: its TYPE and whether it hands
# over frozen data. Learned once per class whose instances cannot override
# either (no instance __dict__); anything else is looked at every time.
_KINDS: dict[type, tuple[str, bool]] = {}


def _kind_of(event: Any) -> tuple[str, bool]:
    event_type = getattr(event, "TYPE", None)
    to_data = getattr(event, "to_data", None)
    if not isinstance(event_type, str) or to_data is None:
        raise TypeError(
            f"publish: {event!r} is not a typed event (expected an object with a TYPE string and to_data())"
        )
    if event_type in LOW_PRIORITY_TYPES:
        raise TypeError(f"publish: {event_type} is a low-priority event; publish it with publish_progress")
    kind = (event_type, getattr(event, "frozen_data", None) is not None)
    cls = event.__class__
    if not hasattr(event, "__dict__") and getattr(cls, "TYPE", None) == event_type:
        _KINDS[cls] = kind
    return kind


@attrs.define(eq=False)
class SignalBus:
    """The signal bus of one run; use as ``async with SignalBus(run_id, clock) as bus``.

    ``clock`` gives each event's ``time``; ``first_seq`` is the first event's
    ``seq`` (a resumed run continues its numbering). The bus owns a task group
    for handler tasks. Leaving the ``async with`` block closes it: publishing
    is refused from then on, every subscription ends after its buffered events,
    and the exit waits until every handler has handled what it had (unless
    the block is being cancelled, in which case the handlers are cancelled).
    """

    run_id: str = attrs.field(validator=_check_run_id, on_setattr=attrs.setters.frozen)
    clock: Callable[[], float] = attrs.field(validator=_check_clock, on_setattr=attrs.setters.frozen)
    first_seq: int = attrs.field(default=1, kw_only=True, validator=_check_first_seq, on_setattr=attrs.setters.frozen)
    _state: str = attrs.field(init=False, default=_NEW)
    _next_seq: int = attrs.field(init=False)
    _live: tuple[Subscription, ...] = attrs.field(init=False, default=())
    _handlers: dict[str, Subscription] = attrs.field(init=False, factory=dict)
    _names: int = attrs.field(init=False, default=0)
    _task_group: TaskGroup | None = attrs.field(init=False, default=None)
    _progress: tuple[Subscription, ...] = attrs.field(init=False, default=())
    """The live subscriptions that named a low-priority type."""

    def __attrs_post_init__(self) -> None:
        self._next_seq = self.first_seq

    async def __aenter__(self) -> SignalBus:
        if self._state is not _NEW:
            raise BusClosedError(f"SignalBus for run {self.run_id!r} was already entered once (state {self._state})")
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        self._task_group = task_group
        self._state = _OPEN
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        self._state = _CLOSED
        live, self._live = self._live, ()
        self._progress = ()
        for subscription in live:
            subscription._end()
        task_group = self._task_group
        assert task_group is not None
        self._task_group = None
        if exc is None or isinstance(exc, Exception):
            # Drain: handlers finish what they have buffered; a body exception still propagates.
            await task_group.__aexit__(None, None, None)
            return None
        return await task_group.__aexit__(exc_type, exc, traceback)

    @property
    def is_open(self) -> bool:
        """True between entering and leaving the ``async with`` block."""
        return self._state is _OPEN

    @property
    def closed(self) -> bool:
        """True once the bus has exited."""
        return self._state is _CLOSED

    @property
    def next_seq(self) -> int:
        """The ``seq`` the next published event will get."""
        return self._next_seq

    def _require_open(self, action: str) -> None:
        if self._state is not _OPEN:
            when = "before it was entered" if self._state is _NEW else "after it closed"
            raise BusClosedError(f"SignalBus for run {self.run_id!r}: {action} {when}")

    async def publish(
        self,
        event: Any,
        *,
        branch_id: str | None = None,
        node_id: str | None = None,
        request_id: str | None = None,
    ) -> Event:
        """Publish a typed event (anything with a ``TYPE`` string and ``to_data()``); return its :class:`Event`.

        ``seq`` and ``time`` are assigned before any await. Returns once every
        ``block`` subscription has buffered the event. If the caller is
        cancelled while waiting, the event stays queued and is still delivered
        in order. Raises :class:`BusClosedError` when the bus is not open and
        :class:`signals.envelope.InvalidEventError` for a malformed event.
        """
        if self._state is not _OPEN:
            self._require_open(f"publish({type(event).__name__})")
        kind = _KINDS.get(event.__class__)
        if kind is None:
            kind = _kind_of(event)
        event_type, frozen = kind
        run_id = self.run_id
        seq = self._next_seq
        if frozen:
            # foldline's typed events hold frozen values already: no second copy.
            envelope = Event.stamped(
                event_type, seq, self.clock(), run_id, branch_id, node_id, request_id, event.frozen_data()
            )
        else:
            envelope = Event(
                SCHEMA_VERSION,
                event_type,
                event_id(run_id, seq),
                self.clock(),
                seq,
                run_id,
                branch_id,
                node_id,
                request_id,
                event.to_data(),
            )
        # Only a fully built event consumes its number, so seq has no holes.
        set_slot(self, "_next_seq", seq + 1)
        waiters = None
        for subscription in self._live:
            if subscription._plain and not subscription._closed:
                # The common case inline: a block subscription of every type with room and no queue.
                buffer = subscription._buffer
                if len(buffer) < subscription.maxsize and not subscription._overflow:
                    buffer.append(envelope)
                    if subscription._wakeup is not None:
                        subscription._wake_reader()
                    continue
            waiter = subscription._offer(envelope)
            if waiter is not None:
                if waiters is None:
                    waiters = [waiter]
                else:
                    waiters.append(waiter)
        if waiters is not None:
            for waiter in waiters:
                await waiter.wait()
        return envelope

    @property
    def wants_progress(self) -> bool:
        """True while some subscription takes low-priority events (:meth:`publish_progress` would build one)."""
        return bool(self._progress)

    def publish_progress(
        self,
        event: Any,
        *,
        branch_id: str | None = None,
        node_id: str | None = None,
        request_id: str | None = None,
    ) -> Event | None:
        """Offer a low-priority event to the subscriptions that named its type; never waits (see the module doc).

        Returns the event, or None when no subscription takes it (nothing is
        built then). Raises :class:`BusClosedError` when the bus is not open and
        ``TypeError`` for an event whose type is not low priority.
        """
        if not self._progress:
            return None
        if self._state is not _OPEN:
            self._require_open(f"publish_progress({type(event).__name__})")
        event_type = getattr(event, "TYPE", None)
        if event_type not in LOW_PRIORITY_TYPES:
            raise TypeError(
                f"publish_progress: {event!r:.120} is not a low-priority event ({sorted(LOW_PRIORITY_TYPES)})"
            )
        seq = self._next_seq
        envelope = Event.stamped(
            event_type, seq, self.clock(), self.run_id, branch_id, node_id, request_id, event.frozen_data()
        )
        set_slot(self, "_next_seq", seq + 1)
        for subscription in self._progress:
            subscription._offer(envelope)  # drop_oldest: never a waiter
        return envelope

    def subscribe(
        self,
        *,
        maxsize: int = 1024,
        policy: str = BLOCK,
        types: Collection[str] | None = None,
        name: str | None = None,
    ) -> _Subscribing:
        """An async context manager yielding a :class:`Subscription` to events published while inside it.

        ``types`` limits it to those event types. Leaving the block
        unsubscribes: buffered events are discarded and a publisher waiting on
        this subscription is released. The bus must be open.
        """
        type_set = check_subscription_options(maxsize, policy, types)
        if name is not None and (not isinstance(name, str) or not name):
            raise ValueError(f"subscribe: name {name!r} is not a non-empty string")
        return _Subscribing(self, name, policy, maxsize, type_set)

    def add_handler(
        self,
        handler: Handler,
        *,
        maxsize: int = 1024,
        policy: str = BLOCK,
        types: Collection[str] | None = None,
        name: str | None = None,
        on_close: Callable[[], None] | None = None,
    ) -> Subscription:
        """Run ``handler(item)`` for every :class:`Event` (and :class:`Gap`) in a task of the bus.

        ``handler`` may be sync or async. If it raises an ``Exception`` its
        subscription is closed with the error in its statistics and the error
        is logged; nothing else is affected. ``on_close`` (sync) runs once the
        handler's task ends, however it ends. The subscription is live from
        this call on. Names must be unique on the bus; the default is
        ``handler-N:<handler's qualified name>``.
        """
        if not callable(handler):
            raise ValueError(f"add_handler: handler {handler!r} is not callable")
        if on_close is not None and not callable(on_close):
            raise ValueError(f"add_handler: on_close {on_close!r} is not callable")
        type_set = check_subscription_options(maxsize, policy, types)
        self._require_open("add_handler")
        if name is None:
            label = getattr(handler, "__qualname__", type(handler).__qualname__)
            name = f"handler-{self._names + 1}:{label}"
        subscription = self._register(name, policy, maxsize, type_set)
        self._handlers[subscription.name] = subscription
        assert self._task_group is not None
        self._task_group.start_soon(self._run_handler, subscription, handler, on_close, name=f"signal handler {name}")
        return subscription

    def statistics(self) -> dict[str, SubscriptionStatistics]:
        """Statistics by subscription name: every live subscription and every handler, ended or not.

        A subscription made with :meth:`subscribe` leaves this mapping when its
        block is left; its final statistics stay on the :class:`Subscription`.
        """
        snapshot = {subscription.name: subscription.statistics() for subscription in self._live}
        for name, subscription in self._handlers.items():
            snapshot.setdefault(name, subscription.statistics())
        return snapshot

    def _register(self, name: str | None, policy: str, maxsize: int, types: frozenset[str] | None) -> Subscription:
        self._require_open("subscribe")
        self._names += 1
        if name is None:
            name = f"subscription-{self._names}"
        taken = name in self._handlers or any(subscription.name == name for subscription in self._live)
        if taken:
            raise ValueError(f"subscription name {name!r} is already used on this bus")
        low = sorted(types & LOW_PRIORITY_TYPES) if types is not None else []
        if low and policy != DROP_OLDEST:
            raise ValueError(
                f"subscription {name!r}: {', '.join(low)} is low priority and may only be taken with "
                f"policy {DROP_OLDEST!r} (the stream never waits for it); got {policy!r}"
            )
        subscription = Subscription(name=name, policy=policy, maxsize=maxsize, types=types)
        self._live = (*self._live, subscription)
        if low:
            self._progress = (*self._progress, subscription)
        return subscription

    def _unregister(self, subscription: Subscription) -> None:
        if subscription in self._live:
            self._live = tuple(live for live in self._live if live is not subscription)
        if subscription in self._progress:
            self._progress = tuple(live for live in self._progress if live is not subscription)

    async def _run_handler(
        self,
        subscription: Subscription,
        handler: Handler,
        on_close: Callable[[], None] | None,
    ) -> None:
        try:
            async for item in subscription:
                result = handler(item)
                if inspect.isawaitable(result):
                    await result
        except Exception as error:
            subscription._discard(error=f"{type(error).__name__}: {error}")
            _log.error(
                "signal handler failed; its subscription is closed",
                run_id=self.run_id,
                subscription=subscription.name,
                error=repr(error),
                exc_info=error,
            )
        finally:
            # Also reached on cancellation: no publisher may keep waiting on this subscription.
            self._unregister(subscription)
            if not subscription.closed:
                subscription._discard()
            if on_close is not None:
                self._close_handler(subscription, on_close)

    def _close_handler(self, subscription: Subscription, on_close: Callable[[], None]) -> None:
        try:
            on_close()
        except Exception as error:
            _log.error(
                "signal handler's on_close failed",
                run_id=self.run_id,
                subscription=subscription.name,
                error=repr(error),
                exc_info=error,
            )


@attrs.define(eq=False)
class _Subscribing:
    """The async context manager :meth:`SignalBus.subscribe` returns."""

    _bus: SignalBus
    _name: str | None
    _policy: str
    _maxsize: int
    _types: frozenset[str] | None
    _subscription: Subscription | None = attrs.field(init=False, default=None)

    async def __aenter__(self) -> Subscription:
        if self._subscription is not None:
            raise RuntimeError("this subscribe() context is already in use; call bus.subscribe() again")
        self._subscription = self._bus._register(self._name, self._policy, self._maxsize, self._types)
        return self._subscription

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        subscription = self._subscription
        assert subscription is not None
        self._bus._unregister(subscription)
        if not subscription.closed:
            subscription._discard()


__all__ = [
    "BLOCK",
    "DROP_OLDEST",
    "POLICIES",
    "BusClosedError",
    "Gap",
    "SignalBus",
    "Subscription",
    "SubscriptionStatistics",
]
