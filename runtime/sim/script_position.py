"""Where a conversation is in its node's script, read from the conversation itself.

A script's replies are recognisable in the requests that follow them: every
scripted tool call has a deterministic id (``tool_use_id(node, step, i)``),
echoed in the assistant message and in the user's tool results, and a step's
text comes back as the assistant message's text. The step a request asks for
is one past the last step whose reply the request holds. Any simulator,
in any process, reads the same position from the same request: a flow whose
worker died is answered by the next worker's simulator as the first would
have answered it (a restarted cursor would send the script's first step
again, and the view would hold two results for one call).

A conversation that holds no reply of its script (its first request, or
every reply folded away) has no position here; :mod:`runtime.sim.conversations`
then uses its own cursor. A text-only step whose text the script repeats is
read as its first use past the last step already read: once the earlier uses
are folded away, only the simulator that answered them knows better.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from runtime.scripted.policies import ScriptPolicy, tool_use_id


@attrs.frozen
class StepIndex:
    """A script's replies by what identifies them: tool-call ids and texts, each to its step."""

    by_call_id: Mapping[str, int]
    by_text: Mapping[str, tuple[int, ...]]

    @classmethod
    def of(cls, policy: ScriptPolicy) -> StepIndex:
        calls: dict[str, int] = {}
        texts: dict[str, list[int]] = {}
        for step_index, step in enumerate(policy.steps):
            for call_index in range(len(step.tool_calls)):
                calls[tool_use_id(policy.node_id, step_index, call_index)] = step_index
            if step.text is not None and not step.tool_calls:
                texts.setdefault(step.text, []).append(step_index)
        return cls(calls, {text: tuple(steps) for text, steps in texts.items()})

    def step_of(self, message: Mapping[str, Any], after: int) -> int | None:
        """The step whose reply an assistant ``message`` is (a text repeated in the script: its first use at or past ``after``)."""
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        calls = [str(block.get("id")) for block in blocks if _is(block, "tool_use")]
        if calls:  # a reply with calls is a step of this script only by their ids (an inherited view holds others)
            steps = [step for step in map(self.by_call_id.get, calls) if step is not None]
            return max(steps) if steps else None
        text = "".join(str(block.get("text", "")) for block in blocks if _is(block, "text"))
        return next((step for step in self.by_text.get(text, ()) if step >= after), None)

    def results_step(self, message: Mapping[str, Any]) -> int | None:
        """The latest step whose tool calls a user message's tool results answer."""
        content = message.get("content")
        if not isinstance(content, list):
            return None
        found = [self.by_call_id.get(str(block.get("tool_use_id"))) for block in content if _is(block, "tool_result")]
        steps = [step for step in found if step is not None]
        return max(steps) if steps else None


def _is(block: Any, kind: str) -> bool:
    return isinstance(block, Mapping) and block.get("type") == kind


def script_position(index: StepIndex, start: int, payload: Mapping[str, Any]) -> int | None:
    """The step ``payload`` asks for: one past the last reply of the script it holds (None: it holds none)."""
    position: int | None = None
    messages = payload.get("messages")
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, Mapping):
            continue
        after = start if position is None else position
        if message.get("role") == "assistant":
            step = index.step_of(message, after)
        elif message.get("role") == "user":
            step = index.results_step(message)
        else:
            step = None
        if step is not None:
            position = max(step + 1, position or 0)
    return position
