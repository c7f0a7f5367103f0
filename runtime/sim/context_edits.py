"""Anthropic's server-side context editing, simulated: ``context_management.edits`` (pure).

Applied to a validated request before the model sees it (and before the
prompt cache does: a cleared span changes the prefix from there on, so the
cache misses from the first cleared block, as Anthropic's context-editing
page says: "Context editing invalidates cached prompt prefixes"). The client
keeps and resends its full history; every request is edited afresh.

``clear_tool_uses_20250919`` (defaults from the context-editing page):

- ``trigger``: ``{"type": "input_tokens", "value": N}`` (default 100,000) or
  ``{"type": "tool_uses", "value": N}``; the edit runs when the request's
  input tokens (or tool uses) exceed N;
- ``keep``: ``{"type": "tool_uses", "value": N}`` (default 3): the N most
  recent tool uses keep their results;
- every older tool use whose tool is not in ``exclude_tools`` has its result's
  content replaced by :data:`CLEARED_RESULT` (oldest first, in order), and with
  ``clear_tool_inputs`` (true, or a list naming the tool) its ``input`` by ``{}``;
- ``clear_at_least``: ``{"type": "input_tokens", "value": N}``: when the
  edit would remove fewer than N tokens, nothing is cleared.

``clear_thinking_20251015``: ``keep`` ``{"type": "thinking_turns", "value":
N}`` (default 1), ``{"type": "all"}`` or ``"all"``: the thinking blocks of
every assistant turn but the N most recent turns with thinking are removed.
It needs thinking on and must come first among the edits.

Each applied edit is reported (``applied_edits``) with the tokens it cleared
and what it cleared. ``compact_20260112`` is checked and run by
:mod:`runtime.sim.compaction` (it reports no applied edit: its block and
``usage.iterations`` say what it did).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from runtime.sim.errors import invalid_request
from runtime.values.server_edits import (
    BETA_OF,
    CLEAR_THINKING,
    CLEAR_TOOL_USES,
    COMPACT,
    DEFAULT_KEEP_THINKING_TURNS,
    DEFAULT_KEEP_TOOL_USES,
    DEFAULT_TRIGGER_TOKENS,
    MAX_EDITS,
)

CLEARED_RESULT = "[cleared by context management]"
"""The simulator's placeholder for a cleared tool result (the docs say a placeholder replaces it, not its words)."""

Count = Callable[[dict[str, Any]], int]


@attrs.frozen
class Edited:
    """The request as the model sees it, and the edits applied (the response's ``applied_edits``)."""

    payload: dict[str, Any]
    applied: tuple[dict[str, Any], ...]


