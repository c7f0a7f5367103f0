"""Streaming from the simulated server, through the official SDK: ``messages.stream``, ``stream=True``, faults."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anthropic
import anyio
import anyio.to_thread
import pytest

from runtime.scripted.default_model import DefaultModel
from runtime.scripted.faults import FaultRule
from runtime.scripted.policies import PolicyRegistry
from runtime.sim.clock import ManualClock
from runtime.sim.server import SimConfig, SimServer, serve_simulator
from runtime.sim.streaming import chunks, encode_sse, message_events

pytestmark = pytest.mark.anyio

MODEL = "claude-haiku-5-5"
SYSTEM = [
    {
        "type": "text",
        "text": "The simulator counts every word of this system prompt. " * 80,
        "cache_control": {"type": "ephemeral"},
    }
]
TOOLS = [
    {
        "name": "get_weather",
        "description": "The weather in a city.",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
            "required": ["city", "days"],
        },
    }
]
QUESTION = "Tell me, in a few words, what the weather will be like in the coming days where I live."


@asynccontextmanager
async def running(config: SimConfig | None = None) -> AsyncIterator[SimServer]:
    clock = ManualClock()
    async with serve_simulator(
        config or SimConfig(), PolicyRegistry(default=DefaultModel(calls="one")), clock, sleep=clock.sleep
    ) as sim:
        yield sim


def client_for(sim: SimServer, key: str) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=sim.base_url, api_key=key, max_retries=0)


def request(**extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 400,
        "system": SYSTEM,
        "messages": [{"role": "user", "content": QUESTION}],
        **extra,
    }


def comparable(message: anthropic.types.Message) -> dict[str, Any]:
    data = message.to_dict()
    data.pop("id")
    for block in data["content"]:
        if block["type"] == "tool_use":
            block.pop("id")  # unique per request: two requests never share a tool-use id ...
            data["usage"].pop("output_tokens")  # ... and the id's tokens are part of the output
    return data


@pytest.mark.parametrize("tools", [None, TOOLS], ids=["text", "tool_use"])
async def test_messages_stream_reassembles_the_non_streaming_message_and_usage(tools: list | None) -> None:
    extra = {} if tools is None else {"tools": tools}
    async with running() as sim:
        # Separate API keys: separate cache scopes, so both calls write the same prefix.
        plain_client, stream_client = client_for(sim, "sk-a"), client_for(sim, "sk-b")
        plain = await plain_client.messages.create(**request(**extra))
        texts: list[str] = []
        async with stream_client.messages.stream(**request(**extra)) as stream:
            async for text in stream.text_stream:
                texts.append(text)
            final = await stream.get_final_message()
        await plain_client.close()
        await stream_client.close()
    assert comparable(final) == comparable(plain)
    assert final.usage.cache_creation_input_tokens and final.usage.cache_creation_input_tokens > 0
    if tools is None:
        assert len(texts) > 1 and "".join(texts) == plain.content[0].text
    else:
        assert texts == [] and final.stop_reason == "tool_use"
        assert final.content[0].input == {"city": "<city>", "days": 1}
    assert [record.stream for record in sim.requests] == [False, True]


async def test_stream_true_gives_the_raw_events_in_the_documented_order() -> None:
    async with running() as sim:
        client = client_for(sim, "sk-a")
        events = [event async for event in await client.messages.create(**request(stream=True, tools=TOOLS))]
        await client.close()
    kinds = [event.type for event in events]
    deltas = kinds.count("content_block_delta")
    assert kinds == [
        "message_start",
        "content_block_start",
        *["content_block_delta"] * deltas,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    start = events[0].message
    assert start.content == [] and start.stop_reason is None
    assert start.usage.input_tokens > 0 and start.usage.cache_creation_input_tokens > 0
    assert start.usage.cache_read_input_tokens == 0
    assert all(event.delta.type == "input_json_delta" for event in events if event.type == "content_block_delta")
    assert events[-2].delta.stop_reason == "tool_use" and events[-2].usage.output_tokens > 0


async def test_the_wire_carries_a_ping_and_server_sent_event_framing() -> None:
    async with running() as sim:
        client = client_for(sim, "sk-a")
        response = await client.messages.with_raw_response.create(**request(stream=True))
        raw = b"".join([chunk async for chunk in response.http_response.aiter_bytes()])
        await client.close()
    names = [line.removeprefix(b"event: ").decode() for line in raw.split(b"\n") if line.startswith(b"event: ")]
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert response.http_response.headers["content-type"] == "text/event-stream"
    assert response.http_response.headers["request-id"].startswith("req_")


async def test_a_mid_stream_fault_surfaces_as_the_sdks_error() -> None:
    config = SimConfig(
        faults=(FaultRule(kind="stream_error", on_request=1), FaultRule(kind="stream_error", on_request=2))
    )
    async with running(config) as sim:
        client = client_for(sim, "sk-a")
        received: list[str] = []
        with pytest.raises(anthropic.APIStatusError) as info:
            async with client.messages.stream(**request()) as stream:
                async for text in stream.text_stream:
                    received.append(text)
        # The same fault on a request that does not stream is the API's 529.
        with pytest.raises(anthropic.OverloadedError):
            await client.messages.create(**request())
        await client.close()
    assert len(received) == 1  # one delta arrived before the error event
    assert info.value.body["error"]["type"] == "overloaded_error"
    assert "mid-stream" in info.value.body["error"]["message"]
    assert [(r.fault, r.stream) for r in sim.requests] == [("stream_error", True), ("stream_error", False)]


async def test_the_sync_client_streams_too() -> None:
    async with running() as sim:

        def call() -> tuple[str, anthropic.types.Message]:
            client = anthropic.Anthropic(base_url=sim.base_url, api_key="sk-a", max_retries=0)
            with client, client.messages.stream(**request()) as stream:
                text = "".join(stream.text_stream)
                return text, stream.get_final_message()

        text, final = await anyio.to_thread.run_sync(call)
    assert text == final.content[0].text and final.stop_reason == "end_turn"


def test_the_encoder_streams_thinking_with_a_signature_and_frames_events() -> None:
    message = {
        "id": "msg_x",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 9},
        "content": [{"type": "thinking", "thinking": "Let me think about this for a while.", "signature": "sig"}],
    }
    events = list(message_events(message))
    deltas = [data["delta"] for name, data in events if name == "content_block_delta"]
    assert "".join(d["thinking"] for d in deltas if d["type"] == "thinking_delta") == message["content"][0]["thinking"]
    assert deltas[-1] == {"type": "signature_delta", "signature": "sig"}
    assert encode_sse("ping", {"type": "ping"}) == b'event: ping\ndata: {"type":"ping"}\n\n'
    assert "".join(chunks("a b c d e f g h i j k l m n o p q r s", 8)) == "a b c d e f g h i j k l m n o p q r s"
    with pytest.raises(ValueError, match="no streamer for content block type 'image'"):
        list(message_events(message | {"content": [{"type": "image"}]}))
