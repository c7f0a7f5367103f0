"""The signal bus: ordering, backpressure, gaps, isolation of failing subscribers, lifecycle."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import anyio
import attrs
import pytest
from anyio.abc import TaskStatus
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from signals.bus import BusClosedError, Gap, SignalBus, Subscription, SubscriptionStatistics
from signals.envelope import Event, InvalidEventError
from signals.events import NodeFailed, NodeFinished, NodeStarted, RunStarted

pytestmark = pytest.mark.anyio

# A deadlock guard for tests where a bug would hang: not a timing assertion.
DEADLOCK_GUARD_S = 20


def counting_clock() -> Callable[[], float]:
    ticks = itertools.count()
    return lambda: float(next(ticks)) * 0.5


def step(index: int) -> NodeFinished:
    return NodeFinished(rounds=index, answer_chars=0)


def events_only(items: list[Any]) -> list[Event]:
    return [item for item in items if isinstance(item, Event)]


async def take(subscription: Subscription, count: int) -> list[Event | Gap]:
    items: list[Event | Gap] = []
    for _ in range(count):
        items.append(await subscription.__anext__())
    return items


async def test_publish_numbers_stamps_and_returns_the_event() -> None:
    async with SignalBus("run-1", counting_clock()) as bus:
        first = await bus.publish(NodeStarted(operation="iterative"), branch_id="b1", node_id="n1")
        second = await bus.publish(NodeFailed(error_type="Boom", message="x"), request_id="q1")
    assert (first.seq, second.seq) == (1, 2)
    assert (first.id, second.id) == ("run-1:1", "run-1:2")
    assert (first.time, second.time) == (0.0, 0.5)
    assert (first.run_id, first.branch_id, first.node_id, first.request_id) == ("run-1", "b1", "n1", None)
    assert second.request_id == "q1"
    assert first.type == "NodeStarted" and dict(first.data) == {"operation": "iterative", "parent": None}
    assert first.schema_version == 1


async def test_first_seq_continues_a_resumed_run() -> None:
    async with SignalBus("run-1", counting_clock(), first_seq=41) as bus:
        assert bus.next_seq == 41
        event = await bus.publish(step(0))
    assert event.seq == 41 and event.id == "run-1:41"


async def test_a_malformed_publish_consumes_no_seq() -> None:
    async with SignalBus("run-1", counting_clock()) as bus:
        await bus.publish(step(0))
        with pytest.raises(InvalidEventError, match="Event.node_id: '' is not a non-empty string or None"):
            await bus.publish(step(1), node_id="")
        with pytest.raises(TypeError, match="is not a typed event"):
            await bus.publish({"type": "NodeFinished"})
        after = await bus.publish(step(2))
    assert after.seq == 2


@settings(max_examples=25, deadline=None)
@given(
    publishers=st.lists(st.integers(0, 30), min_size=1, max_size=5),
    maxsizes=st.lists(st.integers(1, 8), min_size=1, max_size=3),
    backend=st.sampled_from(["asyncio", "trio"]),
)
def test_concurrent_publishers_give_every_block_reader_every_event_in_strict_seq_order(
    publishers: list[int], maxsizes: list[int], backend: str
) -> None:
    total = sum(publishers)
    seen: list[list[int]] = [[] for _ in maxsizes]
    returned: list[int] = []

    async def reader(bus: SignalBus, index: int, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with bus.subscribe(maxsize=maxsizes[index]) as subscription:
            task_status.started()
            async for item in subscription:
                assert isinstance(item, Event)
                seen[index].append(item.seq)

    async def publisher(bus: SignalBus, count: int) -> None:
        for index in range(count):
            event = await bus.publish(step(index))
            returned.append(event.seq)
            if index % 3 == 0:
                await anyio.lowlevel.checkpoint()

    async def main() -> None:
        with anyio.fail_after(DEADLOCK_GUARD_S):
            async with anyio.create_task_group() as readers:
                async with SignalBus("run", counting_clock()) as bus:
                    for index in range(len(maxsizes)):
                        await readers.start(reader, bus, index)
                    async with anyio.create_task_group() as writers:
                        for count in publishers:
                            writers.start_soon(publisher, bus, count)

    anyio.run(main, backend=backend)
    assert sorted(returned) == list(range(1, total + 1))
    for seqs in seen:
        assert seqs == list(range(1, total + 1))


async def test_slow_drop_oldest_reader_sees_a_gap_while_block_reader_sees_every_event() -> None:
    received_fast: list[Event | Gap] = []

    async def read_fast(subscription: Subscription, count: int) -> None:
        async for item in subscription:
            received_fast.append(item)
            if len(received_fast) == count:
                return

    with anyio.fail_after(DEADLOCK_GUARD_S):
        async with SignalBus("run", counting_clock()) as bus:
            async with bus.subscribe(maxsize=4, policy="drop_oldest", name="slow") as slow:
                async with bus.subscribe(maxsize=2, policy="block", name="fast") as fast:
                    async with anyio.create_task_group() as group:
                        group.start_soon(read_fast, fast, 20)
                        published = [await bus.publish(step(index)) for index in range(20)]
                statistics = bus.statistics()
                assert statistics["slow"] == SubscriptionStatistics(
                    policy="drop_oldest", maxsize=4, buffered=4, delivered=0, dropped=16, closed=False, error=None
                )
                items = await take(slow, 5)
                assert slow.statistics().delivered == 4
                # More drops after a read are reported before the next event again.
                for index in range(20, 25):
                    await bus.publish(step(index))
                later = await take(slow, 5)

    assert received_fast == published
    assert [event.seq for event in received_fast] == list(range(1, 21))
    assert fast.statistics().dropped == 0 and fast.statistics().delivered == 20
    assert items[0] == Gap(16)
    assert [event.seq for event in events_only(items)] == [17, 18, 19, 20]
    assert later[0] == Gap(1)
    assert [event.seq for event in events_only(later)] == [22, 23, 24, 25]
    assert slow.statistics().dropped == 17


async def test_a_slow_drop_oldest_handler_is_told_how_many_it_missed() -> None:
    release = anyio.Event()
    handled: list[Event | Gap] = []

    async def slow_handler(item: Event | Gap) -> None:
        handled.append(item)
        if len(handled) == 1:
            await release.wait()

    with anyio.fail_after(DEADLOCK_GUARD_S):
        async with SignalBus("run", counting_clock()) as bus:
            subscription = bus.add_handler(slow_handler, maxsize=3, policy="drop_oldest", name="slow")
            await bus.publish(step(0))
            await anyio.wait_all_tasks_blocked()  # the handler holds event 1
            for index in range(1, 11):
                await bus.publish(step(index))
            release.set()

    assert [item.seq for item in events_only(handled)] == [1, 9, 10, 11]
    assert handled[1] == Gap(7)
    assert subscription.statistics().dropped == 7
    assert subscription.statistics().delivered == 4


async def test_a_block_subscriber_makes_the_publisher_wait_until_it_reads() -> None:
    progress: list[int] = []

    async def publish_three(bus: SignalBus) -> None:
        for index in range(3):
            await bus.publish(step(index))
            progress.append(index)

    with anyio.fail_after(DEADLOCK_GUARD_S):
        async with SignalBus("run", counting_clock()) as bus:
            async with bus.subscribe(maxsize=1) as subscription:
                async with anyio.create_task_group() as group:
                    group.start_soon(publish_three, bus)
                    await anyio.wait_all_tasks_blocked()
                    assert progress == [0]  # the second publish waits for room
                    assert subscription.statistics().buffered == 1
                    first = await subscription.__anext__()
                    await anyio.wait_all_tasks_blocked()
                    assert progress == [0, 1]
                    rest = await take(subscription, 2)
    assert [event.seq for event in [first, *events_only(rest)]] == [1, 2, 3]


async def test_leaving_a_subscription_releases_a_waiting_publisher() -> None:
    with anyio.fail_after(DEADLOCK_GUARD_S):
        async with SignalBus("run", counting_clock()) as bus:
            async with anyio.create_task_group() as group:
                async with bus.subscribe(maxsize=1, name="leaver") as subscription:
                    await bus.publish(step(0))
                    group.start_soon(bus.publish, step(1))
                    await anyio.wait_all_tasks_blocked()
                    assert subscription.statistics().buffered == 1
                # Left with a publisher waiting: it must be released, not wait forever.
            statistics = subscription.statistics()
            assert statistics.closed and statistics.buffered == 0
            assert "leaver" not in bus.statistics()
            event = await bus.publish(step(2))
    assert event.seq == 3


async def test_a_publisher_cancelled_while_waiting_still_gets_its_event_delivered_in_order() -> None:
    with anyio.fail_after(DEADLOCK_GUARD_S):
        async with SignalBus("run", counting_clock()) as bus:
            async with bus.subscribe(maxsize=1) as subscription:
                await bus.publish(step(0))
                async with anyio.create_task_group() as group:
                    group.start_soon(bus.publish, step(1))
                    await anyio.wait_all_tasks_blocked()
                    group.cancel_scope.cancel()
                async with anyio.create_task_group() as group:
                    group.start_soon(bus.publish, step(2))
                    items = await take(subscription, 3)
    assert [event.seq for event in events_only(items)] == [1, 2, 3]


async def test_a_raising_handler_stops_neither_the_publisher_nor_the_other_subscribers() -> None:
    good_sync: list[int] = []
    good_async: list[int] = []

    def bad(item: Event | Gap) -> None:
        assert isinstance(item, Event)
        if item.seq == 3:
            raise ValueError("handler exploded")

    async def good_async_handler(item: Event | Gap) -> None:
        assert isinstance(item, Event)
        await anyio.lowlevel.checkpoint()
        good_async.append(item.seq)

    with capture_logs() as logs, anyio.fail_after(DEADLOCK_GUARD_S):
        async with SignalBus("run-9", counting_clock()) as bus:
            # maxsize 1 with block: if the failure did not release it, the publisher would wait forever.
            bad_subscription = bus.add_handler(bad, maxsize=1, name="bad")
            bus.add_handler(lambda item: good_sync.append(item.seq), name="good-sync")
            bus.add_handler(good_async_handler, maxsize=2, name="good-async")
            async with bus.subscribe(maxsize=64, name="reader") as reader:
                published = [await bus.publish(step(index)) for index in range(10)]
                read = await take(reader, 10)

    assert [event.seq for event in published] == list(range(1, 11))
    assert good_sync == list(range(1, 11))
    assert good_async == list(range(1, 11))
    assert [event.seq for event in events_only(read)] == list(range(1, 11))
    statistics = bus.statistics()
    assert statistics["bad"].closed
    assert statistics["bad"].error == "ValueError: handler exploded"
    assert statistics["bad"].delivered == 3
    assert bad_subscription.statistics() == statistics["bad"]
    assert statistics["good-sync"].error is None and statistics["good-sync"].delivered == 10
    failures = [entry for entry in logs if entry["event"] == "signal handler failed; its subscription is closed"]
    assert len(failures) == 1
    assert failures[0]["subscription"] == "bad"
    assert failures[0]["run_id"] == "run-9"
    assert failures[0]["log_level"] == "error"


async def test_types_limits_a_subscription_to_those_event_types() -> None:
    async with SignalBus("run", counting_clock()) as bus:
        async with bus.subscribe(types=["NodeFailed", "RunStarted"]) as subscription:
            await bus.publish(step(0))
            await bus.publish(NodeFailed(error_type="E", message="m"))
            await bus.publish(step(1))
            await bus.publish(RunStarted(scenario=None, provider="scripted", nodes=[]))
            items = await take(subscription, 2)
    assert [(item.type, item.seq) for item in events_only(items)] == [("NodeFailed", 2), ("RunStarted", 4)]


async def test_closing_the_bus_drains_handlers_and_ends_live_subscriptions() -> None:
    handled: list[int] = []
    closed: list[str] = []
    read: list[int] = []

    async def slow(item: Event | Gap) -> None:
        await anyio.lowlevel.checkpoint()
        assert isinstance(item, Event)
        handled.append(item.seq)

    async def reader(bus: SignalBus, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with bus.subscribe(maxsize=100) as subscription:
            task_status.started()
            async for item in subscription:
                read.append(item.seq)  # type: ignore[union-attr]

    with anyio.fail_after(DEADLOCK_GUARD_S):
        async with anyio.create_task_group() as group:
            async with SignalBus("run", counting_clock()) as bus:
                await group.start(reader, bus)
                subscription = bus.add_handler(slow, maxsize=100, on_close=lambda: closed.append("handler"))
                for index in range(25):
                    await bus.publish(step(index))
            assert bus.closed
            # The bus exit waited for the handler; the reader drains on its own.
            assert handled == list(range(1, 26))
            assert closed == ["handler"]
            assert subscription.statistics().closed
    assert read == list(range(1, 26))


async def test_a_body_error_still_drains_the_handlers_and_propagates() -> None:
    handled: list[int] = []

    async def slow(item: Event | Gap) -> None:
        await anyio.lowlevel.checkpoint()
        handled.append(item.seq)  # type: ignore[union-attr]

    with pytest.raises(RuntimeError, match="the flow broke"), anyio.fail_after(DEADLOCK_GUARD_S):
        async with SignalBus("run", counting_clock()) as bus:
            bus.add_handler(slow)
            for index in range(5):
                await bus.publish(step(index))
            raise RuntimeError("the flow broke")
    assert handled == [1, 2, 3, 4, 5]


async def test_cancelling_the_bus_cancels_its_handlers_and_closes_them() -> None:
    closed: list[bool] = []
    started = anyio.Event()

    async def stuck(item: Event | Gap) -> None:
        started.set()
        await anyio.sleep_forever()

    with anyio.fail_after(DEADLOCK_GUARD_S):
        with anyio.CancelScope() as scope:
            async with SignalBus("run", counting_clock()) as bus:
                subscription = bus.add_handler(stuck, on_close=lambda: closed.append(True))
                await bus.publish(step(0))
                await started.wait()
                scope.cancel()
                await anyio.sleep_forever()
    assert scope.cancelled_caught
    assert closed == [True]
    assert subscription.statistics().closed and subscription.statistics().error is None


class Halt(BaseException):
    """A BaseException that is not cancellation: the bus must not swallow it."""


async def test_a_handler_raising_a_base_exception_is_not_swallowed() -> None:
    def halting(item: Event | Gap) -> None:
        raise Halt("stop everything")

    with pytest.raises(BaseException) as caught, anyio.fail_after(DEADLOCK_GUARD_S):
        async with SignalBus("run", counting_clock()) as bus:
            bus.add_handler(halting)
            await bus.publish(step(0))
            await anyio.sleep_forever()
    error = caught.value
    if isinstance(error, BaseExceptionGroup):
        assert error.subgroup(Halt) is not None
    else:
        assert isinstance(error, Halt)


async def test_a_failing_on_close_is_logged_and_does_not_break_the_bus() -> None:
    def broken_close() -> None:
        raise OSError("disk gone")

    with capture_logs() as logs:
        async with SignalBus("run", counting_clock()) as bus:
            bus.add_handler(lambda item: None, on_close=broken_close, name="h")
            await bus.publish(step(0))
    assert [entry["subscription"] for entry in logs if entry["event"] == "signal handler's on_close failed"] == ["h"]


async def test_the_bus_refuses_use_outside_its_block() -> None:
    bus = SignalBus("run-3", counting_clock())
    with pytest.raises(BusClosedError, match=r"run 'run-3': publish\(NodeFinished\) before it was entered"):
        await bus.publish(step(0))
    with pytest.raises(BusClosedError, match="subscribe before it was entered"):
        async with bus.subscribe():
            pass
    with pytest.raises(BusClosedError, match="add_handler before it was entered"):
        bus.add_handler(print)
    async with bus:
        pass
    with pytest.raises(BusClosedError, match=r"publish\(NodeFinished\) after it closed"):
        await bus.publish(step(0))
    with pytest.raises(BusClosedError, match="add_handler after it closed"):
        bus.add_handler(print)
    with pytest.raises(BusClosedError, match="already entered once"):
        async with bus:
            pass


async def test_one_task_reads_a_subscription_at_a_time() -> None:
    async with SignalBus("run", counting_clock()) as bus:
        async with bus.subscribe(name="shared") as subscription:
            async with anyio.create_task_group() as group:
                group.start_soon(subscription.__anext__)
                await anyio.wait_all_tasks_blocked()
                with pytest.raises(RuntimeError, match="subscription 'shared' is already being read"):
                    await subscription.__anext__()
                await bus.publish(step(0))


async def test_subscription_names_are_unique_and_defaults_are_numbered() -> None:
    def record(item: Event | Gap) -> None:
        return None

    async with SignalBus("run", counting_clock()) as bus:
        async with bus.subscribe() as first, bus.subscribe(name="mine") as mine:
            handler = bus.add_handler(record)
            assert first.name == "subscription-1"
            assert mine.name == "mine"
            assert handler.name.startswith("handler-3:") and handler.name.endswith("record")
            with pytest.raises(ValueError, match="subscription name 'mine' is already used"):
                bus.add_handler(record, name="mine")
            assert sorted(bus.statistics()) == sorted([first.name, "mine", handler.name])
        # Plain subscriptions leave the mapping with their block; handlers stay.
        assert list(bus.statistics()) == [handler.name]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"maxsize": 0}, "maxsize: 0 is not a positive integer"),
        ({"maxsize": 2.5}, "maxsize: 2.5 is not a positive integer"),
        ({"policy": "drop_newest"}, "policy: 'drop_newest' is not one of 'block', 'drop_oldest'"),
        ({"types": "NodeFailed"}, "types: 'NodeFailed' is not a collection of event type names"),
        ({"types": ["NodeFailed", 3]}, "types: 3 is not a non-empty event type name"),
        ({"name": ""}, "subscribe: name '' is not a non-empty string"),
    ],
)
async def test_bad_subscription_options_are_refused(options: dict[str, Any], message: str) -> None:
    async with SignalBus("run", counting_clock()) as bus:
        with pytest.raises(ValueError, match=message):
            bus.subscribe(**options)


async def test_bad_handler_arguments_are_refused() -> None:
    async with SignalBus("run", counting_clock()) as bus:
        with pytest.raises(ValueError, match="handler 3 is not callable"):
            bus.add_handler(3)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="on_close 'x' is not callable"):
            bus.add_handler(print, on_close="x")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="policy: 'lossy' is not one of"):
            bus.add_handler(print, policy="lossy")


def test_bad_bus_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="SignalBus.run_id: '' is not a non-empty string"):
        SignalBus("", counting_clock())
    with pytest.raises(ValueError, match="SignalBus.clock: 12.0 is not callable"):
        SignalBus("run", 12.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="SignalBus.first_seq: -1 is not a non-negative integer"):
        SignalBus("run", counting_clock(), first_seq=-1)


async def test_a_subscription_and_a_bus_cannot_be_reconfigured_after_creation() -> None:
    async with SignalBus("run", counting_clock()) as bus:
        async with bus.subscribe(maxsize=2) as subscription:
            with pytest.raises(attrs.exceptions.FrozenAttributeError):
                subscription.maxsize = 10  # type: ignore[misc]
            with pytest.raises(attrs.exceptions.FrozenAttributeError):
                bus.run_id = "other"  # type: ignore[misc]


def test_gap_counts_are_positive() -> None:
    with pytest.raises(ValueError, match="Gap.count: 0 is not a positive integer"):
        Gap(0)


@settings(max_examples=40, deadline=None)
@given(
    maxsize=st.integers(1, 6),
    script=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), min_size=1, max_size=12),
)
def test_drop_oldest_accounts_for_every_event_exactly_once(maxsize: int, script: list[tuple[int, int]]) -> None:
    """Publish and read in bursts: the reader's events and gaps add up to every seq, in order, none twice."""

    async def main() -> tuple[list[Event | Gap], SubscriptionStatistics, int]:
        items: list[Event | Gap] = []
        published = 0
        async with SignalBus("run", counting_clock()) as bus:
            async with bus.subscribe(maxsize=maxsize, policy="drop_oldest") as subscription:
                for publish_count, read_count in script:
                    for _ in range(publish_count):
                        await bus.publish(step(published))
                        published += 1
                    for _ in range(read_count):
                        if subscription.statistics().buffered == 0:
                            break  # a gap is never pending without an event after it
                        items.append(await subscription.__anext__())
                    assert subscription.statistics().buffered <= maxsize
                statistics = subscription.statistics()
        return items, statistics, published

    items, statistics, published = anyio.run(main)
    expected_next = 1
    for item in items:
        if isinstance(item, Gap):
            expected_next += item.count
        else:
            assert item.seq == expected_next
            expected_next += 1
    gaps = sum(item.count for item in items if isinstance(item, Gap))
    assert statistics.delivered == len(events_only(items))
    assert statistics.delivered + statistics.dropped + statistics.buffered == published
    # Drops not yet reported as a gap sit just before the events still buffered.
    assert (expected_next - 1) + (statistics.dropped - gaps) + statistics.buffered == published