def edits_of(payload: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The request's edits, checked; a 400 naming the key path for a bad one."""
    config = payload.get("context_management")
    if config is None:
        return []
    if not isinstance(config, Mapping) or set(config) - {"edits"}:
        raise invalid_request(f"context_management: expected {{'edits': [...]}}, got {config!r}")
    edits = config.get("edits") or []
    if not isinstance(edits, list) or len(edits) > MAX_EDITS:
        raise invalid_request(f"context_management.edits: expected a list of at most {MAX_EDITS} edits")
    for i, edit in enumerate(edits):
        where = f"context_management.edits.{i}"
        kind = edit.get("type") if isinstance(edit, Mapping) else None
        if kind not in (CLEAR_TOOL_USES, CLEAR_THINKING, COMPACT):
            raise invalid_request(
                f"{where}.type: expected {CLEAR_TOOL_USES!r}, {CLEAR_THINKING!r} or {COMPACT!r}, got {kind!r}"
            )
        if kind == CLEAR_THINKING:
            if i != 0:
                raise invalid_request(f"{where}: {CLEAR_THINKING} must be the first edit in context_management.edits")
            thinking = payload.get("thinking")
            if not isinstance(thinking, Mapping) or thinking.get("type") not in ("enabled", "adaptive"):
                raise invalid_request(f"{where}: {CLEAR_THINKING} requires thinking to be enabled")
    return list(edits)


def _amount(value: Any, where: str, kinds: tuple[str, ...], default: int | None) -> tuple[str, int] | None:
    if value is None:
        return (kinds[0], default) if default is not None else None
    if (
        not isinstance(value, Mapping)
        or value.get("type") not in kinds
        or isinstance(value.get("value"), bool)
        or not isinstance(value.get("value"), int)
        or value["value"] < 0
    ):
        raise invalid_request(f"{where}: expected {{'type': one of {kinds}, 'value': an integer >= 0}}, got {value!r}")
    return str(value["type"]), int(value["value"])


def apply_edits(payload: Mapping[str, Any], total_tokens: int, count: Count) -> Edited:
    """``payload`` (validated) with its ``context_management`` edits applied; ``count`` gives a payload's tokens."""
    current = dict(payload)
    applied: list[dict[str, Any]] = []
    for i, edit in enumerate(edits_of(payload)):
        where = f"context_management.edits.{i}"
        if edit["type"] == COMPACT:
            continue  # a compaction is a pass of its own (runtime.sim.compaction), after these edits
        if edit["type"] == CLEAR_THINKING:
            edited, report = _clear_thinking(current, edit, where)
        else:
            edited, report = _clear_tool_uses(current, edit, where, total_tokens)
        if report is None:
            continue
        after = count(edited)
        cleared = total_tokens - after
        if edit["type"] == CLEAR_TOOL_USES:
            least = _amount(edit.get("clear_at_least"), f"{where}.clear_at_least", ("input_tokens",), None)
            if least is not None and cleared < least[1]:
                continue
        current, total_tokens = edited, after
        applied.append({"type": edit["type"], "cleared_input_tokens": cleared, **report})
    return Edited(current, tuple(applied))


def _tool_uses(messages: list[dict[str, Any]]) -> list[tuple[int, int, dict[str, Any]]]:
    return [
        (m, b, block)
        for m, message in enumerate(messages)
        if message["role"] == "assistant"
        for b, block in enumerate(message["content"])
        if block.get("type") == "tool_use"
    ]


def _clear_tool_uses(
    payload: dict[str, Any], edit: Mapping[str, Any], where: str, total_tokens: int
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    for key in edit:
        if key not in ("type", "trigger", "keep", "clear_at_least", "exclude_tools", "clear_tool_inputs"):
            raise invalid_request(f"{where}.{key}: Extra inputs are not permitted")
    trigger = _amount(edit.get("trigger"), f"{where}.trigger", ("input_tokens", "tool_uses"), DEFAULT_TRIGGER_TOKENS)
    keep = _amount(edit.get("keep"), f"{where}.keep", ("tool_uses",), DEFAULT_KEEP_TOOL_USES)
    assert trigger is not None and keep is not None
    exclude = set(_names(edit.get("exclude_tools"), f"{where}.exclude_tools"))
    inputs = edit.get("clear_tool_inputs")
    input_names = (
        None if inputs is None or isinstance(inputs, bool) else set(_names(inputs, f"{where}.clear_tool_inputs"))
    )

    def clear_inputs(name: str) -> bool:
        return bool(inputs) if input_names is None else name in input_names

    uses = _tool_uses(payload["messages"])
    measured = total_tokens if trigger[0] == "input_tokens" else len(uses)
    if measured <= trigger[1]:
        return payload, None
    older = uses[: max(0, len(uses) - keep[1])]
    chosen = [(m, b, block) for m, b, block in older if block.get("name") not in exclude]
    if not chosen:
        return payload, None
    messages = copy.deepcopy(payload["messages"])
    ids = {block["id"] for _, _, block in chosen}
    for m, b, block in chosen:
        if clear_inputs(str(block.get("name"))):
            messages[m]["content"][b] = {**messages[m]["content"][b], "input": {}}
    for message in messages:
        if message["role"] != "user":
            continue
        for b, block in enumerate(message["content"]):
            if block.get("type") == "tool_result" and block.get("tool_use_id") in ids:
                message["content"][b] = {**block, "content": CLEARED_RESULT}
    return {**payload, "messages": messages}, {"cleared_tool_uses": len(chosen)}


def _names(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid_request(f"{where}: expected a list of tool names, got {value!r}")
    return value


def _clear_thinking(
    payload: dict[str, Any], edit: Mapping[str, Any], where: str
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    for key in edit:
        if key not in ("type", "keep"):
            raise invalid_request(f"{where}.{key}: Extra inputs are not permitted")
    keep_raw = edit.get("keep")
    if keep_raw == "all" or (isinstance(keep_raw, Mapping) and keep_raw.get("type") == "all"):
        return payload, None
    keep = _amount(keep_raw, f"{where}.keep", ("thinking_turns",), DEFAULT_KEEP_THINKING_TURNS)
    assert keep is not None
    thinking_kinds = ("thinking", "redacted_thinking")
    turns = [
        m
        for m, message in enumerate(payload["messages"])
        if message["role"] == "assistant" and any(b.get("type") in thinking_kinds for b in message["content"])
    ]
    cleared = turns[: max(0, len(turns) - keep[1])]
    if not cleared:
        return payload, None
    messages = list(payload["messages"])
    for m in cleared:
        messages[m] = {
            **messages[m],
            "content": [b for b in messages[m]["content"] if b.get("type") not in thinking_kinds],
        }
    return {**payload, "messages": messages}, {"cleared_thinking_turns": len(cleared)}


def check_betas(body: Any, beta_header: str) -> None:
    """Refuse ``context_management`` edits whose beta the request's ``anthropic-beta`` header does not name."""
    config = body.get("context_management") if isinstance(body, Mapping) else None
    edits = config.get("edits") if isinstance(config, Mapping) else None
    if not isinstance(edits, list):
        return  # validation names what is wrong with it
    named = {part.strip() for part in beta_header.split(",") if part.strip()}
    for i, edit in enumerate(edits):
        kind = edit.get("type") if isinstance(edit, Mapping) else None
        beta = BETA_OF.get(kind) if isinstance(kind, str) else None
        if beta is not None and beta not in named:
            raise invalid_request(
                f"context_management.edits.{i}.type: {kind} needs the anthropic-beta header to name {beta!r}"
            )
