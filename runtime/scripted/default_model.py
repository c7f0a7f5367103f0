"""The default model: what answers a request that no script answers (pure, deterministic, no state, no I/O).

For code examples, tests, and clients pointed at ``foldline sim`` that do not
care what the model says. :class:`DefaultModel` answers a request by looking
only at the request, by these rules:

0. **The turn.** System-role messages inside ``messages`` are ignored. The
   *instruction* is the newest user message that carries text and no tool
   result (a client that adds text beside its tool results, as Claude Code
   does, has not given a new instruction); the *turn* is the instruction and
   every message after it.
1. **Call tools** when tools with an ``input_schema`` are offered and
   ``tool_choice`` is not ``none``. The candidates are the tool
   ``tool_choice`` names (``{"type": "tool", "name": ...}``), else every
   offered tool but the runtime's own ``context`` tool and ``spawn`` (which
   needs a node the model cannot know). How many it calls is the one choice
   its caller makes, :attr:`DefaultModel.calls`:

   - ``"each"`` (the default; what the scenario runner and
     :func:`runtime.open_simulated` use): each candidate not called since the
     instruction, all in one response, so every tool a flow offers is
     exercised once per instruction;
   - ``"one"`` (what ``foldline sim`` uses): the first candidate, when no tool
     has been called since the instruction. A client such as Claude Code
     offers dozens of tools, and calling them all at once would be absurd.

   Arguments are built from the tool's ``input_schema`` by
   :func:`runtime.values.json_schema.example_value` (a default, the first
   ``enum`` value, ``const``, a ``"<name>"`` string, the minimum or 1, true,
   one array item, nested objects; a local ``$ref`` is followed), so they
   validate against the schema. Tool-use ids derive from the request's
   messages (the same request always gets the same ids). The second choice,
   :attr:`DefaultModel.request_unique_ids`, is the simulator's: when true (the
   default; ``foldline sim``) it mixes its request id into each tool-use id
   (:func:`with_request_tool_ids`), as the API's ids are unique and a client's
   parallel subagents may send identical messages; the scenario runner and
   :func:`runtime.open_simulated` set it false, so a run over HTTP gets the
   ids, and so the record digests, of the same run in process.
   ``stop_reason = "tool_use"``.
2. **Otherwise answer with text**: after tool results (the last message
   carries them), ``"Simulated answer after N tool result(s): <the last
   result's first 80 characters>"``; else ``"Simulated answer to: <the first
   80 characters of the last user text>"``. ``stop_reason = "end_turn"``.

Server tools (a tool with a ``type`` and no ``input_schema``) are never called.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from runtime.scripted.policies import Reply
from runtime.values.canonical import canonical_json, sha256_hex
from runtime.values.json_schema import example_value

ToolCalls = Literal["each", "one"]
"""How many tools the default model calls per instruction (see the module doc)."""
TOOL_CALLS: tuple[ToolCalls, ...] = ("each", "one")
NEVER_CALLED = frozenset({"context", "spawn"})
"""Tools the default model calls only when ``tool_choice`` names them: the model's context tool and ``spawn``."""
QUOTE_CHARS = 80


def _check_calls(_instance: Any, _attribute: Any, value: Any) -> None:
    if value not in TOOL_CALLS:
        raise ValueError(f"DefaultModel.calls: expected one of {', '.join(TOOL_CALLS)}, got {value!r}")


