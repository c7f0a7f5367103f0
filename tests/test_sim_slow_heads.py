"""Request heads sent a byte at a time cannot hold the simulator's slots; HEAD requests get an answer.

Before the fix a connection counted as busy from the first byte of its head,
so a flood of slow heads filled every slot until the head deadline and a
normal request was refused meanwhile (#28, item 13). Now a connection whose
head is still arriving stays evictable, and the head keeps its own deadline.
asyncio and trio.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anthropic
import anyio
import anyio.abc
import httpx2
import pytest

from runtime.scripted.default_model import DefaultModel
from runtime.scripted.policies import PolicyRegistry
from runtime.sim.server import SimConfig, SimServer, serve_simulator

pytestmark = pytest.mark.anyio

CAP = 32
SLOW = CAP + 20


@asynccontextmanager
async def running(config: SimConfig) -> AsyncIterator[SimServer]:
    async with serve_simulator(config, PolicyRegistry(default=DefaultModel(calls="one")), anyio.current_time) as sim:
        yield sim


async def test_slow_heads_on_every_slot_do_not_keep_a_normal_request_out() -> None:
    config = SimConfig(max_connections=CAP, header_timeout_s=60.0)
    async with running(config) as sim, anyio.create_task_group() as tg:
        streams: list[anyio.abc.SocketStream] = []

        async def trickle(stream: anyio.abc.SocketStream) -> None:
            try:
                for byte in b"POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-api-key: k\r\n":
                    await stream.send(bytes([byte]))
                    await anyio.sleep(0.05)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                return  # evicted: the server closed it

        for _ in range(SLOW):
            stream = await anyio.connect_tcp(sim.host, sim.port)
            streams.append(stream)
            tg.start_soon(trickle, stream)
        await anyio.sleep(0.3)  # every slot now holds a head in progress
        with anyio.fail_after(5.0):
            async with anthropic.AsyncAnthropic(base_url=sim.base_url, api_key="sk", max_retries=0) as client:
                reply = await client.messages.create(
                    model="claude-haiku-5-5", max_tokens=20, messages=[{"role": "user", "content": "hi"}]
                )
        assert reply.stop_reason == "end_turn"
        assert sim.connections.open_count <= CAP and sim.connections.refused == 0
        tg.cancel_scope.cancel()
        for stream in streams:
            await stream.aclose()


async def test_a_head_request_is_answered_with_status_and_headers() -> None:
    async with running(SimConfig()) as sim:
        async with httpx2.AsyncClient(base_url=sim.base_url) as client:
            root = await client.head("/")
            models = await client.head("/v1/models", headers={"x-api-key": "k"})
            after = await client.get("/v1/models", headers={"x-api-key": "k"})
    assert root.status_code == 404 and root.content == b"" and "request-id" in root.headers
    assert models.status_code == 200 and models.content == b""
    assert int(models.headers["content-length"]) == len(after.content) > 0


def test_latency_and_fault_delays_are_bounded_by_the_sdks_timeout() -> None:
    from runtime.errors import ConfigError
    from runtime.scripted.faults import FaultRule

    with pytest.raises(ConfigError, match=r"SimConfig.latency_s: 86400 is above the upper bound 600 seconds"):
        SimConfig(latency_s=86_400)
    with pytest.raises(ValueError, match=r"delay_s.*86400.* at most 600"):
        FaultRule.from_obj({"kind": "slow", "on_request": 1, "delay_s": 86_400}, "faults[0]")
    assert SimConfig(latency_s=600).latency_s == 600
    assert FaultRule.from_obj({"kind": "slow", "on_request": 1, "delay_s": 600}, "faults[0]").delay_s == 600.0
