"""A streamed Messages reply read from its bytes: server-sent events to the message they assemble (pure: no I/O).

The Anthropic provider sends through the official SDK over HTTP and reads the
raw event stream (``with_streaming_response``) instead of the SDK's
``MessageStream``: that helper builds a pydantic model for every event and
a second one for each derived event (about 30 a reply), which over thousands of
nodes cost more CPU than the simulator's whole answer (``scripts/scale.py``).

:class:`SseDecoder` frames events as the SDK's own ``SSEDecoder`` does (any of
``\\n``, ``\\r\\n``, ``\\r`` ends a line; a blank line ends an event; ``:``
lines are comments; an event not ended by a blank line is dropped).
:class:`ReplyAssembler` folds the decoded events into the message's plain
JSON the way the SDK's accumulator folds them into its snapshot: the kinds the
API streams today are folded here; any other event or delta kind (a citation,
a fallback block, a container, ...) hands every event, in order, to the SDK's
own accumulator, so a kind added to the API is read exactly as the SDK reads it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import attrs
import httpx2
import pydantic
from jiter import from_json

_FAST_EVENTS = frozenset({"message_start", "content_block_start", "content_block_delta", "content_block_stop"})
_FAST_DELTAS = frozenset({"text_delta", "thinking_delta", "signature_delta", "input_json_delta", "compaction_delta"})
_FAST_BLOCKS = frozenset({"text", "thinking", "redacted_thinking", "tool_use", "compaction"})
_DELTA_KEYS = frozenset({"stop_reason", "stop_sequence", "stop_details"})
_MESSAGE_DELTA_KEYS = frozenset({"type", "delta", "usage", "context_management"})
_USAGE_KEYS = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "server_tool_use",
    "output_tokens_details",
)
_BETA_USAGE_KEYS = (*_USAGE_KEYS, "iterations")
_KNOWN_USAGE = frozenset({"output_tokens", *_BETA_USAGE_KEYS})


MAX_EVENT_BYTES = 64 * 1024 * 1024
"""The most one event (or one line of it) may hold: past it the stream is refused as malformed, not buffered on."""


class StreamOrderError(ValueError):
    """The events are not a message: one before ``message_start``, or a delta for a block never started."""


@attrs.define(eq=False)
class SseDecoder:
    """Server-sent events from bytes fed in pieces: ``feed`` returns the (event name, data) of each event ended."""

    _pending: bytes = b""
    _event: str | None = None
    _data: list[str] = attrs.field(factory=list)
    _fields: bool = False
    _size: int = 0

    def feed(self, chunk: bytes) -> list[tuple[str | None, str]]:
        text = self._pending + chunk
        lines = text.splitlines(keepends=True)
        if lines and (not lines[-1].endswith((b"\n", b"\r")) or lines[-1].endswith(b"\r")):
            self._pending = lines.pop()  # not ended yet (a final "\r" may be the first half of "\r\n")
        else:
            self._pending = b""
        if len(self._pending) > MAX_EVENT_BYTES:
            raise ValueError(f"a server-sent event line runs past {MAX_EVENT_BYTES:,} bytes")
        return [event for line in lines if (event := self._line(line.rstrip(b"\r\n"))) is not None]

    def end(self) -> list[tuple[str | None, str]]:
        """The events the stream's last bytes end (a final line ended by ``\\r``)."""
        rest, self._pending = self._pending, b""
        return [event for line in rest.splitlines() if (event := self._line(line)) is not None]

    def _line(self, raw: bytes) -> tuple[str | None, str] | None:
        if not raw:
            if not self._fields:
                return None
            event = (self._event, "\n".join(self._data))
            self._event, self._data, self._fields, self._size = None, [], False, 0
            return event
        line = raw.decode("utf-8")
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self._event, self._fields = value or None, True  # an empty name is no name, as in the SDK
        elif name == "data":
            self._size += len(value)
            if self._size > MAX_EVENT_BYTES:
                raise ValueError(f"a server-sent event's data runs past {MAX_EVENT_BYTES:,} bytes")
            self._data.append(value)
            self._fields = True
        return None  # id and retry: the Messages API sends neither, and the SDK's stream ignores both


class ErrorEvent(Exception):
    """The stream's ``error`` event: ``body`` its JSON data (the raw text when it is not JSON), ``message``
    what the SDK's stream names its error by (the data, or its HTTP status when the data is empty)."""

    def __init__(self, body: object, message: str) -> None:
        super().__init__(message)
        self.body = body
        self.message = message


def stream_events(decoded: list[tuple[str | None, str]]) -> Iterator[dict[str, Any]]:
    """The JSON data of the events the SDK's stream yields: ``ping``, unnamed and empty events are skipped;
    an ``error`` event raises :class:`ErrorEvent`."""
    for name, data in decoded:
        if name == "error":
            try:
                body: object = json.loads(data)
            except ValueError:
                raise ErrorEvent(data, data or "Error code: 200") from None  # a stream's status is 200
            raise ErrorEvent(body, f"{body}")
        if name is None or name == "ping" or not data:
            continue
        value = json.loads(data)
        if not isinstance(value, dict):
            raise ValueError(f"event {name!r}: data {data[:200]!r} is not a JSON object")
        yield value


