"""A test check: every tool_use of a payload is answered, and every tool_result answers one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.request.compiler import CompileError


def check_pairing(payload: Mapping[str, Any]) -> None:
    """Raise :class:`CompileError` unless every tool_use is answered by a tool_result
    in the next message and every tool_result answers a tool_use of the previous one."""
    messages = payload.get("messages", [])
    for i, msg in enumerate(messages):
        uses = [b["id"] for b in msg["content"] if b.get("type") == "tool_use"]
        results = [b["tool_use_id"] for b in msg["content"] if b.get("type") == "tool_result"]
        if results:
            prev = messages[i - 1] if i else {"content": []}
            prev_uses = {b["id"] for b in prev["content"] if b.get("type") == "tool_use"}
            stray = [r for r in results if r not in prev_uses]
            if stray:
                raise CompileError(f"message {i}: tool_result for {stray} answers no tool_use of message {i - 1}")
        if uses:
            nxt = messages[i + 1]["content"] if i + 1 < len(messages) else []
            answered = {b.get("tool_use_id") for b in nxt if b.get("type") == "tool_result"}
            missing = [u for u in uses if u not in answered]
            if missing:
                raise CompileError(f"message {i}: tool_use {missing} has no tool_result in message {i + 1}")
