"""The simulated server under abuse: idle floods, huge and deep bodies, slow clients, descriptor exhaustion.

Each test ends by showing the server still answers a normal request. The
5-second bounds are liveness bounds (a stalled server would take its 30 s+
full timeout or forever), not speed measurements.
"""

from __future__ import annotations

import json
import resource
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anthropic
import anyio
import anyio.abc
import pytest

from runtime.measuring.tokenizer import count_tokens
from runtime.scripted.default_model import DefaultModel
from runtime.scripted.policies import PolicyRegistry
from runtime.sim.server import SimConfig, SimServer, serve_simulator
from runtime.sim.tokens import SimTokenCounter
from tests.sim_process import foldline_sim

pytestmark = pytest.mark.anyio

MODEL = "claude-haiku-5-5"
HEAD = "POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-api-key: k\r\nanthropic-version: 2023-06-01\r\ncontent-type: application/json\r\n"


@asynccontextmanager
async def running(config: SimConfig | None = None) -> AsyncIterator[SimServer]:
    async with serve_simulator(
        config or SimConfig(), PolicyRegistry(default=DefaultModel(calls="one")), anyio.current_time
    ) as sim:
        yield sim


async def normal_request(sim_url: str) -> anthropic.types.Message:
    async with anthropic.AsyncAnthropic(base_url=sim_url, api_key="sk-sim", max_retries=0) as client:
        return await client.messages.create(model=MODEL, max_tokens=20, messages=[{"role": "user", "content": "hi"}])


async def read_response(stream: anyio.abc.ByteStream) -> tuple[int, dict]:
    data = b""
    while b"\r\n\r\n" not in data:
        data += await stream.receive()
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    length = int(
        next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    )
    while len(body) < length:
        body += await stream.receive()
    return status, json.loads(body)


def raise_descriptor_limit(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < wanted:
        pytest.skip(f"this test needs {wanted} descriptors; the hard limit here is {hard}")


async def test_1500_idle_connections_and_a_normal_request_is_still_answered_at_once() -> None:
    raise_descriptor_limit(4096)  # 1,500 client ends + up to 1,024 server ends + the rest
    async with running(SimConfig(max_connections=1024)) as sim:
        idle = [await anyio.connect_tcp(sim.host, sim.port) for _ in range(1500)]
        try:
            await anyio.sleep(0.2)  # let the server accept them all
            with anyio.fail_after(5.0):
                message = await normal_request(sim.base_url)
            assert message.stop_reason == "end_turn"
            assert sim.connections.open_count <= 1024
            assert sim.connections.evicted >= 1500 - 1024
        finally:
            for stream in idle:
                await stream.aclose()


async def test_a_50_mb_body_gets_413_while_a_small_request_is_answered_at_once() -> None:
    async with running() as sim:
        big = 50 * 1024 * 1024
        result: dict[str, object] = {}

        async def upload() -> None:
            async with await anyio.connect_tcp(sim.host, sim.port) as stream:
                await stream.send(f"{HEAD}content-length: {big}\r\n\r\n".encode())
                chunk = b"x" * (1024 * 1024)
                try:
                    for _ in range(50):
                        await stream.send(chunk)
                except (anyio.BrokenResourceError, OSError):
                    pass
                result["big"] = await read_response(stream)

        async with anyio.create_task_group() as tg:
            tg.start_soon(upload)
            await anyio.sleep(0.01)
            with anyio.fail_after(5.0):
                result["small"] = await normal_request(sim.base_url)
        status, body = result["big"]  # type: ignore[misc]
        assert status == 413
        assert body["error"] == {
            "type": "request_too_large",
            "message": "Request exceeds the maximum allowed number of bytes.",
        }
        assert body["request_id"].startswith("req_")
        # The SDK sees the API's error class.
        async with anthropic.AsyncAnthropic(base_url=sim.base_url, api_key="k", max_retries=0) as client:
            with pytest.raises(anthropic.RequestTooLargeError):
                await client.messages.create(
                    model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "y" * (33 * 1024 * 1024)}]
                )
        assert (await normal_request(sim.base_url)).stop_reason == "end_turn"


