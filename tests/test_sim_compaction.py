"""Anthropic's server-side compaction (``compact_20260112``) on the simulator: the real SDK over real HTTP.

The worked example (:func:`test_compaction_worked_example`): a cached system
prompt, a first user message of about 60,000 tokens and the edit
``compact_20260112`` with its least trigger, 50,000 input tokens.

1. The request is over the trigger: a compaction pass summarizes it (the
   ``compaction`` entry of ``usage.iterations``: the whole prompt in, the
   summary out), then the model answers from the summary alone (the
   ``message`` entry, which is also the top-level usage). The content is the
   ``compaction`` block, then the reply.
2. The client appends the reply, block included, and asks again: everything
   before the block is dropped, so the request counts (``count_tokens``) and
   bills what the block and the turns after it hold, and the cache reads the
   prefix the answer pass wrote (system, then the block): the compacted span
   is not read from the cache any more.

With ``pause_after_compaction`` the response is the block alone
(``stop_reason`` ``"compaction"``, no top-level usage); sending it back has the
model continue. asyncio and trio.
"""

from __future__ import annotations

from typing import Any

import anthropic
import pytest
from sdk_sim import default_model_client

from runtime.scripted.default_model import DefaultModel
from runtime.scripted.policies import PolicyRegistry, ScriptPolicy, ScriptStep
from runtime.sim.clock import ManualClock
from runtime.sim.config import SimConfig
from runtime.sim.server import serve_simulator

pytestmark = pytest.mark.anyio

MODEL = "claude-sonnet-4-6"
BETA = "compact-2026-01-12"
SYSTEM = [{"type": "text", "text": "Answer from what you were told. " * 200, "cache_control": {"type": "ephemeral"}}]
BIG = "The archive lists ledger entries one by one in order. " * 5_000  # about 60,000 simulator tokens
COMPACT = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000}}


def first_turn() -> list[dict[str, Any]]:
    return [{"role": "user", "content": BIG}]


async def create(
    client: anthropic.AsyncAnthropic, messages: list[dict[str, Any]], edit: dict[str, Any] = COMPACT
) -> Any:
    return await client.beta.messages.create(
        model=MODEL,
        max_tokens=300,
        system=SYSTEM,
        messages=messages,
        cache_control={"type": "ephemeral"},
        context_management={"edits": [edit]},
        betas=[BETA],
    )


async def count(client: anthropic.AsyncAnthropic, messages: list[dict[str, Any]]) -> int:
    counted = await client.beta.messages.count_tokens(
        model=MODEL, system=SYSTEM, messages=messages, context_management={"edits": [COMPACT]}, betas=[BETA]
    )
    return counted.input_tokens


def block_of(reply: Any) -> dict[str, Any]:
    return reply.content[0].model_dump(mode="json", exclude_unset=True)


def total(usage: Any) -> int:
    return usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens


async def test_compaction_worked_example() -> None:
    async with default_model_client() as (_, client):
        whole = await count(client, first_turn())
        assert whole > 50_000
        reply = await create(client, first_turn())
        block = block_of(reply)
        assert block["type"] == "compaction" and block["content"].startswith("<summary>\nSummary of 1 earlier")
        assert [b.type for b in reply.content] == ["compaction", "text"] and reply.stop_reason == "end_turn"
        squeezed, answer = reply.usage.iterations
        assert (squeezed.type, answer.type) == ("compaction", "message")
        assert total(squeezed) == whole  # the compaction pass reads the whole prompt
        assert squeezed.output_tokens > 0
        only_block = [{"role": "assistant", "content": [block]}]
        assert total(answer) == await count(client, only_block)  # the answer pass sees the summary alone
        assert total(reply.usage) == total(answer) and reply.usage.output_tokens == answer.output_tokens

        history = [
            *first_turn(),
            {"role": "assistant", "content": [b.model_dump(mode="json", exclude_unset=True) for b in reply.content]},
            {"role": "user", "content": "And the last entry?"},
        ]
        kept = history[1:]  # what the block and the turns after it hold
        assert await count(client, history) == await count(client, kept) < whole
        again = await create(client, history)
        assert [b.type for b in again.content] == ["text"] and again.usage.iterations is None
        assert total(again.usage) == await count(client, kept)
        # The answer pass cached system + block (its last block, marked by the top-level cache_control);
        # the compaction pass's entry, at the end of the whole prompt, is never read again.
        assert squeezed.cache_creation_input_tokens == whole - squeezed.cache_read_input_tokens
        assert again.usage.cache_read_input_tokens == total(answer)


async def test_pause_after_compaction_returns_the_block_alone_and_the_model_continues() -> None:
    paused = {**COMPACT, "pause_after_compaction": True}
    async with default_model_client() as (_, client):
        reply = await create(client, first_turn(), paused)
        assert reply.stop_reason == "compaction" and [b.type for b in reply.content] == ["compaction"]
        assert (reply.usage.input_tokens, reply.usage.output_tokens) == (0, 0)
        [squeezed] = reply.usage.iterations
        assert squeezed.type == "compaction" and total(squeezed) == await count(client, first_turn())
        resumed = [*first_turn(), {"role": "assistant", "content": [block_of(reply)]}]
        go_on = await create(client, resumed, paused)
        assert go_on.stop_reason == "end_turn" and [b.type for b in go_on.content] == ["text"]
        assert total(go_on.usage) == await count(client, resumed[1:])


