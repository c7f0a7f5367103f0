"""The default model: what the scripted or simulated model does when no script is given.

For code examples and tests that do not care what the model says.
:class:`DefaultModel` answers a request by looking only at the request:

1. Since the last instruction (the newest user text), has it called every
   tool the request offers? If not, it calls each one it has not called yet,
   all in one response, once, with arguments drawn from the tool's input
   schema (:func:`arguments_from_schema`: each required property gets its
   default, its first enum value or example, or a plain value of its type:
   ``"example"``, the minimum or 1, ``true``, ``[]``, ``{}``). The model's
   own ``context`` tool and ``spawn`` (which needs a node the model cannot
   know) are never called.
2. Then it answers with one short text naming what it saw: each tool result's
   tool, size and first line (``error:`` first when it was an error result);
   with no tool results, the first words of the instruction.

It is deterministic (tool-use ids derive from the request's messages), keeps
no state, and does no I/O. :func:`default_policies` is a policy registry
whose fallback is the default model (every node without a script of its own)
and whose default answers fold summary requests (which name no node);
:func:`open_simulated` opens the simulated Anthropic server answering with it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from runtime.scripted.policies import PolicyRegistry, Reply
from runtime.values.canonical import canonical_json, sha256_hex

NEVER_CALLED = frozenset({"context", "spawn"})
"""Tools the default model leaves alone: the model's context tool and ``spawn``."""
FIRST_LINE_CHARS = 80
INSTRUCTION_WORDS = 12


def arguments_from_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments for a tool: a value for each required property of its input schema."""
    properties = schema.get("properties") or {}
    return {name: _value(properties.get(name) or {}) for name in schema.get("required") or ()}


def _value(prop: Mapping[str, Any]) -> Any:
    if "default" in prop:
        return prop["default"]
    if prop.get("enum"):
        return prop["enum"][0]
    if prop.get("examples"):
        return prop["examples"][0]
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "integer":
        return int(prop.get("minimum", 1))
    if kind == "number":
        return float(prop.get("minimum", 1.0))
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return arguments_from_schema(prop)
    return "example"


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or () if isinstance(b, Mapping)]


def _since_instruction(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The messages after the newest user message carrying text (the instruction), and it."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if message.get("role") == "user" and any(b.get("type") == "text" for b in _blocks(message)):
            return list(messages[i:])
    return list(messages)


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or () if isinstance(b, Mapping) and b.get("type") == "text")


def _saw(turn: Sequence[Mapping[str, Any]]) -> str:
    names = {b.get("id"): b.get("name") for m in turn for b in _blocks(m) if b.get("type") == "tool_use"}
    seen = []
    for message in turn:
        for block in _blocks(message):
            if block.get("type") != "tool_result":
                continue
            text = _result_text(block)
            first = text.strip().splitlines()[0][:FIRST_LINE_CHARS] if text.strip() else "(empty)"
            error = "error: " if block.get("is_error") else ""
            seen.append(f"{names.get(block.get('tool_use_id'), 'a tool')} ({len(text):,} characters): {error}{first}")
    if seen:
        return "I called " + "; ".join(seen) + "."
    instruction = next((b.get("text", "") for b in _blocks(turn[0]) if b.get("type") == "text"), "") if turn else ""
    words = instruction.split()
    shown = " ".join(words[:INSTRUCTION_WORDS]) + (" ..." if len(words) > INSTRUCTION_WORDS else "")
    return f"You asked: {shown!r}. I have no tools to call, so this is my whole answer."


class DefaultModel:
    """The default model (see the module doc); a :class:`runtime.scripted.policies.Policy`."""

    def respond(self, payload: Mapping[str, Any]) -> Reply:
        messages = payload.get("messages") or []
        turn = _since_instruction(messages)
        called = {
            b.get("name")
            for m in turn
            if m.get("role") == "assistant"
            for b in _blocks(m)
            if b.get("type") == "tool_use"
        }
        offered = [t for t in payload.get("tools") or () if isinstance(t, Mapping) and "input_schema" in t]
        pending = [t for t in offered if t.get("name") not in called and t.get("name") not in NEVER_CALLED]
        if pending and _may_call(payload):
            seed = sha256_hex(canonical_json(messages))
            uses = tuple(
                {
                    "type": "tool_use",
                    "id": f"toolu_{sha256_hex(f'{seed}:{i}')[:24]}",
                    "name": t["name"],
                    "input": arguments_from_schema(t.get("input_schema") or {}),
                }
                for i, t in enumerate(pending)
            )
            return Reply(content=uses, stop_reason="tool_use")
        return Reply(content=({"type": "text", "text": _saw(turn)},), stop_reason="end_turn")


def _may_call(payload: Mapping[str, Any]) -> bool:
    choice = payload.get("tool_choice")
    if isinstance(choice, str):
        choice = json.loads(choice) if choice.startswith("{") else {"type": choice}
    return not (isinstance(choice, Mapping) and choice.get("type") == "none")


def default_policies() -> PolicyRegistry:
    """Every node answered by :class:`DefaultModel`; fold summary requests by the extractive summarizer."""
    from runtime.sim.summary_policy import FoldSummaryPolicy

    return PolicyRegistry(default=FoldSummaryPolicy(), fallback=DefaultModel())


@asynccontextmanager
async def open_simulated(*, model: str = "claude-haiku-5-5") -> AsyncIterator[Any]:
    """The simulated Anthropic server on loopback, answering with the default model, and a provider
    (the official SDK over HTTP) talking to it; both closed on exit."""
    import time

    from runtime.config import ProviderSpec
    from runtime.providers.factory import open_provider

    async with open_provider(ProviderSpec(kind="simulated", model=model), default_policies(), clock=time.time) as p:
        yield p
