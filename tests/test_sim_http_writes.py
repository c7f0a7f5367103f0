"""A streamed body leaves the simulator's HTTP layer gathered into few writes, whole and in order.

Over real loopback TCP against :func:`runtime.sim.http.serve_connection`
(asyncio and trio): a body larger than one write arrives byte for byte; a
generator that fails part-way still delivers what it made before the failure;
and an ordinary reply's events go out in one write, not one write per event.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import anyio
import anyio.abc
import h11
import pytest

from runtime.sim.http import HttpRequest, HttpResponse, StreamingResponse, serve_connection

pytestmark = pytest.mark.anyio

REQUEST = b"GET /stream HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n"


def _error(status: int, error_type: str, message: str) -> HttpResponse:
    return HttpResponse(status, message.encode())


class _CountingStream(anyio.abc.ByteStream):
    """A real socket stream that counts the writes made through it (the server's side of one connection)."""

    def __init__(self, inner: anyio.abc.ByteStream) -> None:
        self.inner = inner
        self.writes = 0

    async def receive(self, max_bytes: int = 65536) -> bytes:
        return await self.inner.receive(max_bytes)

    async def send(self, item: bytes) -> None:
        self.writes += 1
        await self.inner.send(item)

    async def send_eof(self) -> None:
        await self.inner.send_eof()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _exchange(
    chunks: Callable[[], AsyncIterator[bytes]],
) -> tuple[int | None, bytes, int, BaseException | None]:
    """Serve one streamed response over loopback TCP; (status, body read, server writes, server error)."""
    served: list[_CountingStream] = []
    failure: list[BaseException] = []
    finished = anyio.Event()

    async def handler(request: HttpRequest) -> StreamingResponse:
        return StreamingResponse(200, chunks)

    async def serve(stream: anyio.abc.SocketStream) -> None:
        counting = _CountingStream(stream)
        served.append(counting)
        try:
            await serve_connection(counting, handler, _error)
        except Exception as exc:
            failure.append(exc)
        finally:
            finished.set()

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        client = h11.Connection(h11.CLIENT)
        status, body = None, bytearray()
        with anyio.fail_after(10):
            async with await anyio.connect_tcp("127.0.0.1", port) as stream:
                await stream.send(REQUEST)
                while True:
                    event = client.next_event()
                    if event is h11.NEED_DATA:
                        try:
                            client.receive_data(await stream.receive())
                        except (anyio.EndOfStream, anyio.BrokenResourceError):
                            break
                    elif isinstance(event, h11.Response):
                        status = event.status_code
                    elif isinstance(event, h11.Data):
                        body += event.data
                    elif isinstance(event, h11.EndOfMessage):
                        break
            await finished.wait()  # the client has closed: the server's side ends too
        tg.cancel_scope.cancel()
    return status, bytes(body), served[0].writes, failure[0] if failure else None


async def test_a_reply_of_many_events_goes_out_in_one_write() -> None:
    events = [f'event: e{i}\ndata: {{"i": {i}}}\n\n'.encode() for i in range(12)]

    async def chunks() -> AsyncIterator[bytes]:
        for event in events:
            yield event

    status, body, writes, error = await _exchange(chunks)
    assert (status, body, error) == (200, b"".join(events), None)
    assert writes == 1  # head, every event and the end of the body: one system call, not fourteen


async def test_a_body_larger_than_one_write_arrives_whole_and_in_order() -> None:
    pieces = [bytes([65 + i % 26]) * 10_000 for i in range(30)]  # 300,000 bytes

    async def chunks() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    status, body, writes, error = await _exchange(chunks)
    assert (status, body, error) == (200, b"".join(pieces), None)
    assert 2 <= writes <= 7  # gathered up to 64 KiB a write


async def test_what_a_failing_generator_made_before_its_failure_still_goes_out() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b"event: a\ndata: {}\n\n"
        yield b"event: b\ndata: {}\n\n"
        raise RuntimeError("the generator broke")

    status, body, _, error = await _exchange(chunks)
    assert status == 200
    assert body == b"event: a\ndata: {}\n\nevent: b\ndata: {}\n\n"
    assert isinstance(error, RuntimeError) and str(error) == "the generator broke"
