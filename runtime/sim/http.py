"""HTTP/1.1 for the simulated server: h11 over an anyio byte stream, with limits.

:func:`serve_connection` reads requests from one connection (keep-alive,
Content-Length or chunked bodies, both decoded by h11), hands each to the
handler, and writes its response: a whole body (:class:`HttpResponse`) or a
chunked stream (:class:`StreamingResponse`, for server-sent events; its chunks gathered into writes
of up to 64 KiB, the head with them). A handler
returning ``None`` drops the connection without a response (the "drop" fault).

Limits (:class:`HttpLimits`), all on wall time whatever clock the app reads:

- idle: a connection with no request under way is closed after
  ``idle_timeout_s`` (and is the first evicted when the server is full, see
  :mod:`runtime.sim.connections`);
- header: a request's head must arrive within ``header_timeout_s`` of its
  first byte, its body within ``body_timeout_s`` of the head; past either the
  client gets a 408 and the connection closes;
- body size: above ``max_body_bytes`` the client gets the API's 413
  ``request_too_large``; a declared body up to ``drain_limit_bytes`` is read
  and discarded first, so a client still sending can read the answer;
- a malformed request gets a 400 and the connection closes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

import anyio
import anyio.abc
import attrs
import h11

MAX_BODY_BYTES = 32 * 1024 * 1024
"""The Messages API's request size limit (32 MB); above it the API answers 413."""

TOO_LARGE_MESSAGE = "Request exceeds the maximum allowed number of bytes."
_RECEIVE_BYTES = 262_144
_WRITE_BYTES = 65_536
"""A streamed body is gathered into writes of about this size, each write one HTTP chunk: the simulator's
event generators yield a reply's events at once, and one write (or one chunk) per event cost a system call
and an h11 event on this side and a read, a parse and a wake-up on the client's for each (``scripts/scale.py``)."""
_REASONS: Mapping[int, bytes] = {
    200: b"OK",
    400: b"Bad Request",
    401: b"Unauthorized",
    404: b"Not Found",
    405: b"Method Not Allowed",
    408: b"Request Timeout",
    413: b"Payload Too Large",
    429: b"Too Many Requests",
    500: b"Internal Server Error",
    503: b"Service Unavailable",
    529: b"Overloaded",
}


def _positive(instance: object, attribute: attrs.Attribute, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"HttpLimits.{attribute.name}: {value!r} is not a number > 0")


@attrs.frozen(kw_only=True)
class HttpLimits:
    """Per-connection limits (seconds of wall time, bytes)."""

    max_body_bytes: int = attrs.field(default=MAX_BODY_BYTES, validator=_positive)
    drain_limit_bytes: int = attrs.field(default=128 * 1024 * 1024, validator=_positive)
    header_timeout_s: float = attrs.field(default=30.0, validator=_positive)
    body_timeout_s: float = attrs.field(default=120.0, validator=_positive)
    idle_timeout_s: float = attrs.field(default=60.0, validator=_positive)


@attrs.frozen
class HttpRequest:
    """One request: method, path (query removed), headers (names lower-cased; last value wins), body, query."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes
    query: str = ""


@attrs.frozen
class HttpResponse:
    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = "application/json"


@attrs.frozen
class StreamingResponse:
    """A response whose body is written chunk by chunk as ``chunks()`` yields (chunked encoding)."""

    status: int
    chunks: Callable[[], AsyncIterator[bytes]]
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = "text/event-stream"


Response = HttpResponse | StreamingResponse
Handler = Callable[[HttpRequest], Awaitable["Response | None"]]
ErrorResponder = Callable[[int, str, str], HttpResponse]
"""Builds the error response for a protocol failure: (status, error type, message)."""


class ActivityMarker:
    """Told when a connection waits for a request (idle) and when one is under way (busy)."""

    def idle(self) -> None:
        """No request under way (or only its head arriving): the connection may be evicted."""

    def busy(self) -> None:
        """A request's head is in: its body is being read, or it is being answered."""


class _Refusal(Exception):
    def __init__(self, status: int, error_type: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message


async def serve_connection(
    stream: anyio.abc.ByteStream,
    handler: Handler,
    error_response: ErrorResponder,
    *,
    limits: HttpLimits | None = None,
    activity: ActivityMarker | None = None,
) -> None:
    """Serve requests on ``stream`` until the client closes it, asks to close, idles out, or is dropped."""
    limits = limits or HttpLimits()
    activity = activity or ActivityMarker()
    conn = h11.Connection(h11.SERVER)
    async with stream:
        try:
            while True:
                activity.idle()
                try:
                    request = await _receive_request(conn, stream, limits, activity)
                except h11.RemoteProtocolError as exc:
                    if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                        message = f"malformed HTTP request: {exc}"
                        await _send(conn, stream, error_response(400, "invalid_request_error", message))
                    return
                except _Refusal as refusal:
                    if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                        refused = error_response(refusal.status, refusal.error_type, refusal.message)
                        await _send(conn, stream, refused, close=True)
                    return
                if request is None:
                    return
                response = await handler(request)
                if response is None:
                    return
                await _send(conn, stream, response, head_only=request.method == "HEAD")
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, h11.LocalProtocolError):
            # The client went away, or the connection is past answering: nothing to send.
            return


