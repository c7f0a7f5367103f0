"""Signed thinking in the simulator: blocks it signs, and the check of blocks given back (pure).

A request with ``thinking`` enabled (``{"type": "enabled", "budget_tokens": N}``
or ``{"type": "adaptive"}``) is answered with a ``thinking`` block before the
reply's other blocks. Its ``signature`` is an HMAC-SHA256, keyed per server,
of the block's text and of everything that preceded it in the conversation
(the request's messages, cache marks excluded, and the reply's earlier blocks).

Every ``thinking`` / ``redacted_thinking`` block a request gives back in an
assistant message is checked against the messages before it: a modified block,
or a block whose preceding content changed since it was made, is refused with
the API's 400 ``invalid_request_error``. A block left out is not an error (the
API accepts a reply without its thinking), so a runtime that drops the blocks
of replies made before a rewrite is accepted.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from runtime.scripted.policies import Reply
from runtime.sim.errors import SimAPIError, invalid_request
from runtime.sim.tokens import strip_cache_control
from runtime.values.canonical import canonical_bytes

THINKING_KINDS = ("thinking", "redacted_thinking")


def thinking_enabled(payload: Mapping[str, Any]) -> bool:
    thinking = payload.get("thinking")
    return isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive")


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [strip_cache_control(block) for block in content if isinstance(block, Mapping)]


def _conversation(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{"role": m.get("role"), "content": _blocks(m.get("content", []))} for m in messages]


@attrs.define(eq=False)
class ThinkingSigner:
    """Signs thinking blocks and verifies the ones a request gives back (one key per server)."""

    key: bytes = attrs.field(factory=lambda: secrets.token_bytes(32), repr=False)
    verified: int = attrs.field(default=0, init=False)
    """How many given-back blocks this signer has verified (for tests and reports)."""

    def _mac(self, preceding: list[dict[str, Any]], before: list[dict[str, Any]], block: Mapping[str, Any]) -> str:
        text = block.get("thinking") if block.get("type") == "thinking" else block.get("data")
        body = canonical_bytes({"preceding": preceding, "before": before, "type": block.get("type"), "text": text})
        return base64.b64encode(hmac.new(self.key, body, hashlib.sha256).digest()).decode("ascii")

    def sign_reply(self, reply: Reply, payload: Mapping[str, Any]) -> Reply:
        """``reply`` with a signed thinking block first when the request enables thinking."""
        if not thinking_enabled(payload) or not reply.content:
            return reply
        messages = payload.get("messages") or []
        thinking = _thinking_text(messages, reply)
        preceding, before = _conversation(messages), []
        if messages and messages[-1].get("role") == "assistant":
            # A request ending with an assistant message is continued (a prefill, a paused turn, a compaction
            # block): the reply joins that message, so its blocks are what comes before the thinking.
            preceding, before = preceding[:-1], preceding[-1]["content"]
        block: dict[str, Any] = {"type": "thinking", "thinking": thinking, "signature": ""}
        block["signature"] = self._mac(preceding, before, block)
        content: tuple[dict[str, Any], ...] = (block, *reply.content)
        return Reply(content=content, stop_reason=reply.stop_reason, output_tokens=None)

    def verify(self, payload: Mapping[str, Any]) -> None:
        """Raise the API's 400 when a given-back thinking block was changed or its context was."""
        messages = payload.get("messages") or []
        for i, message in enumerate(messages):
            if message.get("role") != "assistant" or isinstance(message.get("content"), str):
                continue
            blocks = _blocks(message.get("content", []))
            if not any(block.get("type") in THINKING_KINDS for block in blocks):
                continue
            preceding = _conversation(messages[:i])
            for j, block in enumerate(blocks):
                if block.get("type") not in THINKING_KINDS:
                    continue
                # The simulator makes no redacted blocks, so a redacted block given back never verifies.
                given = block.get("signature") if block.get("type") == "thinking" else None
                expected = self._mac(preceding, blocks[:j], block)
                if not isinstance(given, str) or not hmac.compare_digest(given, expected):
                    raise _invalid_signature(i, j, str(block.get("type")))
                self.verified += 1


def _invalid_signature(message_index: int, block_index: int, kind: str) -> SimAPIError:
    return invalid_request(f"messages.{message_index}.content.{block_index}: Invalid `signature` in `{kind}` block")


def _thinking_text(messages: Sequence[Mapping[str, Any]], reply: Reply) -> str:
    """What the simulated model 'thinks': a few deterministic lines about the turn and its answer."""
    last = messages[-1] if messages else {}
    results = sum(1 for b in _blocks(last.get("content", [])) if b.get("type") == "tool_result")
    calls = [b.get("name") for b in reply.content if b.get("type") == "tool_use"]
    plan = f"call {', '.join(str(c) for c in calls)}" if calls else "answer now"
    return (
        f"Turn with {len(messages)} message(s); the last one carries {results} tool result(s). "
        f"Weighing what is known against what is missing, the next step is to {plan}."
    )
