"""A chat-completions request body: checked with bounds, and read as a Messages payload (pure).

:func:`read_chat_request` checks a decoded ``POST /v1/chat/completions`` body
(every error names its key path, the value and what was expected, answered
as OpenAI's 400 ``invalid_request_error``) and returns a :class:`ChatRequest`:

- ``payload``: the request as the Messages API would carry it, which is what
  the simulator's policies (the default model, scripts) answer: system and
  developer messages become ``system``, a ``tool`` message a ``tool_result``
  block of the user message that follows the call (consecutive tool and user
  messages are one user message), an assistant's ``tool_calls`` its
  ``tool_use`` blocks, ``tools`` their ``input_schema``, ``tool_choice`` and
  ``max_completion_tokens`` (or ``max_tokens``) theirs, ``response_format``
  its ``output_config.format`` (``json_object``: any JSON object); a given-back
  ``reasoning_details`` item the simulator signed becomes the signed
  ``thinking`` block it was made from, so the Messages face's signature check
  applies (:mod:`runtime.sim.thinking`);
- ``segments``: the prompt as the cache sees it, the tools first and then one
  segment per message, each the canonical JSON the token count and the
  prefix digests read (:mod:`runtime.sim.chat.cache`); ``messages`` and
  ``tools_json`` keep them as sent, for the exact count of a model OpenAI
  tokenizes with o200k_base (:mod:`runtime.sim.chat.tokens`).

The pairing rule is the API's: an assistant message with ``tool_calls`` must
be followed by one ``tool`` message per call before any other message, and a
``tool`` message must answer such a call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from runtime.sim.chat.fields import STANDARD_FIELDS, FieldError, check_standard_fields
from runtime.sim.errors import SimAPIError
from runtime.values.canonical import canonical_json
from runtime.values.chat_images import chat_image_tokens
from runtime.values.images import ImageError, decode_base64_image, inspect_image
from runtime.values.json_schema import SchemaError, check_schema

MAX_MESSAGES = 100_000
MAX_TOOLS = 128
MAX_NAME_CHARS = 256
MAX_CACHE_KEY_CHARS = 1_024
MAX_OUTPUT_TOKENS = 1_000_000
ROLES = ("system", "developer", "user", "assistant", "tool")
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
SIGNED_FORMAT = "foldline-sim-v1"
"""The ``format`` of a ``reasoning_details`` item the simulator signed."""
KNOWN_FIELDS = (
    frozenset(
        {
            "model",
            "messages",
            "tools",
            "tool_choice",
            "max_tokens",
            "max_completion_tokens",
            "stream",
            "stream_options",
            "prompt_cache_key",
            "reasoning_effort",
            "cache_control",
            "stop",
            "temperature",
            "parallel_tool_calls",
            "user",
            "response_format",
        }
    )
    | STANDARD_FIELDS
)
"""The request fields the simulated server reads; any other is refused, as OpenAI refuses unknown arguments."""
DEFAULT_MAX_TOKENS = 4_096


class ChatAPIError(SimAPIError):
    """An error of the chat face: a 400 ``invalid_request_error`` with the field it names (``param``) and a code."""

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(400, "invalid_request_error", message)
        self.param = param
        self.code = code


def chat_error(message: str, *, param: str | None = None, code: str | None = None) -> ChatAPIError:
    """An error of the chat face; ``param`` names the field."""
    return ChatAPIError(message, param=param, code=code)


@attrs.frozen
class ChatRequest:
    """A checked chat request: the Messages payload its answer comes from, and its prompt segments."""

    model: str
    payload: dict[str, Any]
    segments: tuple[str, ...]
    counted: tuple[tuple[str, int], ...]
    """Per segment: the text its tokens are counted from (image data left out) and its images' tokens."""
    stream: bool
    include_usage: bool
    cache_key: str | None
    reasoning: bool
    """Whether the request asks for reasoning (``reasoning_effort`` set and not ``none``)."""
    messages: tuple[Any, ...] = ()
    """The messages as sent (decoded), for a count of their values (:mod:`runtime.sim.chat.tokens`)."""
    tools_json: str | None = None
    """The tools as sent, as canonical JSON (None: no tools)."""


