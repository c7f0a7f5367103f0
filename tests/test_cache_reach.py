"""Reach: a mark reaches entries at or before it and fewer than 20 lookback positions back."""

from __future__ import annotations

import pytest

from runtime.cache.certificates import certify
from runtime.cache.reach import LOOKBACK, reaches


def text_payload(n_blocks: int) -> dict:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": [{"type": "text", "text": f"block {i}"} for i in range(n_blocks)]}],
    }


def test_lookback_is_twenty_positions():
    assert LOOKBACK == 20


@pytest.mark.parametrize(("distance", "expected"), [(0, True), (19, True), (20, False), (21, False)])
def test_reach_at_19_20_and_21_positions(distance, expected):
    refs = certify(text_payload(30))
    entry = refs[3]
    mark = refs[3 + distance]
    assert mark.position - entry.position == distance
    assert reaches(mark, entry) is expected


def test_a_mark_never_reaches_an_entry_after_it():
    refs = certify(text_payload(5))
    assert not reaches(refs[1], refs[2])


def test_an_entry_later_in_the_same_run_is_not_reached():
    payload = {
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"u{i}", "content": "r"} for i in range(3)],
            }
        ],
    }
    first, _, last = certify(payload)
    assert first.position == last.position
    assert reaches(last, first)
    assert not reaches(first, last)


def test_a_collapsed_run_brings_far_blocks_within_reach():
    results = [{"type": "tool_result", "tool_use_id": f"u{i}", "content": "r"} for i in range(25)]
    payload = {
        "model": "m",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "before"}]},
            {"role": "user", "content": results},
            {"role": "user", "content": [{"type": "text", "text": "after"}]},
        ],
    }
    collapsed = certify(payload)
    assert reaches(collapsed[-1], collapsed[0])
    flat = certify(payload, collapse_runs=False)
    assert not reaches(flat[-1], flat[0])


def test_reach_spans_tiers():
    payload = {
        "model": "m",
        "tools": [{"name": "t", "description": "d", "input_schema": {}}],
        "system": [{"type": "text", "text": "s"}],
        "messages": [{"role": "user", "content": "hi"}],
    }
    tool, system, message = certify(payload)
    assert reaches(message, tool)
    assert reaches(message, system)
    assert not reaches(tool, system)


def test_lookback_is_a_parameter():
    refs = certify(text_payload(10))
    assert reaches(refs[5], refs[0], lookback=6)
    assert not reaches(refs[5], refs[0], lookback=5)
