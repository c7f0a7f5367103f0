"""The provider reads a streamed reply itself: what it reads equals what the SDK's own ``MessageStream`` reads.

The simulator's streams (thinking, text, tool use, pause_turn, refusal, a
compaction with its iterations, a context edit) are captured as bytes and
served again, byte for byte, by a real loopback HTTP server; the provider
(:mod:`runtime.providers.sse_reply`) and the SDK's stream helper (the
reference: how the provider read replies before) each read them through the
real SDK, and their replies, progress pieces and failures are compared. Kinds
the provider does not fold itself (a citation, an unknown event) go through
the SDK's accumulator and still compare equal. The framing of events is
checked against the SDK's ``SSEDecoder`` over any cut of the bytes (Hypothesis).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anthropic
import anyio
import anyio.abc
import pytest
from anthropic._streaming import SSEDecoder
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.contract.progress import reporting_progress
from runtime.contract.provider import AttemptFailed, ProviderError
from runtime.providers.anthropic import AnthropicProvider
from runtime.providers.sse_reply import SseDecoder, stream_events
from runtime.scripted.default_model import DefaultModel
from runtime.scripted.policies import PolicyRegistry, ScriptPolicy, ScriptStep
from runtime.sim.app import protocol_error_response
from runtime.sim.clock import ManualClock
from runtime.sim.config import SimConfig
from runtime.sim.http import HttpRequest, StreamingResponse, serve_connection
from runtime.sim.server import serve_simulator
from runtime.sim.streaming import encode_sse

pytestmark = pytest.mark.anyio

MODEL = "claude-haiku-5-5"
TOOL = {"name": "read", "description": "d", "input_schema": {"type": "object", "properties": {"p": {"type": "string"}}}}
BASE: dict[str, Any] = {"model": MODEL, "max_tokens": 4_000, "messages": [{"role": "user", "content": "hi"}]}
COMPACT = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000}}
CLEAR = {
    "type": "clear_tool_uses_20250919",
    "trigger": {"type": "input_tokens", "value": 100},
    "keep": {"type": "tool_uses", "value": 1},
}


def _tool_turns(n: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "read them"}]
    for i in range(n):
        call = {"type": "tool_use", "id": f"toolu_{i:02d}", "name": "read", "input": {"p": f"f{i}"}}
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i:02d}", "content": "line of a file " * 60}
        messages += [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]
    return messages


SCRIPTED: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "thinking, text and a tool call": (
        {"text": "Let me read it first.", "tool_calls": [{"name": "read", "arguments": {"p": "a ü \\n b"}}]},
        {**BASE, "tools": [TOOL], "thinking": {"type": "enabled", "budget_tokens": 1_024}},
    ),
    "text alone": ({"text": "All done: three files read."}, BASE),
    "two tool calls": (
        {"tool_calls": [{"name": "read", "arguments": {}}, {"name": "read", "arguments": {"p": "x" * 70}}]},
        {**BASE, "tools": [TOOL]},
    ),
    "pause_turn": ({"text": "Still working.", "stop_reason": "pause_turn"}, BASE),
    "refusal": ({"text": "I can't help with that.", "stop_reason": "refusal"}, BASE),
    "a scripted compaction": (
        {"text": "The last entry is 5,000.", "compaction": "<summary>ledger of 5,000 entries</summary>"},
        {**BASE, "context_management": {"edits": [COMPACT]}},
    ),
}
DEFAULT_MODEL: dict[str, dict[str, Any]] = {
    "a compaction pass, with iterations": {
        **BASE,
        "messages": [{"role": "user", "content": "The archive lists ledger entries one by one. " * 6_000}],
        "context_management": {"edits": [COMPACT]},
    },
    "a context edit's report": {
        **BASE,
        "tools": [TOOL],
        "messages": _tool_turns(3),
        "context_management": {"edits": [CLEAR]},
    },
    "a reply cut at max_tokens": {**BASE, "max_tokens": 5},
}


def _betas(payload: dict[str, Any]) -> list[str]:
    from runtime.values.server_edits import betas_for

    return list(betas_for(payload["context_management"]["edits"]))


async def _raw_body(client: anthropic.AsyncAnthropic, payload: dict[str, Any], node: str | None) -> bytes:
    headers = {"x-foldline-node": node} if node else {}
    if "context_management" in payload:
        opened = client.beta.messages.with_streaming_response.create(
            **payload, betas=_betas(payload), stream=True, extra_headers=headers
        )
    else:
        opened = client.messages.with_streaming_response.create(**payload, stream=True, extra_headers=headers)
    async with opened as response:
        assert response.status_code == 200
        return await response.http_response.aread()


async def _simulator_bodies() -> dict[str, tuple[bytes, dict[str, Any]]]:
    """Each scenario's stream as the simulator sent it, and the payload that asked for it."""
    clock = ManualClock()
    steps = {name: [ScriptStep.from_obj(step, name)] for name, (step, _) in SCRIPTED.items()}
    policies = PolicyRegistry({n: ScriptPolicy(n, s) for n, s in steps.items()}, default=DefaultModel(calls="one"))
    bodies: dict[str, tuple[bytes, dict[str, Any]]] = {}
    async with serve_simulator(SimConfig(), policies, clock, sleep=clock.sleep) as sim:
        async with anthropic.AsyncAnthropic(base_url=sim.base_url, api_key="sk-sim", max_retries=0) as client:
            for name, (_, payload) in SCRIPTED.items():
                bodies[name] = (await _raw_body(client, payload, name), payload)
            for name, payload in DEFAULT_MODEL.items():
                bodies[name] = (await _raw_body(client, payload, None), payload)
    return bodies


