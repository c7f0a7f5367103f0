"""The simulated server at the HTTP level: auth styles, routes, envelopes, keep-alive, chunked bodies."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import h11
import pytest

from runtime.scripted.policies import PolicyRegistry, Reply, ScriptPolicy, ScriptStep
from runtime.sim.clock import ManualClock
from runtime.sim.server import SimConfig, SimServer, serve_simulator

pytestmark = pytest.mark.anyio

BODY = {"model": "claude-haiku-5-5", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}


@asynccontextmanager
async def server(policies: PolicyRegistry | None = None) -> AsyncIterator[SimServer]:
    if policies is None:
        policies = PolicyRegistry(default=ScriptPolicy("d", [ScriptStep(text="ok")] * 20))
    clock = ManualClock()
    async with serve_simulator(SimConfig(), policies, clock, sleep=clock.sleep) as sim:
        yield sim


class RawClient:
    """A minimal HTTP/1.1 client on one connection, for exercising the server directly."""

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream
        self.conn = h11.Connection(h11.CLIENT)

    async def request(
        self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None, chunked: bool = False
    ) -> tuple[int, dict[str, str], bytes]:
        all_headers = [("host", "127.0.0.1"), *(headers or {}).items()]
        all_headers.append(("transfer-encoding", "chunked") if chunked else ("content-length", str(len(body))))
        out = self.conn.send(h11.Request(method=method, target=path, headers=all_headers))
        if chunked:
            for start in range(0, len(body), 7):
                out += self.conn.send(h11.Data(data=body[start : start + 7]))
        elif body:
            out += self.conn.send(h11.Data(data=body))
        out += self.conn.send(h11.EndOfMessage())
        await self.stream.send(out)
        status, response_headers, data = 0, {}, b""
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                self.conn.receive_data(await self.stream.receive())
            elif isinstance(event, h11.Response):
                status = event.status_code
                response_headers = {k.decode(): v.decode() for k, v in event.headers}
            elif isinstance(event, h11.Data):
                data += event.data
            elif isinstance(event, h11.EndOfMessage):
                if self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE:
                    self.conn.start_next_cycle()
                return status, response_headers, data


@asynccontextmanager
async def connect(sim: SimServer) -> AsyncIterator[RawClient]:
    async with await anyio.connect_tcp(sim.host, sim.port) as stream:
        yield RawClient(stream)


def post_json(body: Any = BODY, **headers: str) -> tuple[bytes, dict[str, str]]:
    return json.dumps(body).encode(), {"content-type": "application/json", "anthropic-version": "2023-06-01", **headers}


async def test_both_auth_header_styles_and_keep_alive_on_one_connection() -> None:
    async with server() as sim, connect(sim) as client:
        body, headers = post_json()
        status, response_headers, data = await client.request(
            "POST", "/v1/messages", body, {**headers, "x-api-key": "k1"}
        )
        assert status == 200 and json.loads(data)["content"] == [{"type": "text", "text": "ok"}]
        assert response_headers["request-id"].startswith("req_")
        status, _, data = await client.request(
            "POST", "/v1/messages", body, {**headers, "authorization": "Bearer k1", "anthropic-version": "2023-06-01"}
        )
        assert status == 200
    assert len(sim.requests) == 2


async def test_a_missing_key_is_a_401_envelope() -> None:
    async with server() as sim, connect(sim) as client:
        status, headers, data = await client.request("POST", "/v1/messages", *post_json())
    envelope = json.loads(data)
    assert status == 401
    assert envelope["type"] == "error" and envelope["error"]["type"] == "authentication_error"
    assert envelope["request_id"] == headers["request-id"]


@pytest.mark.parametrize(("method", "path"), [("POST", "/v1/complete"), ("GET", "/v1/messages"), ("POST", "/")])
async def test_other_routes_are_404_envelopes(method: str, path: str) -> None:
    async with server() as sim, connect(sim) as client:
        status, _, data = await client.request(method, path, b"", {"x-api-key": "k"})
    assert status == 404
    assert json.loads(data)["error"] == {"type": "not_found_error", "message": f"Not found: {method} {path}"}


@pytest.mark.parametrize("body", [b"{nope", b'{"model": NaN}', b"\xff\xfe"])
async def test_a_body_that_is_not_json_is_a_400(body: bytes) -> None:
    async with server() as sim, connect(sim) as client:
        status, _, data = await client.request(
            "POST", "/v1/messages", body, {"x-api-key": "k", "anthropic-version": "2023-06-01"}
        )
    assert status == 400
    assert json.loads(data)["error"]["message"].startswith("request body: not valid JSON")


async def test_a_chunked_request_body_is_read_whole() -> None:
    async with server() as sim, connect(sim) as client:
        count_body = {"model": BODY["model"], "messages": BODY["messages"]}
        body, headers = post_json(count_body, **{"x-api-key": "k"})
        status, _, data = await client.request("POST", "/v1/messages/count_tokens", body, headers, chunked=True)
    assert status == 200 and json.loads(data)["input_tokens"] > 0


async def test_a_request_without_a_node_and_no_default_policy_is_a_400() -> None:
    policies = PolicyRegistry.from_scripts({"a": [ScriptStep(text="x")]})
    async with server(policies) as sim, connect(sim) as client:
        status, _, data = await client.request("POST", "/v1/messages", *post_json(**{"x-api-key": "k"}))
    assert status == 400
    assert "names no node" in json.loads(data)["error"]["message"]


async def test_connection_close_is_honoured() -> None:
    async with server() as sim, connect(sim) as client:
        body, headers = post_json(**{"x-api-key": "k", "connection": "close"})
        status, response_headers, _ = await client.request("POST", "/v1/messages", body, headers)
        assert status == 200 and response_headers.get("connection") == "close"
        with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
            await client.stream.receive()


async def test_garbage_on_the_wire_gets_a_400_and_the_server_keeps_serving() -> None:
    async with server() as sim:
        async with await anyio.connect_tcp(sim.host, sim.port) as stream:
            await stream.send(b"NOT HTTP AT ALL\r\n\r\n")
            reply = b""
            try:
                while True:
                    reply += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass
        assert reply.startswith(b"HTTP/1.1 400")
        async with connect(sim) as client:
            status, _, _ = await client.request("POST", "/v1/messages", *post_json(**{"x-api-key": "k"}))
        assert status == 200


async def test_a_client_that_disconnects_mid_request_does_not_stop_the_server() -> None:
    async with server() as sim:
        async with await anyio.connect_tcp(sim.host, sim.port) as stream:
            await stream.send(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: 500\r\n\r\n{")
        async with connect(sim) as client:
            status, _, _ = await client.request("POST", "/v1/messages", *post_json(**{"x-api-key": "k"}))
        assert status == 200


class _BrokenPolicy:
    def respond(self, payload: Any) -> Any:
        raise RuntimeError("policy bug")


class _CountedPolicy:
    def respond(self, payload: Any) -> Reply:
        return Reply(content=({"type": "text", "text": "x"},), stop_reason="end_turn", output_tokens=77)


async def test_a_policy_bug_becomes_a_500_that_says_so_and_is_not_retried() -> None:
    async with server(PolicyRegistry(default=_BrokenPolicy())) as sim, connect(sim) as client:
        status, headers, data = await client.request("POST", "/v1/messages", *post_json(**{"x-api-key": "k"}))
    assert status == 500 and headers["x-should-retry"] == "false"
    assert json.loads(data)["error"] == {
        "type": "api_error",
        "message": "simulated server bug: RuntimeError: policy bug",
    }


async def test_output_tokens_given_by_the_policy_are_reported_as_is() -> None:
    async with server(PolicyRegistry(default=_CountedPolicy())) as sim, connect(sim) as client:
        body = BODY | {"max_tokens": 100}
        status, _, data = await client.request("POST", "/v1/messages", *post_json(body, **{"x-api-key": "k"}))
    assert status == 200 and json.loads(data)["usage"]["output_tokens"] == 77


async def test_the_request_log_is_bounded_and_keeps_the_newest() -> None:
    policies = PolicyRegistry(default=ScriptPolicy("d", [ScriptStep(text="ok")] * 5))
    clock = ManualClock()
    async with serve_simulator(SimConfig(request_log_limit=2), policies, clock) as sim, connect(sim) as client:
        for _ in range(3):
            clock.advance(1.0)
            await client.request("POST", "/v1/messages", *post_json(**{"x-api-key": "k"}))
    assert [record.started_at for record in sim.requests] == [2.0, 3.0]
