"""The simulator's chat-completions face, through the official ``openai`` SDK over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

openai = pytest.importorskip("openai")

from runtime.scripted.default_model import DefaultModel  # noqa: E402
from runtime.scripted.faults import FaultRule  # noqa: E402
from runtime.scripted.policies import PolicyRegistry  # noqa: E402
from runtime.sim.chat.cache import INCREMENT, MIN_CACHED_TOKENS, ChatPrefixCache  # noqa: E402
from runtime.sim.clock import ManualClock  # noqa: E402
from runtime.sim.config import SimConfig  # noqa: E402
from runtime.sim.server import SimServer, serve_simulator  # noqa: E402

pytestmark = pytest.mark.anyio
KEY = "sk-sim-chat-test-key"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "look",
            "description": "Look a term up.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        },
    }
]


@asynccontextmanager
async def chat_sim(**config: Any) -> AsyncIterator[tuple[SimServer, Any]]:
    clock = ManualClock()
    async with serve_simulator(
        SimConfig(api_keys=frozenset({KEY}), **config), PolicyRegistry({}, default=DefaultModel(calls="one")), clock
    ) as sim:
        client = openai.AsyncOpenAI(api_key=KEY, base_url=sim.base_url + "/v1", max_retries=0)
        try:
            yield sim, client
        finally:
            await client.close()


def _system(words: int) -> dict[str, Any]:
    return {"role": "system", "content": " ".join(f"rule{i}" for i in range(words))}


async def _loop(client: Any, rounds: int, key: str | None) -> list[Any]:
    """A tool loop of ``rounds`` requests, each its predecessor with the reply and a result appended."""
    messages: list[dict[str, Any]] = [_system(900), {"role": "user", "content": "Find it."}]
    usages = []
    for n in range(rounds):
        extra = {"prompt_cache_key": key} if key is not None else {}
        reply = await client.chat.completions.create(model="gpt-sim", messages=messages, tools=TOOLS, **extra)
        usages.append(reply.usage)
        message = reply.choices[0].message.model_dump(exclude_none=True)
        messages.append(message)
        for call in message.get("tool_calls") or []:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": f"result {n} " + "x " * 60})
        if not message.get("tool_calls"):
            messages.append({"role": "user", "content": f"Look once more ({n})."})
    return usages


async def test_keyed_loop_reads_the_previous_prompt_rounded_down_to_128() -> None:
    async with chat_sim() as (sim, client):
        usages = await _loop(client, 12, "session-a")
    assert usages[0].prompt_tokens_details.cached_tokens == 0
    for before, after in zip(usages, usages[1:], strict=False):
        expected = before.prompt_tokens // INCREMENT * INCREMENT
        assert after.prompt_tokens_details.cached_tokens == expected
        assert after.prompt_tokens_details.cached_tokens % INCREMENT == 0
        assert after.prompt_tokens_details.cached_tokens >= MIN_CACHED_TOKENS


async def test_unkeyed_requests_spread_over_machines_and_read_less() -> None:
    async with chat_sim() as (sim, client):
        keyed = await _loop(client, 12, "session-b")
        unkeyed = await _loop(client, 12, None)
        machines = [r.chat_cache.machine for r in sim.requests[12:] if r.chat_cache is not None]
    read_keyed = sum(u.prompt_tokens_details.cached_tokens for u in keyed)
    read_unkeyed = sum(u.prompt_tokens_details.cached_tokens for u in unkeyed)
    assert machines == [n % 4 for n in range(12)]
    assert 0 < read_unkeyed < read_keyed


async def test_x_session_id_header_routes_like_the_key() -> None:
    async with chat_sim() as (sim, client):
        headered = openai.AsyncOpenAI(
            api_key=KEY, base_url=sim.base_url + "/v1", max_retries=0, default_headers={"X-Session-Id": "s1"}
        )
        try:
            usages = await _loop(headered, 6, None)
        finally:
            await headered.close()
        machines = {r.chat_cache.machine for r in sim.requests if r.chat_cache is not None}
    assert len(machines) == 1
    assert all(u.prompt_tokens_details.cached_tokens > 0 for u in usages[1:])


def test_short_prompts_are_not_cached() -> None:
    cache = ChatPrefixCache()
    segments = [("a", 600), ("b", 400)]
    first = cache.apply("s", "m", "k", segments, now=0.0, readable_at=0.0)
    second = cache.apply("s", "m", "k", segments, now=1.0, readable_at=1.0)
    assert (first.cached_tokens, second.cached_tokens) == (0, 0)
    longer = [("a", 600), ("b", 500), ("c", 10)]
    assert cache.apply("s", "m", "k", longer, now=2.0, readable_at=2.0).cached_tokens == 0
    assert cache.apply("s", "m", "k", longer + [("d", 5)], now=3.0, readable_at=3.0).cached_tokens == 1_024


def test_a_prefix_lives_five_minutes_from_its_last_use() -> None:
    cache = ChatPrefixCache()
    segments = [("a", 2_000)]
    cache.apply("s", "m", "k", segments, now=0.0, readable_at=0.0)
    assert cache.apply("s", "m", "k", segments, now=299.0, readable_at=299.0).cached_tokens == 1_920
    assert cache.apply("s", "m", "k", segments, now=700.0, readable_at=700.0).cached_tokens == 0


async def test_streaming_reports_usage_in_a_last_chunk_with_no_choices() -> None:
    async with chat_sim() as (sim, client):
        stream = await client.chat.completions.create(
            model="gpt-sim",
            messages=[{"role": "user", "content": "hello"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Simulated answer to: hello"
    assert chunks[-1].choices == [] and chunks[-1].usage.prompt_tokens > 0
    assert all(c.usage is None for c in chunks[:-1])
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"


async def test_streamed_tool_call_arrives_in_pieces() -> None:
    async with chat_sim() as (sim, client):
        stream = await client.chat.completions.create(
            model="gpt-sim", messages=[{"role": "user", "content": "look"}], tools=TOOLS, stream=True
        )
        deltas = [c.choices[0].delta for c in [chunk async for chunk in stream] if c.choices]
    calls = [call for d in deltas for call in d.tool_calls or []]
    assert calls[0].id and calls[0].function.name == "look"
    assert "".join(c.function.arguments or "" for c in calls) == '{"q":"<q>"}'


@pytest.mark.parametrize(
    ("body", "param", "fragment"),
    [
        ({"messages": [{"role": "user", "content": "x"}]}, "model", "is not a non-empty string"),
        ({"model": "m", "messages": []}, "messages", "array of 1 to"),
        ({"model": "m", "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role", "one of system"),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "frobnicate": 1}, "frobnicate", "Unrecognized"),
        (
            {"model": "m", "messages": [{"role": "tool", "tool_call_id": "c1", "content": "x"}]},
            "messages[0].tool_call_id",
            "does not answer a tool call",
        ),
        (
            {
                "model": "m",
                "messages": [
                    {"role": "user", "content": "x"},
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
                    },
                    {"role": "user", "content": "y"},
                ],
            },
            "messages[2]",
            "must be followed by tool messages",
        ),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, "max_tokens", "from 1 to"),
    ],
)
async def test_bad_requests_get_openais_error_envelope(body: dict[str, Any], param: str, fragment: str) -> None:
    async with chat_sim() as (sim, client):
        with pytest.raises(openai.BadRequestError) as caught:
            await client.post("/chat/completions", cast_to=dict, body=body)
    error = caught.value.body
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert fragment in error["message"]


async def test_a_wrong_key_is_a_401_in_openais_envelope() -> None:
    async with chat_sim() as (sim, client):
        other = openai.AsyncOpenAI(api_key="sk-wrong", base_url=sim.base_url + "/v1", max_retries=0)
        try:
            with pytest.raises(openai.AuthenticationError) as caught:
                await other.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        finally:
            await other.close()
    assert caught.value.body["type"] == "invalid_request_error"
    assert "sk-wrong" not in str(caught.value.body)


async def test_faults_answer_in_the_chat_envelope_with_retry_headers() -> None:
    rule = FaultRule.from_obj({"on_request": 1, "kind": "429", "retry_after_ms": 5}, "faults[0]")
    async with chat_sim(faults=(rule,)) as (sim, client):
        with pytest.raises(openai.RateLimitError) as caught:
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        again = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert caught.value.body["type"] == "rate_limit_exceeded"
    assert caught.value.response.headers["retry-after-ms"] == "5"
    assert again.choices[0].message.content


async def test_given_back_reasoning_details_are_checked_against_what_preceded_them() -> None:
    async with chat_sim() as (sim, client):
        sim.app.chat.dialect = "reasoning_details"
        messages: list[dict[str, Any]] = [{"role": "user", "content": "look"}]
        first = await client.chat.completions.create(model="m", messages=messages, tools=TOOLS, reasoning_effort="low")
        reply = first.choices[0].message.model_dump(exclude_none=True)
        assert reply["reasoning_details"][0]["signature"]
        call = reply["tool_calls"][0]["id"]
        good = [*messages, reply, {"role": "tool", "tool_call_id": call, "content": "r"}]
        await client.chat.completions.create(model="m", messages=good, tools=TOOLS, reasoning_effort="low")
        changed = [{"role": "user", "content": "look again"}, *good[1:]]
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(model="m", messages=changed, tools=TOOLS, reasoning_effort="low")
        assert "signature" in caught.value.body["message"]
        assert sim.app.thinking.verified == 1


@given(
    sizes=st.lists(st.integers(min_value=1, max_value=900), min_size=1, max_size=12),
    keep=st.integers(min_value=0, max_value=12),
    extra=st.lists(st.integers(min_value=1, max_value=900), max_size=4),
)
def test_a_read_is_a_multiple_of_128_from_1024_within_the_matched_prefix(
    sizes: list[int], keep: int, extra: list[int]
) -> None:
    cache = ChatPrefixCache()
    first = [(f"a{i}", n) for i, n in enumerate(sizes)]
    cache.apply("s", "m", "k", first, now=0.0, readable_at=0.0)
    second = first[:keep] + [(f"b{i}", n) for i, n in enumerate(extra)]
    if not second:
        return
    outcome = cache.apply("s", "m", "k", second, now=1.0, readable_at=1.0)
    shared = sum(n for _, n in first[:keep]) if sum(sizes) >= MIN_CACHED_TOKENS else 0
    assert outcome.matched_tokens == shared
    assert outcome.cached_tokens % INCREMENT == 0
    assert outcome.cached_tokens <= outcome.matched_tokens <= outcome.prompt_tokens
    expected = shared // INCREMENT * INCREMENT if outcome.prompt_tokens >= MIN_CACHED_TOKENS else 0
    assert outcome.cached_tokens == (expected if expected >= MIN_CACHED_TOKENS else 0)


async def test_stop_sequences_cut_the_reply() -> None:
    async with chat_sim() as (sim, client):
        reply = await client.chat.completions.create(
            model="gpt-sim", messages=[{"role": "user", "content": "hello there"}], stop=["to:"]
        )
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(
                model="gpt-sim", messages=[{"role": "user", "content": "x"}], stop=["a", "b", "c", "d", "e"]
            )
    assert reply.choices[0].message.content == "Simulated answer "
    assert reply.choices[0].finish_reason == "stop"
    assert caught.value.body["param"] == "stop"


@pytest.mark.slow
def test_foldline_sim_serves_the_chat_face_in_the_dialect_it_is_told() -> None:
    from tests.sim_process import foldline_sim

    with foldline_sim("--chat-reasoning", "reasoning_content") as sim:
        client = openai.OpenAI(base_url=sim.url + "/v1", api_key="sk-sim", max_retries=0)
        try:
            reply = client.chat.completions.create(
                model="gpt-sim", messages=[{"role": "user", "content": "hi"}], reasoning_effort="low"
            )
        finally:
            client.close()
    message = reply.choices[0].message.model_dump()
    assert message["content"] == "Simulated answer to: hi"
    assert message["reasoning_content"].startswith("Turn with 1 message(s)")