def _fail(where: str, value: Any, expected: str) -> ChatAPIError:
    shown = json.dumps(value)[:80] if not isinstance(value, (dict, list)) else type(value).__name__
    return chat_error(f"{where}: {shown} is not {expected}", param=where)


def _text(value: Any, where: str, *, limit: int | None = None, empty: bool = True) -> str:
    if not isinstance(value, str) or (not empty and not value) or (limit is not None and len(value) > limit):
        bound = f" of at most {limit} characters" if limit is not None else ""
        raise _fail(where, value, f"a {'' if empty else 'non-empty '}string{bound}")
    return value


def _int(value: Any, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _fail(where, value, f"an integer from {low} to {high}")
    return value


def _array(value: Any, where: str, limit: int, *, empty: bool = True) -> list[Any]:
    if not isinstance(value, list) or len(value) > limit or (not empty and not value):
        raise _fail(where, value, f"an array of {'1' if not empty else '0'} to {limit} items")
    return value


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(where, value, "an object")
    return value


def _parts(content: Any, where: str, *, images: bool) -> list[dict[str, Any]]:
    """A message's content as Messages blocks (text, and images where allowed)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    out: list[dict[str, Any]] = []
    for i, part in enumerate(_array(content, where, MAX_MESSAGES)):
        at = f"{where}[{i}]"
        part = _object(part, at)
        kind = part.get("type")
        if kind == "text":
            out.append({"type": "text", "text": _text(part.get("text"), f"{at}.text")})
        elif kind == "image_url" and images:
            url = _text(_object(part.get("image_url"), f"{at}.image_url").get("url"), f"{at}.image_url.url")
            out.append(_image_block(url, f"{at}.image_url.url"))
        else:
            allowed = '"text" or "image_url"' if images else '"text"'
            raise _fail(f"{at}.type", kind, allowed)
    return out


def _image_block(url: str, where: str) -> dict[str, Any]:
    head, sep, data = url.partition(",")
    if not (url.startswith("data:image/") and sep and head.endswith(";base64")):
        raise _fail(where, url[:40], "a data:image/...;base64, URL (the simulator reads no remote images)")
    media = head[len("data:") : -len(";base64")]
    return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}


def _tool_call(call: Any, where: str) -> dict[str, Any]:
    call = _object(call, where)
    call_id = _text(call.get("id"), f"{where}.id", limit=MAX_NAME_CHARS, empty=False)
    function = _object(call.get("function"), f"{where}.function")
    name = _text(function.get("name"), f"{where}.function.name", limit=MAX_NAME_CHARS, empty=False)
    arguments = _text(function.get("arguments"), f"{where}.function.arguments")
    try:
        parsed = json.loads(arguments) if arguments else {}
    except ValueError:
        raise _fail(f"{where}.function.arguments", arguments[:40], "a JSON object in a string") from None
    if not isinstance(parsed, dict):
        raise _fail(f"{where}.function.arguments", arguments[:40], "a JSON object in a string")
    return {"type": "tool_use", "id": call_id, "name": name, "input": parsed}


def _signed_thinking(details: Any, where: str) -> list[dict[str, Any]]:
    """Given-back ``reasoning_details`` items the simulator signed, as the thinking blocks they came from."""
    out: list[dict[str, Any]] = []
    for i, item in enumerate(_array(details, where, 1_000)):
        item = _object(item, f"{where}[{i}]")
        if item.get("format") == SIGNED_FORMAT:
            text = _text(item.get("text"), f"{where}[{i}].text")
            signature = _text(item.get("signature"), f"{where}[{i}].signature")
            out.append({"type": "thinking", "thinking": text, "signature": signature})
    return out


def _assistant(message: Mapping[str, Any], where: str) -> tuple[list[dict[str, Any]], list[str]]:
    blocks: list[dict[str, Any]] = []
    if message.get("reasoning_details") is not None:
        blocks.extend(_signed_thinking(message["reasoning_details"], f"{where}.reasoning_details"))
    for field in ("reasoning_content", "reasoning"):
        if message.get(field) is not None:
            _text(message[field], f"{where}.{field}")
    content = message.get("content")
    if content is not None:
        blocks.extend(_parts(content, f"{where}.content", images=False))
    calls = [
        _tool_call(c, f"{where}.tool_calls[{i}]")
        for i, c in enumerate(_array(message.get("tool_calls") or [], f"{where}.tool_calls", 1_000))
    ]
    if not blocks and not calls:
        raise chat_error(f"{where}: an assistant message needs content or tool_calls", param=where)
    return blocks + calls, [call["id"] for call in calls]


def _messages(raw: list[Any]) -> tuple[str | None, list[dict[str, Any]]]:
    """The system text and the Messages-shaped conversation (pairing checked)."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    pending: list[str] = []
    for i, message in enumerate(raw):
        where = f"messages[{i}]"
        message = _object(message, where)
        role = message.get("role")
        if role not in ROLES:
            raise _fail(f"{where}.role", role, "one of " + ", ".join(ROLES))
        if pending and role != "tool":
            raise chat_error(
                f"{where}: an assistant message with 'tool_calls' must be followed by tool messages responding "
                f"to each 'tool_call_id'; missing: {', '.join(pending)}",
                param=where,
            )
        if role in ("system", "developer"):
            system.extend(b["text"] for b in _parts(message.get("content"), f"{where}.content", images=False))
            continue
        if role == "tool":
            call_id = _text(message.get("tool_call_id"), f"{where}.tool_call_id", limit=MAX_NAME_CHARS)
            if call_id not in pending:
                raise chat_error(
                    f"{where}.tool_call_id: {call_id!r} does not answer a tool call of the assistant message before it",
                    param=f"{where}.tool_call_id",
                )
            pending.remove(call_id)
            text = "".join(b["text"] for b in _parts(message.get("content"), f"{where}.content", images=False))
            _append(out, "user", [{"type": "tool_result", "tool_use_id": call_id, "content": text}])
        elif role == "user":
            _append(out, "user", _parts(message.get("content"), f"{where}.content", images=True))
        else:
            blocks, pending = _assistant(message, where)
            out.append({"role": "assistant", "content": blocks})
    if pending:
        raise chat_error(f"messages: the tool calls {', '.join(pending)} have no tool message", param="messages")
    return ("\n\n".join(system) if system else None), out


def _append(out: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    if out and out[-1]["role"] == role:
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": role, "content": blocks})


def _tools(raw: list[Any]) -> list[dict[str, Any]]:
    out = []
    for i, tool in enumerate(raw):
        where = f"tools[{i}]"
        tool = _object(tool, where)
        if tool.get("type") != "function":
            raise _fail(f"{where}.type", tool.get("type"), '"function"')
        function = _object(tool.get("function"), f"{where}.function")
        name = _text(function.get("name"), f"{where}.function.name", limit=64, empty=False)
        description = _text(function.get("description", ""), f"{where}.function.description")
        parameters = _object(function.get("parameters", {"type": "object", "properties": {}}), f"{where}.parameters")
        out.append({"name": name, "description": description, "input_schema": dict(parameters)})
    return out


def _tool_choice(choice: Any) -> dict[str, Any] | None:
    if choice is None:
        return None
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    function = _object(_object(choice, "tool_choice").get("function"), "tool_choice.function")
    return {"type": "tool", "name": _text(function.get("name"), "tool_choice.function.name", empty=False)}


def _segments(tools: Sequence[Any], raw_messages: Sequence[Any]) -> tuple[str, ...]:
    """The prompt as the cache sees it: the tools, then each message as sent (canonical JSON)."""
    head = canonical_json({"tools": list(tools)}) if tools else None
    body = tuple(canonical_json(message) for message in raw_messages)
    return (head, *body) if head is not None else body


def _counted(message: Any) -> tuple[str, int]:
    """A message's text to count (each image's data URL left empty) and its images' tokens (the chat scaling)."""
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, list) or not any(_is_image(part) for part in content):
        return canonical_json(message), 0
    parts, tokens = [], 0
    for part in content:
        if _is_image(part):
            tokens += _image_tokens(part["image_url"]["url"])
            part = {**part, "image_url": {**part["image_url"], "url": ""}}
        parts.append(part)
    return canonical_json({**message, "content": parts}), tokens


def _is_image(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") == "image_url"


def _image_tokens(url: str) -> int:
    """An image's tokens by the chat-completions rule; an image the API would not read is its 400."""
    data = url.partition(",")[2]
    try:
        info = inspect_image(decode_base64_image(data, "image_url.url"), "image_url.url")
    except ImageError as exc:
        raise chat_error(f"Could not process image: {exc}", param="image_url.url") from None
    return chat_image_tokens(info.width, info.height)


def _response_format(value: Any) -> dict[str, Any] | None:
    """``response_format`` as the Messages face's ``output_config.format`` (``json_object``: any object)."""
    if value is None:
        return None
    kind = _object(value, "response_format").get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_schema", "schema": {"type": "object"}}
    if kind != "json_schema":
        raise _fail("response_format.type", kind, '"text", "json_object" or "json_schema"')
    spec = _object(value.get("json_schema"), "response_format.json_schema")
    _text(spec.get("name"), "response_format.json_schema.name", limit=64, empty=False)
    schema = spec.get("schema", {"type": "object"})
    try:
        check_schema(schema, "response_format.json_schema.schema")
    except SchemaError as exc:
        raise chat_error(str(exc), param="response_format.json_schema.schema") from None
    return {"type": "json_schema", "schema": dict(schema)}


def read_chat_request(body: Any) -> ChatRequest:
    """Check a decoded chat-completions body and read it (see the module docstring)."""
    body = _object(body, "request body")
    unknown = sorted(set(body) - KNOWN_FIELDS)
    if unknown:
        raise chat_error(f"Unrecognized request argument supplied: {unknown[0]}", param=unknown[0])
    model = _text(body.get("model"), "model", limit=MAX_NAME_CHARS, empty=False)
    try:
        check_standard_fields(body)
    except FieldError as exc:
        raise chat_error(str(exc), param=exc.field) from None
    raw_messages = _array(body.get("messages"), "messages", MAX_MESSAGES, empty=False)
    system, messages = _messages(raw_messages)
    raw_tools = _array(body.get("tools") or [], "tools", MAX_TOOLS)
    tools = _tools(raw_tools)
    limit = body.get("max_completion_tokens", body.get("max_tokens", DEFAULT_MAX_TOKENS))
    field = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
    payload: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "max_tokens": _int(limit, field, 1, MAX_OUTPUT_TOKENS),
    }
    if system is not None:
        payload["system"] = system
    if tools:
        payload["tools"] = tools
    stop = body.get("stop")
    if stop is not None:
        stops = [stop] if isinstance(stop, str) else _array(stop, "stop", 4)
        payload["stop_sequences"] = [
            _text(v, f"stop[{i}]", limit=MAX_NAME_CHARS, empty=False) for i, v in enumerate(stops)
        ]
    choice = _tool_choice(body.get("tool_choice"))
    if choice is not None:
        payload["tool_choice"] = choice
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _fail("stream", stream, "true or false")
    options = _object(body.get("stream_options") or {}, "stream_options")
    include_usage = options.get("include_usage", False)
    if not isinstance(include_usage, bool):
        raise _fail("stream_options.include_usage", include_usage, "true or false")
    key = body.get("prompt_cache_key")
    if key is not None:
        _text(key, "prompt_cache_key", limit=MAX_CACHE_KEY_CHARS, empty=False)
    effort = body.get("reasoning_effort")
    if effort is not None and effort not in REASONING_EFFORTS:
        raise _fail("reasoning_effort", effort, "one of " + ", ".join(REASONING_EFFORTS))
    if body.get("cache_control") is not None:
        control = _object(body["cache_control"], "cache_control")
        if control.get("type") != "ephemeral" or control.get("ttl", "5m") not in ("5m", "1h"):
            raise _fail("cache_control", dict(control), '{"type": "ephemeral"} with an optional "ttl" of 5m or 1h')
    output_format = _response_format(body.get("response_format"))
    if output_format is not None:
        payload["output_config"] = {"format": output_format}
    reasoning = effort is not None and effort != "none"
    if reasoning:
        payload["thinking"] = {"type": "adaptive"}
    return ChatRequest(
        model=model,
        payload=payload,
        segments=_segments(raw_tools, raw_messages),
        counted=((canonical_json({"tools": raw_tools}), 0),) * bool(raw_tools)
        + tuple(_counted(message) for message in raw_messages),
        stream=stream,
        include_usage=include_usage,
        cache_key=key,
        reasoning=reasoning,
        messages=tuple(raw_messages),
        tools_json=canonical_json(raw_tools) if raw_tools else None,
    )
