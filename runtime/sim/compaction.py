"""Anthropic's server-side compaction (``compact_20260112``, beta ``compact-2026-01-12``), simulated (pure).

What the API documents (its compaction page, and the pinned SDK's types,
whose docstrings carry the defaults), and what the simulator does for each:

- the edit ``{"type": "compact_20260112"}`` takes ``trigger``
  (``{"type": "input_tokens", "value": N}``, default 150,000, at least 50,000),
  ``pause_after_compaction`` (default false) and ``instructions`` (text that
  replaces the default summary prompt); any other key is refused;
- when the request's input tokens (what the model would see) reach the
  trigger (the compaction-threshold page: "Detects when input tokens reach
  your specified trigger threshold"), a compaction pass summarizes the conversation into a ``compaction``
  block (``{"type": "compaction", "content": summary, "encrypted_content": null}``);
  the model then answers from that block alone: the response's content is the
  block followed by the reply. With ``pause_after_compaction`` the response is
  the block alone, with ``stop_reason`` ``"compaction"``; the client appends it
  and sends again to have the model continue;
- ``usage.iterations`` lists the passes: a ``compaction`` entry (the pass
  that wrote the summary: the whole prompt in, the summary out) and a
  ``message`` entry (the reply). The top-level usage is the ``message`` pass
  alone (zero when paused): a compaction's tokens are not in it;
- a request carrying a ``compaction`` block (in any message; a block whose
  ``content`` is null records a failed compaction and is a no-op) is read from
  its latest such block on: everything before it is dropped before counting,
  caching and answering, and ``count_tokens`` counts what is left;
- a request carrying a compaction block must declare the edit (the API refuses
  a compaction block whose strategy the request does not name).

The summary is deterministic, built from the dropped content (each message's
role and the head of its text, tool calls by name), or the one a script step
gives (``compaction = "..."``). Streaming sends the block as
``content_block_start`` (content null) and one ``compaction_delta`` with the
summary (:mod:`runtime.sim.streaming`). The prompt cache is the cache engine's
own: the summary changes the prompt from the first message on, so after a
compaction only the tools and system prefix can be read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from runtime.sim.errors import invalid_request
from runtime.values.server_edits import (
    COMPACT,
    COMPACTION_BLOCK,
    DEFAULT_COMPACT_TRIGGER,
    MIN_COMPACT_TRIGGER,
)

SUMMARY_HEAD_CHARS = 160
"""How much of each message's text the simulator's summary quotes."""
SUMMARY_MAX_CHARS = 8_000
"""The longest summary the simulator writes (the last messages are kept when it must cut)."""
_KEYS = ("type", "trigger", "pause_after_compaction", "instructions")


@attrs.frozen
class CompactEdit:
    """A request's ``compact_20260112`` edit, checked, with the documented defaults filled in."""

    trigger: int = DEFAULT_COMPACT_TRIGGER
    pause: bool = False
    instructions: str | None = None


def compact_edit(payload: Mapping[str, Any]) -> CompactEdit | None:
    """The request's compaction edit (None: it declares none); a 400 naming the key path for a bad one."""
    config = payload.get("context_management")
    edits = config.get("edits") if isinstance(config, Mapping) else None
    for i, edit in enumerate(edits if isinstance(edits, list) else ()):
        if isinstance(edit, Mapping) and edit.get("type") == COMPACT:
            return _checked(edit, f"context_management.edits.{i}")
    return None


def _checked(edit: Mapping[str, Any], where: str) -> CompactEdit:
    for key in edit:
        if key not in _KEYS:
            raise invalid_request(f"{where}.{key}: Extra inputs are not permitted")
    trigger = edit.get("trigger")
    value = DEFAULT_COMPACT_TRIGGER
    if trigger is not None:
        if (
            not isinstance(trigger, Mapping)
            or set(trigger) != {"type", "value"}
            or trigger.get("type") != "input_tokens"
            or isinstance(trigger.get("value"), bool)
            or not isinstance(trigger.get("value"), int)
        ):
            raise invalid_request(f"{where}.trigger: expected {{'type': 'input_tokens', 'value': N}}, got {trigger!r}")
        value = trigger["value"]
        if value < MIN_COMPACT_TRIGGER:
            raise invalid_request(f"{where}.trigger.value: must be at least {MIN_COMPACT_TRIGGER}, got {value}")
    pause = edit.get("pause_after_compaction", False)
    if not isinstance(pause, bool):
        raise invalid_request(f"{where}.pause_after_compaction: expected a boolean, got {pause!r}")
    instructions = edit.get("instructions")
    if instructions is not None and (not isinstance(instructions, str) or not instructions.strip()):
        raise invalid_request(f"{where}.instructions: expected non-empty text or null, got {instructions!r}")
    return CompactEdit(value, pause, instructions)


