"""Micro-benchmark of the signal bus: events per second from publish to every subscriber.

Used by ``foldline bench --micro``. It reads a monotonic clock because it is
a benchmark, not part of the pure core. The figure covers building each
event (a ``ResponseReceived`` with its usage, the commonest event of a run),
numbering and stamping it, and handing it to every subscriber's reader task,
which counts it. The clock stops once every reader has read everything.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
from anyio.abc import TaskStatus

from runtime.values.usage import Usage
from signals.bus import BLOCK, DROP_OLDEST, POLICIES, Gap, SignalBus
from signals.events import ResponseReceived


async def measure_bus_throughput(
    events: int, subscribers: int, policy: str = BLOCK, *, timer: Callable[[], float] = time.perf_counter
) -> float:
    """Publish ``events`` events to ``subscribers`` readers and return events per second.

    ``timer`` measures the run: wall time by default, ``time.process_time``
    for CPU time.

    Every reader reads through its own subscription (``maxsize`` 1024,
    ``policy``). The run checks its own result: with ``block`` each reader
    must have read every event, in ``seq`` order; with ``drop_oldest`` each
    reader's events plus its gap counts must add up to ``events``. A mismatch
    raises ``RuntimeError`` rather than report a figure for lost events.
    """
    if type(events) is not int or events < 1:
        raise ValueError(f"events: {events!r} is not a positive integer")
    if type(subscribers) is not int or subscribers < 1:
        raise ValueError(f"subscribers: {subscribers!r} is not a positive integer")
    if policy not in POLICIES:
        raise ValueError(f"policy: {policy!r} is not one of {', '.join(repr(p) for p in POLICIES)}")

    counts = [[0, 0, True] for _ in range(subscribers)]  # events read, gap total, in seq order

    async def read(bus: SignalBus, index: int, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        tally = counts[index]
        previous = 0
        async with bus.subscribe(maxsize=1024, policy=policy, name=f"reader-{index}") as subscription:
            task_status.started()
            async for item in subscription:
                if isinstance(item, Gap):
                    tally[1] += item.count
                    continue
                if item.seq <= previous:
                    tally[2] = False
                previous = item.seq
                tally[0] += 1

    usage = Usage(input_tokens=1200, cache_read_input_tokens=48000, cache_write_5m_tokens=900, output_tokens=350)
    started = 0.0
    async with anyio.create_task_group() as readers:
        async with SignalBus("bench", time.monotonic) as bus:
            for index in range(subscribers):
                await readers.start(read, bus, index)
            publish = bus.publish
            started = timer()
            for _ in range(events):
                await publish(ResponseReceived(usage=usage, stop_reason="end_turn", duration_s=0.42), node_id="n1")
        # The bus has closed: each subscription ends after its buffered events.
    elapsed = timer() - started

    for index, (read_count, gaps, ordered) in enumerate(counts):
        if not ordered:
            raise RuntimeError(f"reader {index} saw events out of seq order")
        lost = gaps if policy == DROP_OLDEST else 0
        if read_count + lost != events or gaps != lost:
            raise RuntimeError(f"reader {index} accounted for {read_count} events and {gaps} dropped of {events}")
    return events / elapsed
