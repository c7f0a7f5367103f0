"""Anthropic's server-side context editing on the simulator: a worked example, then the rules one by one.

The worked example (:func:`test_clear_tool_uses_worked_example`): a system
prompt cached on its own breakpoint (``S`` tokens), a tool ``read``, and a
conversation that grows by one tool round per request, each result ``R``
tokens; the top-level ``cache_control`` marks the last block of every
request. The edit is ``clear_tool_uses_20250919`` with ``keep`` 2 tool uses
and a ``trigger`` of 6,000 input tokens. Request ``n`` holds ``n`` rounds
(3,103 input tokens for one round, 1,211 more per round: :data:`TOTALS`):

====  ==========================  =============================================
 n    cleared (results)           the cache
====  ==========================  =============================================
 1-3  none (under the trigger)    each reads the previous request's whole
                                  prompt and writes its new round
 4    rounds 1 and 2              reads only the system prompt (S): the prompt
                                  changes at round 1's result, so the old
                                  entries no longer match; writes the rest
 5    rounds 1, 2 and 3           reads only S again (round 3's result is now
                                  cleared too); writes the rest
 6    rounds 1-4                  reads only S; writes the rest
====  ==========================  =============================================

``applied_edits`` reports the tool uses cleared and the tokens they held
(the unedited count less the edited count, both read from ``count_tokens``);
``count_tokens`` with the same ``context_management`` answers the edited count
and ``original_input_tokens``. The real SDK over real HTTP; asyncio and trio.
"""

from __future__ import annotations

from typing import Any

import anthropic
import pytest
from sdk_sim import default_model_client

from runtime.sim.context_edits import CLEARED_RESULT

pytestmark = pytest.mark.anyio

MODEL = "claude-sonnet-4-6"  # minimum cacheable prefix: 1,024 simulator tokens
BETA = "context-management-2025-06-27"
SYSTEM = [{"type": "text", "text": "Read files carefully. " * 400, "cache_control": {"type": "ephemeral"}}]
TOOLS = [{"name": "read", "description": "read a file", "input_schema": {"type": "object"}}]
RESULT = "alpha beta gamma delta " * 250
EDIT = {
    "type": "clear_tool_uses_20250919",
    "trigger": {"type": "input_tokens", "value": 6_000},
    "keep": {"type": "tool_uses", "value": 2},
}

TOTALS = [3_103, 4_314, 5_525, 6_736, 7_947, 9_158]
"""Request n's input tokens unedited (the simulator's count at its default factor 1.15): 1,211 more per round."""


running = default_model_client


