"""apply_marks: cache_control on the marked blocks, copying only the path to them."""

from __future__ import annotations

import copy

import pytest

from runtime.cache.apply import apply_marks
from runtime.cache.errors import CacheInputError
from runtime.cache.marks import Mark

FIVE = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}


def payload() -> dict:
    return {
        "model": "m",
        "max_tokens": 10,
        "tools": [
            {"name": "a", "description": "d", "input_schema": {}},
            {"name": "b", "description": "d", "input_schema": {}},
        ],
        "system": [{"type": "text", "text": "sys"}],
        "messages": [
            {"role": "user", "content": "task"},
            {
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": "t", "signature": "s"}, {"type": "text", "text": "ok"}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "r"}]},
        ],
    }


def test_no_marks_gives_an_equal_payload():
    original = payload()
    result = apply_marks(original, [])
    assert result == original
    assert result is not original


def test_marks_land_on_tools_system_and_message_blocks():
    original = payload()
    snapshot = copy.deepcopy(original)
    marks = [
        Mark(("tools", 1), "1h", "caller"),
        Mark(("system", 0), "1h", "stable"),
        Mark(("messages", 1, 1), "5m", "anchor"),
        Mark(("messages", 2, 0), "5m", "turn"),
    ]
    result = apply_marks(original, marks)
    assert original == snapshot, "the input must not be mutated"
    assert result["tools"][1]["cache_control"] == HOUR
    assert "cache_control" not in result["tools"][0]
    assert result["system"][0]["cache_control"] == HOUR
    assert result["messages"][1]["content"][1]["cache_control"] == FIVE
    assert result["messages"][2]["content"][0]["cache_control"] == FIVE
    expected = copy.deepcopy(snapshot)
    expected["tools"][1]["cache_control"] = HOUR
    expected["system"][0]["cache_control"] = HOUR
    expected["messages"][1]["content"][1]["cache_control"] = FIVE
    expected["messages"][2]["content"][0]["cache_control"] = FIVE
    assert result == expected


def test_only_the_path_to_a_marked_block_is_copied():
    original = payload()
    result = apply_marks(original, [Mark(("messages", 2, 0), "5m", "turn")])
    assert result["tools"] is original["tools"]
    assert result["system"] is original["system"]
    assert result["messages"] is not original["messages"]
    assert result["messages"][0] is original["messages"][0]
    assert result["messages"][1] is original["messages"][1]
    assert result["messages"][2] is not original["messages"][2]


def test_string_content_becomes_the_one_text_block_it_stands_for():
    original = payload()
    original["system"] = "sys"
    result = apply_marks(original, [Mark(("system", 0), "1h", "stable"), Mark(("messages", 0, 0), "5m", "turn")])
    assert result["system"] == [{"type": "text", "text": "sys", "cache_control": HOUR}]
    assert result["messages"][0]["content"] == [{"type": "text", "text": "task", "cache_control": FIVE}]
    assert original["system"] == "sys"
    assert original["messages"][0]["content"] == "task"


@pytest.mark.parametrize(
    ("marks", "fragment"),
    [
        ([Mark(("messages", 1, 0), "5m", "turn")], "thinking or blank takes no mark"),
        ([Mark(("messages", 7, 0), "5m", "turn")], "the payload has 3 messages"),
        ([Mark(("messages", 2, 4), "5m", "turn")], "only 1 blocks"),
        ([Mark(("tools", 5), "1h", "stable")], "only 2 blocks"),
        (
            [Mark(("messages", 0, 0), "5m", "turn"), Mark(("messages", 2, 0), "1h", "read")],
            "one-hour marks must come first",
        ),
        ([Mark(("messages", 0, 0), "5m", "turn"), Mark(("messages", 0, 0), "5m", "anchor")], "two marks on"),
        (
            [Mark(("tools", 0), "1h", "caller")] * 1
            + [
                Mark(("tools", 1), "1h", "caller"),
                Mark(("system", 0), "1h", "stable"),
                Mark(("messages", 0, 0), "5m", "turn"),
                Mark(("messages", 2, 0), "5m", "turn"),
            ],
            "at most 4",
        ),
        (["not a mark"], "is not a Mark"),
    ],
)
def test_bad_marks_are_refused(marks, fragment):
    with pytest.raises(CacheInputError, match=fragment):
        apply_marks(payload(), marks)
