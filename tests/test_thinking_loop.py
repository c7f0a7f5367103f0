"""Signed thinking through the official SDK against the simulator (issue 14).

A tool loop with thinking on gives every earlier reply's blocks back, the
simulator verifies each signature, and the blocks sit in the cached prefix; a
fold drops exactly the blocks of replies made before it; a tampered block gets
the API's 400 and the runtime reports a failed attempt.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from sdk_sim import run_node, simulated
from support import READER, calls, iterative, read, text

THINKING = {"type": "enabled", "budget_tokens": 1024}
SYSTEM = "You are a meticulous reader who thinks before each step. " * 60


def folds_of(payload: dict[str, Any]) -> list[str]:
    """The fold ids a payload's notes name."""
    return re.findall(r"\[fold (f-\w+)", str(payload["messages"]))


def thinking_of(payload: dict[str, Any]) -> list[list[str]]:
    """Per assistant message, the types of its thinking blocks."""
    return [
        [b["type"] for b in m["content"] if b["type"] in ("thinking", "redacted_thinking")]
        for m in payload["messages"]
        if m["role"] == "assistant"
    ]


@pytest.mark.anyio
async def test_a_twelve_round_tool_loop_gives_every_earlier_block_back_verified_and_cached() -> None:
    rounds = 12
    script = [calls(read(f"doc{i}.md", 600)) for i in range(rounds)] + [text("all read")]
    profile = READER.evolve(system=SYSTEM, prompt_caching=True, thinking=THINKING, max_tokens=4096)
    async with simulated({"n": script}) as (sim, capture, clock):
        result = await run_node(capture, clock, profile, iterative("read", max_rounds=rounds + 1))
        assert result.status == "ok", result["n"].reason
        payloads = capture.payloads
        assert len(payloads) == rounds + 1
        for k, payload in enumerate(payloads):
            assert payload["thinking"] == THINKING
            # every earlier reply carries its one thinking block, first among its blocks
            assert thinking_of(payload) == [["thinking"]] * k
            for m in payload["messages"]:
                if m["role"] == "assistant":
                    assert m["content"][0]["type"] == "thinking"
                    assert all("cache_control" not in b for b in m["content"] if b["type"] == "thinking")
        assert sim.app.thinking.verified == sum(range(rounds + 1))  # every given-back block verified
        served = [r for r in sim.requests if r.path == "/v1/messages"]
        assert all(r.status == 200 for r in served)
        last = payloads[-1]
        thinking_tokens = sum(
            sim.app.counter.block_tokens(b)
            for m in last["messages"][:-2]
            for b in m["content"]
            if b.get("type") == "thinking"
        )
        assert served[-1].usage is not None and served[-1].usage.cache_read_input_tokens > thinking_tokens > 0


@pytest.mark.anyio
async def test_a_tampered_block_gets_the_apis_400_and_fails_the_attempt_not_the_process() -> None:
    script = [calls(read(f"doc{i}.md", 300)) for i in range(3)] + [text("done")]
    profile = READER.evolve(thinking=THINKING, max_tokens=4096)
    async with simulated({"n": script}) as (sim, capture, clock):
        capture.tamper_on = 3
        result = await run_node(capture, clock, profile, iterative("read", max_rounds=4))
        assert result.status == "failed"
        reason = result["n"].reason
        assert "HTTP 400 invalid_request_error" in reason and "Invalid `signature` in `thinking` block" in reason
        refused = [r for r in sim.requests if r.status == 400]
        assert len(refused) == 1 and "messages.1.content.0" in (refused[0].error_message or "")


@pytest.mark.anyio
async def test_a_fold_mid_loop_drops_exactly_the_blocks_made_before_it_and_the_simulator_accepts() -> None:
    rounds = 12
    script = [calls(read(f"doc{i}.md", 1500)) for i in range(rounds)] + [text("all read")]
    # The fixed fractions: their folds are tool_io notes; the cost policy's deeper target also asks for a
    # summary, which this simulator (no default policy) answers 400, and that is not what this test is about.
    profile = READER.evolve(
        thinking=THINKING,
        max_tokens=4096,
        max_input_tokens=6000,
        context_management=True,
        tools=("synthetic_read",),
        fold_policy="fixed",
    )
    async with simulated({"n": script}) as (sim, capture, clock):
        result = await run_node(capture, clock, profile, iterative("read the docs", max_rounds=rounds + 2))
        assert result.status == "ok", result["n"].reason
        served = [r for r in sim.requests if r.path == "/v1/messages"]
        assert all(r.status == 200 for r in served)  # every request, folded or not, accepted
        folded_at = [k for k, p in enumerate(capture.payloads) if "[fold f-" in str(p["messages"])]
        assert folded_at, "the loop never folded"
        first = folded_at[0]
        before, after = capture.payloads[first - 1], capture.payloads[first]
        # the first folded request gives back no block of a reply made before the fold ...
        assert thinking_of(after) and all(kinds == [] for kinds in thinking_of(after))
        assert any(kinds for kinds in thinking_of(before))
        # ... and later requests under the same fold keep the blocks of every reply made after it
        # (folds stop at their target, so a later request may fold again: those are not compared)
        same = [k for k in range(first + 1, len(capture.payloads)) if folds_of(capture.payloads[k]) == folds_of(after)]
        assert same, "no request after the first fold was sent under it"
        made_after = same[-1] - first
        kept = thinking_of(capture.payloads[same[-1]])
        assert kept[-made_after:] == [["thinking"]] * made_after
        assert all(kinds == [] for kinds in kept[:-made_after])
        assert sim.app.thinking.verified > 0
