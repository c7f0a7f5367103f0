"""Concurrent nodes' requests reach the provider in one order, whatever the reply timing."""

from __future__ import annotations

import random

import anyio
import pytest

from runtime.bench.ordering import OrderedSends
from runtime.contract.provider import ProviderReply
from runtime.request.compiler import RequestSettings, compile_request
from runtime.values.messages import Instruction
from runtime.values.usage import Usage

pytestmark = pytest.mark.anyio

REQUEST = compile_request(system="s", tools=(), view=[Instruction("go")], settings=RequestSettings(model="m"))


class SlowRecorder:
    """Replies after a random real delay (the timing HTTP adds) and records who sent when."""

    name = "recorder"
    caches_by_prefix = True
    max_retries = 0
    counts_tokens = False

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        self.order: list[str | None] = []
        self.in_flight = 0

    async def send(self, request: object, *, node_id: str | None) -> ProviderReply:
        self.in_flight += 1
        assert self.in_flight == 1, "two requests in flight at once"
        self.order.append(node_id)
        await anyio.sleep(self.random.uniform(0, 0.004))
        self.in_flight -= 1
        return ProviderReply(content=(), stop_reason="end_turn", usage=Usage(), model="m")

    async def aclose(self) -> None:
        return None


async def _run(seed: int) -> list[str | None]:
    inner = SlowRecorder(seed)
    provider = OrderedSends(inner)
    work = random.Random(seed + 1)

    async def node(name: str, sends: int) -> None:
        for _ in range(sends):
            for _ in range(work.randrange(0, 30)):  # computing between requests, a varying number of steps
                await anyio.lowlevel.checkpoint()
            await provider.send(REQUEST, node_id=name)

    async with anyio.create_task_group() as tg:
        for name, sends in (("worker-3", 3), ("worker-1", 4), ("worker-2", 2)):
            tg.start_soon(node, name, sends)
    return inner.order


async def test_the_order_is_the_same_whatever_the_timing() -> None:
    orders = [await _run(seed) for seed in range(4)]
    assert all(order == orders[0] for order in orders)
    assert sorted(orders[0], key=str) == ["worker-1"] * 4 + ["worker-2"] * 2 + ["worker-3"] * 3
    # nodes take turns: every node's first request, then every second one, ...
    assert orders[0] == ["worker-1", "worker-2", "worker-3"] * 2 + ["worker-1", "worker-3", "worker-1"]


async def test_it_passes_through_name_caching_and_close() -> None:
    inner = SlowRecorder(0)
    provider = OrderedSends(inner)
    assert provider.name == "recorder" and provider.caches_by_prefix and provider.counts_tokens is False
    await provider.aclose()


async def test_a_node_sending_twice_at_once_gets_two_turns() -> None:
    inner = SlowRecorder(7)
    provider = OrderedSends(inner)
    async with anyio.create_task_group() as tg:
        for _ in range(2):
            tg.start_soon(lambda: provider.send(REQUEST, node_id="lead"))
        tg.start_soon(lambda: provider.send(REQUEST, node_id="child"))
    assert inner.order == ["child", "lead", "lead"]