@asynccontextmanager
async def replaying(body: bytes, pieces: int = 1) -> AsyncIterator[str]:
    """A real HTTP server on loopback answering every request with ``body`` (a stream, in ``pieces`` writes)."""

    async def handler(request: HttpRequest) -> StreamingResponse:
        async def chunks() -> AsyncIterator[bytes]:
            size = -(-len(body) // pieces) or 1
            for start in range(0, len(body), size):
                yield body[start : start + size]

        return StreamingResponse(200, chunks, headers=(("request-id", "req_replayed"),))

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)

    async def serve(stream: anyio.abc.SocketStream) -> None:
        await serve_connection(stream, handler, protocol_error_response)

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        yield f"http://127.0.0.1:{port}"
        tg.cancel_scope.cancel()


async def _ours(base_url: str, payload: dict[str, Any]) -> tuple[Any, list[str], list[tuple[str, str]]]:
    provider = AnthropicProvider.create(api_key="sk-replay", base_url=base_url, max_retries=0)
    texts: list[str] = []
    pieces: list[tuple[str, str]] = []
    provider.progress = texts.append
    try:
        with reporting_progress(lambda kind, piece: pieces.append((kind, piece))):
            reply: Any = await provider.send_payload(payload, node_id=None)
    except (AttemptFailed, ProviderError) as exc:
        reply = exc
    finally:
        await provider.aclose()
    return reply, texts, pieces


async def _sdks(base_url: str, payload: dict[str, Any]) -> tuple[Any, list[str], list[tuple[str, str]]]:
    """The reference: the SDK's stream helper reads the stream; the provider's ``_reply`` makes the reply."""
    provider = AnthropicProvider.create(api_key="sk-replay", base_url=base_url, max_retries=0)
    client = provider._client
    texts: list[str] = []
    pieces: list[tuple[str, str]] = []
    try:
        if "context_management" in payload:
            opened: Any = client.beta.messages.stream(**payload, betas=_betas(payload))
        else:
            opened = client.messages.stream(**payload)
        async with opened as stream:
            async for event in stream:
                if event.type == "text":
                    texts.append(event.text)
                    pieces.append(("text", event.text))
                elif event.type == "thinking":
                    pieces.append(("thinking", event.thinking))
            reply: Any = provider._reply(await stream.get_final_message())
    except anthropic.APIStatusError as exc:
        reply = exc
    finally:
        await provider.aclose()
    return reply, texts, pieces


