"""The simulator's default model: what answers a request that names no scripted node (pure, deterministic).

Rules, applied to the request as sent (the same request always gets the same answer):

1. **Call a tool** when tools are offered, ``tool_choice`` is not ``none``,
   and the last message is not a tool result: the tool ``tool_choice`` names
   (``{"type": "tool", "name": ...}``), else the first tool. Its arguments
   are built from the tool's ``input_schema``: every required property (all
   properties when none is required) gets its ``default``, else its first
   ``enum`` value, else a value of its type (string: ``"<name>"`` text,
   integer/number: the minimum or 1, boolean: true, array: one item, object:
   recursively, null: null; a local ``$ref`` is followed). ``stop_reason = "tool_use"``; the tool-use id
   is derived from the request's content.
2. **Otherwise answer with text**: after tool results, ``"Simulated answer
   after N tool result(s): <first 80 characters of the last result>"``;
   else ``"Simulated answer to: <first 80 characters of the last user
   text>"``. ``stop_reason = "end_turn"``.

Server tools (a tool with a ``type`` and no ``input_schema``) are never called.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.scripted.policies import Reply
from runtime.values.canonical import canonical_bytes, sha256_hex

QUOTE_CHARS = 80
_MAX_SCHEMA_DEPTH = 8


class DefaultModel:
    """Answers any request by the rules in the module docstring."""

    def respond(self, payload: Mapping[str, Any]) -> Reply:
        messages = payload.get("messages") or []
        tool = _tool_to_call(payload, messages)
        if tool is not None:
            schema = tool.get("input_schema") or {"type": "object"}
            arguments = example_value(schema, tool["name"], root=schema)
            call_id = "toolu_" + sha256_hex(b"default-model:" + canonical_bytes(list(messages)))[:24]
            block = {"type": "tool_use", "id": call_id, "name": tool["name"], "input": arguments}
            return Reply(content=(block,), stop_reason="tool_use")
        return Reply(content=({"type": "text", "text": _answer_text(messages)},), stop_reason="end_turn")


def _tool_to_call(payload: Mapping[str, Any], messages: list[Any]) -> Mapping[str, Any] | None:
    tools = [tool for tool in payload.get("tools") or [] if isinstance(tool, Mapping) and "input_schema" in tool]
    choice = payload.get("tool_choice") or {"type": "auto"}
    if not tools or choice.get("type") == "none" or _last_is_tool_result(messages):
        return None
    if choice.get("type") == "tool":
        return next((tool for tool in tools if tool.get("name") == choice.get("name")), tools[0])
    return tools[0]


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content or [] if isinstance(block, Mapping)]


def _last_is_tool_result(messages: list[Any]) -> bool:
    if not messages or messages[-1].get("role") != "user":
        return False
    return any(block.get("type") == "tool_result" for block in _blocks(messages[-1]))


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return " ".join(part.get("text", "") for part in content or [] if isinstance(part, Mapping))


def _quote(text: str) -> str:
    flat = " ".join(text.split())
    return flat[:QUOTE_CHARS] if flat else "(empty)"


def _answer_text(messages: list[Any]) -> str:
    if _last_is_tool_result(messages):
        results = [block for block in _blocks(messages[-1]) if block.get("type") == "tool_result"]
        return f"Simulated answer after {len(results)} tool result(s): {_quote(_result_text(results[-1]))}"
    for message in reversed(messages):
        if message.get("role") == "user":
            texts = [block.get("text", "") for block in _blocks(message) if block.get("type") == "text"]
            if texts:
                return f"Simulated answer to: {_quote(' '.join(texts))}"
    return "Simulated answer."


def _resolve(schema: Mapping[str, Any], root: Any) -> Any:
    """``schema`` with a local ``$ref`` (``#/$defs/Name``) followed into ``root``; anything else as is."""
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return schema
    target: Any = root
    for part in ref[2:].split("/"):
        target = target.get(part) if isinstance(target, Mapping) else None
    return target if isinstance(target, Mapping) else schema


def example_value(schema: Any, name: str, depth: int = 0, root: Any = None) -> Any:
    """A value that fits ``schema`` (JSON Schema; local ``$ref`` resolved in ``root``), by the module's rules."""
    if not isinstance(schema, Mapping) or depth > _MAX_SCHEMA_DEPTH:
        return f"<{name}>"
    schema = _resolve(schema, root)
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            usable = [
                option for option in options if not (isinstance(option, Mapping) and option.get("type") == "null")
            ]
            return example_value((usable or options)[0], name, depth + 1, root)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        return _example_object(schema, depth, root)
    if kind == "array":
        return [example_value(schema.get("items", {"type": "string"}), name, depth + 1, root)]
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return float(schema.get("minimum", 1.0))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return f"<{name}>"


def _example_object(schema: Mapping[str, Any], depth: int, root: Any) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    if not isinstance(properties, Mapping):
        return {}
    required = [key for key in schema.get("required") or [] if key in properties]
    chosen = required or list(properties)
    return {key: example_value(properties[key], key, depth + 1, root) for key in chosen}
