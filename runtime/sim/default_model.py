"""The simulator's default model: what answers a request that names no scripted node (pure, deterministic).

Rules, applied to the request as sent (the same request always gets the same answer):

1. **Call a tool** when tools are offered, ``tool_choice`` is not ``none``,
   and the last message is not a tool result: the tool ``tool_choice`` names
   (``{"type": "tool", "name": ...}``), else the first tool. Its arguments
   are built from the tool's ``input_schema``: every required property (all
   properties when none is required) gets its ``default``, else its first
   ``enum`` value, else a value of its type (string: ``"<name>"`` text,
   integer/number: the minimum or 1, boolean: true, array: one item, object:
   recursively, null: null; a local ``$ref`` is followed; see
   :func:`runtime.sim.json_schema.example_value`). ``stop_reason = "tool_use"``; the tool-use id
   is derived from the request's content (the server mixes in the request's id:
   :func:`with_request_tool_ids`).
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
from runtime.sim.json_schema import example_value
from runtime.values.canonical import canonical_bytes, sha256_hex

QUOTE_CHARS = 80


class DefaultModel:
    """Answers any request by the rules in the module docstring."""

    def respond(self, payload: Mapping[str, Any]) -> Reply:
        # A mid-conversation system message instructs; the turn it answers is the user's before it.
        messages = [m for m in payload.get("messages") or [] if m.get("role") != "system"]
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


def with_request_tool_ids(reply: Reply, request_id: str) -> Reply:
    """``reply`` with each tool-use id made unique to the request (its id mixed with ``request_id``).

    The model's ids derive from the messages alone; the server mixes in the
    request's id so that conversations with identical messages (parallel
    subagents, say) never share a tool-use id, as the API's ids are unique."""
    if not request_id:
        return reply
    content = tuple(
        {**block, "id": "toolu_" + sha256_hex(f"{request_id}:{block['id']}")[:24]}
        if block.get("type") == "tool_use"
        else block
        for block in reply.content
    )
    return Reply(content=content, stop_reason=reply.stop_reason, output_tokens=reply.output_tokens)
