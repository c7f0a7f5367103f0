"""The chat face counts a model OpenAI tokenizes with o200k_base exactly, any other by its factor (issue 18).

Through the official ``openai`` SDK over HTTP: ``usage.prompt_tokens`` of a
gpt-4o/gpt-4.1/gpt-5/o-series model is OpenAI's documented count (the
cookbook's: 3 tokens per message, each value's o200k_base tokens, 1 per
``name``, 3 priming the reply), whatever the server's token factor; a model
tiktoken does not know keeps the factor. The prefix cache reads the exact
counts too (1,024-token minimum, 128-token increments).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

openai = pytest.importorskip("openai")

from runtime.measuring.tokenizer import count_tokens  # noqa: E402
from runtime.scripted.default_model import DefaultModel  # noqa: E402
from runtime.scripted.policies import PolicyRegistry  # noqa: E402
from runtime.sim.chat.cache import INCREMENT, MIN_CACHED_TOKENS  # noqa: E402
from runtime.sim.chat.tokens import (  # noqa: E402
    REPLY_PRIMING,
    TOKENS_PER_MESSAGE,
    TOKENS_PER_NAME,
    ExactCounter,
    counts_exactly,
    string_leaves,
)
from runtime.sim.clock import ManualClock  # noqa: E402
from runtime.sim.config import SimConfig  # noqa: E402
from runtime.sim.server import SimServer, serve_simulator  # noqa: E402
from tests.test_sim_chat import TOOLS  # noqa: E402  (the chat face tests' one tool)

KEY = "sk-sim-chat-tokens-test"
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You turn meeting notes into action items."},
    {"role": "user", "name": "dana", "content": "We agreed to ship the parser on Friday and to review the cache."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "look", "arguments": '{"q":"a"}'}}],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "The cache review is owned by Lee."},
    {"role": "user", "content": [{"type": "text", "text": "List the items, one per line."}]},
]


def cookbook_count(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
    """OpenAI's documented count, written out independently of the simulator's code."""
    total = REPLY_PRIMING
    for message in messages:
        total += 3
        for key, value in message.items():
            if value is None:
                continue
            texts = [value] if isinstance(value, str) else _texts(value)
            total += sum(count_tokens(t) for t in texts)
            if key == "name":
                total += 1
    if tools:
        total += count_tokens(json.dumps(tools, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
    return total


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []


@asynccontextmanager
async def chat_sim(factor: float) -> AsyncIterator[tuple[SimServer, Any]]:
    async with serve_simulator(
        SimConfig(api_keys=frozenset({KEY}), token_factor=factor),
        PolicyRegistry({}, default=DefaultModel(calls="one")),
        ManualClock(),
    ) as sim:
        client = openai.AsyncOpenAI(api_key=KEY, base_url=sim.base_url + "/v1", max_retries=0)
        try:
            yield sim, client
        finally:
            await client.close()


def test_the_documented_constants() -> None:
    assert (TOKENS_PER_MESSAGE, TOKENS_PER_NAME, REPLY_PRIMING) == (3, 1, 3)


def test_which_models_are_counted_exactly() -> None:
    for model in ("gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "gpt-5", "gpt-5-mini", "o1", "o3-mini"):
        assert counts_exactly(model), model
    for model in ("gpt-4", "gpt-3.5-turbo", "gpt-sim", "claude-haiku-5-5", "llama-3.1-8b"):
        assert not counts_exactly(model), model  # cl100k_base, or a tokenizer that is not ours


def test_an_image_part_counts_no_text() -> None:
    part = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 400}}
    message = {"role": "user", "content": [{"type": "text", "text": "see"}, part]}
    assert list(string_leaves(message)) == ["user", "text", "see"]


@pytest.mark.anyio
@pytest.mark.parametrize("factor", [1.15, 1.37])
@pytest.mark.parametrize("model", ["gpt-5-mini", "gpt-4o"])
async def test_an_o200k_model_is_counted_as_openai_documents_at_any_factor(model: str, factor: float) -> None:
    async with chat_sim(factor) as (_sim, client):
        bare = await client.chat.completions.create(model=model, messages=MESSAGES)
        tooled = await client.chat.completions.create(model=model, messages=MESSAGES, tools=TOOLS)
    assert bare.usage.prompt_tokens == cookbook_count(MESSAGES, None)
    assert tooled.usage.prompt_tokens == cookbook_count(MESSAGES, TOOLS)


@pytest.mark.anyio
async def test_a_model_the_simulator_does_not_know_keeps_its_factor() -> None:
    counts = {}
    for factor in (1.0, 1.37):
        async with chat_sim(factor) as (_sim, client):
            reply = await client.chat.completions.create(model="gpt-sim", messages=MESSAGES)
            counts[factor] = reply.usage.prompt_tokens
    assert counts[1.37] > counts[1.0] * 1.3  # the factor scales it
    assert counts[1.0] != cookbook_count(MESSAGES, None)  # and it is not the exact count


@settings(max_examples=25, deadline=None)
@given(
    texts=st.lists(st.text(min_size=0, max_size=60), min_size=1, max_size=6),
    name=st.one_of(st.none(), st.from_regex(r"[a-z]{1,12}", fullmatch=True)),
)
def test_the_exact_counter_is_the_documented_sum(texts: list[str], name: str | None) -> None:
    counter = ExactCounter()
    for text in texts:
        message: dict[str, Any] = {"role": "user", "content": text}
        if name is not None:
            message["name"] = name
        expected = 3 + count_tokens("user") + count_tokens(text) + (1 + count_tokens(name) if name else 0)
        assert counter.message_tokens(message, 0) == expected
        assert counter.message_tokens(message, 255) == expected + 255  # an image's tiles add on


@pytest.mark.anyio
async def test_the_cache_reads_exact_counts_in_128_token_increments() -> None:
    system = {"role": "system", "content": " ".join(f"rule{i}" for i in range(900))}
    messages: list[dict[str, Any]] = [system, {"role": "user", "content": "Find it."}]
    async with chat_sim(1.37) as (_sim, client):
        first = await client.chat.completions.create(model="gpt-5-mini", messages=messages, prompt_cache_key="s")
        messages.append({"role": "assistant", "content": "Looking."})
        messages.append({"role": "user", "content": "And now?"})
        second = await client.chat.completions.create(model="gpt-5-mini", messages=messages, prompt_cache_key="s")
    assert first.usage.prompt_tokens == cookbook_count(messages[:2], None) >= MIN_CACHED_TOKENS
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    prefix = first.usage.prompt_tokens - REPLY_PRIMING  # the priming is no part of the cached prefix
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached == prefix // INCREMENT * INCREMENT and cached >= MIN_CACHED_TOKENS
