"""What the pinned ``anthropic`` SDK sends is accepted, what the API refuses is refused.

The accepted fields come from the SDK's own request types
(:mod:`runtime.sim.sdk_fields`); the tool runner's default ``thread`` field is
answered with the ``thread_unsupported_request`` details the SDK recognizes,
so ``client.beta.messages.tool_runner(...)`` completes with its defaults.
The real SDK over real HTTP; asyncio and trio.
"""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
import pytest
from anthropic import beta_async_tool
from sdk_sim import default_model_client

from runtime.scripted.default_model import DefaultModel
from runtime.scripted.policies import PolicyRegistry
from runtime.sim.clock import ManualClock
from runtime.sim.sdk_fields import block_types, create_keys
from runtime.sim.server import SimConfig, serve_simulator

pytestmark = pytest.mark.anyio

MODEL = "claude-opus-5"  # output limit 128,000 (runtime/data/models.toml)
CALLS: list[str] = []


@beta_async_tool
async def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city's name
    """
    CALLS.append(city)
    return f"sunny, 21 C in {city}"


running = default_model_client


def ask(**extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 2_000, "messages": [{"role": "user", "content": "Weather?"}], **extra}


async def test_the_beta_tool_runner_completes_with_the_sdks_defaults() -> None:
    CALLS.clear()
    async with running() as (sim, client):
        runner = client.beta.messages.tool_runner(**ask(), tools=[get_weather])
        final = await runner.until_done()
    assert CALLS == ["<city>"]
    assert final.content[0].text == "Simulated answer after 1 tool result(s): sunny, 21 C in <city>"
    refused = [r for r in sim.app.requests if r.status == 400]
    assert refused and all("message threads" in (r.error_message or "") for r in refused)
    assert [r.status for r in sim.app.requests if r.status != 400] == [200, 200]


async def test_a_thread_is_refused_with_the_details_the_sdk_reads() -> None:
    async with running() as (_, client):
        with pytest.raises(anthropic.BadRequestError) as raised:
            await client.beta.messages.create(**ask(thread={"type": "create"}))
    error = raised.value.body["error"]
    assert error["details"] == {"error_code": "thread_unsupported_request", "unsupported": ["thread"]}
    assert "not simulated" in error["message"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"thinking": {"type": "enabled", "budget_tokens": 1_023}}, "budget_tokens: Input should be greater than or"),
        ({"thinking": {"type": "enabled", "budget_tokens": 2_000}}, "`max_tokens` must be greater than"),
        ({"max_tokens": 128_001}, "max_tokens: 128001 > 128000, which is the maximum allowed"),
        ({"temperature": 1.5}, "temperature: Input should be a number from 0 to 1"),
        ({"top_p": -0.1}, "top_p: Input should be a number from 0 to 1"),
        ({"top_k": -1}, "top_k: Input should be an integer >= 0"),
        ({"frequency_penalty": 0.5}, "frequency_penalty: Extra inputs are not permitted"),
        ({"mcp_servers": [{"type": "url", "url": "https://x", "name": "x"}]}, "mcp_servers: not simulated"),
        (
            {"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "b", "clear_at": 1}]},
            "messages.1.clear_at: not simulated",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "made_up", "text": "x"}]}]},
            "messages.0.content.0.type: 'made_up' is not a block type allowed in a user message",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}]}]},
            "'tool_use' is not a block type allowed in a user message",
        ),
    ],
)
async def test_what_the_api_refuses_is_refused(extra: dict[str, Any], message: str) -> None:
    async with running() as (_, client):
        with pytest.raises(anthropic.BadRequestError) as raised:
            await client.messages.create(**ask(), extra_body=extra)  # extra_body: fields the SDK would not send
    assert message in raised.value.message


async def test_sampling_fields_within_range_and_documented_extras_are_taken() -> None:
    extras = {"temperature": 0.2, "top_p": 0.9, "top_k": 5, "service_tier": "auto"}
    async with running() as (_, client):
        reply = await client.messages.create(**ask(metadata={"user_id": "u1"}, inference_geo="us"), extra_body=extras)
        thinking = await client.messages.create(**ask(thinking={"type": "enabled", "budget_tokens": 1_024}))
    assert reply.stop_reason == "end_turn" and thinking.content[0].type == "thinking"


async def test_history_with_server_tool_blocks_is_accepted() -> None:
    server_use = {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "rain"}}
    result = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_01",
        "content": [
            {"type": "web_search_result", "url": "https://example.com", "title": "Rain", "encrypted_content": "e"}
        ],
    }
    messages = [
        {"role": "user", "content": "Will it rain?"},
        {"role": "assistant", "content": [server_use, result, {"type": "text", "text": "Maybe."}]},
        {"role": "user", "content": "Thanks"},
    ]
    async with running() as (_, client):
        reply = await client.messages.create(**ask(messages=messages))
    assert reply.content[0].text == "Simulated answer to: Thanks"


async def test_a_request_without_the_anthropic_version_header_is_refused() -> None:
    async with running() as (sim, _):
        async with httpx2.AsyncClient(base_url=sim.base_url) as raw:
            response = await raw.post("/v1/messages", json=ask(), headers={"x-api-key": "k"})
    assert response.status_code == 400
    assert response.json()["error"] == {
        "type": "invalid_request_error",
        "message": "anthropic-version: header is required",
    }


def test_the_accepted_fields_and_blocks_are_the_sdks() -> None:
    assert {"thread", "context_management", "output_config", "stream", "compaction"} <= create_keys()
    assert "betas" not in create_keys()
    assert {"server_tool_use", "web_search_tool_result", "compaction", "mcp_tool_use"} <= block_types()


async def test_the_chat_face_takes_the_standard_fields_and_refuses_bad_values() -> None:
    openai = pytest.importorskip("openai", reason="the openai extra (the chat face's own SDK)")

    fields = {
        "temperature": 0.7,
        "top_p": 0.5,
        "seed": 7,
        "n": 1,
        "metadata": {"run": "a"},
        "store": False,
        "logprobs": False,
        "frequency_penalty": 0.1,
        "presence_penalty": -0.1,
        "service_tier": "auto",
        "verbosity": "low",
        "logit_bias": {"42": -5},
        "safety_identifier": "user-1",
    }
    bad = [
        ({"n": 2}, "n: 2 is not 1"),
        ({"logprobs": True}, "logprobs: True is not false"),
        ({"top_p": 2}, "top_p: 2 is not a number from 0 to 1"),
        ({"verbosity": "loud"}, "verbosity: loud is not one of low, medium, high"),
        ({"metadata": {"k": 1}}, "metadata:"),
    ]
    async with running() as (sim, _):
        client = openai.AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="sk-sim", max_retries=0)
        try:
            reply = await client.chat.completions.create(
                model="gpt-5-mini", messages=[{"role": "user", "content": "Hi"}], **fields
            )
            errors = []
            for extra, _ in bad:
                with pytest.raises(openai.BadRequestError) as raised:
                    await client.chat.completions.create(
                        model="gpt-5-mini", messages=[{"role": "user", "content": "Hi"}], extra_body=extra
                    )
                errors.append(raised.value.message)
        finally:
            await client.close()
    assert reply.choices[0].message.content == "Simulated answer to: Hi"
    assert all(expected in got for (_, expected), got in zip(bad, errors, strict=True))


async def test_tool_use_ids_are_unique_per_request_even_for_identical_conversations() -> None:
    tools = [{"name": "lookup", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}]
    async with running() as (_, client):
        replies = [await client.messages.create(**ask(tools=tools)) for _ in range(3)]
    ids = [reply.content[0].id for reply in replies]
    assert len(set(ids)) == 3 and all(i.startswith("toolu_") for i in ids)
    assert {reply.content[0].input["q"] for reply in replies} == {"<q>"}  # same answer otherwise


async def test_message_batches_say_they_are_not_simulated() -> None:
    async with running() as (_, client):
        with pytest.raises(anthropic.NotFoundError) as raised:
            await client.messages.batches.create(requests=[{"custom_id": "a", "params": ask()}])
    assert "message batches are not simulated" in raised.value.message


async def test_a_script_calling_a_server_tool_is_told_it_is_not_simulated() -> None:
    from runtime.scripted.policies import ScriptCall, ScriptPolicy, ScriptStep

    step = ScriptStep(tool_calls=(ScriptCall.create("web_search", {"query": "rain"}),))
    policies = PolicyRegistry({"n": ScriptPolicy("n", [step])}, default=DefaultModel(calls="one"))
    clock = ManualClock()
    web = {"type": "web_search_20250305", "name": "web_search"}
    async with serve_simulator(SimConfig(), policies, clock, sleep=clock.sleep) as sim:
        async with anthropic.AsyncAnthropic(base_url=sim.base_url, api_key="k", max_retries=0) as client:
            with pytest.raises(anthropic.BadRequestError) as raised:
                await client.messages.create(**ask(tools=[web]), extra_headers={"x-foldline-node": "n"})
            offered = await client.messages.create(**ask(tools=[web]))  # offered, not called: answered
    assert "the server tool 'web_search' (web_search_20250305) is not simulated" in raised.value.message
    assert offered.stop_reason == "end_turn"


def test_the_core_the_simulator_knows_without_the_sdk_is_what_the_sdk_names() -> None:
    # The fast path (no SDK import for what foldline itself compiles) never accepts what the SDK does not name.
    from runtime.sim import sdk_fields

    assert sdk_fields.CORE_CREATE_KEYS <= sdk_fields.create_keys()
    assert sdk_fields.CORE_COUNT_KEYS <= sdk_fields.count_keys()
    assert all(sdk_fields.CORE_MESSAGE_KEYS <= sdk_fields.message_keys()[role] for role in ("user", "assistant"))
    assert sdk_fields.CORE_BLOCK_TYPES <= sdk_fields.block_types()
