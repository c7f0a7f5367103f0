"""What the simulator keeps per conversation and per response is small, and answers as it did when it kept more.

:class:`runtime.sim.conversations.ConversationScripts` keeps an answered
request's step (not its reply) under a raw digest, and only the most recently
used scripts' step indexes; :class:`runtime.sim.diagnostics.Fingerprint` keeps
raw digests. Pure and synchronous (no event loop): nothing here runs on
asyncio or trio.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.scripted.policies import ScriptCall, ScriptPolicy, ScriptStep
from runtime.sim.conversations import KEPT_INDEXES, ConversationScripts
from runtime.sim.diagnostics import cache_miss_reason, fingerprint
from runtime.sim.layout import build_layout
from runtime.sim.tokens import SimTokenCounter


def _policy(node: str, steps: int) -> ScriptPolicy:
    calls = [
        ScriptStep(tool_calls=[ScriptCall.create("synthetic_read", {"path": f"{node}-{i}.md"})]) for i in range(steps)
    ]
    return ScriptPolicy(node, [*calls, ScriptStep(text=f"{node} is done.")])


def _follow(payload: dict[str, Any], reply: Any) -> dict[str, Any]:
    results = [
        {"type": "tool_result", "tool_use_id": block["id"], "content": "ok"}
        for block in reply.content
        if block["type"] == "tool_use"
    ]
    assistant = {"role": "assistant", "content": list(reply.content)}
    user = {"role": "user", "content": results or [{"type": "text", "text": "Go on."}]}
    return {**payload, "messages": [*payload["messages"], assistant, user]}


@settings(max_examples=60, deadline=None)
@given(nodes=st.integers(1, 5), steps=st.integers(1, 4), kept=st.integers(1, 3), retry_every=st.integers(1, 3))
def test_a_retry_is_answered_as_the_first_attempt_with_indexes_dropped_and_rebuilt(
    nodes: int, steps: int, kept: int, retry_every: int
) -> None:
    policies = [_policy(f"n{i}", steps) for i in range(nodes)]
    scripts = ConversationScripts(kept_indexes=kept)
    payloads = {p.node_id: {"messages": [{"role": "user", "content": f"Read, {p.node_id}."}]} for p in policies}
    first_answers: dict[str, list[Any]] = {p.node_id: [] for p in policies}
    for round_ in range(steps + 1):
        for policy in policies:  # the conversations interleave: each index is dropped and built again
            payload = payloads[policy.node_id]
            reply = scripts.respond(policy, payload)
            first_answers[policy.node_id].append((payload, reply))
            if round_ % retry_every == 0:
                assert scripts.respond(policy, payload) == reply  # a retry: the same answer, no step used
            payloads[policy.node_id] = _follow(payload, reply)
            assert len(scripts._indexes) <= kept
    for policy in policies:  # every earlier request again, in any order: the answer it first got
        for payload, reply in reversed(first_answers[policy.node_id]):
            assert scripts.respond(policy, payload) == reply
    # What is kept per answered request: its step under a 32-byte digest, not the reply.
    assert all(len(key) == 32 and isinstance(step, int) for key, step in scripts._answers.items())
    assert 1_024 <= KEPT_INDEXES


def _payload(messages: list[str], *, system: str = "Be exact.", tool: str = "read") -> dict[str, Any]:
    roles = ["user", "assistant"]
    return {
        "model": "claude-haiku-5-5",
        "tools": [{"name": tool, "input_schema": {"type": "object"}}],
        "system": [{"type": "text", "text": system}],
        "messages": [
            {"role": roles[i % 2], "content": [{"type": "text", "text": text}]} for i, text in enumerate(messages)
        ],
    }


def _printed(payload: dict[str, Any]) -> tuple[Any, Any]:
    layout = build_layout(payload, SimTokenCounter(), lookback_collapse=False)
    return fingerprint(payload, layout), layout


WORDS = st.text(st.sampled_from("abc "), min_size=1, max_size=12)


@settings(max_examples=100, deadline=None)
@given(previous=st.lists(WORDS, min_size=1, max_size=6), data=st.data())
def test_the_first_changed_message_and_the_tokens_missed_are_read_from_the_compact_fingerprint(
    previous: list[str], data: st.DataObject
) -> None:
    changed_at = data.draw(st.integers(0, len(previous)), label="changed_at")
    current = previous[:changed_at] + data.draw(st.lists(WORDS, max_size=3), label="after")
    before, layout = _printed(_payload(previous))
    after, _ = _printed(_payload(current))
    reason = cache_miss_reason(before, after)
    if current[: len(previous)] == previous:  # only appended: no divergence
        assert reason is None
        return
    first = next(m for m in range(len(previous)) if m >= len(current) or current[m] != previous[m])
    ends = [b.prefix_tokens for b in layout.blocks if b.location[0] == "messages"]  # one block a message here
    kept = ends[first - 1] if first > 0 else before.system_tokens
    assert reason == {"type": "messages_changed", "cache_missed_input_tokens": layout.total_tokens - kept}


def test_tools_system_and_settings_changes_are_told_apart() -> None:
    base, _ = _printed(_payload(["one", "ok", "two"]))
    assert cache_miss_reason(base, _printed(_payload(["one", "ok", "two"], tool="write"))[0]) == {
        "type": "tools_changed",
        "cache_missed_input_tokens": base.total,
    }
    assert cache_miss_reason(base, _printed(_payload(["one", "ok", "two"], system="Be brief."))[0]) == {
        "type": "system_changed",
        "cache_missed_input_tokens": base.total - base.tools_tokens,
    }
    thinking = _payload(["one", "ok", "two"]) | {"tool_choice": {"type": "none"}}
    assert cache_miss_reason(base, _printed(thinking)[0]) == {"type": "unavailable"}
    assert len(base.message_keys) == 32 * 3 and len(base.tools) == len(base.system) == len(base.seed) == 32