async def test_every_simulator_stream_reads_as_the_sdk_reads_it() -> None:
    bodies = await _simulator_bodies()
    kinds = set()
    for name, (body, payload) in bodies.items():
        async with replaying(body, pieces=3) as base_url:
            ours, sdks = await _ours(base_url, payload), await _sdks(base_url, payload)
        assert ours == sdks, name
        kinds |= {block["type"] for block in ours[0].content}
        kinds.add(ours[0].stop_reason)
    assert {"thinking", "text", "tool_use", "compaction", "pause_turn", "refusal", "max_tokens"} <= kinds
    assert any(ours for ours in bodies if "iterations" in bodies[ours][0].decode())
    assert any(b'"context_management"' in body for body, _ in bodies.values())


def _events(*events: tuple[str, dict[str, Any]]) -> bytes:
    return b"".join(encode_sse(name, data) for name, data in events)


START = ("message_start", {"type": "message_start", "message": {
    "id": "msg_1", "type": "message", "role": "assistant", "model": MODEL, "content": [], "stop_reason": None,
    "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1},
}})  # fmt: skip
TEXT_START = (
    "content_block_start",
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
)
TEXT = (
    "content_block_delta",
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi."}},
)
STOP = ("content_block_stop", {"type": "content_block_stop", "index": 0})
DELTA = (
    "message_delta",
    {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": 3},
    },
)
END = ("message_stop", {"type": "message_stop"})
CITATION = {"type": "char_location", "cited_text": "x", "document_index": 0, "document_title": None, "start_char_index": 0, "end_char_index": 1}  # fmt: skip


async def test_kinds_the_provider_does_not_fold_read_as_the_sdk_reads_them() -> None:
    cited = ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "citations_delta", "citation": CITATION}})  # fmt: skip
    unknown = ("future_event", {"type": "future_event", "detail": 1})
    odd_role = ("message_start", {**START[1], "message": {**START[1]["message"], "role": "robot"}})
    container = ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None, "container": {"id": "c", "expires_at": "2026-01-01T00:00:00Z"}}, "usage": {"output_tokens": 3}})  # fmt: skip
    for body in (
        _events(START, TEXT_START, TEXT, cited, STOP, DELTA, END),
        _events(START, unknown, TEXT_START, TEXT, STOP, DELTA, END),
        _events(START, TEXT_START, TEXT, STOP, container, END),
        _events(START, TEXT_START, TEXT, STOP, DELTA, END).replace(b"\n", b"\r\n"),
        b": a comment\n\n" + _events(START, ("ping", {"type": "ping"}), TEXT_START, TEXT, STOP, DELTA, END),
        _events(odd_role, TEXT_START, TEXT, STOP, DELTA, END),  # not the SDK's types: constructed, not validated
    ):
        async with replaying(body) as base_url:
            ours, sdks = await _ours(base_url, BASE), await _sdks(base_url, BASE)
        assert ours == sdks and ours[0].content[0]["text"] == "Hi.", body[:300]
    assert ours[0].content[0] == {"type": "text", "text": "Hi.", "citations": None}


@pytest.mark.parametrize(
    ("error", "error_type", "status", "message"),
    [
        (
            b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
            "overloaded_error",
            529,
            "Overloaded",
        ),
        (b'{"type":"error","error":{"type":"api_error","message":"boom"}}', "api_error", 500, "boom"),
        (b"not json", None, 500, "not json"),
    ],
)
async def test_an_error_event_fails_the_attempt_as_the_sdk_names_it(
    error: bytes, error_type: str | None, status: int, message: str
) -> None:
    body = _events(START, TEXT_START, TEXT) + b"event: error\ndata: " + error + b"\n\n"
    async with replaying(body) as base_url:
        (ours, texts, _), (sdks, _, _) = await _ours(base_url, BASE), await _sdks(base_url, BASE)
    assert isinstance(ours, AttemptFailed) and isinstance(sdks, anthropic.APIStatusError)
    assert (ours.status, ours.error_type) == (status, error_type) and sdks.status_code == 200
    assert str(ours) == f"HTTP {status} mid-stream {error_type or ''}: {message}"
    if isinstance(sdks.body, dict):
        assert sdks.body["error"] == {"type": error_type, "message": message}
    else:
        assert sdks.message.startswith(message)  # the SDK adds the request id and path; the attempt's record has both
    assert ours.headers["request-id"] == "req_replayed" and texts == ["Hi."]


