"""The simulated Anthropic server: a real HTTP server on loopback.

``async with serve_simulator(config, policies, clock) as sim:`` listens on
``config.host``/``config.port`` (an ephemeral port by default) and yields a
:class:`SimServer` whose ``base_url`` the official SDK can be pointed at.
:func:`serve_forever` runs it until cancelled, for ``foldline sim``.

Time: ``clock()`` gives the request start times the cache rules use;
``sleep`` (default :func:`anyio.sleep`) is what latency and slow faults wait
on. For virtual time pass a :class:`~runtime.sim.clock.ManualClock` and its
``sleep``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import cast

import anyio
import anyio.abc
import attrs

from runtime.logs import get_logger
from runtime.scripted.policies import PolicyRegistry
from runtime.sim.admin import Admin
from runtime.sim.app import Clock, RequestRecord, SimApp, Sleep, protocol_error_response
from runtime.sim.cache_engine import CacheEngine, CacheEntry
from runtime.sim.config import SimConfig
from runtime.sim.connections import ConnectionSlot, ConnectionTable, accept_forever
from runtime.sim.http import serve_connection

__all__ = ["SimConfig", "SimServer", "serve_forever", "serve_simulator"]

log = get_logger("foldline.sim")


@attrs.define(eq=False)
class SimServer:
    """A running simulator: where it listens, what it served, and its cache engine."""

    host: str
    port: int
    app: SimApp
    connections: ConnectionTable

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def requests(self) -> tuple[RequestRecord, ...]:
        """What was served, oldest first (bounded by ``SimConfig.request_log_limit``)."""
        return self.app.requests

    @property
    def engine(self) -> CacheEngine:
        return self.app.engine

    def cache_entries(self, api_key: str, model: str) -> tuple[CacheEntry, ...]:
        """The cache entries of (``api_key``, ``model``), shortest prefix first."""
        return self.app.cache_entries(api_key, model)


@asynccontextmanager
async def serve_simulator(
    config: SimConfig,
    policies: PolicyRegistry,
    clock: Clock,
    *,
    sleep: Sleep | None = None,
    admin: Admin | None = None,
) -> AsyncIterator[SimServer]:
    """Serve the simulated API for the duration of the ``async with`` block.

    ``admin`` (optional) answers the admin routes under ``/_foldline/`` (the CLI's virtual clock)."""
    app = SimApp(config=config, policies=policies, clock=clock, sleep=sleep or anyio.sleep, admin=admin)
    multi = await anyio.create_tcp_listener(local_host=config.host, local_port=config.port)
    port = multi.extra(anyio.abc.SocketAttribute.local_port)
    table = ConnectionTable(config.max_connections)
    server = SimServer(host=config.host, port=port, app=app, connections=table)
    limits = config.http_limits()

    async def handle(stream: anyio.abc.SocketStream, slot: ConnectionSlot) -> None:
        await serve_connection(stream, app.handle, protocol_error_response, limits=limits, activity=slot)

    async with multi, anyio.create_task_group() as tg:
        for listener in multi.listeners:
            tg.start_soon(accept_forever, cast(anyio.abc.SocketListener, listener), table, handle, tg)
        try:
            yield server
        finally:
            tg.cancel_scope.cancel()


async def serve_forever(
    host: str,
    port: int,
    config: SimConfig,
    policies: PolicyRegistry,
    clock: Clock,
    *,
    sleep: Sleep | None = None,
    admin: Admin | None = None,
    task_status: anyio.abc.TaskStatus[SimServer] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve on ``host``:``port`` (overriding the config's) until cancelled.

    Started with ``await task_group.start(serve_forever, ...)``, it reports the
    running :class:`SimServer` once it listens.
    """
    config = attrs.evolve(config, host=host, port=port)
    async with serve_simulator(config, policies, clock, sleep=sleep, admin=admin) as server:
        log.info("sim.listening", base_url=server.base_url)
        task_status.started(server)
        await anyio.sleep_forever()
