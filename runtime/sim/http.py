"""HTTP/1.1 for the simulated server: h11 over an anyio byte stream.

:func:`serve_connection` reads requests from one connection (keep-alive,
Content-Length or chunked bodies, both decoded by h11), hands each to the
handler, and writes its response. A handler returning ``None`` drops the
connection without a response (the "drop" fault). A malformed request gets a
400 (or 413 when the body is too large) and the connection closes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

import anyio
import anyio.abc
import attrs
import h11

MAX_BODY_BYTES = 64 * 1024 * 1024
_RECEIVE_BYTES = 65_536
_REASONS: Mapping[int, bytes] = {
    200: b"OK",
    400: b"Bad Request",
    401: b"Unauthorized",
    404: b"Not Found",
    413: b"Payload Too Large",
    429: b"Too Many Requests",
    500: b"Internal Server Error",
    529: b"Overloaded",
}


@attrs.frozen
class HttpRequest:
    """One request: method, path (query removed), headers (names lower-cased; last value wins), body."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes


@attrs.frozen
class HttpResponse:
    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = "application/json"


Handler = Callable[[HttpRequest], Awaitable["HttpResponse | None"]]
ErrorResponder = Callable[[int, str, str], HttpResponse]
"""Builds the error response for a protocol failure: (status, error type, message)."""


class _BodyTooLarge(Exception):
    pass


async def serve_connection(
    stream: anyio.abc.ByteStream,
    handler: Handler,
    error_response: ErrorResponder,
    *,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> None:
    """Serve requests on ``stream`` until the client closes it, asks to close, or is dropped."""
    conn = h11.Connection(h11.SERVER)
    async with stream:
        try:
            while True:
                try:
                    request = await _receive_request(conn, stream, max_body_bytes)
                except h11.RemoteProtocolError as exc:
                    if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                        message = f"malformed HTTP request: {exc}"
                        await _send(conn, stream, error_response(400, "invalid_request_error", message))
                    return
                except _BodyTooLarge:
                    await _send(
                        conn,
                        stream,
                        error_response(413, "request_too_large", f"request body exceeds {max_body_bytes} bytes"),
                    )
                    return
                if request is None:
                    return
                response = await handler(request)
                if response is None:
                    return
                await _send(conn, stream, response)
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, h11.LocalProtocolError):
            # The client went away, or the connection is past answering: nothing to send.
            return


async def _receive_request(
    conn: h11.Connection, stream: anyio.abc.ByteStream, max_body_bytes: int
) -> HttpRequest | None:
    head: h11.Request | None = None
    body = bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            try:
                data = await stream.receive(_RECEIVE_BYTES)
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                data = b""
            conn.receive_data(data)
        elif isinstance(event, h11.Request):
            head = event
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > max_body_bytes:
                raise _BodyTooLarge()
        elif isinstance(event, h11.EndOfMessage):
            assert head is not None
            headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in head.headers}
            target = head.target.decode("latin-1")
            return HttpRequest(head.method.decode("ascii"), target.split("?", 1)[0], headers, bytes(body))
        else:
            return None  # ConnectionClosed (or PAUSED, which a server loop never reaches)


async def _send(conn: h11.Connection, stream: anyio.abc.ByteStream, response: HttpResponse) -> None:
    headers = [
        ("content-type", response.content_type),
        ("content-length", str(len(response.body))),
        *response.headers,
    ]
    out = conn.send(
        h11.Response(status_code=response.status, headers=headers, reason=_REASONS.get(response.status, b""))
    )
    out += conn.send(h11.Data(data=response.body))
    out += conn.send(h11.EndOfMessage())
    await stream.send(out)
