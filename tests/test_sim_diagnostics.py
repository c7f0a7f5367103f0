"""Prompt-cache diagnostics on the simulator: ``diagnostics.previous_message_id`` and ``cache_miss_reason``.

The reasons are the ``anthropic`` SDK's documented types; each case sends a
first request, then a second that names it and changes one thing. The real
SDK over real HTTP; asyncio and trio.
"""

from __future__ import annotations

from typing import Any

import anthropic
import pytest
from sdk_sim import default_model_client

pytestmark = pytest.mark.anyio

SYSTEM = "Be exact. " * 300
TOOLS = [{"name": "read", "input_schema": {"type": "object"}}]
FIRST = [{"role": "user", "content": "one"}, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "two"}]


running = default_model_client


def body(**change: Any) -> dict[str, Any]:
    return {
        "model": "claude-opus-4-8",
        "max_tokens": 300,
        "system": SYSTEM,
        "tools": TOOLS,
        "messages": FIRST,
        **change,
    }


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"model": "claude-sonnet-4-6"}, "model_changed"),
        ({"tools": [*TOOLS, {"name": "write", "input_schema": {"type": "object"}}]}, "tools_changed"),
        ({"system": SYSTEM + "More."}, "system_changed"),
        ({"messages": [{"role": "user", "content": "ONE"}, *FIRST[1:]]}, "messages_changed"),
        ({"tool_choice": {"type": "none"}}, "unavailable"),
        ({"messages": [*FIRST, {"role": "assistant", "content": "fine"}, {"role": "user", "content": "three"}]}, None),
    ],
)
async def test_the_reason_names_the_first_difference(change: dict[str, Any], reason: str | None) -> None:
    async with running() as (_, client):
        first = await client.messages.create(**body(), extra_body={"diagnostics": {"previous_message_id": None}})
        second = await client.messages.create(
            **body(**change), extra_body={"diagnostics": {"previous_message_id": first.id}}
        )
        plain = await client.messages.create(**body(**change))
    assert first.diagnostics is None and plain.diagnostics is None
    if reason is None:
        assert second.diagnostics is None  # only appended: no divergence
        return
    missed = second.diagnostics.cache_miss_reason
    assert missed.type == reason
    if reason != "unavailable":
        assert missed.cache_missed_input_tokens > 0
    if reason in ("model_changed", "tools_changed"):
        assert missed.cache_missed_input_tokens == first.usage.input_tokens + first.usage.cache_creation_input_tokens


async def test_an_unknown_previous_message_is_not_found_and_a_bad_field_is_refused() -> None:
    async with running() as (_, client):
        reply = await client.messages.create(**body(), extra_body={"diagnostics": {"previous_message_id": "msg_nope"}})
        with pytest.raises(anthropic.BadRequestError, match="diagnostics.previous_message_id: expected"):
            await client.messages.create(**body(), extra_body={"diagnostics": {"previous_message_id": 3}})
    assert reply.diagnostics.cache_miss_reason.type == "previous_message_not_found"