async def test_a_streamed_compaction_matches_the_whole_response() -> None:
    async with default_model_client() as (_, client):
        whole = await create(client, first_turn())
        async with client.beta.messages.stream(
            model=MODEL,
            max_tokens=300,
            system=SYSTEM,
            messages=first_turn(),
            context_management={"edits": [COMPACT]},
            betas=[BETA],
        ) as stream:
            kinds = [event.type async for event in stream]
            streamed = await stream.get_final_message()
    assert "content_block_start" in kinds
    assert [block_of(streamed)] == [block_of(whole)]
    assert streamed.content[1].text == whole.content[1].text
    assert [i.type for i in streamed.usage.iterations] == ["compaction", "message"]
    assert streamed.usage.iterations[0].output_tokens == whole.usage.iterations[0].output_tokens


async def test_a_script_gives_the_summary_and_its_step_answers_after_the_pause() -> None:
    steps = [ScriptStep(text="The last entry is 5,000.", compaction="<summary>ledger of 5,000 entries</summary>")]
    policies = PolicyRegistry({"n": ScriptPolicy("n", steps)}, default=DefaultModel(calls="one"))
    clock = ManualClock()
    async with serve_simulator(SimConfig(), policies, clock, sleep=clock.sleep) as sim:
        client = anthropic.AsyncAnthropic(
            base_url=sim.base_url, api_key="sk-sim", max_retries=0, default_headers={"x-foldline-node": "n"}
        )
        try:
            paused = await create(client, first_turn(), {**COMPACT, "pause_after_compaction": True})
            assert block_of(paused)["content"] == "<summary>ledger of 5,000 entries</summary>"
            resumed = [*first_turn(), {"role": "assistant", "content": [block_of(paused)]}]
            answer = await create(client, resumed, {**COMPACT, "pause_after_compaction": True})
        finally:
            await client.close()
    assert answer.content[0].text == "The last entry is 5,000."


@pytest.mark.parametrize(
    ("edit", "messages", "message"),
    [
        (
            {**COMPACT, "trigger": {"type": "input_tokens", "value": 10_000}},
            None,
            "context_management.edits.0.trigger.value: must be at least 50000, got 10000",
        ),
        ({**COMPACT, "keep": 3}, None, "context_management.edits.0.keep: Extra inputs are not permitted"),
        (
            {**COMPACT, "pause_after_compaction": "yes"},
            None,
            "context_management.edits.0.pause_after_compaction: expected a boolean",
        ),
        (
            {"type": "clear_tool_uses_20250919"},
            [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "compaction", "content": "<summary>x</summary>"}]},
            ],
            "messages.1.content.0: a compaction block needs the request's context_management.edits to declare",
        ),
        (
            COMPACT,
            [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "compaction", "content": ""}]},
            ],
            "messages.1.content.0.content: expected a non-empty string or null",
        ),
    ],
)
async def test_bad_compaction_requests_are_refused_with_their_key_path(
    edit: dict[str, Any], messages: list[dict[str, Any]] | None, message: str
) -> None:
    async with default_model_client() as (_, client):
        with pytest.raises(anthropic.BadRequestError) as raised:
            await client.beta.messages.create(
                model=MODEL,
                max_tokens=100,
                messages=messages or [{"role": "user", "content": "hi"}],
                context_management={"edits": [edit]},
                betas=[BETA, "context-management-2025-06-27"],
            )
    assert message in raised.value.message


async def test_a_failed_compaction_block_is_a_no_op() -> None:
    failed = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "compaction", "content": None}, {"type": "text", "text": "hello"}]},
    ]
    async with default_model_client() as (_, client):
        # Nothing before a failed block is dropped: the first message still counts.
        assert await count(client, failed) > await count(client, failed[1:])


async def test_thinking_after_a_compaction_verifies_when_it_is_sent_back() -> None:
    """The reply after a compaction joins the block's assistant message: its thinking is signed that way."""
    thinking = {"type": "enabled", "budget_tokens": 1_024}
    async with default_model_client() as (_, client):
        ask = {"model": MODEL, "max_tokens": 2_000, "system": SYSTEM, "thinking": thinking, "betas": [BETA]}
        reply = await client.beta.messages.create(messages=first_turn(), context_management={"edits": [COMPACT]}, **ask)
        assert [b.type for b in reply.content] == ["compaction", "thinking", "text"]
        history = [
            *first_turn(),
            {"role": "assistant", "content": [b.model_dump(mode="json", exclude_unset=True) for b in reply.content]},
            {"role": "user", "content": "And the last entry?"},
        ]
        again = await client.beta.messages.create(messages=history, context_management={"edits": [COMPACT]}, **ask)
    assert again.content[0].type == "thinking"  # the given-back thinking verified: no 400
