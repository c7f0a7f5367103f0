"""Message roles as the API takes them: mid-conversation system messages, and same-role turns combined.

Mid-conversation ``system`` messages (Anthropic's page "Mid-conversation
system messages"): a ``{"role": "system"}`` message placed right after a user
turn (or an assistant turn ending in a server tool use), last or followed by
an assistant turn, on a model that takes them; the prefix before it is cached
as before. Consecutive user (or assistant) turns are combined into one turn.
The real ``anthropic`` SDK over real HTTP; asyncio and trio.
"""

from __future__ import annotations

from typing import Any

import anthropic
import pytest
from sdk_sim import default_model_client

from runtime.sim.models import supports_system_messages

pytestmark = pytest.mark.anyio

MODEL = "claude-opus-4-8"
LONG = "Background for the whole session. " * 300


running = default_model_client


def body(messages: list[dict[str, Any]], model: str = MODEL, **extra: Any) -> dict[str, Any]:
    return {"model": model, "max_tokens": 300, "messages": messages, **extra}


USER = {"role": "user", "content": "Review the module."}
ASSISTANT = {"role": "assistant", "content": "I found three issues."}
SYSTEM = {"role": "system", "content": "Now focus on performance only."}


async def test_a_mid_conversation_system_message_is_taken_and_the_user_turn_before_it_answered() -> None:
    async with running() as (sim, client):
        last = await client.messages.create(**body([USER, ASSISTANT, {"role": "user", "content": "And now?"}, SYSTEM]))
        before = await client.messages.create(**body([USER, SYSTEM, ASSISTANT, {"role": "user", "content": "Next"}]))
    assert last.content[0].text == "Simulated answer to: And now?"
    assert before.content[0].text == "Simulated answer to: Next"
    assert [r.status for r in sim.app.requests] == [200, 200]


async def test_a_system_message_keeps_the_cached_prefix_before_it() -> None:
    first = [{"role": "user", "content": [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}]}]
    async with running() as (_, client):
        write = await client.messages.create(**body(first))
        read = await client.messages.create(**body([*first, SYSTEM]))
        changed_top = await client.messages.create(**body(first, system="Now focus on performance only."))
    assert write.usage.cache_creation_input_tokens > 0
    assert read.usage.cache_read_input_tokens == write.usage.cache_creation_input_tokens
    assert read.usage.input_tokens > 0  # the system message itself is new input
    assert changed_top.usage.cache_read_input_tokens == 0  # editing the top-level system misses


@pytest.mark.parametrize(
    ("messages", "model", "message"),
    [
        ([SYSTEM, USER], MODEL, "messages.0: a system message must immediately follow a user message"),
        ([USER, ASSISTANT, SYSTEM], MODEL, "messages.2: a system message must immediately follow a user message"),
        ([USER, SYSTEM, USER], MODEL, "messages.1: a system message must be the last message or be followed by an"),
        ([USER, SYSTEM, SYSTEM], MODEL, "messages.1: a system message must be the last message or be followed"),
        ([USER, {"role": "system", "content": ""}], MODEL, "messages.1.content: expected a non-empty string"),
        (
            [USER, {"role": "system", "content": [{"type": "image", "source": {}}]}],
            MODEL,
            "messages.1.content.0: a system message holds text blocks only",
        ),
        ([USER, SYSTEM], "claude-sonnet-4-6", "messages.1.role: mid-conversation system messages are not supported"),
    ],
)
async def test_misplaced_system_messages_are_refused(messages: list[dict[str, Any]], model: str, message: str) -> None:
    async with running() as (_, client):
        with pytest.raises(anthropic.BadRequestError) as raised:
            await client.messages.create(**body(messages, model))
    assert message in raised.value.message
    assert raised.value.body["error"]["type"] == "invalid_request_error"


async def test_a_system_message_may_follow_an_assistant_turn_ending_in_a_server_tool_use() -> None:
    server_use = {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "x"}}
    messages = [USER, {"role": "assistant", "content": [server_use]}, SYSTEM]
    async with running() as (_, client):
        reply = await client.messages.create(**body(messages))
    assert reply.stop_reason == "end_turn"


async def test_consecutive_same_role_turns_are_combined_into_one() -> None:
    split = [{"role": "user", "content": "first part"}, {"role": "user", "content": "second part"}]
    joined = [
        {"role": "user", "content": [{"type": "text", "text": "first part"}, {"type": "text", "text": "second part"}]}
    ]
    async with running() as (_, client):
        split_count = await client.messages.count_tokens(model=MODEL, messages=split)
        joined_count = await client.messages.count_tokens(model=MODEL, messages=joined)
        reply = await client.messages.create(**body(split))
        two_assistants = [USER, ASSISTANT, {"role": "assistant", "content": "More."}, {"role": "user", "content": "ok"}]
        after = await client.messages.create(**body(two_assistants))
    assert split_count.input_tokens == joined_count.input_tokens
    assert reply.content[0].text == "Simulated answer to: first part second part"
    assert after.content[0].text == "Simulated answer to: ok"


def test_which_models_take_system_messages() -> None:
    assert supports_system_messages("claude-opus-4-8") and supports_system_messages("claude-opus-4-8-20260528")
    assert supports_system_messages("claude-opus-5-5")
    assert not supports_system_messages("claude-sonnet-4-6") and not supports_system_messages("claude-opus-4-7")