@attrs.define(eq=False)
class ReplyAssembler:
    """Folds a stream's events (their JSON data, in order) into the message; ``beta``: the beta endpoint's."""

    beta: bool = False
    events: list[dict[str, Any]] = attrs.field(factory=list)
    message: dict[str, Any] | None = None
    stopped: bool = False
    _json: dict[int, bytes] = attrs.field(factory=dict)
    _sdk_only: bool = False

    def add(self, event: dict[str, Any]) -> tuple[str, str] | None:
        """Fold ``event``; returns ("text" | "thinking", piece) for a delta that is progress (also once a kind
        not folded here has handed the message to the SDK's accumulator: the pieces still stream)."""
        self.events.append(event)
        kind = event.get("type")
        if kind == "message_stop":
            self.stopped = True
        if self.message is None and kind != "message_start":
            raise StreamOrderError(f"unexpected event order: {kind!r} before message_start")
        if kind in _FAST_EVENTS:
            return self._block_event(kind, event)
        if kind == "message_delta" and self._plain_delta(event):
            self._message_delta(event)
        elif kind != "message_stop":
            self._sdk_only = True  # a kind folded by the SDK's accumulator alone
        return None

    def _block_event(self, kind: str, event: dict[str, Any]) -> tuple[str, str] | None:
        message = self.message
        if kind == "message_start":
            self.message = dict(event["message"])
            self.message["content"] = list(self.message.get("content") or ())
            return None
        assert message is not None
        content = message["content"]
        if kind == "content_block_start":
            block = dict(event["content_block"])
            if block.get("type") not in _FAST_BLOCKS:
                self._sdk_only = True
            content.append(block)
            return None
        if kind == "content_block_stop":
            return None
        return self._delta(content, event["index"], event["delta"])

    def _delta(self, content: list[dict[str, Any]], index: int, delta: dict[str, Any]) -> tuple[str, str] | None:
        kind = delta.get("type")
        if kind not in _FAST_DELTAS:
            self._sdk_only = True
            return None
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(content):
            raise StreamOrderError(f"content_block_delta: index {index!r} names no started block")
        block = content[index]
        block_type = block.get("type")
        if kind == "text_delta" and block_type == "text":
            block["text"] = block.get("text", "") + delta["text"]
            return ("text", delta["text"])
        if kind == "thinking_delta" and block_type == "thinking":
            block["thinking"] = block.get("thinking", "") + delta["thinking"]
            return ("thinking", delta["thinking"])
        if kind == "signature_delta" and block_type == "thinking":
            block["signature"] = delta["signature"]
        elif kind == "input_json_delta" and block_type == "tool_use":
            self._json[index] = self._json.get(index, b"") + delta["partial_json"].encode()
        elif kind == "compaction_delta" and block_type == "compaction":
            block["content"] = delta.get("content")
            block["encrypted_content"] = delta.get("encrypted_content")
        return None

    def _plain_delta(self, event: dict[str, Any]) -> bool:
        """A ``message_delta`` of only the fields folded here (its context management on the beta endpoint)."""
        delta, usage = event.get("delta"), event.get("usage")
        if not isinstance(delta, dict) or not isinstance(usage, dict) or set(event) - _MESSAGE_DELTA_KEYS:
            return False
        if "context_management" in event and not self.beta:
            return False
        return (
            not (set(delta) - _DELTA_KEYS)
            and not (set(usage) - _KNOWN_USAGE)
            and ("iterations" not in usage or self.beta)
        )

    def _message_delta(self, event: dict[str, Any]) -> None:
        message = self.message
        assert message is not None
        delta, usage = event["delta"], event["usage"]
        for key in _DELTA_KEYS:
            message[key] = delta.get(key)
        total = message["usage"] = dict(message.get("usage") or {})
        total["output_tokens"] = usage["output_tokens"]
        for key in _BETA_USAGE_KEYS if self.beta else _USAGE_KEYS:
            if usage.get(key) is not None:
                total[key] = usage[key]
        if self.beta and event.get("context_management") is not None:
            message["context_management"] = event["context_management"]

    def final(self) -> Any:
        """The SDK's message model of what was folded (``Message`` or ``BetaMessage``): validated, or where a field
        does not match the SDK's types, constructed without checks as the SDK's stream helper does."""
        if self._sdk_only:
            return self._sdk_final()
        if self.message is None:
            raise StreamOrderError("the stream carries no message_start")
        content = self.message["content"]
        for index, buffer in self._json.items():
            if buffer:
                content[index]["input"] = from_json(buffer, partial_mode=True)
        model = _message_type(self.beta)
        try:  # pydantic's own validation (compiled) builds the same model as the SDK's construct, 5x faster
            return model.model_validate(self.message)
        except pydantic.ValidationError:
            return model.construct(**self.message)  # the SDK's lenient construct, as its stream helper builds it

    def _sdk_final(self) -> Any:
        if self.beta:
            from anthropic.lib.streaming._beta_messages import accumulate_event as beta_accumulate

            snapshot: Any = None
            buffers: dict[int, bytes] = {}
            for event in self.events:
                snapshot = beta_accumulate(
                    event=event,  # type: ignore[arg-type]
                    current_snapshot=snapshot,
                    request_headers=httpx2.Headers(),
                    json_bufs=buffers,
                )
            return snapshot
        from anthropic.lib.streaming._messages import accumulate_event

        snapshot = None
        buffers = {}
        for event in self.events:
            snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=buffers)  # type: ignore[arg-type]
        return snapshot


def _message_type(beta: bool) -> Any:
    if beta:
        from anthropic.types.beta import BetaMessage

        return BetaMessage
    from anthropic.types import Message

    return Message
