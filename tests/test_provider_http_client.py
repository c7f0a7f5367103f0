"""The Anthropic provider's HTTP client: aiohttp on asyncio when the extra is installed, httpx otherwise.

The two clients must be indistinguishable to the runtime and to the server: the same bodies reach the simulator,
the same replies come back, and every failure (an error status, an error mid-stream, a dropped connection, a
malformed stream) is the same failed attempt with the same status and error type. The aiohttp client runs on
asyncio only, so the comparisons run on asyncio; trio is tested to keep httpx.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import anyio
import pytest

from runtime.contract.provider import AttemptFailed, ProviderError
from runtime.request.compiler import RequestSettings, compile_request
from runtime.scripted.default_model import DefaultModel
from runtime.scripted.faults import FaultRule
from runtime.scripted.policies import PolicyRegistry
from runtime.sim.clock import ManualClock
from runtime.sim.config import SimConfig
from runtime.sim.server import serve_simulator
from runtime.values.messages import Instruction

aiohttp = pytest.importorskip("aiohttp", reason="the aiohttp client needs the 'aiohttp' extra (foldline[aiohttp])")

import anthropic  # noqa: E402  (after the skip: the SDK picks its aiohttp client up at import)

from runtime.providers.anthropic import AnthropicProvider, http_client  # noqa: E402

FAULTS = (
    {"kind": "529", "on_request": 1},
    {"kind": "stream_error", "on_request": 2},
    {"kind": "drop", "on_request": 3},
    {"kind": "malformed", "on_request": 5},
    {"kind": "429", "on_request": 6, "retry_after_ms": 1500},
)
"""Requests 1-3 and 5-6 fail each in its own way; 4 and 7 are answered."""


def _request(text: str) -> Any:
    return compile_request(
        system="s", tools=(), view=(Instruction(text),), settings=RequestSettings(model="claude-haiku-5-5")
    )


async def _outcomes(choice: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], type]:
    """What seven sends through ``choice`` gave, what the simulator received, and the client type used."""
    rules = tuple(FaultRule.from_obj(rule, "faults") for rule in FAULTS)
    outcomes: list[tuple[Any, ...]] = []
    async with serve_simulator(
        SimConfig(faults=rules), PolicyRegistry(default=DefaultModel()), ManualClock(0.0)
    ) as sim:
        provider = AnthropicProvider.create(api_key="k", base_url=sim.base_url, http=choice)
        used = type(provider._client._client)
        try:
            for number in range(1, 8):
                try:
                    reply = await provider.send(_request(f"request {number}: say something"), node_id=None)
                except AttemptFailed as failed:
                    retry_after = failed.headers.get("retry-after-ms")
                    outcomes.append(("failed", failed.status, failed.error_type, retry_after, _words(str(failed))))
                except ProviderError as error:
                    outcomes.append(("error", error.status, error.error_type))
                else:
                    outcomes.append(("reply", reply.content, reply.stop_reason, reply.usage, reply.model))
            outcomes.append(("count", await provider.count_tokens(_request("count me"))))
        finally:
            await provider.aclose()
    received = [(r.path, r.status, r.fault, r.error_type, r.payload_digest, r.usage) for r in sim.app.requests]
    return outcomes, received, used


def _words(text: str) -> str:
    """A failure's text without the exception class an HTTP library names (``ReadError``, ``RemoteProtocolError``)."""
    return text.split(":", 1)[0]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # aiohttp runs on asyncio only
