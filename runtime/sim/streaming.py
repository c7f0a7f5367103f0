"""Server-sent events in the Messages API's streaming format (pure: no I/O).

A whole message (the non-streaming response body) becomes the event sequence
the API streams:

``message_start`` (the message with empty content, ``stop_reason`` null and
the input-side usage, cache fields included) -> for each content block:
``content_block_start`` / ``content_block_delta``\\* / ``content_block_stop``
(a ``ping`` after the first block starts) -> ``message_delta`` (stop reason,
stop sequence, cumulative usage) -> ``message_stop``.

Block kinds stream by :data:`BLOCK_STREAMERS`: ``text`` as ``text_delta``,
``tool_use`` as ``input_json_delta`` (the input's JSON in pieces),
``thinking`` as ``thinking_delta`` then one ``signature_delta``, and
``redacted_thinking`` whole in its start event, ``compaction`` (a server-side
compaction's summary) as its start with null content and one ``compaction_delta``
carrying the whole summary. Add a kind by adding a
streamer. An error mid-stream is :func:`error_event`. :func:`encode_sse`
frames one event.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

StreamEvent = tuple[str, dict[str, Any]]
"""One event: its name and its JSON data."""

CHUNK_CHARS = 16
"""The most characters one text, thinking or JSON delta carries."""


def encode_sse(event: str, data: Mapping[str, Any]) -> bytes:
    """One server-sent event: ``event: NAME`` and one ``data:`` line of compact JSON."""
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"event: {event}\ndata: {payload}\n\n".encode()


def chunks(text: str, size: int = CHUNK_CHARS) -> list[str]:
    """``text`` cut into pieces of at most ``size`` characters, breaking after a space where one is near."""
    pieces: list[str] = []
    rest = text
    while len(rest) > size:
        cut = rest.rfind(" ", size // 2, size)
        cut = size if cut < 0 else cut + 1
        pieces.append(rest[:cut])
        rest = rest[cut:]
    if rest:
        pieces.append(rest)
    return pieces


BlockStreamer = Callable[[Mapping[str, Any]], tuple[dict[str, Any], list[dict[str, Any]]]]
"""A block -> (the block as ``content_block_start`` carries it, its deltas in order)."""


def _text(block: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    start = {key: value for key, value in block.items() if key != "text"} | {"text": ""}
    return start, [{"type": "text_delta", "text": piece} for piece in chunks(block.get("text", ""))]


def _tool_use(block: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    start = {key: value for key, value in block.items() if key != "input"} | {"input": {}}
    encoded = json.dumps(block.get("input", {}), ensure_ascii=False, separators=(",", ":"))
    pieces = [""] + (chunks(encoded) if encoded != "{}" else [])
    return start, [{"type": "input_json_delta", "partial_json": piece} for piece in pieces]


def _thinking(block: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    start = {"type": "thinking", "thinking": "", "signature": ""}
    deltas: list[dict[str, Any]] = [
        {"type": "thinking_delta", "thinking": piece} for piece in chunks(block.get("thinking", ""))
    ]
    deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
    return start, deltas


def _whole(block: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return dict(block), []


def _compaction(block: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    start = {**block, "content": None, "encrypted_content": None}
    delta = {
        "type": "compaction_delta",
        "content": block.get("content"),
        "encrypted_content": block.get("encrypted_content"),
    }
    return start, [delta]


BLOCK_STREAMERS: Mapping[str, BlockStreamer] = MappingProxyType(
    {
        "text": _text,
        "tool_use": _tool_use,
        "thinking": _thinking,
        "redacted_thinking": _whole,
        "compaction": _compaction,
    }
)

_INPUT_USAGE_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def block_events(index: int, block: Mapping[str, Any]) -> Iterator[StreamEvent]:
    """The start, delta and stop events of content block ``index``."""
    streamer = BLOCK_STREAMERS.get(block.get("type", ""))
    if streamer is None:
        raise ValueError(f"block_events: no streamer for content block type {block.get('type')!r}")
    start, deltas = streamer(block)
    yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": start}
    for delta in deltas:
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": index}


def message_events(message: Mapping[str, Any]) -> Iterator[StreamEvent]:
    """The events that stream ``message`` (a Messages API response body), in the API's order."""
    usage = dict(message["usage"])
    output_tokens = usage.get("output_tokens", 0)
    started = dict(message) | {
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage | {"output_tokens": min(1, output_tokens)},
    }
    started.pop("context_management", None)  # it comes with message_delta, after the edits are known
    yield "message_start", {"type": "message_start", "message": started}
    content = message.get("content", [])
    if not content:
        yield "ping", {"type": "ping"}
    for index, block in enumerate(content):
        for i, event in enumerate(block_events(index, block)):
            yield event
            if index == 0 and i == 0:
                yield "ping", {"type": "ping"}
    final_usage = {key: usage[key] for key in _INPUT_USAGE_KEYS if key in usage} | {"output_tokens": output_tokens}
    if "iterations" in usage:  # the passes of a compacted response, known when it ends
        final_usage["iterations"] = usage["iterations"]
    delta = {"stop_reason": message.get("stop_reason"), "stop_sequence": message.get("stop_sequence")}
    if "stop_details" in message:
        delta["stop_details"] = message["stop_details"]
    delta_event: dict[str, Any] = {"type": "message_delta", "delta": delta, "usage": final_usage}
    if "context_management" in message:
        delta_event["context_management"] = message["context_management"]
    yield "message_delta", delta_event
    yield "message_stop", {"type": "message_stop"}


def error_event(error_type: str, message: str, request_id: str | None = None) -> StreamEvent:
    """The ``error`` event a stream ends with when the server fails mid-stream."""
    data: dict[str, Any] = {"type": "error", "error": {"type": error_type, "message": message}}
    if request_id is not None:
        data["request_id"] = request_id
    return "error", data