def conversation(rounds: int, cleared: int = 0) -> list[dict[str, Any]]:
    """``rounds`` tool rounds after the instruction; the first ``cleared`` results as the edit leaves them."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read the files one by one."}]
    for n in range(1, rounds + 1):
        use = {"type": "tool_use", "id": f"toolu_{n:02d}", "name": "read", "input": {"path": f"f{n}"}}
        content = CLEARED_RESULT if n <= cleared else f"file {n}: {RESULT}"
        messages.append({"role": "assistant", "content": [use]})
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": content}]}
        )
    return messages


async def count(client: anthropic.AsyncAnthropic, messages: list[dict[str, Any]]) -> int:
    counted = await client.messages.count_tokens(model=MODEL, system=SYSTEM, tools=TOOLS, messages=messages)
    return counted.input_tokens


async def send(client: anthropic.AsyncAnthropic, messages: list[dict[str, Any]], edits: list[Any]) -> Any:
    return await client.beta.messages.create(
        model=MODEL,
        max_tokens=200,
        system=SYSTEM,
        tools=TOOLS,
        messages=messages,
        cache_control={"type": "ephemeral"},
        context_management={"edits": edits},
        betas=[BETA],
    )


async def test_clear_tool_uses_worked_example() -> None:
    async with running() as (sim, client):
        totals = [await count(client, conversation(n)) for n in range(1, 7)]
        assert totals == TOTALS  # requests 1-3 under the 6,000 trigger, 4 on over it
        replies = [await send(client, conversation(n), [EDIT]) for n in range(1, 7)]
        edited = {n: await count(client, conversation(n, cleared=n - 2)) for n in (4, 5, 6)}
        counted = await client.beta.messages.count_tokens(
            model=MODEL,
            system=SYSTEM,
            tools=TOOLS,
            messages=conversation(4),
            context_management={"edits": [EDIT]},
            betas=[BETA],
        )
        entries = sim.app.cache_entries("sk-sim", MODEL)
    system_entry = next(e.prefix_tokens for e in entries if e.location == ("system", 0))  # S: tools and system
    for n, reply in enumerate(replies[:3], start=1):
        assert reply.context_management.applied_edits == []
        usage = reply.usage
        assert usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens == TOTALS[n - 1]
        assert usage.cache_read_input_tokens == (TOTALS[n - 2] if n > 1 else 0)  # the previous whole prompt
    for n in (4, 5, 6):
        reply = replies[n - 1]
        [applied] = reply.context_management.applied_edits
        assert applied.type == "clear_tool_uses_20250919"
        assert applied.cleared_tool_uses == n - 2  # every round but the 2 most recent
        assert applied.cleared_input_tokens == TOTALS[n - 1] - edited[n]
        usage = reply.usage
        assert usage.cache_read_input_tokens == system_entry  # the prompt changed at round 1's result
        assert usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens == edited[n]
    assert edited[4] < TOTALS[2]  # clearing two of four rounds leaves less than three whole rounds
    assert counted.input_tokens == edited[4]
    assert counted.context_management.original_input_tokens == TOTALS[3]


async def test_clear_at_least_leaves_the_prompt_alone_when_too_little_would_go() -> None:
    greedy = {**EDIT, "clear_at_least": {"type": "input_tokens", "value": 1_000_000}}
    async with running() as (_, client):
        total = await count(client, conversation(4))
        reply = await send(client, conversation(4), [greedy])
    assert reply.context_management.applied_edits == []
    assert (
        reply.usage.input_tokens + reply.usage.cache_creation_input_tokens + reply.usage.cache_read_input_tokens
        == total
    )


async def test_exclude_tools_and_clear_tool_inputs() -> None:
    tools = [*TOOLS, {"name": "keep_me", "input_schema": {"type": "object"}}]
    messages = conversation(4)
    messages[1]["content"][0]["name"] = "keep_me"  # round 1 uses a tool the edit excludes
    edit = {**EDIT, "exclude_tools": ["keep_me"], "clear_tool_inputs": True}
    async with running() as (sim, client):
        reply = await client.beta.messages.create(
            model=MODEL,
            max_tokens=200,
            system=SYSTEM,
            tools=tools,
            messages=messages,
            context_management={"edits": [edit]},
            betas=[BETA],
        )
    [applied] = reply.context_management.applied_edits
    assert applied.cleared_tool_uses == 1  # round 2 only: round 1 is excluded, rounds 3-4 are kept
    assert sim.app.requests[-1].status == 200


async def test_clear_thinking_keeps_the_most_recent_thinking_turns() -> None:
    async with running() as (_, client):
        thinking = {"type": "enabled", "budget_tokens": 1_024}
        first = await client.messages.create(
            model=MODEL,
            max_tokens=2_000,
            thinking=thinking,
            tools=TOOLS,
            messages=[{"role": "user", "content": "Read f1"}],
        )
        messages: list[Any] = [{"role": "user", "content": "Read f1"}, {"role": "assistant", "content": first.content}]
        use = next(b for b in first.content if b.type == "tool_use")
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "one"}]})
        second = await client.messages.create(
            model=MODEL, max_tokens=2_000, thinking=thinking, tools=TOOLS, messages=messages
        )
        messages += [{"role": "assistant", "content": second.content}, {"role": "user", "content": "and now?"}]
        edit = {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}
        reply = await client.beta.messages.create(
            model=MODEL,
            max_tokens=2_000,
            thinking=thinking,
            tools=TOOLS,
            messages=messages,
            context_management={"edits": [edit]},
            betas=[BETA],
        )
        kept = await client.beta.messages.create(
            model=MODEL,
            max_tokens=2_000,
            thinking=thinking,
            tools=TOOLS,
            messages=messages,
            context_management={"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
            betas=[BETA],
        )
    [applied] = reply.context_management.applied_edits
    assert applied.type == "clear_thinking_20251015" and applied.cleared_thinking_turns == 1
    assert applied.cleared_input_tokens > 0
    assert kept.context_management.applied_edits == []


@pytest.mark.parametrize(
    ("edits", "thinking", "message"),
    [
        ([{"type": "compact_20260112"}], None, "compact_20260112 needs the anthropic-beta header to name 'compact"),
        ([{"type": "clear_everything"}], None, "context_management.edits.0.type: expected"),
        (
            [EDIT, {"type": "clear_thinking_20251015"}],
            {"type": "enabled", "budget_tokens": 1024},
            "must be the first edit",
        ),
        ([{"type": "clear_thinking_20251015"}], None, "requires thinking to be enabled"),
        ([{**EDIT, "keep": {"type": "tool_uses", "value": -1}}], None, "edits.0.keep: expected"),
        ([{**EDIT, "placeholder": "x"}], None, "edits.0.placeholder: Extra inputs are not permitted"),
    ],
)
async def test_bad_edits_are_refused_with_their_key_path(edits: list[Any], thinking: Any, message: str) -> None:
    extra = {"thinking": thinking} if thinking else {}
    async with running() as (_, client):
        with pytest.raises(anthropic.BadRequestError) as raised:
            await client.beta.messages.create(
                model=MODEL,
                max_tokens=2_000,
                messages=conversation(1),
                tools=TOOLS,
                context_management={"edits": edits},
                betas=[BETA],
                **extra,
            )
    assert message in raised.value.message
