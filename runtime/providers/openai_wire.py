"""A compiled request on the chat-completions wire, and a completion read back (pure).

foldline compiles every request once, in the Messages shape it measures
(:mod:`runtime.request.compiler`); :func:`chat_payload` renders that request for a
chat-completions server without deciding anything again:

- ``system`` leads as a ``system`` message; ``tools`` become ``function``
  tools (their JSON schema as ``parameters``);
- an assistant message's text blocks are its ``content``, its ``tool_use``
  blocks its ``tool_calls`` (arguments as a JSON string);
- a user message's ``tool_result`` blocks become ``tool`` messages, in call
  order, right after the assistant message that made the calls (the pairing
  the compiler kept); its other blocks (notes, instructions, images as data
  URLs) follow as one ``user`` message; a result's images, which a ``tool``
  message cannot carry, follow in a ``user`` message naming the call;
  an error result's text is prefixed ``Error:``;
- ``tool_choice`` ``auto``/``any``/``tool``/``none`` become ``auto``,
  ``required``, the named function and ``none``; ``max_tokens`` goes as
  ``max_completion_tokens``; a typed result's ``output_config.format`` (a
  JSON schema) goes as a strict ``json_schema`` ``response_format``.

Reasoning comes back per :class:`ChatDialect` (a per-model setting, never
guessed from a model's name or a server's address): ``reasoning_content`` or
``reasoning`` as text, ``reasoning_details`` as the whole array, or not at
all. A reply keeps it as a ``thinking`` block whose ``signature`` names its
origin (:func:`reasoning_block`): a digest of the server's address and the
model, the field, and for ``reasoning_details`` the array itself. The
compiler keeps a reply's thinking only while the conversation before it is
unchanged (:mod:`runtime.values.thinking`: a reply made before a fold goes back
without it), and :func:`chat_payload` gives a kept block back only to its
origin, in its own field; any other thinking block (another server's,
another model's, Anthropic's) is left out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from runtime.contract.provider import ProviderError
from runtime.request.compiler import Request
from runtime.values.canonical import canonical_json, sha256_hex
from runtime.values.usage import Usage

REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_details", "none")
CACHE_KEY_MODES = ("session", "header", "off")
CACHE_CONTROL_ASKS = ("ephemeral", "1h")
SESSION_HEADER = "X-Session-Id"
ORIGIN_TAG = "foldline-chat-reasoning/1:"
"""How the ``signature`` of a thinking block made from a chat-completions reply begins."""
STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}
ReasoningField = Literal["reasoning_content", "reasoning", "reasoning_details", "none"]


@attrs.frozen(kw_only=True)
class ChatDialect:
    """How one model on one server speaks chat completions (the model's settings).

    - ``reasoning``: the field a reply's reasoning comes in and goes back in
      (``none``: it is not kept or given back).
    - ``cache_key``: the session key goes as ``prompt_cache_key`` and the
      ``X-Session-Id`` header (``session``), as the header only
      (``header``, for servers that refuse unknown fields) or not at all.
    - ``cache_control``: a top-level ``cache_control`` to send (``ephemeral``
      or ``1h``; OpenRouter's Claude routes cache only when asked), or None.
    - ``reasoning_effort``: sent as such when set.
    """

    reasoning: ReasoningField = "none"
    cache_key: Literal["session", "header", "off"] = "session"
    cache_control: Literal["ephemeral", "1h"] | None = None
    reasoning_effort: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.reasoning not in REASONING_FIELDS:
            raise ValueError(f"ChatDialect.reasoning: {self.reasoning!r} is not one of {', '.join(REASONING_FIELDS)}")
        if self.cache_key not in CACHE_KEY_MODES:
            raise ValueError(f"ChatDialect.cache_key: {self.cache_key!r} is not one of {', '.join(CACHE_KEY_MODES)}")
        if self.cache_control is not None and self.cache_control not in CACHE_CONTROL_ASKS:
            raise ValueError(f"ChatDialect.cache_control: {self.cache_control!r} is not ephemeral, 1h or unset")


def origin_of(base_url: str, model: str) -> str:
    """Where a reply's reasoning came from: a digest of the server's address and the model."""
    return sha256_hex(f"chat-origin\x00{base_url}\x00{model}")[:32]


def session_key(request: Request) -> str | None:
    """The request's session cache key: a digest of its conversation's first message id, or None.

    The first message of a conversation is its root branch's first turn;
    forks start from a copy of the view and carry it too, and a fold never
    replaces it, so every request of one root branch and its forks names the
    same session. The digest says nothing else.
    """
    for message in request.messages:
        for block in message.blocks:
            if block.source_id is not None:
                return sha256_hex(f"foldline-session\x00{block.source_id}")[:48]
    return None


def reasoning_block(field: str, origin: str, text: str, details: Sequence[Any] | None) -> dict[str, Any]:
    """A reply's reasoning as the ``thinking`` block foldline keeps (``details`` kept whole)."""
    tag = {"field": field, "origin": origin}
    if details is not None:
        tag["details"] = list(details)  # type: ignore[assignment]
    return {"type": "thinking", "thinking": text, "signature": ORIGIN_TAG + canonical_json(tag)}


def _given_back(block: Mapping[str, Any], field: str, origin: str) -> dict[str, Any] | None:
    """The tag of a kept reasoning block when it goes back to this origin in this field, else None."""
    signature = block.get("signature")
    if block.get("type") != "thinking" or not isinstance(signature, str) or not signature.startswith(ORIGIN_TAG):
        return None
    tag = json.loads(signature[len(ORIGIN_TAG) :])
    if not isinstance(tag, dict) or tag.get("origin") != origin or tag.get("field") != field:
        return None
    return tag


def _image_part(block: Mapping[str, Any]) -> dict[str, Any]:
    source = block.get("source") or {}
    url = f"data:{source.get('media_type')};base64,{source.get('data', '')}"
    return {"type": "image_url", "image_url": {"url": url}}


def _user_content(blocks: Sequence[Mapping[str, Any]]) -> str | list[dict[str, Any]]:
    """One text block as a string; several blocks as parts, so each keeps its bounds (a fold appends a note)."""
    if len(blocks) == 1 and blocks[0].get("type") == "text":
        return str(blocks[0].get("text", ""))
    return [{"type": "text", "text": b["text"]} if b.get("type") == "text" else _image_part(b) for b in blocks]


def _result_messages(block: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = block.get("content")
    images: list[Mapping[str, Any]] = []
    if isinstance(content, list):
        text = "".join(str(p.get("text", "")) for p in content if p.get("type") == "text")
        images = [p for p in content if p.get("type") == "image"]
    else:
        text = str(content or "")
    if block.get("is_error"):
        text = f"Error: {text}"
    out: list[dict[str, Any]] = [{"role": "tool", "tool_call_id": block["tool_use_id"], "content": text}]
    if images:
        head = {"type": "text", "text": f"(the images of tool call {block['tool_use_id']})"}
        out.append({"role": "user", "content": [head, *(_image_part(i) for i in images)]})
    return out


def _assistant(blocks: Sequence[Mapping[str, Any]], dialect: ChatDialect, origin: str) -> dict[str, Any]:
    texts = [str(b.get("text", "")) for b in blocks if b.get("type") == "text"]
    calls = [
        {
            "id": b["id"],
            "type": "function",
            "function": {"name": b["name"], "arguments": canonical_json(b.get("input") or {})},
        }
        for b in blocks
        if b.get("type") == "tool_use"
    ]
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    if dialect.reasoning != "none":
        tags = [(b, t) for b in blocks if (t := _given_back(b, dialect.reasoning, origin)) is not None]
        if tags and dialect.reasoning == "reasoning_details":
            message["reasoning_details"] = [item for _, t in tags for item in t.get("details") or []]
        elif tags:
            message[dialect.reasoning] = "".join(str(b.get("thinking", "")) for b, _ in tags)
    return message


def chat_messages(payload: Mapping[str, Any], dialect: ChatDialect, origin: str) -> list[dict[str, Any]]:
    """A Messages payload's conversation as chat messages (see the module docstring)."""
    out: list[dict[str, Any]] = []
    system = payload.get("system")
    if system is not None:
        text = system if isinstance(system, str) else "".join(str(b.get("text", "")) for b in system)
        out.append({"role": "system", "content": text})
    for message in payload.get("messages") or []:
        blocks = [_unmarked(b) for b in message["content"]]
        if message["role"] == "assistant":
            out.append(_assistant(blocks, dialect, origin))
            continue
        rest = [b for b in blocks if b.get("type") != "tool_result"]
        for block in blocks:
            if block.get("type") == "tool_result":
                out.extend(_result_messages(block))
        if rest:
            out.append({"role": "user", "content": _user_content(rest)})
    return out


def _unmarked(block: Mapping[str, Any]) -> dict[str, Any]:
    """A block without its ``cache_control`` (chat completions caches by prefix, not by marks)."""
    return {key: value for key, value in block.items() if key != "cache_control"}


def _tool_choice(choice: Mapping[str, Any] | None) -> Any:
    if choice is None:
        return None
    kind = choice.get("type")
    if kind == "tool":
        return {"type": "function", "function": {"name": choice["name"]}}
    return {"auto": "auto", "any": "required", "none": "none"}.get(str(kind), "auto")


def chat_body(payload: Mapping[str, Any], dialect: ChatDialect, origin: str) -> dict[str, Any]:
    """The chat-completions body of a compiled request's Messages payload (no stream options, no session key).

    The one rendering of both engines: in process from the compiled request
    (:func:`chat_payload`), on Temporal from the payload an activity is given.
    A payload with Anthropic's server-side ``context_management`` is refused: chat completions has none.
    """
    if payload.get("context_management") is not None:
        raise ProviderError(
            "profile key server_context_edits: Anthropic's server-side context management is not available on a "
            "chat-completions provider; use an anthropic provider or remove the key",
            error_type="invalid_request_error",
        )
    body: dict[str, Any] = {
        "model": payload["model"],
        "messages": chat_messages(payload, dialect, origin),
        "max_completion_tokens": payload["max_tokens"],
    }
    if payload.get("tools"):
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool["name"],
                    "description": tool.get("description", ""),
                    "parameters": tool["input_schema"],
                },
            }
            for tool in payload["tools"]
        ]
    choice = _tool_choice(payload.get("tool_choice"))
    if choice is not None:
        body["tool_choice"] = choice
    if dialect.reasoning_effort is not None:
        body["reasoning_effort"] = dialect.reasoning_effort
    response_format = _response_format(payload.get("output_config"))
    if response_format is not None:
        body["response_format"] = response_format
    return body