@pytest.mark.parametrize(
    ("body", "failure", "text"),
    [
        (_events(START, TEXT_START, TEXT, STOP, DELTA), AttemptFailed, "stream cut: it ended after 5 event(s)"),
        (b"", ProviderError, "it carries no server-sent events"),
        (_events(TEXT_START, START), ProviderError, "before message_start"),
        (
            _events(
                START, ("content_block_delta", {"type": "content_block_delta", "index": 3, "delta": TEXT[1]["delta"]})
            ),
            ProviderError,
            "names no started block",
        ),  # fmt: skip
        (b"event: message_start\ndata: {nope\n\n", ProviderError, "malformed response stream"),
        (b"event: message_start\ndata: [1]\n\n", ProviderError, "is not a JSON object"),
    ],
)
async def test_a_stream_that_is_not_a_message_fails_with_a_clear_error(body: bytes, failure: type, text: str) -> None:
    async with replaying(body) as base_url:
        ours, _, _ = await _ours(base_url, BASE)
    assert isinstance(ours, failure) and text in str(ours), ours
    if failure is ProviderError:
        assert ours.error_type == "malformed_response"


LINE_ENDS = st.sampled_from([b"\n", b"\r\n", b"\r"])
FIELD_LINES = st.one_of(
    st.builds(lambda v: b"event: " + v, st.sampled_from([b"ping", b"message_start", b"error", b"x", b""])),
    st.builds(
        lambda v: b"data: " + v.encode(),
        st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=12),
    ),
    st.builds(
        lambda v: b"data:" + v.encode(),
        st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=12),
    ),
    st.just(b": comment"),
    st.just(b""),
)


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(st.tuples(FIELD_LINES, LINE_ENDS), max_size=30), cuts=st.lists(st.integers(0, 400), max_size=8))
def test_events_are_framed_as_the_sdks_decoder_frames_them(lines: list[tuple[bytes, bytes]], cuts: list[int]) -> None:
    body = b"".join(line + end for line, end in lines)
    points = sorted({c for c in cuts if c < len(body)} | {0, len(body)})
    chunks = [body[a:b] for a, b in zip(points, points[1:], strict=False)]
    decoder = SseDecoder()
    ours = [event for chunk in chunks for event in decoder.feed(chunk)] + decoder.end()
    theirs = [(e.event, e.data) for e in SSEDecoder().iter_bytes(iter(chunks))]
    keep = lambda events: [e for e in events if e[0] or e[1]]  # noqa: E731  (both frame nameless, empty events alike)
    assert keep(ours) == keep(theirs)


def test_an_event_past_the_bound_is_refused_not_buffered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("runtime.providers.sse_reply.MAX_EVENT_BYTES", 100)
    with pytest.raises(ValueError, match="line runs past 100 bytes"):
        SseDecoder().feed(b"data: " + b"x" * 200)
    decoder = SseDecoder()
    with pytest.raises(ValueError, match="event's data runs past 100 bytes"):
        for _ in range(5):
            decoder.feed(b"data: " + b"x" * 40 + b"\n")
    assert SseDecoder().feed(b"data: " + b"x" * 90 + b"\n\n") == [(None, "x" * 90)]


def test_the_events_a_stream_yields_skip_pings_nameless_and_empty_ones() -> None:
    decoded = [("ping", '{"type":"ping"}'), (None, '{"a":1}'), ("message_stop", ""), ("x", json.dumps({"type": "x"}))]
    assert list(stream_events(decoded)) == [{"type": "x"}]
