"""The simulator's cache rules (pure): reads, writes, billing, TTLs, visibility, scopes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.sim.cache_engine import CacheEngine, CacheOutcome
from runtime.sim.layout import Layout, build_layout
from runtime.sim.tokens import SimTokenCounter
from runtime.sim.validation import validate_request

EPH = {"type": "ephemeral"}
EPH_1H = {"type": "ephemeral", "ttl": "1h"}
# One token per character keeps the arithmetic in these tests easy to follow.
COUNTER = SimTokenCounter(token_factor=1.0, count_text=len)
MIN = 500
KEY = "key-a"


def text(value: str, cc: dict | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": value}
    if cc is not None:
        block["cache_control"] = cc
    return block


def lay(
    system: list[dict], messages: list[dict], tools: list[dict] | None = None, model: str = "m", collapse: bool = True
) -> Layout:
    body: dict[str, Any] = {"model": model, "max_tokens": 10, "system": system, "messages": messages}
    if tools:
        body["tools"] = tools
    return build_layout(validate_request(body), COUNTER, lookback_collapse=collapse)


def turns(*texts: str, last_cc: dict | None = EPH) -> list[dict]:
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": [text(t)]} for i, t in enumerate(texts)]
    if last_cc is not None:
        messages[-1]["content"][-1]["cache_control"] = last_cc
    return messages


def apply(
    engine: CacheEngine, layout: Layout, now: float = 0.0, readable_at: float | None = None, key: str = KEY
) -> CacheOutcome:
    return engine.apply(key, layout, min_tokens=MIN, now=now, readable_at=now if readable_at is None else readable_at)


def check_sums(outcome: CacheOutcome, layout: Layout) -> None:
    total = (
        outcome.input_tokens
        + outcome.cache_read_input_tokens
        + outcome.cache_write_5m_tokens
        + outcome.cache_write_1h_tokens
    )
    assert total == layout.total_tokens
    assert (
        min(
            outcome.input_tokens,
            outcome.cache_read_input_tokens,
            outcome.cache_write_5m_tokens,
            outcome.cache_write_1h_tokens,
        )
        >= 0
    )


BIG = "s" * 600


def test_nothing_marked_is_all_input() -> None:
    engine = CacheEngine()
    layout = lay([text(BIG)], turns("hello", last_cc=None))
    outcome = apply(engine, layout)
    assert outcome == CacheOutcome.uncached(layout.total_tokens)
    assert engine.entries(KEY, "m") == ()


def test_below_the_minimum_nothing_is_written_or_read_and_nothing_fails() -> None:
    engine = CacheEngine()
    layout = lay([text("short", EPH)], turns("hello"))
    assert layout.total_tokens < MIN
    for _ in range(2):
        outcome = apply(engine, layout)
        assert outcome == CacheOutcome.uncached(layout.total_tokens)
        assert outcome.usage_fields()["cache_creation"] == {
            "ephemeral_5m_input_tokens": 0,
            "ephemeral_1h_input_tokens": 0,
        }
    assert engine.entries(KEY, "m") == ()


def test_a_mark_below_the_minimum_takes_no_part_while_a_later_one_does() -> None:
    engine = CacheEngine()
    layout = lay([text("short", EPH_1H)], turns(BIG))
    outcome = apply(engine, layout)
    assert outcome.written == (("messages", 0, 0),)
    assert outcome.cache_write_1h_tokens == 0
    assert outcome.cache_write_5m_tokens == layout.total_tokens
    assert [e.location for e in engine.entries(KEY, "m")] == [("messages", 0, 0)]


def test_write_then_read_with_the_usage_split() -> None:
    engine = CacheEngine()
    layout = lay([text(BIG, EPH_1H)], turns("hello", "hi there", "more"))
    system = layout.block_at(("system", 0))
    first = apply(engine, layout)
    assert first.cache_write_1h_tokens == system.prefix_tokens
    assert first.cache_write_5m_tokens == layout.total_tokens - system.prefix_tokens
    assert first.input_tokens == 0 and first.cache_read_input_tokens == 0
    assert first.usage_fields()["cache_creation_input_tokens"] == layout.total_tokens
    second = apply(engine, layout, now=10.0)
    assert second.cache_read_input_tokens == layout.total_tokens
    assert second.cache_write_5m_tokens == second.cache_write_1h_tokens == second.input_tokens == 0
    assert second.read_location == ("messages", 2, 0)
    assert second.written == ()


def test_input_tokens_are_the_tokens_after_the_last_mark() -> None:
    engine = CacheEngine()
    messages = turns("hello", "hi", "tail after the mark", last_cc=None)
    messages[1]["content"][0]["cache_control"] = EPH
    layout = lay([text(BIG)], messages)
    outcome = apply(engine, layout)
    marked = layout.block_at(("messages", 1, 0))
    assert outcome.input_tokens == layout.total_tokens - marked.prefix_tokens
    assert outcome.cache_write_5m_tokens == marked.prefix_tokens
    check_sums(outcome, layout)


def test_a_growing_conversation_reads_the_previous_turn_through_lookback() -> None:
    engine = CacheEngine()
    first = lay([text(BIG, EPH_1H)], turns("q1"))
    apply(engine, first)
    second = lay([text(BIG, EPH_1H)], turns("q1", "a1", "q2"))
    outcome = apply(engine, second, now=1.0)
    previous_end = second.block_at(("messages", 0, 0))
    assert outcome.read_location == ("messages", 0, 0)
    assert outcome.cache_read_input_tokens == previous_end.prefix_tokens
    assert outcome.cache_write_1h_tokens == 0
    assert outcome.cache_write_5m_tokens == second.total_tokens - previous_end.prefix_tokens
    assert outcome.refreshed == (("system", 0), ("messages", 0, 0))


def test_billing_positions_a_b_c() -> None:
    tools = [{"name": "t", "description": "d" * 600, "input_schema": {"type": "object"}, "cache_control": EPH_1H}]
    engine = CacheEngine()
    apply(engine, lay([text("sys")], turns("x", last_cc=None), tools=tools))
    layout = lay([text("system text " * 10, EPH_1H)], turns("q1", "a1", "q2"), tools=tools)
    outcome = apply(engine, layout, now=1.0)
    a = layout.block_at(("tools", 0)).prefix_tokens
    b = layout.block_at(("system", 0)).prefix_tokens
    c = layout.total_tokens
    assert outcome.read_location == ("tools", 0)
    assert (outcome.cache_read_input_tokens, outcome.cache_write_1h_tokens, outcome.cache_write_5m_tokens) == (
        a,
        b - a,
        c - b,
    )
    assert outcome.written == (("system", 0), ("messages", 2, 0))
    ttls = {e.location: e.ttl for e in engine.entries(KEY, "m")}
    assert ttls == {("tools", 0): "1h", ("system", 0): "1h", ("messages", 2, 0): "5m"}


def test_ttl_runs_from_the_request_start_and_expires() -> None:
    engine = CacheEngine()
    layout = lay([text(BIG)], turns("hello"))
    apply(engine, layout, now=100.0, readable_at=130.0)
    (entry,) = engine.entries(KEY, "m")
    assert (entry.written_at, entry.readable_at, entry.expires_at) == (100.0, 130.0, 400.0)
    assert apply(engine, layout, now=399.9).cache_read_input_tokens == layout.total_tokens
    engine2 = CacheEngine()
    apply(engine2, layout, now=100.0)
    expired = apply(engine2, layout, now=400.0)
    assert expired.cache_read_input_tokens == 0
    assert expired.cache_write_5m_tokens == layout.total_tokens


def test_a_read_refreshes_the_lifetime() -> None:
    engine = CacheEngine()
    layout = lay([text(BIG)], turns("hello"))
    apply(engine, layout, now=0.0)
    assert apply(engine, layout, now=200.0).cache_read_input_tokens > 0
    (entry,) = engine.entries(KEY, "m")
    assert (entry.expires_at, entry.last_touch) == (500.0, 200.0)
    assert apply(engine, layout, now=450.0).cache_read_input_tokens == layout.total_tokens


def test_one_hour_entries_live_an_hour() -> None:
    engine = CacheEngine()
    layout = lay([text(BIG)], turns("hello", last_cc=EPH_1H))
    apply(engine, layout, now=0.0)
    assert apply(engine, layout, now=3599.0).cache_read_input_tokens == layout.total_tokens


def test_an_entry_is_readable_only_once_its_writers_response_began() -> None:
    engine = CacheEngine()
    layout = lay([text(BIG)], turns("hello"))
    apply(engine, layout, now=0.0, readable_at=5.0)
    parallel = apply(engine, layout, now=3.0, readable_at=8.0)
    assert parallel.cache_read_input_tokens == 0
    assert parallel.cache_write_5m_tokens == layout.total_tokens  # both writers pay
    (entry,) = engine.entries(KEY, "m")
    assert entry.readable_at == 5.0  # the first response to begin makes it readable
    assert entry.expires_at == 303.0
    assert apply(engine, layout, now=5.0).cache_read_input_tokens == layout.total_tokens


def test_caches_are_scoped_by_key_and_model() -> None:
    engine = CacheEngine()
    layout = lay([text(BIG)], turns("hello"))
    apply(engine, layout)
    assert apply(engine, layout, key="key-b").cache_read_input_tokens == 0
    other_model = lay([text(BIG)], turns("hello"), model="m2")
    assert apply(engine, other_model).cache_read_input_tokens == 0
    assert apply(engine, layout).cache_read_input_tokens == layout.total_tokens
    assert len(engine.entries(KEY, "m")) == 1 and len(engine.entries("key-b", "m")) == 1


def _reach(distance: int, collapse: bool = True) -> CacheOutcome:
    engine = CacheEngine()
    apply(engine, lay([text(BIG, EPH)], turns("start", last_cc=None)))
    blocks = [text(f"part {i}") for i in range(distance)]
    blocks[-1]["cache_control"] = EPH
    return apply(engine, lay([text(BIG)], [{"role": "user", "content": blocks}], collapse=collapse), now=1.0)


def test_a_mark_19_positions_after_an_entry_reads_it() -> None:
    outcome = _reach(19)
    assert outcome.read_location == ("system", 0)


@pytest.mark.parametrize("distance", [20, 21])
def test_a_mark_20_or_more_positions_after_an_entry_does_not_read_it(distance: int) -> None:
    outcome = _reach(distance)
    assert outcome.read_location is None and outcome.cache_read_input_tokens == 0


def test_a_run_of_tool_results_is_one_position_only_with_the_switch_on() -> None:
    n = 25
    uses = [{"type": "tool_use", "id": f"t{i}", "name": "read", "input": {"i": i}} for i in range(n)]
    results = [{"type": "tool_result", "tool_use_id": f"t{i}", "content": f"r{i}"} for i in range(n)]
    results[-1]["cache_control"] = EPH
    messages = [
        {"role": "user", "content": [text("task")]},
        {"role": "assistant", "content": uses},
        {"role": "user", "content": results},
    ]
    for collapse, reads in ((True, True), (False, False)):
        engine = CacheEngine()
        apply(engine, lay([text(BIG, EPH)], turns("start", last_cc=None)))
        outcome = apply(engine, lay([text(BIG)], messages, collapse=collapse), now=1.0)
        assert (outcome.read_location == ("system", 0)) is reads


def test_readable_at_before_the_start_is_refused() -> None:
    with pytest.raises(ValueError, match="readable_at 1.0 is before the request start 2.0"):
        CacheEngine().apply(KEY, lay([text(BIG)], turns("x")), min_tokens=MIN, now=2.0, readable_at=1.0)


request_shapes = st.lists(
    st.tuples(
        st.integers(0, 400),  # seconds since the previous request
        st.integers(1, 6),  # conversation length (messages)
        st.sampled_from([None, "5m", "1h"]),  # mark on the system block
        st.sampled_from([None, "5m"]),  # mark on the last block
        st.integers(0, 3),  # latency
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(request_shapes)
def test_usage_always_adds_up_and_entries_respect_the_rules(shapes: list[tuple]) -> None:
    engine = CacheEngine()
    words = [f"w{i} " * 40 for i in range(6)]
    now = 0.0
    for gap, length, system_ttl, last_ttl, latency in shapes:
        now += gap
        system_cc = {"type": "ephemeral", "ttl": system_ttl} if system_ttl else None
        last_cc = {"type": "ephemeral", "ttl": last_ttl} if last_ttl else None
        layout = lay([text("system " * 80, system_cc)], turns(*words[:length], last_cc=last_cc))
        outcome = apply(engine, layout, now=now, readable_at=now + latency)
        check_sums(outcome, layout)
        marked = {m.location for m in layout.marks if m.prefix_tokens >= MIN}
        assert set(outcome.written) <= marked
        if not marked:
            assert outcome == CacheOutcome.uncached(layout.total_tokens)
        for entry in engine.entries(KEY, "m"):
            assert entry.prefix_tokens >= MIN
            assert entry.readable_at <= entry.expires_at
        # The same request again, once its response has begun, reads through its last mark.
        if marked:
            again = apply(engine, layout, now=now + latency)
            last = max(m.prefix_tokens for m in layout.marks if m.location in marked)
            assert again.cache_read_input_tokens == last
            assert again.cache_write_5m_tokens == again.cache_write_1h_tokens == 0
            now += latency


# --- boundaries the mutation run found unchecked ---------------------------------------


def test_an_entry_is_not_readable_at_its_expiry_and_is_dropped_then() -> None:
    engine = CacheEngine()
    apply(engine, lay([text(BIG)], turns("hello")), now=0.0)
    (entry,) = engine.entries(KEY, "m")
    assert entry.readable(299.999) and not entry.readable(entry.expires_at)
    apply(engine, lay([text("t" * 700)], turns("other")), now=300.0)  # another prefix, same scope, at the expiry
    assert [e.location for e in engine.entries(KEY, "m")] == [("messages", 0, 0)]
    assert [e.written_at for e in engine.entries(KEY, "m")] == [300.0]


def test_a_mark_exactly_at_the_minimum_takes_part() -> None:
    layout = lay([text(BIG)], turns("hello"))
    (mark,) = layout.marks
    exact = CacheEngine().apply(KEY, layout, min_tokens=mark.prefix_tokens, now=0.0, readable_at=0.0)
    assert exact.cache_write_5m_tokens == mark.prefix_tokens
    above = CacheEngine().apply(KEY, layout, min_tokens=mark.prefix_tokens + 1, now=0.0, readable_at=0.0)
    assert above == CacheOutcome.uncached(layout.total_tokens)


def test_usage_fields_are_the_apis() -> None:
    outcome = CacheOutcome(7, 5, 3, 2, None, (), ())
    assert outcome.usage_fields() == {
        "input_tokens": 7,
        "cache_creation_input_tokens": 5,
        "cache_read_input_tokens": 5,
        "cache_creation": {"ephemeral_5m_input_tokens": 3, "ephemeral_1h_input_tokens": 2},
    }
    assert CacheOutcome.uncached(9) == CacheOutcome(9, 0, 0, 0, None, (), ())


def test_a_scope_never_used_has_no_entries() -> None:
    engine = CacheEngine()
    apply(engine, lay([text(BIG)], turns("hello")))
    assert engine.entries("key-never-used", "m") == () and engine.entries(KEY, "other-model") == ()


def test_a_fresh_write_is_touched_at_its_start() -> None:
    engine = CacheEngine()
    apply(engine, lay([text(BIG)], turns("hello")), now=42.0, readable_at=50.0)
    (entry,) = engine.entries(KEY, "m")
    assert (entry.written_at, entry.readable_at, entry.last_touch, entry.ttl) == (42.0, 50.0, 42.0, "5m")


def test_a_concurrent_write_keeps_the_longer_lived_entry_and_is_stamped_with_its_own_start() -> None:
    engine = CacheEngine()
    apply(engine, lay([text(BIG)], turns("hello", last_cc=EPH_1H)), now=0.0, readable_at=100.0)
    apply(engine, lay([text(BIG)], turns("hello")), now=10.0, readable_at=20.0)  # a 5m write, while unreadable
    (entry,) = engine.entries(KEY, "m")
    assert (entry.ttl, entry.expires_at) == ("1h", 3600.0)  # the 1h write lives longer
    assert (entry.written_at, entry.last_touch, entry.readable_at) == (10.0, 10.0, 20.0)


def test_a_concurrent_write_that_expires_at_the_same_moment_takes_the_newer_writes_lifetime() -> None:
    engine = CacheEngine()
    apply(engine, lay([text(BIG)], turns("hello", last_cc=EPH_1H)), now=0.0, readable_at=4000.0)
    apply(engine, lay([text(BIG)], turns("hello")), now=3300.0, readable_at=3300.0)  # 5m: also expires at 3600
    (entry,) = engine.entries(KEY, "m")
    assert (entry.ttl, entry.expires_at, entry.readable_at) == ("5m", 3600.0, 3300.0)
