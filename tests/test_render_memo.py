"""The rendering memo keeps the live branches' messages, not every message a long run ever rendered."""

from __future__ import annotations

from runtime.request import rendering
from runtime.request.rendering import MEMO_ENTRIES, _BlockMemo, render_blocks
from runtime.values.messages import Instruction


def test_the_module_memo_is_bounded_well_below_a_large_runs_messages() -> None:
    # 10,000 nodes of 9 messages each would be 90,000 entries; the memo holds the working set of 1,024 at once.
    assert 9 * 1_024 <= MEMO_ENTRIES <= 40_000
    assert rendering._memo._max == MEMO_ENTRIES


def test_a_full_memo_drops_the_least_recently_used_and_renders_it_again_the_same() -> None:
    memo = _BlockMemo(max_entries=3)
    messages = [Instruction(f"message {i}") for i in range(4)]
    first = render_blocks(messages[0])
    for message in messages[:3]:
        memo.put(message, render_blocks(message))
    assert memo.get(messages[0]) is not None  # now the most recently used
    memo.put(messages[3], render_blocks(messages[3]))
    assert memo.get(messages[1]) is None  # the least recently used went
    assert [memo.get(m) is not None for m in (messages[0], messages[2], messages[3])] == [True, True, True]
    assert render_blocks(messages[0]) == first
