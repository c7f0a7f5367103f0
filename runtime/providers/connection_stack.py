"""The Anthropic provider's HTTP connections to the simulator: idle ones on a stack, taken and given back in O(1).

httpcore's pool (the SDK's default) walks every connection it holds at each
request's start and at its end, and asks each idle one's socket whether it is
readable (a ``poll`` and, through anyio, a ``getpeername``): with the 72
connections a provider holds (its requests in flight and its counts), that walk
was a third of the HTTP client's CPU in ``scripts/scale.py``. :class:`StackPool`
keeps the idle connections of each origin on a stack instead: a request takes
the most recently used one, checks that one alone (closed, or expired: the
server went away or its keep-alive ran out), and gives it back when its
response is closed. At most ``max_connections`` are out at once; a request past
that waits for one to come back.

:class:`StackTransport` is httpx's own transport (its request and response
types, its exception mapping) over this pool; the provider uses it for a
loopback ``base_url`` (the simulator). Toward the API the SDK's default client
stays as it is (its proxy settings from the environment included).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

import anyio
import httpcore2
import httpx2


class StackPool:
    """Connections per origin, idle ones on a stack; ``handle_async_request`` as httpcore's pool offers it."""

    def __init__(self, *, max_connections: int, keepalive_expiry: float | None, socket_options: Any = None) -> None:
        if isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1:
            raise ValueError(f"StackPool.max_connections: {max_connections!r} is not a positive integer")
        self.max_connections = max_connections
        self._keepalive_expiry = keepalive_expiry
        self._socket_options = socket_options
        self._ssl_context: Any = None
        self._slots = anyio.Semaphore(max_connections, max_value=max_connections)
        self._idle: dict[tuple[bytes, bytes, int], list[httpcore2.AsyncHTTPConnection]] = {}
        self._open: set[httpcore2.AsyncHTTPConnection] = set()

    @property
    def connections(self) -> int:
        """Connections held now, idle or in use."""
        return len(self._open)

    @property
    def idle(self) -> int:
        return sum(len(stack) for stack in self._idle.values())

    def _new(self, origin: httpcore2.Origin) -> httpcore2.AsyncHTTPConnection:
        if origin.scheme == b"https" and self._ssl_context is None:
            self._ssl_context = httpx2.create_ssl_context()
        connection = httpcore2.AsyncHTTPConnection(
            origin=origin,
            ssl_context=self._ssl_context,
            keepalive_expiry=self._keepalive_expiry,
            socket_options=self._socket_options,
        )
        self._open.add(connection)
        return connection

    async def _take(self, origin: httpcore2.Origin) -> httpcore2.AsyncHTTPConnection:
        """The most recently used idle connection to ``origin`` still fit to use, else a new one."""
        stack = self._idle.get(_key(origin))
        while stack:
            connection = stack.pop()
            if not connection.is_closed() and connection.is_idle() and not connection.has_expired():
                return connection
            await self._discard(connection)
        return self._new(origin)

    async def _discard(self, connection: httpcore2.AsyncHTTPConnection) -> None:
        self._open.discard(connection)
        with anyio.CancelScope(shield=True):
            await connection.aclose()

    def _give_back(self, origin: httpcore2.Origin, connection: httpcore2.AsyncHTTPConnection) -> bool:
        """Keep ``connection`` for the next request when its response left it idle; False when it is done."""
        if connection.is_idle() and not connection.is_closed() and connection in self._open:
            self._idle.setdefault(_key(origin), []).append(connection)
            return True
        self._open.discard(connection)
        return False

    async def handle_async_request(self, request: httpcore2.Request) -> httpcore2.Response:
        await self._slots.acquire()
        connection: httpcore2.AsyncHTTPConnection | None = None
        try:
            connection = await self._take(request.url.origin)
            response = await connection.handle_async_request(request)
        except BaseException:
            self._slots.release()
            if connection is not None:
                await self._discard(connection)  # half used, perhaps: never given to another request
            raise
        body = _ReleasingStream(response.stream, self, request.url.origin, connection)
        return httpcore2.Response(
            status=response.status, headers=response.headers, content=body, extensions=response.extensions
        )

    async def aclose(self) -> None:
        connections, self._open, self._idle = list(self._open), set(), {}
        with anyio.CancelScope(shield=True):
            for connection in connections:
                await connection.aclose()

    async def __aenter__(self) -> StackPool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _key(origin: httpcore2.Origin) -> tuple[bytes, bytes, int]:
    return (origin.scheme, origin.host, origin.port)  # an Origin compares equal but does not hash


class _ReleasingStream:
    """A response body that gives its connection back to the pool (or drops it) and frees its slot when closed."""

    def __init__(
        self, stream: Any, pool: StackPool, origin: httpcore2.Origin, connection: httpcore2.AsyncHTTPConnection
    ) -> None:
        self._stream = stream
        self._pool = pool
        self._origin = origin
        self._connection = connection
        self._released = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._stream:
                yield chunk
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        if self._released:
            return
        self._released = True
        try:
            with anyio.CancelScope(shield=True):
                if hasattr(self._stream, "aclose"):
                    await self._stream.aclose()
                if not self._pool._give_back(self._origin, self._connection):
                    await self._connection.aclose()
        finally:
            self._pool._slots.release()


class StackTransport(httpx2.AsyncHTTPTransport):
    """httpx's transport (its types and exception mapping) over a :class:`StackPool`."""

    def __init__(self, *, limits: httpx2.Limits, socket_options: Iterable[Any] | None = None) -> None:
        if limits.max_connections is None:
            raise ValueError("StackTransport: limits.max_connections must be set (the pool's bound)")
        super().__init__(limits=limits, socket_options=socket_options)  # httpx's own, for its exception mapping
        self._pool = StackPool(  # type: ignore[assignment]
            max_connections=limits.max_connections,
            keepalive_expiry=limits.keepalive_expiry,
            socket_options=socket_options,
        )

    @property
    def pool(self) -> StackPool:
        return self._pool  # type: ignore[return-value]
