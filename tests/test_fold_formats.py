"""The text formats a fold shows the model, and the parsers a scripted policy uses."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.fold.formats import (
    ARG_LIMIT,
    PATH_ARG_LIMIT,
    call_line,
    clip_marker,
    listed_arguments,
    message_line,
    note_header,
    parse_clip_marker,
    parse_note_calls,
    parse_note_header,
    parse_read_result,
    read_call,
    read_result_text,
)


def test_a_call_line_names_the_index_function_arguments_and_size() -> None:
    line = call_line(12, "read_file", {"size": 6000, "path": "docs/a.md"}, 6000, False)
    assert line == '- #12 read_file {"path":"docs/a.md","size":6000} -> 6000 chars'
    (parsed,) = parse_note_calls("header\n" + line + "\nother text")
    assert (parsed.index, parsed.name, parsed.output_chars, parsed.is_error) == (12, "read_file", 6000, False)
    assert parsed.arguments == {"path": "docs/a.md", "size": 6000}
    error = call_line(3, "fail", {}, 80, True)
    assert error.endswith("-> error, 80 chars") and parse_note_calls(error)[0].is_error


def test_a_path_argument_is_whole_up_to_1000_and_others_are_clipped_to_160() -> None:
    path = "a/" * 450  # 900 characters
    long_path = "b" * 1500
    shown = json.loads(
        listed_arguments({"path": path, "file_path": long_path, "query": "q" * 500, "n": list(range(200))})
    )
    assert shown["path"] == path
    assert len(shown["file_path"]) == PATH_ARG_LIMIT and shown["file_path"].endswith("...")
    assert len(shown["query"]) == ARG_LIMIT and shown["query"].endswith("...")
    assert isinstance(shown["n"], str) and len(shown["n"]) == ARG_LIMIT  # a long list becomes its clipped JSON text
    assert json.loads(listed_arguments({"size": 5, "flag": True})) == {"size": 5, "flag": True}


def test_message_lines_are_listed_but_are_not_calls() -> None:
    line = message_line(7, "assistant", "I will read the notes first. " * 20)
    assert line.startswith('- #7 assistant: "I will read') and len(json.loads(line.split(": ", 1)[1])) == 160
    assert parse_note_calls(line) == ()


def test_a_note_header_round_trips() -> None:
    header = note_header("f-0123456789ab", "tool_io", 12, 3)
    assert header == "[fold f-0123456789ab · tool_io · 12 messages from #3]"
    parsed = parse_note_header(header + "\nFolded calls ...")
    assert parsed is not None
    assert (parsed.fold_id, parsed.stage, parsed.count, parsed.first_index) == ("f-0123456789ab", "tool_io", 12, 3)
    assert parsed.span_sha256 is None
    assert parse_note_header("not a note") is None


@pytest.mark.parametrize("span", ["a" * 64, "b" * 16])
def test_every_older_note_header_still_parses_with_the_span_digits_it_shows(span: str) -> None:
    old = f"[fold f-0123456789ab · reset · 5 messages from #40 · span sha256 {span}]"
    parsed = parse_note_header(old + "\nFolded calls (as above):\n- #41 run {} -> 3 chars")
    assert parsed is not None
    assert (parsed.fold_id, parsed.stage, parsed.count, parsed.first_index) == ("f-0123456789ab", "reset", 5, 40)
    assert parsed.span_sha256 == span
    for bad in (span[:-1], span + "0", span.upper()):  # only the lengths and digits written are read
        assert parse_note_header(old.replace(span, bad)) is None


@settings(max_examples=60, deadline=None)
@given(
    st.text("0123456789abcdef", min_size=12, max_size=12),
    st.sampled_from(["tool_io", "all", "reset", "clip"]),
    st.integers(1, 10**6),
    st.integers(0, 10**9),
)
def test_note_headers_round_trip(hex12: str, stage: str, count: int, first: int) -> None:
    parsed = parse_note_header(note_header("f-" + hex12, stage, count, first))
    assert parsed is not None
    assert (parsed.fold_id, parsed.stage, parsed.count, parsed.first_index) == ("f-" + hex12, stage, count, first)


def test_a_clip_marker_carries_the_exact_read_call() -> None:
    marker = clip_marker(index=7, start=3750, end=98795, total=100045, limit=16000)
    assert read_call(7, 3750, 16000) in marker
    assert 'context {"action":"read_result","index":7,"offset":3750,"limit":16000}' in marker
    (parsed,) = parse_clip_marker("head" + marker + "tail")
    assert (parsed.index, parsed.offset, parsed.limit) == (7, 3750, 16000)
    assert (parsed.start, parsed.end, parsed.omitted, parsed.total) == (3750, 98795, 95045, 100045)
    assert parse_clip_marker("no marker here") == ()


def test_a_read_result_answer_round_trips_and_malformed_answers_are_named() -> None:
    text = read_result_text(4, 100, 50, 1000, 150, "x" * 50)
    assert text.split("\n", 1)[0] == "read_result index=4 offset=100 limit=50 total=1000 next_offset=150"
    parsed = parse_read_result(text)
    assert (parsed.index, parsed.offset, parsed.limit, parsed.total, parsed.next_offset) == (4, 100, 50, 1000, 150)
    assert parsed.text == "x" * 50
    end = parse_read_result(read_result_text(4, 990, 50, 1000, None, "y" * 10))
    assert end.next_offset is None and end.text == "y" * 10
    with pytest.raises(ValueError, match="not a read_result answer"):
        parse_read_result("hello\nworld")


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=200), st.integers(0, 10**6), st.integers(1, 16000))
def test_read_result_text_keeps_any_chunk_exactly(chunk: str, offset: int, limit: int) -> None:
    parsed = parse_read_result(read_result_text(9, offset, limit, offset + len(chunk), None, chunk))
    assert parsed.text == chunk


# --- parsing past lines and markers that are not what they seem ------------------------------


def test_note_call_lines_after_a_malformed_one_are_still_read() -> None:
    from runtime.fold.formats import call_line, parse_note_calls

    good = call_line(7, "read_file", {"path": "a.md"}, 120, False)
    failing = call_line(9, "run", {"cmd": "ls"}, 30, True)
    lines = ["Folded calls:", "- #3 read_file {not json} -> 5 chars", good, '- #5 run {"a": [1} -> 5 chars', failing]
    calls = parse_note_calls("\n".join(lines))
    assert [(c.index, c.name, c.output_chars, c.is_error, c.line) for c in calls] == [
        (7, "read_file", 120, False, good),
        (9, "run", 30, True, failing),
    ]
    assert calls[0].arguments == {"path": "a.md"}


def _marker(index: int, start: int, end: int) -> str:
    from runtime.fold.formats import clip_marker

    return clip_marker(index=index, start=start, end=end, total=end + 10, limit=100)


def test_a_marker_whose_call_is_not_a_read_is_skipped_and_the_next_one_read() -> None:
    from runtime.fold.formats import parse_clip_marker

    call = '{"action":"read_result","index":2,"offset":10,"limit":100}'
    not_json = _marker(2, 10, 20).replace(call, "{action: read_result}")
    a_restore = _marker(2, 10, 20).replace(call, call.replace("read_result", "restore"))
    text = "head" + not_json + a_restore + _marker(5, 30, 40) + "tail"
    assert [(m.index, m.start, m.end) for m in parse_clip_marker(text)] == [(5, 30, 40)]


def test_markers_inside_json_strings_lists_and_objects_are_read() -> None:
    import json

    from runtime.fold.formats import parse_clip_marker

    inside = "head" + _marker(3, 100, 200) + "tail"
    for value in (inside, [1, [inside]], {"k": {"x": inside}}):
        assert [(m.index, m.start) for m in parse_clip_marker(json.dumps(value))] == [(3, 100)], value
    assert parse_clip_marker('["not json') == ()
