"""The simulator's request layout: marks and their 400s, prefix-key tiers, lookback positions."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.sim.errors import SimAPIError
from runtime.sim.layout import build_layout
from runtime.sim.tokens import MESSAGE_OVERHEAD_TOKENS, SimTokenCounter
from runtime.sim.validation import validate_request

EPH = {"type": "ephemeral"}
EPH_1H = {"type": "ephemeral", "ttl": "1h"}
COUNTER = SimTokenCounter()


def text(value: str, cc: dict | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": value}
    if cc is not None:
        block["cache_control"] = cc
    return block


def payload(**extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "model": "claude-haiku-5-5",
        "max_tokens": 100,
        "tools": [{"name": "read", "description": "read a file", "input_schema": {"type": "object"}}],
        "system": [text("You are careful.")],
        "messages": [
            {"role": "user", "content": [text("task")]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {"p": 1}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "data"}]},
        ],
    }
    base.update(extra)
    return base


def lay(body: dict[str, Any], collapse: bool = True):
    return build_layout(validate_request(body), COUNTER, lookback_collapse=collapse)


def refused(body: dict[str, Any]) -> SimAPIError:
    with pytest.raises(SimAPIError) as info:
        lay(body)
    assert info.value.status == 400 and info.value.error_type == "invalid_request_error"
    return info.value


def test_blocks_are_in_api_order_with_running_token_totals() -> None:
    layout = lay(payload())
    assert [block.location for block in layout.blocks] == [
        ("tools", 0),
        ("system", 0),
        ("messages", 0, 0),
        ("messages", 1, 0),
        ("messages", 2, 0),
    ]
    running = 0
    for block in layout.blocks:
        running += block.tokens
        assert block.prefix_tokens == running
    assert layout.total_tokens == running
    tool_result = layout.block_at(("messages", 2, 0))
    raw = {"type": "tool_result", "tool_use_id": "t1", "content": "data"}
    assert tool_result.tokens == COUNTER.block_tokens(raw) + MESSAGE_OVERHEAD_TOKENS
    with pytest.raises(KeyError, match="no block at"):
        layout.block_at(("messages", 9, 0))


def test_explicit_marks_on_every_documented_block_type() -> None:
    body = payload()
    body["tools"][0]["cache_control"] = EPH_1H
    body["system"][0]["cache_control"] = EPH_1H
    body["messages"][1]["content"][0]["cache_control"] = EPH
    body["messages"][2]["content"][0]["cache_control"] = EPH
    marks = lay(body).marks
    assert [(m.location, m.mark_ttl, m.automatic) for m in marks] == [
        (("tools", 0), "1h", False),
        (("system", 0), "1h", False),
        (("messages", 1, 0), "5m", False),
        (("messages", 2, 0), "5m", False),
    ]


def test_a_fifth_mark_is_the_documented_400() -> None:
    body = payload(system=[text(f"s{i}", EPH) for i in range(5)])
    assert refused(body).message == "A maximum of 4 blocks with cache_control may be provided. Found 5."


def test_one_hour_after_five_minutes_is_refused() -> None:
    body = payload(system=[text("a", EPH), text("b", EPH_1H)])
    message = refused(body).message
    assert message.startswith("Cache entries with longer TTL must appear before shorter TTLs")
    assert "system.1" in message and "system.0" in message


def test_marks_on_thinking_or_empty_text_blocks_are_refused() -> None:
    body = payload()
    body["messages"][1]["content"].insert(
        0, {"type": "thinking", "thinking": "hmm", "signature": "s", "cache_control": EPH}
    )
    assert "messages.1.content.0.cache_control: cache_control cannot be set on thinking blocks" in refused(body).message
    body = payload(system=[text("", EPH)])
    assert refused(body).message == "system.0.cache_control: cache_control cannot be set for empty text blocks"


@pytest.mark.parametrize(
    ("cc", "message"),
    [
        ({"type": "persistent"}, "system.0.cache_control.type: Input should be 'ephemeral'"),
        ({"type": "ephemeral", "ttl": "2h"}, "system.0.cache_control.ttl: Input should be '5m' or '1h', got '2h'"),
        ({"type": "ephemeral", "scope": "x"}, "system.0.cache_control.scope: Extra inputs are not permitted"),
        ("ephemeral", "system.0.cache_control: expected an object"),
    ],
)
def test_malformed_cache_control_is_refused(cc: Any, message: str) -> None:
    assert refused(payload(system=[text("x", cc)])).message.startswith(message)


def test_top_level_cache_control_marks_the_last_cacheable_block() -> None:
    marks = lay(payload(cache_control=EPH_1H)).marks
    assert [(m.location, m.mark_ttl, m.automatic) for m in marks] == [(("messages", 2, 0), "1h", True)]


def test_top_level_cache_control_walks_back_over_thinking() -> None:
    body = payload(cache_control=EPH)
    body["messages"] = [
        {"role": "user", "content": [text("task")]},
        {"role": "assistant", "content": [text("so"), {"type": "thinking", "thinking": "t", "signature": "s"}]},
    ]
    assert [m.location for m in lay(body).marks] == [("messages", 1, 0)]


def test_top_level_same_ttl_as_the_last_blocks_mark_is_a_no_op() -> None:
    body = payload(cache_control=EPH, system=[text(f"s{i}", EPH_1H) for i in range(3)])
    body["messages"][2]["content"][0]["cache_control"] = EPH
    marks = lay(body).marks
    assert len(marks) == 4 and not any(m.automatic for m in marks)


def test_top_level_with_a_different_ttl_than_the_last_blocks_mark_is_refused() -> None:
    body = payload(cache_control=EPH_1H)
    body["messages"][2]["content"][0]["cache_control"] = EPH
    assert "conflicts with the cache_control (ttl '5m')" in refused(body).message


def test_top_level_takes_a_slot_and_four_explicit_marks_leave_none() -> None:
    body = payload(cache_control=EPH, system=[text(f"s{i}", EPH_1H) for i in range(4)])
    assert refused(body).message == "A maximum of 4 blocks with cache_control may be provided. Found 5."


def test_top_level_after_an_explicit_five_minute_mark_must_not_be_one_hour() -> None:
    body = payload(cache_control=EPH_1H, system=[text("s", EPH)])
    assert "the top-level cache_control comes after a '5m' one at system.0" in refused(body).message


def test_a_tools_change_changes_every_key() -> None:
    before = lay(payload())
    tools = [{"name": "read", "description": "read a file!", "input_schema": {"type": "object"}}]
    after = lay(payload(tools=tools))
    assert all(a.key != b.key for a, b in zip(before.blocks, after.blocks, strict=True))


def test_a_system_change_keeps_the_tools_keys_only() -> None:
    before = lay(payload())
    after = lay(payload(system=[text("You are very careful.")]))
    same = [a.key == b.key for a, b in zip(before.blocks, after.blocks, strict=True)]
    assert same == [True, False, False, False, False]


@pytest.mark.parametrize(
    "change",
    [
        {"tool_choice": {"type": "auto"}},
        {"thinking": {"type": "enabled", "budget_tokens": 1024}, "max_tokens": 2048},
        {"output_config": {"effort": "low"}},
    ],
)
def test_tool_choice_thinking_and_effort_change_only_the_messages_keys(change: dict) -> None:
    before = lay(payload())
    after = lay(payload(**change))
    same = [a.key == b.key for a, b in zip(before.blocks, after.blocks, strict=True)]
    assert same == [True, True, False, False, False]


def test_cache_control_is_not_part_of_the_key() -> None:
    body = payload()
    marked = copy.deepcopy(body)
    marked["system"][0]["cache_control"] = EPH
    assert [b.key for b in lay(body).blocks] == [b.key for b in lay(marked).blocks]
    assert [b.tokens for b in lay(body).blocks] == [b.tokens for b in lay(marked).blocks]


def test_message_boundaries_are_part_of_the_key() -> None:
    one = payload(messages=[{"role": "user", "content": [text("a"), text("b")]}])
    two = payload(
        messages=[
            {"role": "user", "content": [text("a")]},
            {"role": "assistant", "content": [text("b")]},
        ]
    )
    assert lay(one).blocks[-1].key != lay(two).blocks[-1].key


def _wide_turn(n: int) -> list[dict[str, Any]]:
    uses = [{"type": "tool_use", "id": f"t{i}", "name": "read", "input": {"i": i}} for i in range(n)]
    results = [{"type": "tool_result", "tool_use_id": f"t{i}", "content": f"r{i}"} for i in range(n)]
    return [
        {"role": "user", "content": [text("task")]},
        {"role": "assistant", "content": [text("reading"), *uses]},
        {"role": "user", "content": [*results, text("and?")]},
    ]


def test_runs_of_tool_use_and_tool_result_are_one_position_when_collapsing() -> None:
    collapsed = lay(payload(messages=_wide_turn(5)), collapse=True)
    positions = [(b.location, b.position) for b in collapsed.blocks]
    # tools 1, system 2, task 3, "reading" 4, five tool_use 5, five tool_result 6, "and?" 7
    assert [p for _, p in positions] == [1, 2, 3, 4] + [5] * 5 + [6] * 5 + [7]
    separate = lay(payload(messages=_wide_turn(5)), collapse=False)
    assert [b.position for b in separate.blocks] == list(range(1, 16))


def test_lookback_covers_twenty_positions_counting_the_marks_own() -> None:
    layout = lay(payload(messages=[{"role": "user", "content": [text(f"p{i}") for i in range(30)]}]))
    last = layout.blocks[-1]
    window = list(layout.lookback(last.index))
    assert len(window) == 20
    assert window[0] is last
    assert last.position - window[-1].position == 19


def test_lookback_spans_a_collapsed_run_whole() -> None:
    layout = lay(payload(messages=_wide_turn(30)), collapse=True)
    last = layout.blocks[-1]
    window = list(layout.lookback(last.index))
    # All 7 positions fit: every block of the request is in reach.
    assert len(window) == len(layout.blocks)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=8), st.integers(1, 7))
def test_appending_messages_keeps_every_earlier_key_and_count(texts: list[str], cut: int) -> None:
    cut = min(cut, len(texts))
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": [text(t)]} for i, t in enumerate(texts)]
    short = lay(payload(messages=messages[:cut]))
    long = lay(payload(messages=messages))
    for a, b in zip(short.blocks, long.blocks, strict=False):
        assert (a.key, a.tokens, a.prefix_tokens, a.position) == (b.key, b.tokens, b.prefix_tokens, b.position)
    assert len({b.key for b in long.blocks}) == len(long.blocks)