async def test_a_huge_valid_request_is_counted_off_the_event_loop() -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 30_000  # 1.35 MB, above the 1 MB threshold below
    body = json.dumps({"model": "claude-opus-5", "messages": [{"role": "user", "content": text}]}).encode()
    head = HEAD.replace("/v1/messages", "/v1/messages/count_tokens")
    entered, released = threading.Event(), threading.Event()

    def gated_count(piece: str) -> int:
        # The huge block's count waits until the test has been answered a small request: on a worker
        # thread that is harmless; on the event loop it would block every request until the wait times out.
        if len(piece) >= len(text):
            entered.set()
            released.wait(timeout=20.0)
        return count_tokens(piece)

    async with running(SimConfig(thread_tokenize_bytes=1_000_000)) as sim:
        sim.app.counter = SimTokenCounter(token_factor=sim.app.config.token_factor, count_text=gated_count)
        result: dict[str, tuple[int, dict]] = {}

        async def huge() -> None:
            async with await anyio.connect_tcp(sim.host, sim.port) as stream:
                await stream.send(f"{head}content-length: {len(body)}\r\n\r\n".encode() + body)
                result["huge"] = await read_response(stream)

        async with anyio.create_task_group() as tg:
            tg.start_soon(huge)
            assert await anyio.to_thread.run_sync(entered.wait, 20.0), "the huge block was never counted"
            # The order is the proof, not a stopwatch: the huge count is held until the small request
            # is answered, so a server counting on its event loop answers the huge one first.
            try:
                with anyio.fail_after(30.0):
                    await normal_request(sim.base_url)
                assert "huge" not in result, "the huge request was answered before the small one: nothing overlapped"
            finally:
                released.set()
        status, counted = result["huge"]
        assert status == 200 and counted["input_tokens"] > 200_000


@pytest.mark.parametrize("depth", [200_000, 101])
async def test_json_nested_too_deep_is_a_400(depth: int) -> None:
    async with running() as sim:
        body = b"[" * depth + b"]" * depth
        async with await anyio.connect_tcp(sim.host, sim.port) as stream:
            await stream.send(f"{HEAD}content-length: {len(body)}\r\n\r\n".encode() + body)
            status, envelope = await read_response(stream)
        assert status == 400
        assert envelope["error"]["message"] == "request body: JSON nested deeper than 100 levels"
        assert (await normal_request(sim.base_url)).stop_reason == "end_turn"


async def test_header_body_and_idle_timeouts_close_slow_connections() -> None:
    config = SimConfig(header_timeout_s=0.2, body_timeout_s=0.2, idle_timeout_s=0.2)
    async with running(config) as sim:
        async with await anyio.connect_tcp(sim.host, sim.port) as stream:
            await stream.send(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\n")  # the head never ends
            status, envelope = await read_response(stream)
            assert (status, envelope["error"]["type"]) == (408, "timeout_error")
            assert "request head not received within 0.2 s" in envelope["error"]["message"]
        async with await anyio.connect_tcp(sim.host, sim.port) as stream:
            await stream.send(f"{HEAD}content-length: 100\r\n\r\n{{".encode())  # the body never ends
            status, envelope = await read_response(stream)
            assert status == 408 and "request body not received within 0.2 s" in envelope["error"]["message"]
        async with await anyio.connect_tcp(sim.host, sim.port) as stream:
            with anyio.fail_after(5):
                with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
                    await stream.receive()  # an idle connection is closed by the server
        assert (await normal_request(sim.base_url)).stop_reason == "end_turn"


def test_accept_errors_from_descriptor_exhaustion_are_survived() -> None:
    async def flood_then_ask(url: str) -> anthropic.types.Message:
        host, port = url.removeprefix("http://").split(":")
        streams = []
        for _ in range(200):  # more than the server's 96 descriptors
            streams.append(await anyio.connect_tcp(host, int(port)))
        await anyio.sleep(0.5)
        for stream in streams:
            await stream.aclose()
        with anyio.fail_after(20):
            return await normal_request(url)

    with foldline_sim("--max-connections", "1000", "--idle-timeout", "0.3") as sim:
        # Lower the running server's descriptor limit (Linux prlimit) below what the flood needs.
        resource.prlimit(sim.pid, resource.RLIMIT_NOFILE, (96, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        message = anyio.run(flood_then_ask, sim.url)
        assert message.stop_reason == "end_turn"
        assert any("sim.accept_failed" in line and "Too many open files" in line for line in sim.stderr_lines)