@attrs.frozen
class DefaultModel:
    """The default model (the rules are the module doc's); a :class:`runtime.scripted.policies.Policy`.

    ``calls`` is how many tools it calls per instruction: ``"each"`` offered
    tool once, or ``"one"`` (for clients that offer many tools);
    ``request_unique_ids`` whether the simulator mixes its request id into the
    tool-use ids (in process there is no request id and it changes nothing)."""

    calls: ToolCalls = attrs.field(default="each", kw_only=True, validator=_check_calls)
    request_unique_ids: bool = attrs.field(default=True, kw_only=True, validator=attrs.validators.instance_of(bool))

    def respond(self, payload: Mapping[str, Any]) -> Reply:
        messages = [m for m in payload.get("messages") or () if isinstance(m, Mapping) and m.get("role") != "system"]
        tools = self._tools_to_call(payload, _since_instruction(messages))
        if tools:
            seed = sha256_hex(canonical_json(messages))
            uses = tuple(
                {
                    "type": "tool_use",
                    "id": f"toolu_{sha256_hex(f'{seed}:{i}')[:24]}",
                    "name": tool["name"],
                    "input": _arguments(tool),
                }
                for i, tool in enumerate(tools)
            )
            return Reply(content=uses, stop_reason="tool_use")
        return Reply(content=({"type": "text", "text": _answer_text(messages)},), stop_reason="end_turn")

    def _tools_to_call(self, payload: Mapping[str, Any], turn: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        offered = [t for t in payload.get("tools") or () if isinstance(t, Mapping) and "input_schema" in t]
        choice = _tool_choice(payload.get("tool_choice"))
        if not offered or choice.get("type") == "none":
            return []
        named = [t for t in offered if choice.get("type") == "tool" and t.get("name") == choice.get("name")]
        candidates = named or [t for t in offered if t.get("name") not in NEVER_CALLED]
        called = [
            b.get("name")
            for m in turn
            if m.get("role") == "assistant"
            for b in _blocks(m)
            if b.get("type") == "tool_use"
        ]
        if self.calls == "one":
            return candidates[:1] if not called else []
        return [t for t in candidates if t.get("name") not in called]


def _arguments(tool: Mapping[str, Any]) -> Any:
    schema = tool.get("input_schema") or {"type": "object"}
    return example_value(schema, str(tool["name"]), root=schema)


def _tool_choice(choice: Any) -> Mapping[str, Any]:
    """``tool_choice`` as a mapping: absent is ``auto``; a string is its JSON, or a bare type."""
    if isinstance(choice, str):
        try:
            choice = json.loads(choice) if choice.startswith("{") else {"type": choice}
        except ValueError:
            return {"type": "auto"}
    return choice if isinstance(choice, Mapping) else {"type": "auto"}


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or () if isinstance(b, Mapping)]


def _is_instruction(message: Mapping[str, Any]) -> bool:
    kinds = {b.get("type") for b in _blocks(message)}
    return message.get("role") == "user" and "text" in kinds and "tool_result" not in kinds


def _since_instruction(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The instruction (the newest user message with text and no tool result) and the messages after it."""
    for i in range(len(messages) - 1, -1, -1):
        if _is_instruction(messages[i]):
            return list(messages[i:])
    return list(messages)


def _tool_results(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The tool results the last message carries, when it is the user's."""
    if not messages or messages[-1].get("role") != "user":
        return []
    return [b for b in _blocks(messages[-1]) if b.get("type") == "tool_result"]


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return " ".join(part.get("text", "") for part in content or () if isinstance(part, Mapping))


def _quote(text: str) -> str:
    flat = " ".join(text.split())
    return flat[:QUOTE_CHARS] if flat else "(empty)"


def _answer_text(messages: Sequence[Mapping[str, Any]]) -> str:
    results = _tool_results(messages)
    if results:
        return f"Simulated answer after {len(results)} tool result(s): {_quote(_result_text(results[-1]))}"
    for message in reversed(messages):
        if message.get("role") == "user":
            texts = [b.get("text", "") for b in _blocks(message) if b.get("type") == "text"]
            if texts:
                return f"Simulated answer to: {_quote(' '.join(texts))}"
    return "Simulated answer."


def with_request_tool_ids(reply: Reply, request_id: str) -> Reply:
    """``reply`` with each tool-use id made unique to the request (its id mixed with ``request_id``).

    The model's ids derive from the messages alone; the simulator mixes in the
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