def latest_compaction(payload: Mapping[str, Any]) -> tuple[int, int] | None:
    """(message, block) of the request's latest compaction block with a summary (None: it carries none)."""
    found = None
    for m, message in enumerate(payload["messages"]):
        for b, block in enumerate(message["content"]):
            if block.get("type") == COMPACTION_BLOCK and block.get("content") is not None:
                found = (m, b)
    return found


def check_compaction_blocks(payload: Mapping[str, Any]) -> None:
    """Refuse a compaction block (a bad one, or one the request's edits do not declare), naming its key path."""
    declared = compact_edit(payload) is not None
    for m, message in enumerate(payload["messages"]):
        for b, block in enumerate(message["content"]):
            if block.get("type") != COMPACTION_BLOCK:
                continue
            where = f"messages.{m}.content.{b}"
            if not declared:
                raise invalid_request(
                    f"{where}: a compaction block needs the request's context_management.edits to declare {COMPACT}"
                )
            content = block.get("content")
            if content is not None and (not isinstance(content, str) or not content):
                raise invalid_request(f"{where}.content: expected a non-empty string or null, got {content!r}")


def dropped_before_compaction(payload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The request from its latest compaction block on (None: it carries none, nothing is dropped)."""
    at = latest_compaction(payload)
    if at is None:
        return None
    m, b = at
    messages = payload["messages"]
    first = {**messages[m], "content": list(messages[m]["content"][b:])}
    return {**payload, "messages": [first, *messages[m + 1 :]]}


def compaction_block(summary: str) -> dict[str, Any]:
    """The block a compaction writes."""
    return {"type": COMPACTION_BLOCK, "content": summary, "encrypted_content": None}


def compacted(payload: Mapping[str, Any], block: Mapping[str, Any]) -> dict[str, Any]:
    """The request the model answers after a compaction: its tools and system, then the compaction block."""
    return {**payload, "messages": [{"role": "assistant", "content": [dict(block)]}]}


def summary_of(payload: Mapping[str, Any], instructions: str | None) -> str:
    """The simulator's deterministic summary of the messages a compaction closes."""
    lines = [_line(message) for message in payload["messages"]]
    body = "\n".join(line for line in lines if line)
    if len(body) > SUMMARY_MAX_CHARS:
        body = "...\n" + body[-SUMMARY_MAX_CHARS:].split("\n", 1)[-1]
    head = f"Summary of {len(payload['messages'])} earlier message(s)"
    if instructions is not None:
        head += f" (as instructed: {instructions[:SUMMARY_HEAD_CHARS]})"
    return f"<summary>\n{head}:\n{body}\n</summary>"


def _line(message: Mapping[str, Any]) -> str:
    pieces: list[str] = []
    for block in message["content"]:
        kind = block.get("type")
        if kind == "text":
            pieces.append(_head(str(block.get("text", ""))))
        elif kind == "tool_use":
            pieces.append(f"called {block.get('name')}")
        elif kind == "tool_result":
            content = block.get("content")
            text = (
                content
                if isinstance(content, str)
                else " ".join(str(c.get("text", "")) for c in content or () if isinstance(c, Mapping))
            )
            pieces.append(f"result: {_head(text)}")
        elif kind == COMPACTION_BLOCK and isinstance(block.get("content"), str):
            pieces.append(f"earlier summary: {_head(block['content'])}")
    return f"- {message['role']}: " + "; ".join(pieces) if pieces else ""


def _head(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= SUMMARY_HEAD_CHARS else flat[:SUMMARY_HEAD_CHARS] + "..."


def iteration(kind: str, usage: Mapping[str, Any]) -> dict[str, Any]:
    """One ``usage.iterations`` entry of a pass (``kind`` ``"compaction"`` or ``"message"``) from its usage."""
    keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "cache_creation", "output_tokens")
    return {"type": kind, **{key: usage[key] for key in keys if key in usage}}