async def _feed(conn: h11.Connection, stream: anyio.abc.ByteStream) -> None:
    try:
        data = await stream.receive(_RECEIVE_BYTES)
    except (anyio.EndOfStream, anyio.BrokenResourceError):
        data = b""
    conn.receive_data(data)


async def _receive_request(
    conn: h11.Connection, stream: anyio.abc.ByteStream, limits: HttpLimits, activity: ActivityMarker
) -> HttpRequest | None:
    # Idle: wait for the first byte of the next request (h11 may hold pipelined bytes already).
    event = conn.next_event()
    if event is h11.NEED_DATA:
        with anyio.move_on_after(limits.idle_timeout_s) as idle:
            await _feed(conn, stream)
        if idle.cancelled_caught:
            return None
        event = conn.next_event()
    # A connection still sending its head stays evictable (it counts as idle until the head is in), so heads sent
    # a byte at a time cannot hold the slots; the head has a deadline of its own besides.
    with anyio.move_on_after(limits.header_timeout_s):
        while event is h11.NEED_DATA:
            await _feed(conn, stream)
            event = conn.next_event()
    if event is h11.NEED_DATA:
        raise _Refusal(408, "timeout_error", f"request head not received within {limits.header_timeout_s:g} s")
    activity.busy()
    if not isinstance(event, h11.Request):
        return None  # ConnectionClosed
    headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in event.headers}
    declared = _declared_length(headers)
    if declared is not None and declared > limits.max_body_bytes:
        await _drain(conn, stream, limits, declared)
        raise _Refusal(413, "request_too_large", TOO_LARGE_MESSAGE)
    body = await _receive_body(conn, stream, limits)
    target = event.target.decode("latin-1")
    path, _, query = target.partition("?")
    return HttpRequest(event.method.decode("ascii"), path, headers, body, query)


def _declared_length(headers: Mapping[str, str]) -> int | None:
    value = headers.get("content-length")
    return int(value) if value is not None and value.strip().isdigit() else None


async def _receive_body(conn: h11.Connection, stream: anyio.abc.ByteStream, limits: HttpLimits) -> bytes:
    body = bytearray()
    with anyio.move_on_after(limits.body_timeout_s):
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                await _feed(conn, stream)
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > limits.max_body_bytes:
                    await _drain(conn, stream, limits, None)
                    raise _Refusal(413, "request_too_large", TOO_LARGE_MESSAGE)
            elif isinstance(event, h11.EndOfMessage):
                return bytes(body)
            else:
                raise anyio.EndOfStream()  # ConnectionClosed mid-body
    raise _Refusal(408, "timeout_error", f"request body not received within {limits.body_timeout_s:g} s")


async def _drain(conn: h11.Connection, stream: anyio.abc.ByteStream, limits: HttpLimits, declared: int | None) -> None:
    """Read and discard the rest of an oversized body (bounded in bytes and time) so the client can read the 413."""
    if declared is not None and declared > limits.drain_limit_bytes:
        return
    seen = 0
    with anyio.move_on_after(limits.body_timeout_s):
        while seen <= limits.drain_limit_bytes:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                await _feed(conn, stream)
            elif isinstance(event, h11.Data):
                seen += len(event.data)
            else:
                return


async def _send(
    conn: h11.Connection,
    stream: anyio.abc.ByteStream,
    response: Response,
    *,
    close: bool = False,
    head_only: bool = False,
) -> None:
    """Send ``response``; ``head_only`` (the answer to a ``HEAD`` request): its status and headers, no body."""
    headers = [("content-type", response.content_type), *response.headers]
    if isinstance(response, HttpResponse):
        headers.append(("content-length", str(len(response.body))))
    else:
        headers.append(("cache-control", "no-cache"))
    if close:
        headers.append(("connection", "close"))
    reason = _REASONS.get(response.status, b"")
    out = conn.send(h11.Response(status_code=response.status, headers=headers, reason=reason))
    if head_only:
        await stream.send(out + conn.send(h11.EndOfMessage()))
        return
    if isinstance(response, HttpResponse):
        out += conn.send(h11.Data(data=response.body))
        out += conn.send(h11.EndOfMessage())
        await stream.send(out)
        return
    chunks = response.chunks()
    made: list[bytes] = []  # framed as one chunk a write: each h11 Data event costs both sides a parse
    size = 0
    try:
        async for chunk in chunks:
            if chunk:
                made.append(chunk)
                size += len(chunk)
                if size >= _WRITE_BYTES:
                    await stream.send(out + conn.send(h11.Data(data=b"".join(made))))
                    out, made, size = b"", [], 0
    except Exception:
        await stream.send(out + (conn.send(h11.Data(data=b"".join(made))) if made else b""))  # what was made goes out
        raise
    finally:
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            await aclose()
    body = conn.send(h11.Data(data=b"".join(made))) if made else b""
    await stream.send(out + body + conn.send(h11.EndOfMessage()))