def _response_format(output_config: Any) -> dict[str, Any] | None:
    """A typed result's ``output_config.format`` (a JSON schema) as ``response_format`` (strict JSON schema)."""
    if not isinstance(output_config, Mapping) or not isinstance(output_config.get("format"), Mapping):
        return None
    schema = output_config["format"].get("schema")
    title = schema.get("title") if isinstance(schema, Mapping) else None
    name = title if isinstance(title, str) and re.fullmatch(r"[A-Za-z0-9_-]{1,64}", title) else "result"
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def chat_payload(request: Request, dialect: ChatDialect, origin: str) -> dict[str, Any]:
    """The chat-completions body of a compiled request (:func:`chat_body` of its payload)."""
    return chat_body(request.payload(), dialect, origin)


def payload_session_key(cache_key: str) -> str:
    """The session key of a request sent by an engine that names its session itself (the Temporal workflow).

    The workflow passes :func:`session_key` of its request; a digest of that
    digest would say no more, so it goes as given, bounded and checked.
    """
    if not cache_key or len(cache_key) > 256 or not cache_key.isascii() or not cache_key.isprintable():
        raise ValueError(f"session key {cache_key[:40]!r}: expected 1 to 256 printable ASCII characters")
    return cache_key


def chat_usage(usage: Mapping[str, Any]) -> Usage:
    """foldline's usage from a chat completion's: fresh, cached, written where reported, output, reasoning.

    ``prompt_tokens`` counts the whole prompt, ``cached_tokens`` (and
    ``cache_write_tokens``, where a server reports them) the part of it read
    from (written to) the cache; the rest is fresh input.
    """
    details = usage.get("prompt_tokens_details") or {}
    output_details = usage.get("completion_tokens_details") or {}
    prompt = int(usage.get("prompt_tokens") or 0)
    cached = int(details.get("cached_tokens") or 0)
    written = int(details.get("cache_write_tokens") or 0)
    return Usage(
        input_tokens=max(prompt - cached - written, 0),
        cache_read_input_tokens=cached,
        cache_write_5m_tokens=written,
        output_tokens=int(usage.get("completion_tokens") or 0),
        reasoning_tokens=int(output_details.get("reasoning_tokens") or 0),
    )
