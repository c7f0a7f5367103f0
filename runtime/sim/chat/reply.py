"""A simulated reply as a chat completion, whole or as ``chat.completion.chunk`` events (pure).

The reply's blocks (Messages shape, as the policies and the thinking signer
make them) become one assistant message: text blocks its ``content``,
``tool_use`` blocks its ``tool_calls`` (arguments as a JSON string), and a
``thinking`` block its reasoning in the server's dialect
(:data:`REASONING_DIALECTS`): ``reasoning_content`` (DeepSeek, vLLM, Qwen's
templates), ``reasoning`` (text), ``reasoning_details`` (OpenRouter's array,
sent with ``reasoning`` beside it; each item carries the simulator's
signature, checked when it is given back) or ``none`` (OpenAI's chat
completions return no reasoning, only its count). Usage reports
``prompt_tokens`` (cached included), ``prompt_tokens_details.cached_tokens``,
``completion_tokens`` and ``completion_tokens_details.reasoning_tokens``.

Streaming follows the API: a first chunk with the role, reasoning and
content deltas, each tool call opened with its id and name and then its
arguments in pieces, a chunk with ``finish_reason``, with
``stream_options.include_usage`` one more chunk with empty ``choices`` and
the usage (every other chunk carries ``"usage": null``), then ``data: [DONE]``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from runtime.sim.chat.wire import SIGNED_FORMAT
from runtime.sim.streaming import chunks
from runtime.values.canonical import canonical_json

REASONING_DIALECTS = ("reasoning_content", "reasoning", "reasoning_details", "none")
FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
    "pause_turn": "stop",
}


def reply_message(content: Sequence[Mapping[str, Any]], dialect: str) -> dict[str, Any]:
    """The assistant message of a chat completion for the reply's blocks."""
    texts = [str(b.get("text", "")) for b in content if b.get("type") == "text"]
    thinking = [b for b in content if b.get("type") == "thinking"]
    calls = [
        {
            "id": b["id"],
            "type": "function",
            "function": {"name": b["name"], "arguments": canonical_json(b.get("input") or {})},
        }
        for b in content
        if b.get("type") == "tool_use"
    ]
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    if thinking and dialect != "none":
        text = "".join(str(b.get("thinking", "")) for b in thinking)
        if dialect == "reasoning_details":
            message["reasoning"] = text
            message["reasoning_details"] = [
                {
                    "type": "reasoning.text",
                    "text": b.get("thinking", ""),
                    "signature": b.get("signature", ""),
                    "format": SIGNED_FORMAT,
                    "index": i,
                }
                for i, b in enumerate(thinking)
            ]
        else:
            message[dialect] = text
    return message


def usage_body(prompt: int, cached: int, completion: int, reasoning: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


def completion_body(
    completion_id: str, model: str, created: int, message: Mapping[str, Any], finish: str, usage: Mapping[str, Any]
) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": dict(message), "finish_reason": finish, "logprobs": None}],
        "usage": dict(usage),
    }


def encode_data(data: Mapping[str, Any] | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"data: {text}\n\n".encode()


def _deltas(message: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    yield {"role": "assistant", "content": ""}
    for field in ("reasoning_content", "reasoning"):
        for piece in chunks(str(message.get(field) or "")):
            yield {field: piece}
    if message.get("reasoning_details"):
        yield {"reasoning_details": message["reasoning_details"]}
    for piece in chunks(str(message.get("content") or "")):
        yield {"content": piece}
    for index, call in enumerate(message.get("tool_calls") or []):
        name = call["function"]["name"]
        opened = {"index": index, "id": call["id"], "type": "function", "function": {"name": name, "arguments": ""}}
        yield {"tool_calls": [opened]}
        for piece in chunks(call["function"]["arguments"]):
            yield {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}


def stream_chunks(
    body: Mapping[str, Any], *, include_usage: bool, broken: Mapping[str, Any] | None = None
) -> Iterator[bytes]:
    """The completion ``body`` as server-sent ``data:`` lines; ``broken`` (an error) cuts it after the first delta."""
    choice = body["choices"][0]
    base = {"id": body["id"], "object": "chat.completion.chunk", "created": body["created"], "model": body["model"]}
    extra: dict[str, Any] = {"usage": None} if include_usage else {}
    for n, delta in enumerate(_deltas(choice["message"])):
        yield encode_data({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}], **extra})
        if broken is not None and n >= 1:
            yield encode_data({"error": dict(broken)})
            return
    finish = {"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}
    yield encode_data({**base, "choices": [finish], **extra})
    if include_usage:
        yield encode_data({**base, "choices": [], "usage": body["usage"]})
    yield encode_data("[DONE]")