@pytest.mark.anyio
async def test_aiohttp_and_httpx_send_the_same_bodies_and_fail_the_same_way(anyio_backend: str) -> None:
    by_httpx, received_httpx, httpx_type = await _outcomes("httpx")
    by_aiohttp, received_aiohttp, aiohttp_type = await _outcomes("aiohttp")
    assert httpx_type is anthropic.DefaultAsyncHttpxClient and aiohttp_type is anthropic.DefaultAioHttpClient
    assert [outcome[0] for outcome in by_httpx] == [
        "failed",
        "failed",
        "failed",
        "reply",
        "error",
        "failed",
        "reply",
        "count",
    ]
    assert by_httpx[0][1:3] == (529, "overloaded_error") and by_httpx[2][1:3] == (None, "connection_error")
    assert by_httpx[5][1:4] == (429, "rate_limit_error", "1500")
    assert by_aiohttp == by_httpx
    assert received_aiohttp == received_httpx  # the same bodies (by digest), statuses and faults at the server


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_auto_is_aiohttp_on_asyncio_and_the_provider_uses_it(anyio_backend: str) -> None:
    client = http_client("auto", connections=4, timeout=5.0)
    try:
        assert isinstance(client, anthropic.DefaultAioHttpClient)
    finally:
        await client.aclose()
    async with serve_simulator(SimConfig(), PolicyRegistry(default=DefaultModel()), ManualClock(0.0)) as sim:
        provider = AnthropicProvider.create(api_key="k", base_url=sim.base_url)
        try:
            assert isinstance(provider._client._client, anthropic.DefaultAioHttpClient)
            reply = await provider.send(_request("hello"), node_id=None)
        finally:
            await provider.aclose()
    assert reply.stop_reason == "end_turn" and reply.usage.output_tokens > 0


@pytest.mark.parametrize("anyio_backend", ["trio"])
@pytest.mark.anyio
async def test_trio_keeps_httpx_and_refuses_aiohttp_by_name(anyio_backend: str) -> None:
    client = http_client("auto", connections=4, timeout=5.0)
    try:
        assert type(client) is anthropic.DefaultAsyncHttpxClient
    finally:
        await client.aclose()
    with pytest.raises(ProviderError, match="'aiohttp' runs on asyncio only; this runs on trio"):
        http_client("aiohttp", connections=4, timeout=5.0)
    async with serve_simulator(SimConfig(), PolicyRegistry(default=DefaultModel()), ManualClock(0.0)) as sim:
        provider = AnthropicProvider.create(api_key="k", base_url=sim.base_url)
        try:
            reply = await provider.send(_request("hello"), node_id=None)
        finally:
            await provider.aclose()
    assert reply.stop_reason == "end_turn"


def test_an_unknown_client_is_refused_naming_the_value_and_the_choices() -> None:
    with pytest.raises(ProviderError, match=r"http_client: 'requests' is not one of auto, httpx, aiohttp"):
        AnthropicProvider.create(api_key="k", base_url="http://127.0.0.1:9", http="requests")


def test_outside_an_event_loop_auto_is_httpx_and_aiohttp_is_refused() -> None:
    client = http_client("auto", connections=1, timeout=1.0)
    try:
        assert type(client) is anthropic.DefaultAsyncHttpxClient
    finally:
        anyio.run(client.aclose)
    with pytest.raises(ProviderError, match="runs on asyncio only; this runs on no event loop"):
        http_client("aiohttp", connections=1, timeout=1.0)


_WITHOUT_AIOHTTP = """
import sys
sys.modules["aiohttp"] = None  # as if the extra were not installed: the SDK falls back as it does then
import anyio
from runtime.contract.provider import ProviderError
from runtime.providers.anthropic import http_client

async def main():
    auto = http_client("auto", connections=1, timeout=1.0)
    print(type(auto).__name__)
    await auto.aclose()
    try:
        http_client("aiohttp", connections=1, timeout=1.0)
    except ProviderError as exc:
        print(exc)

anyio.run(main)
"""


def test_without_the_extra_auto_is_httpx_and_aiohttp_names_the_extra() -> None:
    done = subprocess.run([sys.executable, "-c", _WITHOUT_AIOHTTP], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    auto, refusal = done.stdout.strip().splitlines()
    assert auto == "_DefaultAsyncHttpxClient"
    assert refusal.startswith("http_client 'aiohttp': To use the aiohttp client") and "foldline[aiohttp]" in refusal
