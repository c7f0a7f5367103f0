"""The result bound (tool_result_max_chars N) and the one projection shared with clips."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.record import Record
from actors.tools import synthetic_text
from runtime.fold.bodies import JSON_PREVIEW_LABEL, recovery_text, result_shape
from runtime.fold.formats import parse_clip_marker, parse_read_result
from runtime.fold.projection import CLIP_FLOOR, BoundProjection, ProjectionError, clipped_copy, project
from runtime.fold.recovery import read_result
from runtime.fold.units import RecordReader
from runtime.request.compiler import RequestSettings, compile_request
from runtime.values.canonical import canonical_json
from runtime.values.messages import AssistantResponse, Instruction, Message, ToolCall, ToolResult

BIG = synthetic_text("listing", 100_045)


def result(output: object, name: str = "run_shell") -> ToolResult:
    return ToolResult.for_call(ToolCall.create("toolu_1", name, {"command": "ls"}), output)


def recovered_interval(original: ToolResult, index: int, text: str, record: Record, bound: int | None) -> str:
    """Follow every marker in ``text`` with read_result paging and return what they recover, joined."""
    pieces = []
    for marker in parse_clip_marker(text):
        offset, got = marker.offset, []
        while offset < marker.end:
            page = parse_read_result(
                read_result(
                    RecordReader(record),
                    marker.index,
                    offset=offset,
                    limit=min(marker.limit, marker.end - offset),
                    bound=bound,
                ).text
            )
            got.append(page.text)
            offset += len(page.text)
        pieces.append("".join(got))
    return "".join(pieces)


@pytest.mark.parametrize("bound", [1024, 4000, 20000])
def test_a_100045_character_result_fits_the_bound_marker_included_and_recovers_exactly(bound: int) -> None:
    original = result(BIG)
    record = Record()
    record.append(Instruction("task"))
    index = record.append(original)
    projected = project(original, index=index, allowance=None, bound=bound)
    assert len(projected.output) <= bound and projected.cut
    (marker,) = parse_clip_marker(projected.output)
    assert marker.index == index and marker.limit <= min(bound, 16_000)
    kept = projected.kept[0]
    head = (3 * kept) // 4
    assert projected.output.startswith(BIG[:head]) and projected.output.endswith(BIG[len(BIG) - (kept - head) :])
    assert (marker.start, marker.end) == (head, len(BIG) - (kept - head))
    assert recovered_interval(original, index, projected.output, record, bound) == BIG[marker.start : marker.end]
    # The greatest retained count: one more source character would not fit.
    bigger = project(original, index=index, allowance=kept + 1, bound=None)
    assert len(bigger.output) > bound


def test_the_same_original_index_and_bound_give_the_same_bytes_every_time() -> None:
    original = result(BIG)
    outputs = {project(original, index=5, allowance=None, bound=4000).output for _ in range(3)}
    assert len(outputs) == 1
    assert project(original, index=6, allowance=None, bound=4000).output not in outputs  # the index is named


def test_an_uncut_value_at_the_boundary_keeps_its_form() -> None:
    exact = result("z" * 4000)
    assert project(exact, index=1, allowance=None, bound=4000).output == "z" * 4000
    over = project(result("z" * 4001), index=1, allowance=None, bound=4000)
    assert over.cut and len(over.output) <= 4000


def test_mapping_outputs_keep_every_key_protected_fields_whole_and_previews_labelled() -> None:
    value = {
        "success": True,
        "error": "e" * 3000,  # protected: never cut even when long
        "stdout": "o" * 30_000,
        "items": list(range(5000)),
        "nested": {"a": "n" * 9000, "b": [1, 2, 3]},
        "small": "fine",
        "count": 7,
    }
    original = result(value)
    shape = result_shape(original)
    assert [b.key for b in shape.bodies] == ["count", "items", "nested", "small", "stdout"]
    projected = project(original, index=3, allowance=None, bound=4000)
    out = json.loads(projected.output)
    assert set(out) == set(value)
    assert out["success"] is True and out["error"] == value["error"]
    assert out["small"] == "fine" and out["count"] == 7
    for key in ("stdout", "items", "nested"):
        assert isinstance(out[key], str) and len(out[key]) <= 4000
    assert out["items"].startswith(JSON_PREVIEW_LABEL) and out["nested"].startswith(JSON_PREVIEW_LABEL)
    assert not out["stdout"].startswith(JSON_PREVIEW_LABEL)
    record = Record()
    for _ in range(3):
        record.append(Instruction("pad"))
    assert record.append(original) == 3
    # Every marker's interval is the original's recovery text, labels and separators included.
    recovery = recovery_text(original)
    for marker in parse_clip_marker(projected.output):
        page = parse_read_result(
            read_result(RecordReader(record), 3, offset=marker.offset, limit=marker.end - marker.offset).text
        )
        assert page.text == recovery[marker.start : marker.end][: len(page.text)]


def test_unicode_bodies_are_counted_in_characters() -> None:
    text = "".join(chr(0x4E00 + (i * 31) % 20000) for i in range(9000)) + "✓🙂" * 500
    projected = project(result(text), index=2, allowance=None, bound=1024)
    assert len(projected.output) <= 1024
    (marker,) = parse_clip_marker(projected.output)
    assert marker.total == len(text)


def test_a_bound_too_small_for_the_marker_is_an_explicit_error() -> None:
    with pytest.raises(ProjectionError, match="tool_result_max_chars=60"):
        project(result("q" * 500), index=1, allowance=None, bound=60)


def test_a_copy_is_projected_from_its_original_never_from_its_own_text() -> None:
    original = result(BIG)
    record = Record()
    record.append(Instruction("task"))
    call_message = AssistantResponse((ToolCall.create("toolu_1", "run_shell", {"command": "ls"}),))
    record.append(call_message)
    index = record.append(original)
    copy = clipped_copy(original, index=index, allowance=20_000, bound=None)
    record.append(copy)
    assert copy.clipped_from == original.id and copy.clip is not None and copy.clip.original_index == index
    with pytest.raises(ProjectionError, match="cut from the original only"):
        project(copy, index=3, allowance=None, bound=None)

    def lookup(original_id: str) -> tuple[ToolResult, int]:
        i = record.index_of(original_id)
        assert i is not None
        return record[i], i  # type: ignore[return-value]

    projection = BoundProjection(4000, lookup, record.index_of)
    bounded_copy = projection.output_of(copy)
    assert len(bounded_copy) <= 4000
    assert bounded_copy == project(original, index=index, allowance=20_000, bound=4000).output
    assert len(parse_clip_marker(bounded_copy)) == 1  # never a second marker around the copy's marker
    request = compile_request(
        system="s",
        tools=(),
        view=[Instruction("task"), call_message, copy],
        settings=RequestSettings(model="claude-haiku-5-5"),
        projection=projection,
    )
    assert request.payload()["messages"][2]["content"][0]["content"] == bounded_copy
    # Without a bound the stored copy is sent as stored.
    plain = compile_request(
        system="s",
        tools=(),
        view=[Instruction("task"), call_message, copy],
        settings=RequestSettings(model="claude-haiku-5-5"),
    )
    assert plain.payload()["messages"][2]["content"][0]["content"] == copy.output


@settings(max_examples=60, deadline=None)
@given(
    st.text(min_size=1, max_size=6000),
    st.integers(min_value=CLIP_FLOOR, max_value=5000),
    st.one_of(st.none(), st.integers(min_value=2, max_value=6000)),
)
def test_any_text_projects_within_the_bound_and_its_marker_recovers_the_middle(
    text: str, bound: int, allowance: int | None
) -> None:
    original = result(text)
    record = Record()
    index = record.append(original)
    projected = project(original, index=index, allowance=allowance, bound=bound)
    assert len(projected.output) <= bound
    if not projected.cut:
        assert projected.output == text and len(text) <= bound and (allowance is None or allowance >= len(text))
        return
    (marker,) = parse_clip_marker(projected.output)
    assert recovered_interval(original, index, projected.output, record, bound) == text[marker.start : marker.end]
    kept = projected.kept[0]
    assert projected.output.startswith(text[: (3 * kept) // 4])


@st.composite
def texts_above_the_bound(draw: st.DrawFn) -> tuple[str, int, int | None]:
    """A bound at or above the clip floor and a text longer than it: an arbitrary (often non-ASCII)
    start, then line-structured text that never repeats, so a wrong offset recovers wrong text."""
    bound = draw(st.integers(min_value=CLIP_FLOOR, max_value=5000))
    start = draw(st.text(max_size=200))
    length = draw(st.integers(min_value=bound + 1, max_value=4 * bound))
    allowance = draw(st.one_of(st.none(), st.integers(min_value=2, max_value=4 * bound)))
    return start + synthetic_text(f"body{length}", length - len(start)), bound, allowance


@settings(max_examples=80, deadline=None)
@given(texts_above_the_bound())
def test_any_text_above_the_bound_is_cut_to_it_with_one_marker_that_recovers_the_middle(
    case: tuple[str, int, int | None],
) -> None:
    text, bound, allowance = case
    original = result(text)
    record = Record()
    record.append(Instruction("task"))
    index = record.append(original)
    projected = project(original, index=index, allowance=allowance, bound=bound)
    assert projected.cut and len(projected.output) <= bound
    (marker,) = parse_clip_marker(projected.output)
    kept = projected.kept[0]
    head = (3 * kept) // 4
    assert (marker.index, marker.total) == (index, len(text))
    assert (marker.start, marker.end) == (head, len(text) - (kept - head))
    assert projected.output.startswith(text[:head]) and projected.output.endswith(text[marker.end :])
    assert recovered_interval(original, index, projected.output, record, bound) == text[marker.start : marker.end]
    if allowance is not None and allowance <= kept:
        assert kept == allowance  # the allowance, not the bound, decided
    else:
        # The greatest retained count under the bound: one more source character would not fit.
        assert len(project(original, index=index, allowance=kept + 1, bound=None).output) > bound


def test_canonical_outputs_for_non_mapping_json_are_one_preview_body() -> None:
    original = result(list(range(3000)))
    projected = project(original, index=1, allowance=None, bound=1500)
    value = json.loads(projected.output)
    assert isinstance(value, str) and value.startswith(JSON_PREVIEW_LABEL) and len(value) <= 1500
    assert recovery_text(original) == canonical_json(list(range(3000)))


def ids_of(messages: list[Message]) -> frozenset[str]:
    return frozenset(m.id for m in messages)


def test_a_request_projection_keeps_an_included_protected_rounds_own_bound() -> None:
    from types import SimpleNamespace

    from runtime.fold.projection import request_projection

    record = Record()
    record.append(Instruction("task"))
    kept, other = result(BIG), ToolResult.for_call(ToolCall.create("toolu_2", "run_shell", {"command": "ls"}), BIG)
    record.append(kept)
    record.append(other)
    decided = SimpleNamespace(included=True, result_bound=20_000, member_ids=ids_of([kept]))
    projection = request_projection(record, 4000, decided)
    assert projection is not None and projection.frozen == {kept.id: 20_000}
    assert len(projection.output_of(other)) <= 4000 < len(projection.output_of(kept)) <= 20_000
    for plain in (
        None,
        SimpleNamespace(included=False, result_bound=20_000, member_ids=ids_of([kept])),
        SimpleNamespace(included=True, result_bound=4000, member_ids=ids_of([kept])),
    ):
        unfrozen = request_projection(record, 4000, plain)
        assert unfrozen is not None and unfrozen.frozen == {} and len(unfrozen.output_of(kept)) <= 4000
    undecided = SimpleNamespace(result_bound=20_000, member_ids=ids_of([kept]))  # no "included": not included
    assert request_projection(record, 4000, undecided).frozen == {}
    assert request_projection(record, None, None) is None
    assert RecordReader(record).index_of(other.id) == 2 and ids_of([kept, other]) == {kept.id, other.id}
