"""The fold rules a mutation run found unpinned (scripts/mutation): each test names the rule it pins.

Every test here was written against a mutant of ``runtime/fold`` that the
module's other tests let through; the mutant is named in the comment above it
so a later run that reports it again points here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.tools import synthetic_text
from runtime.bench.conversations import Conversation, measurer_for
from runtime.fold.audit import unrecoverable_bytes
from runtime.fold.bodies import recovery_text
from runtime.fold.clip import MAX_CUTS_PER_BODY, _level, clip_stage
from runtime.fold.formats import (
    is_path_like,
    listed_arguments,
    listing_lines,
    parse_clip_marker,
    parse_read_result,
)
from runtime.fold.marks import FoldMark, resolve_marks
from runtime.fold.measurer import ViewMeasurer
from runtime.fold.projection import ProjectionError, allowance_of, clipped_copy, record_projection
from runtime.fold.units import Unit
from runtime.measuring.measure import TokenCounter
from runtime.values.canonical import canonical_json
from runtime.values.messages import AssistantResponse, ClipInfo, Message, Note, TextPart, ToolCall, ToolResult


@attrs.frozen
class RecordAndView:
    """The two things the audit reads of a branch: its record and the ids in its view."""

    messages: tuple[Message, ...]
    view: tuple[str, ...]

    def record_messages(self) -> tuple[Message, ...]:
        return self.messages

    def view_ids(self) -> tuple[str, ...]:
        return self.view


# audit.x_unrecoverable_bytes__mutmut_23: a clipped copy whose original the record lacks counts its own bytes.
def test_a_clipped_copy_whose_original_is_missing_counts_its_own_bytes():
    copy = ToolResult("call-1", "read_file", "{}", "the kept part", clipped_from="missing-id")
    whole = ToolResult("call-2", "read_file", "{}", "an unclipped result")
    branch = RecordAndView((whole, copy), (whole.id, copy.id))
    assert unrecoverable_bytes(branch) == len(canonical_json(copy.content()).encode("utf-8"))


# bodies.x_recovery_text__mutmut_2..6: a response reads back as its text parts and its calls, one a line.
def test_a_response_reads_back_as_its_text_and_calls_one_a_line():
    response = AssistantResponse(
        (TextPart("Reading both."), ToolCall.create("c1", "read_file", {"path": "a.md"}), TextPart("Done."))
    )
    assert recovery_text(response) == 'Reading both.\n[call read_file {"path":"a.md"}]\nDone.'


# bodies.x_recovery_text__mutmut_7, 8: anything else is refused naming its type.
def test_recovery_text_refuses_what_is_not_a_message_naming_its_type():
    with pytest.raises(TypeError) as refused:
        recovery_text(TextPart("not a message"))  # type: ignore[arg-type]
    assert str(refused.value) == "recovery_text: TextPart is not a message kind"


def _level_by_search(kept: list[int], remove: int, floor: int) -> int:
    """The rule, by trying every level: the highest level in [floor, largest] that removes at least
    ``remove`` characters; the floor when even the floor removes no more than that."""
    removed_at = {level: sum(max(0, k - level) for k in kept) for level in range(floor, max(kept) + 1)}
    if removed_at[floor] <= remove:
        return floor
    return max(level for level, removed in removed_at.items() if removed >= remove)


# clip.x__level__mutmut_8, 9, 16, 23, 25, 29: one common level is the highest that removes enough, found exactly.
@given(
    kept=st.lists(st.integers(min_value=0, max_value=400), min_size=1, max_size=5),
    floor=st.integers(min_value=0, max_value=200),
    remove=st.integers(min_value=0, max_value=900),
)
def test_the_common_level_is_the_highest_that_removes_enough(kept, floor, remove):
    kept = [*kept, floor + 1 + kept[0]]  # at least one body above the floor, as the stage guarantees
    assert _level(kept, remove, floor) == _level_by_search(kept, remove, floor)


def test_the_common_level_at_its_boundaries():
    assert _level([3000, 2000], 2000, 1000) == 1500  # exactly enough at 1500: the highest such level
    assert _level([3000, 2000], 2001, 1000) == 1499
    assert _level([3000, 500], 1999, 1000) == 1001  # a body under the floor loses nothing
    assert _level([3000, 2000], 3000, 1000) == 1000  # the floor removes exactly enough
    assert _level([3000, 2000], 5000, 1000) == 1000  # nor can more be removed


def _clip_to(c: Conversation, deficit: int, bound: int | None = None, scale: float | None = None):
    branch = c.branch()
    measurer = measurer_for(branch, counter=TokenCounter(), bound=bound, scale=scale)
    view = branch.view()
    estimate = measurer.estimate(view)
    return clip_stage(
        view,
        estimate=estimate,
        target=estimate - deficit,
        eligible=lambda result: True,
        record=branch,
        measurer=measurer,
        bound=bound,
    )


# The clip stage's tie rule: between bodies of one size, the oldest original is cut first. (Its mutants
# clip_stage__mutmut_49, 51, 53 are equivalent: no two candidates share an original index, and the view
# keeps record order, so the first candidate in the view is the oldest; see equivalent.toml.)
@pytest.mark.parametrize("rounds", [1, 2])
def test_between_equal_bodies_the_oldest_is_cut_first(rounds):
    c = Conversation()
    c.task("Read.")
    calls = [("read_file", {"path": f"{name}.md"}, synthetic_text("same", 20_000)) for name in ("a", "b", "c")]
    if rounds == 1:
        _, results = c.round(calls)
    else:
        results = [c.round([call])[1][0] for call in calls]
    outcome = _clip_to(c, deficit=500)
    assert [copy.clipped_from for copy in outcome.copies] == [results[0].id]


# clip.x_clip_stage__mutmut_27: under a bound, "largest" is what a body keeps under it (k_N), so two bodies
# both cut to the bound tie, and the older goes first, however long the newer one's source is.
def test_under_a_bound_bodies_rank_by_what_they_keep_not_by_their_source_length():
    c = Conversation()
    c.task("Read.")
    _, (older,) = c.round([("read_file", {"path": "a.md"}, synthetic_text("a", 12_000))])
    c.round([("read_file", {"path": "b.md"}, synthetic_text("b", 30_000))])
    outcome = _clip_to(c, deficit=60, bound=4000)
    assert [copy.clipped_from for copy in outcome.copies] == [older.id]


def _one_read(size: int = 20_000) -> tuple[Conversation, ToolResult]:
    c = Conversation()
    c.task("Read.")
    _, (result,) = c.round([("read_file", {"path": "a.md"}, synthetic_text("a", size))])
    return c, result


# clip.x_clip_stage__mutmut_8: an estimate exactly at the target is not over it: nothing is cut.
def test_an_estimate_exactly_at_the_target_cuts_nothing():
    c, _ = _one_read()
    outcome = _clip_to(c, deficit=0)
    assert outcome.copies == () and outcome.cuts == () and outcome.replaced == ()


# clip.x_clip_stage__mutmut_138: each kept cut lists the original's index, its body's length and what it keeps.
def test_a_cut_lists_the_originals_index_its_body_length_and_what_it_keeps():
    c, result = _one_read()
    outcome = _clip_to(c, deficit=300)
    (copy,) = outcome.copies
    assert outcome.cuts == ((c.branch().index_of(result.id), 20_000, copy.clip.head + copy.clip.tail),)


# clip.x_clip_stage__mutmut_74: the deficit is in scaled tokens; the characters to remove follow from the
# raw tokens it stands for (deficit / scale), so twice the deficit at twice the scale cuts the same.
def test_the_cut_follows_the_deficit_in_raw_tokens():
    c, _ = _one_read()
    at_one = _clip_to(c, deficit=300, scale=1.0)
    at_two = _clip_to(c, deficit=600, scale=2.0)
    assert [cut[2] for cut in at_two.cuts] == [cut[2] for cut in at_one.cuts]
    assert len(at_one.cuts) == 1


# clip.x__kept_per_body__mutmut_4, clip_stage__mutmut_26, 88, _allowance__mutmut_2: a copy already in the view is
# cut again from what it keeps (its clip's head and tail), so a small further deficit cuts a little more.
def test_a_copy_is_cut_again_from_what_it_keeps():
    c, result = _one_read(60_000)
    first = _clip_to(c, deficit=3000)
    (copy1,) = first.copies
    c.add(copy1, in_view=False)
    c.view[c.view.index(result.id)] = copy1.id
    second = _clip_to(c, deficit=300)
    (copy2,) = second.copies
    kept1, kept2 = copy1.clip.head + copy1.clip.tail, copy2.clip.head + copy2.clip.tail
    assert copy2.clipped_from == result.id and second.replaced == (copy1.id,)
    assert kept1 - 5000 < kept2 < kept1


# clip.x_clip_stage__mutmut_26: bodies rank by what they keep now, so a deeply cut copy of a long original
# ranks below a shorter whole body.
def test_a_cut_copy_ranks_by_what_it_keeps_not_by_its_originals_length():
    c, result = _one_read(60_000)
    first = _clip_to(c, deficit=14_000)
    (copy1,) = first.copies
    assert copy1.clip.head + copy1.clip.tail < 10_000
    c.add(copy1, in_view=False)
    c.view[c.view.index(result.id)] = copy1.id
    _, (whole,) = c.round([("read_file", {"path": "b.md"}, synthetic_text("b", 10_000))])
    second = _clip_to(c, deficit=300)
    assert [copy.clipped_from for copy in second.copies] == [whole.id]


# clip.x_clip_stage__mutmut_119: a copy cut under a bound says a read of at most the bound, so the page its
# marker suggests fits under the same bound.
def test_a_copy_cut_under_a_bound_suggests_reads_within_it():
    c, result = _one_read(30_000)
    outcome = _clip_to(c, deficit=60, bound=4000)
    (copy,) = outcome.copies
    (marker,) = parse_clip_marker(copy.output)
    assert marker.index == c.branch().index_of(result.id)
    assert marker.limit == 4000 < marker.end - marker.start


# clip.x_clip_stage__mutmut_131..133: a cut that does not lower the estimate is not kept, and the stage goes on to
# the next body. 40,000 spaces are a few hundred tokens: the marker a cut adds costs more than the spaces it
# removes, so the largest body cannot be cut and the smaller one is.
def test_a_cut_that_does_not_lower_the_estimate_is_dropped_and_the_next_body_is_cut():
    c = Conversation()
    c.task("Read.")
    c.round([("read_file", {"path": "blank.txt"}, " " * 40_000)])
    _, (text,) = c.round([("read_file", {"path": "b.md"}, synthetic_text("b", 8_000))])
    outcome = _clip_to(c, deficit=50)
    assert [copy.clipped_from for copy in outcome.copies] == [text.id]


@attrs.define(eq=False)
class CountingMeasurer:
    """A real view measurer that also counts the candidate views it is asked to measure (one a cut)."""

    inner: ViewMeasurer
    measured: int = 0

    @property
    def scale(self) -> float:
        return self.inner.scale

    def estimate(self, view: Sequence[Message]) -> int:
        self.measured += 1
        return self.inner.estimate(view)

    def block_tokens(self, message: Message) -> tuple[int, int]:
        return self.inner.block_tokens(message)


# clip.x_clip_stage__mutmut_103, 104, 108..111: a body is cut at most four times in one stage, even when the
# estimate is still over the target. Dense digits around 30,000 spaces: each cut, sized by the body's average
# tokens per character, removes mostly cheap spaces and undershoots, so the stage would go on cutting.
def test_a_body_is_cut_at_most_four_times_in_one_stage():
    dense = "".join(f"{i * 7919 % 100_000:05d}" for i in range(2000))
    c = Conversation()
    c.task("Read.")
    c.round([("read_file", {"path": "a.md"}, dense + " " * 30_000 + dense)])
    branch = c.branch()
    measurer = CountingMeasurer(measurer_for(branch, counter=TokenCounter()))
    view = branch.view()
    estimate = measurer.inner.estimate(view)
    outcome = clip_stage(
        view,
        estimate=estimate,
        target=estimate - 3000,
        eligible=lambda result: True,
        record=branch,
        measurer=measurer,
        bound=None,
    )
    assert measurer.measured == MAX_CUTS_PER_BODY == 4
    assert len(outcome.copies) == 1 and outcome.estimate > estimate - 3000


# clip.x_clip_stage__mutmut_34: a result with no body to cut (an empty mapping) is passed over, not the end of
# the search.
def test_a_result_with_no_body_is_passed_over():
    c = Conversation()
    c.task("Read.")
    c.round([("list_tags", {}, {})])
    _, (text,) = c.round([("read_file", {"path": "b.md"}, synthetic_text("b", 8_000))])
    outcome = _clip_to(c, deficit=50)
    assert [copy.clipped_from for copy in outcome.copies] == [text.id]


# projection.x__cut_text__mutmut_13, 16 and allowance_of__mutmut_2: a marker suggests reading the omitted span in one
# page when it is shorter than a page, and a copy's allowance is its head plus its tail.
def test_a_short_omission_is_suggested_as_one_read_and_a_copys_allowance_is_what_it_keeps():
    _, result = _one_read(30_000)
    copy = clipped_copy(result, index=3, allowance=28_000, bound=None)
    (marker,) = parse_clip_marker(copy.output)
    assert marker.end - marker.start == 2_000 == marker.limit
    assert allowance_of(copy) == copy.clip.head + copy.clip.tail == 28_000


# formats.x_is_path_like__mutmut_3, 6, 7: a path-like name is one of the listed names or any name ending in "path".
def test_path_like_names():
    assert is_path_like("file") and is_path_like("URL") and is_path_like("source_path") and is_path_like("SrcPath")
    assert not is_path_like("pattern") and not is_path_like("paths")


# formats.x__clip__mutmut_3, listed_arguments__mutmut_11, 14: a value at its limit is shown whole; a longer string is
# clipped on its own characters (not on its JSON text) to the limit, ending in "...".
def test_listed_arguments_at_and_over_their_limits():
    rows = list(range(10, 63))  # canonical JSON: 53 two-digit numbers, 52 commas, 2 brackets = 160 characters
    assert len(json.dumps(rows, separators=(",", ":"))) == 160
    at_limit = {"path": "p" * 1000, "query": "q" * 160, "note": "n" * 159, "rows": rows}
    assert json.loads(listed_arguments(at_limit)) == at_limit
    over = json.loads(listed_arguments({"path": "p" * 1001, "query": "q" * 200}))
    assert over == {"path": "p" * 997 + "...", "query": "q" * 157 + "..."}


# formats.x_listing_lines__mutmut_2, 3: a note's listing keeps its call lines, message lines and detail lines.
def test_listing_lines_keeps_calls_messages_and_details():
    call = '- #3 read_file {"path":"a.md"} -> 120 chars'
    message = '- #4 assistant: "done"'
    detail = "  (#4 thought for 12 characters)"
    text = "\n".join(["Folded:", call, message, detail, "not a listing line"])
    assert listing_lines(text) == (call, message, detail)


# projection.xǁBoundProjectionǁmemo_key__mutmut_1: a rendered result is remembered per bound, so one message
# rendered under two bounds gives two outputs (not the first one twice).
def test_one_result_rendered_under_two_bounds_renders_twice():
    c, _ = _one_read(30_000)
    branch = c.branch()
    wide = measurer_for(branch, counter=TokenCounter(), bound=8000).estimate(branch.view())
    narrow = measurer_for(branch, counter=TokenCounter(), bound=2000).estimate(branch.view())
    wide_again = measurer_for(branch, counter=TokenCounter(), bound=8000).estimate(branch.view())
    assert narrow < wide == wide_again


# projection.x_clipped_copy__mutmut_11, 22, 24, 37: a copy keeps its original's call, arguments and error flag, and
# records the original's whole length and what it keeps (k_N under a bound, below the allowance asked for).
def test_a_clipped_copy_keeps_its_originals_call_and_records_what_it_keeps():
    c = Conversation()
    c.task("Read.")
    call = ToolCall.create("call-9", "read_file", {"path": "a.md"})
    c.round([("read_file", {"path": "a.md"}, "x")])  # an earlier round, so the original is not at index 0
    original = ToolResult.for_call(call, synthetic_text("a", 30_000), is_error=True)
    c.add(original)
    index = c.branch().index_of(original.id)
    copy = clipped_copy(original, index=index, allowance=10_000, bound=4000)
    assert (copy.call_id, copy.name, copy.arguments_json, copy.is_error) == (
        "call-9",
        "read_file",
        '{"path":"a.md"}',
        True,
    )
    assert copy.clip.original_index == index and copy.clip.total == 30_000
    assert copy.clip.head + copy.clip.tail < 4000


# formats.x_parse_read_result__mutmut_11: a text that is not a read_result answer is refused showing 120 characters
# of its first line.
def test_a_text_that_is_no_read_result_answer_is_refused_showing_its_first_line():
    with pytest.raises(ValueError) as refused:
        parse_read_result("y" * 300 + "\nmore")
    assert str(refused.value) == f"not a read_result answer: the first line is {'y' * 120!r}"


# projection.xǁBoundProjectionǁ_original__mutmut_5, 7: a result the record lacks, or a copy whose original it
# lacks, is refused naming the result (and the original).
def test_a_bounded_result_outside_the_record_is_refused_naming_it():
    c, _ = _one_read(3000)
    projection = record_projection(c.branch(), 4000)
    assert projection is not None
    stray = ToolResult("call-x", "read_file", "{}", "text")
    with pytest.raises(ProjectionError) as refused:
        projection.output_of(stray)
    assert str(refused.value) == f"result {stray.id} (read_file) is not in the branch's record"
    orphan = ToolResult("call-y", "read_file", "{}", "text", clipped_from="gone")
    with pytest.raises(ProjectionError) as refused:
        projection.output_of(orphan)
    assert str(refused.value) == f"clipped copy {orphan.id} names original gone, which is not in the record"


# fold.marks.xǁFoldMarkǁ__attrs_post_init____mutmut_12, 13, 17, 19: a mark's bounds are non-negative integers, end
# not before start; a refusal names the field and the value.
@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        (-1, 2, "FoldMark.start: -1 is not a non-negative integer"),
        (True, 2, "FoldMark.start: True is not a non-negative integer"),
        (1, 2.5, "FoldMark.end: 2.5 is not a non-negative integer"),
        (3, 2, "FoldMark: end 2 is before start 3"),
    ],
)
def test_a_fold_mark_refuses_bad_bounds_naming_them(start, end, message):
    with pytest.raises(ValueError) as refused:
        FoldMark(start, end)
    assert str(refused.value) == message


@attrs.frozen
class NoIndexes:
    """A record that holds none of the members asked about: covers() must go by what they stand for."""

    def message_at(self, index: int) -> Message:
        raise IndexError(index)

    def index_of(self, message_id: str) -> int | None:
        return None

    def record_length(self) -> int:
        return 0


# fold.marks.xǁFoldMarkǁcovers__mutmut_10..16: a mark covers a copy whose original, or a note whose first replaced
# message, is at either end of its span (inclusive), and nothing just outside it.
@pytest.mark.parametrize(("index", "covered"), [(3, False), (4, True), (6, True), (7, False)])
def test_a_mark_covers_what_stands_for_either_end_of_its_span(index, covered):
    mark = FoldMark(4, 6)
    copy = ToolResult("c", "read_file", "{}", "kept", clipped_from="o", clip=ClipInfo(index, 100, 2, 2))
    note = Note("folded", ("x",), index, "tool_io")
    for member in (copy, note):
        unit = Unit("message", (member,), 0, (0,))
        assert mark.covers(unit, NoIndexes()) is covered


# fold.marks.x_resolve_marks__mutmut_5, 22: a mark that takes a unit lands (itself), one that only waits is held.
def test_a_mark_lands_when_it_takes_a_unit_and_is_held_when_it_waits():
    note = Note("folded", ("x",), 5, "tool_io")
    units = [Unit("note", (note,), 0, (0,))]
    mark = FoldMark(4, 6)
    taken = resolve_marks([mark], units, NoIndexes(), never={}, not_now=set())
    assert (taken.units, taken.landing, taken.held) == ((0,), (mark,), ())
    waiting = resolve_marks([mark], units, NoIndexes(), never={}, not_now={0})
    assert (waiting.units, waiting.landing, waiting.held) == ((), (), (mark,))
