"""The simulator's own token count: its factor, its consistency, its per-block cache."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.measuring.tokenizer import count_tokens
from runtime.sim.layout import build_layout
from runtime.sim.tokens import MESSAGE_OVERHEAD_TOKENS, SimTokenCounter
from runtime.sim.validation import validate_request
from runtime.values.canonical import canonical_json


def test_a_block_counts_its_canonical_json_times_the_factor_rounded_up() -> None:
    block = {"type": "text", "text": "The quick brown fox jumps over the lazy dog."}
    counter = SimTokenCounter(token_factor=1.15)
    ours = count_tokens(canonical_json(block))
    assert counter.block_tokens(block) == math.ceil(ours * 1.15)
    assert counter.block_tokens(block) != ours


def test_cache_control_does_not_count() -> None:
    counter = SimTokenCounter()
    block = {"type": "text", "text": "hello"}
    assert counter.block_tokens({**block, "cache_control": {"type": "ephemeral", "ttl": "1h"}}) == counter.block_tokens(
        block
    )


def test_the_factor_is_validated() -> None:
    for bad in (0, -1.0, float("nan"), True, "1.2"):
        with pytest.raises(ValueError, match="token_factor"):
            SimTokenCounter(token_factor=bad)  # type: ignore[arg-type]


def test_repeated_blocks_are_not_tokenized_again() -> None:
    counter = SimTokenCounter()
    paragraph = " ".join(f"token{i} lorem ipsum dolor sit amet" for i in range(400))
    messages = []
    for i in range(40):
        role = "user" if i % 2 == 0 else "assistant"
        messages.append({"role": role, "content": [{"type": "text", "text": f"{i}: {paragraph}"}]})
    body = validate_request({"model": "claude-haiku-5-5", "max_tokens": 1, "messages": messages})
    first = build_layout(body, counter, lookback_collapse=True)
    assert first.total_tokens > 100_000
    encoded = counter.encoded_blocks
    assert encoded == 40
    grown = validate_request(
        {
            "model": "claude-haiku-5-5",
            "max_tokens": 1,
            "messages": messages + [{"role": "user", "content": "next"}, {"role": "assistant", "content": "ok"}],
        }
    )
    second = build_layout(grown, counter, lookback_collapse=True)
    assert counter.encoded_blocks == encoded + 2  # only the two new blocks were tokenized
    assert second.blocks[39].prefix_tokens == first.total_tokens


def test_the_cache_is_bounded() -> None:
    counter = SimTokenCounter(cache_size=3)
    for i in range(5):
        counter.block_tokens({"type": "text", "text": f"b{i}"})
    counter.block_tokens({"type": "text", "text": "b0"})
    assert counter.encoded_blocks == 6


def test_output_tokens_are_the_sum_of_the_content_blocks() -> None:
    counter = SimTokenCounter()
    blocks = [{"type": "text", "text": "answer"}, {"type": "tool_use", "id": "toolu_1", "name": "x", "input": {}}]
    assert counter.content_tokens(blocks) == sum(counter.block_tokens(b) for b in blocks)


def test_each_message_carries_a_fixed_overhead() -> None:
    counter = SimTokenCounter()
    block = {"type": "text", "text": "hi"}
    body = validate_request(
        {"model": "claude-haiku-5-5", "max_tokens": 1, "messages": [{"role": "user", "content": [block, block]}]}
    )
    layout = build_layout(body, counter, lookback_collapse=True)
    assert layout.total_tokens == 2 * counter.block_tokens(block) + MESSAGE_OVERHEAD_TOKENS


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=200), st.floats(0.5, 3.0))
def test_counts_are_consistent_and_scale_with_the_factor(value: str, factor: float) -> None:
    block = {"type": "text", "text": value}
    counter = SimTokenCounter(token_factor=factor)
    fresh = SimTokenCounter(token_factor=factor)
    assert counter.block_tokens(block) == counter.block_tokens(block) == fresh.block_tokens(block)
    assert counter.block_tokens(block) == math.ceil(count_tokens(canonical_json(block)) * factor)
