"""The provider's connections to a loopback server: reused from a stack, bounded, and dropped when unfit.

Real HTTP throughout: httpx's client over :class:`StackTransport` against an
HTTP/1.1 server on loopback (the simulator's own connection code, with a
handler that counts and can wait), and the provider against the simulator.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.abc
import attrs
import httpx2
import pytest

from runtime.providers.anthropic import AnthropicProvider
from runtime.providers.connection_stack import StackPool, StackTransport
from runtime.sim.app import protocol_error_response
from runtime.sim.http import HttpLimits, HttpRequest, HttpResponse, serve_connection

pytestmark = pytest.mark.anyio


@attrs.define
class Server:
    url: str = ""
    accepted: int = 0
    open: int = 0
    answering: int = 0
    most_answering: int = 0
    release: anyio.Event | None = None


@asynccontextmanager
async def serving(idle_timeout_s: float = 60.0) -> AsyncIterator[Server]:
    server = Server()

    async def handler(request: HttpRequest) -> HttpResponse:
        server.answering += 1
        server.most_answering = max(server.most_answering, server.answering)
        try:
            if server.release is not None:
                await server.release.wait()
            return HttpResponse(200, b'{"ok":true}')
        finally:
            server.answering -= 1

    async def serve(stream: anyio.abc.SocketStream) -> None:
        server.accepted += 1
        server.open += 1
        try:
            limits = HttpLimits(idle_timeout_s=idle_timeout_s)
            await serve_connection(stream, handler, protocol_error_response, limits=limits)
        finally:
            server.open -= 1

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    server.url = f"http://127.0.0.1:{listener.extra(anyio.abc.SocketAttribute.local_port)}/"
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        yield server
        tg.cancel_scope.cancel()


def _client(connections: int) -> tuple[httpx2.AsyncClient, StackPool]:
    transport = StackTransport(limits=httpx2.Limits(max_connections=connections, max_keepalive_connections=connections))
    return httpx2.AsyncClient(transport=transport), transport.pool


async def test_one_request_after_another_reuses_one_connection() -> None:
    async with serving() as server:
        client, pool = _client(4)
        async with client:
            for _ in range(5):
                assert (await client.get(server.url)).json() == {"ok": True}
            assert (pool.connections, pool.idle, server.accepted) == (1, 1, 1)
        assert pool.connections == 0


async def test_requests_past_the_bound_wait_for_a_connection_to_come_back() -> None:
    async with serving() as server:
        server.release = anyio.Event()
        client, pool = _client(2)
        statuses: list[int] = []

        async def get() -> None:
            statuses.append((await client.get(server.url)).status_code)

        async with client, anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(get)
            with anyio.fail_after(5):
                while server.answering < 2:
                    await anyio.sleep(0.01)
            await anyio.sleep(0.05)
            assert (server.answering, pool.connections) == (2, 2)  # the other four wait for a connection
            server.release.set()
        assert statuses == [200] * 6 and server.most_answering == 2 and server.accepted == 2


async def test_a_connection_the_server_closed_is_dropped_and_a_new_one_made() -> None:
    async with serving(idle_timeout_s=0.05) as server:
        client, pool = _client(2)
        async with client:
            assert (await client.get(server.url)).status_code == 200
            with anyio.fail_after(5):
                while server.open:
                    await anyio.sleep(0.01)  # the server closes the idle connection
            assert (await client.get(server.url)).status_code == 200
            assert (server.accepted, pool.connections) == (2, 1)


async def test_a_request_cancelled_mid_way_gives_its_slot_back_and_its_connection_up() -> None:
    async with serving() as server:
        server.release = anyio.Event()
        client, pool = _client(1)
        async with client:
            with anyio.move_on_after(0.2):
                await client.get(server.url)
            assert pool.connections == 0  # half used: closed, never handed to another request
            server.release.set()
            with anyio.fail_after(5):
                assert (await client.get(server.url)).status_code == 200
            assert server.accepted == 2


async def test_the_provider_talks_to_a_loopback_server_through_the_stack_and_to_others_through_the_sdks_pool() -> None:
    local = AnthropicProvider.create(api_key="k", base_url="http://127.0.0.1:9", max_in_flight=3)
    remote = AnthropicProvider.create(api_key="k", base_url="https://api.example.com", max_in_flight=3)
    try:
        assert isinstance(local._client._client._transport, StackTransport)
        assert local._client._client._transport.pool.max_connections == 3 + 8  # messages and counts
        assert not isinstance(remote._client._client._transport, StackTransport)
    finally:
        await local.aclose()
        await remote.aclose()


def test_a_pool_needs_a_positive_bound() -> None:
    with pytest.raises(ValueError, match="StackPool.max_connections: 0 is not a positive integer"):
        StackPool(max_connections=0, keepalive_expiry=None)
    with pytest.raises(ValueError, match="limits.max_connections must be set"):
        StackTransport(limits=httpx2.Limits(max_connections=None))
