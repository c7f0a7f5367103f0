"""Splice counting and line counting rules a mutation run found unpinned (scripts/mutation).

Each test names the mutants of ``runtime/measuring/measure_splice.py`` or ``runtime/measuring/measure.py`` it was
written against. The rule every splice test checks is the module's: a candidate's spliced
count is the count of the candidate compiled and counted whole, or None (then the caller
counts it whole); it never raises, and the cases it promises to take are taken.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs
import pytest

from actors.tools import synthetic_text
from runtime.bench.conversations import Conversation
from runtime.fold.projection import record_projection
from runtime.measuring.image_count import measure_request
from runtime.measuring.measure import LINE_COUNT_MIN_CHARS, TokenCounter, _lines_of, measure
from runtime.measuring.measure_splice import SpliceBase
from runtime.measuring.tokenizer import count_tokens
from runtime.request.compiler import RequestSettings, compile_request
from runtime.request.rendering import CompileError, ResultProjection
from runtime.values.messages import (
    AssistantResponse,
    ImagePart,
    Instruction,
    Message,
    Note,
    TextPart,
    ToolCall,
    ToolResult,
)

SETTINGS = RequestSettings(model="claude-haiku-5-5")
CHART = Path(__file__).resolve().parents[1] / "scenarios" / "vision" / "chart.png"


def _note(text: str) -> Note:
    return Note(f"Folded: {text}. " * 3, ("m",), 0, "tool_io")


def _conversation(rounds: int = 8, *, parallel: bool = False) -> Conversation:
    c = Conversation()
    c.task("Read the files and report.")
    for i in range(rounds):
        calls = [("read_file", {"path": f"f{i}.md"}, synthetic_text(f"f{i}.md", 200))]
        if parallel and i % 3 == 1:
            calls.append(("read_file", {"path": f"g{i}.md"}, synthetic_text(f"g{i}.md", 150)))
        c.round(calls, say=f"Reading {i}." if i % 2 else None)
        if i == 3:
            c.answer("Half way.")
            c.task("Go on.")
        if parallel and i == 5:
            c.task("And the rest.")
    return c


def _whole(view: Sequence[Message], system: object, projection: ResultProjection | None = None) -> int:
    request = compile_request(system=system, tools=(), view=view, settings=SETTINGS, projection=projection)  # type: ignore[arg-type]
    return measure_request(request, TokenCounter(), 1.0).counted


def _base(
    view: Sequence[Message], system: object, counter: TokenCounter, projection: ResultProjection | None = None
) -> SpliceBase:
    request = compile_request(system=system, tools=(), view=view, settings=SETTINGS, projection=projection)  # type: ignore[arg-type]
    base = SpliceBase.build(view, request, counter)
    assert base is not None
    return base


def _spliced_or_whole(
    base: SpliceBase,
    candidate: list[Message],
    system: object,
    counter: TokenCounter,
    projection: ResultProjection | None = None,
) -> int | None:
    """The spliced count, checked against the whole count (None: declined, or refused by the compiler too)."""
    spliced = base.counted_for(candidate, counter, projection)
    try:
        whole = _whole(candidate, system, projection)
    except CompileError:
        assert spliced is None, "a view the compiler refuses was given a count"
        return None
    assert spliced is None or spliced == whole
    return spliced


# _count mutmut_5 (two messages of padding), _role mutmut_2, _5, _6 (a window ending in a user message before a user
# message of the tail, which then joins it), counted_for mutmut_55 (an empty window: an IndexError), _window mutmut_42:
# every window of two small views, cut out, replaced by a note or by two, counts as whole or declines, and never raises.
@pytest.mark.parametrize("parallel", [False, True])
def test_every_window_of_a_small_view_is_counted_as_whole_or_declined(parallel: bool) -> None:
    conversation = _conversation(parallel=parallel)
    branch = conversation.branch()
    view = list(branch.view())
    counter = TokenCounter()
    base = _base(view, branch.system, counter)
    spliced = 0
    for lo in range(len(view)):
        for hi in range(lo, len(view) + 1):
            for replacement in ([], [_note(f"{lo}-{hi}")], [_note("a"), _note("b")]):
                candidate = view[:lo] + replacement + view[hi:]
                if candidate != view and _spliced_or_whole(base, candidate, branch.system, counter) is not None:
                    spliced += 1
    assert spliced > 100  # the splice takes most of these (a guard that the loop checks counts, not Nones)


# counted_for mutmut_57, _58 (a window ending at the second rendered message declined), _window mutmut_29, _30 (a
# change at the first message declined), _42 (a note put before the first message declined), _allowed mutmut_6 (the
# first message, kept between two notes, taken for a message moved into the window): a change within the first
# rendered message is the cheapest window there is, and is spliced.
def test_a_change_within_the_first_rendered_message_is_spliced() -> None:
    branch = _conversation().branch()
    view = list(branch.view())
    counter = TokenCounter()
    base = _base(view, branch.system, counter)
    for candidate in (
        view[:1] + [_note("after the task")] + view[1:],
        [_note("instead of the task")] + view[1:],
        [_note("before the task")] + view,
        [_note("before"), view[0], _note("after")] + view[1:],
    ):
        spliced = base.counted_for(candidate, counter, None)
        assert spliced is not None
        assert spliced == _whole(candidate, branch.system)


def _small() -> tuple[Conversation, list[Message]]:
    """Four rendered messages: the task, a call, its result, an answer."""
    c = Conversation()
    c.task("Read.")
    c.round([("read_file", {"path": "a.md"}, synthetic_text("a.md", 300))])
    c.answer("Done reading a.")
    return c, list(c.branch().view())


# counted_for mutmut_59 (a window of exactly half the view declined), _window mutmut_13 (the window started one
# rendered message early, then over half), counted_for mutmut_54 and _65 (a window over half the view spliced):
# MAX_WINDOW_SHARE is the bound, inclusive.
def test_a_window_of_half_the_view_is_spliced_and_one_over_half_is_not() -> None:
    c, view = _small()
    branch = c.branch()
    counter = TokenCounter()
    base = _base(view, branch.system, counter)
    assert len(base.request.messages) == 4
    result = view[2]
    assert isinstance(result, ToolResult)
    clipped = attrs.evolve(result, output=result.output[:40], clipped_from=result.id, id="clipped-a")
    for candidate in (
        view[:2] + [clipped] + view[3:],
        [*view, _note("end")],
        [*view[:3], _note("instead")],
        [view[0], _note("after the task"), *view[1:]],  # one rendered message laid out (_window mutmut_43: three)
    ):
        spliced = base.counted_for(candidate, counter, None)  # two rendered messages laid out of four
        assert spliced is not None
        assert spliced == _whole(candidate, branch.system)
    # All four but the task (the call, its clipped result, the answer and a note): counted whole.
    assert base.counted_for([*view[:2], clipped, view[3], _note("end")], counter, None) is None
    # A view of one rendered message: any window is all of it.
    one = Conversation()
    one.task("Hello there.")
    only = list(one.branch().view())
    base_one = _base(only, one.branch().system, counter)
    assert base_one.counted_for([*only, _note("more")], counter, None) is None


# _allowed mutmut_15, _17 (a result for a call the base never saw: a TypeError): declined, without raising.
def test_a_result_for_a_call_not_in_the_view_declines_without_raising() -> None:
    branch = _conversation().branch()
    view = list(branch.view())
    counter = TokenCounter()
    base = _base(view, branch.system, counter)
    stray = ToolResult(call_id="toolu_unknown", name="read_file", arguments_json="{}", output="stray")
    candidate = view[:5] + [stray] + view[5:]
    assert base.counted_for(candidate, counter, None) is None
    with pytest.raises(CompileError, match="orphaned tool result"):
        _whole(candidate, branch.system)


# _allowed mutmut_8 (the first message of the base in the window ended the check), _9 (a message of the base outside
# the window let in): a new reply after a kept message, and a message of the base repeated, are counted whole.
def test_a_new_reply_after_a_kept_message_or_a_repeated_message_is_counted_whole() -> None:
    branch = _conversation().branch()
    view = list(branch.view())
    counter = TokenCounter()
    base = _base(view, branch.system, counter)
    reply = AssistantResponse((TextPart("new"),))
    assert base.counted_for(view[:1] + [_note("n")] + view[1:3] + [reply, _note("m")] + view[3:], counter, None) is None
    assert base.counted_for(view[:5] + [view[0]] + view[5:], counter, None) is None


# build mutmut_24 (the window may start at the reply that carries thinking), _25 (not right after it either): a
# thinking reply's keep decision reads everything before it, so no window starts at or before it; one starting
# after it is spliced.
def test_windows_start_after_the_last_reply_with_thinking() -> None:
    c = _conversation(4)
    c.add(AssistantResponse((TextPart("Thinking done."),), context="c" * 64))
    c.task("More.")
    c.round([("read_file", {"path": "z.md"}, synthetic_text("z.md", 200))])
    c.round([("read_file", {"path": "y.md"}, synthetic_text("y.md", 200))])
    branch = c.branch()
    view = list(branch.view())
    counter = TokenCounter()
    base = _base(view, branch.system, counter)
    after = base.thinking_before
    assert isinstance(view[after - 1], AssistantResponse) and view[after - 1].context is not None
    assert base.counted_for(view[:after] + [_note("t")] + view[after:], counter, None) is None
    for candidate in (view[: after + 1] + [_note("t")] + view[after + 1 :], view[:-2] + [_note("last")]):
        spliced = base.counted_for(candidate, counter, None)
        assert spliced is not None
        assert spliced == _whole(candidate, branch.system)


# counted_for mutmut_50, _52 (the window laid out without the result projection): a bounded result in the window is
# counted as the request carries it.
def test_a_window_holding_a_bounded_result_is_counted_as_projected() -> None:
    c = Conversation()
    c.task("Read.")
    for i in range(6):
        c.round([("read_file", {"path": f"b{i}.md"}, synthetic_text(f"b{i}.md", 3000))], say="Next.")
    branch = c.branch()
    view = list(branch.view())
    projection = record_projection(c.record, 1200)
    assert projection is not None
    counter = TokenCounter()
    base = _base(view, branch.system, counter, projection)
    candidate = view[:3] + [_note("p")] + view[3:]
    spliced = base.counted_for(candidate, counter, projection)
    assert spliced is not None
    assert spliced == _whole(candidate, branch.system, projection) < _whole(candidate, branch.system)


# build mutmut_3 (a view with an image served as a base): its image is counted beside the payload, so no base.
def test_a_view_with_an_image_gives_no_base() -> None:
    c = _conversation(3)
    c.add(Instruction("Look.", images=(ImagePart.from_bytes(CHART.read_bytes(), "chart"),)))
    c.round([("read_file", {"path": "q.md"}, synthetic_text("q.md", 300))])
    branch = c.branch()
    view = list(branch.view())
    request = compile_request(system=branch.system, tools=(), view=view, settings=SETTINGS)
    assert SpliceBase.build(view, request, TokenCounter()) is None


def _delayed() -> Conversation:
    """Rounds whose result comes, twice, after an instruction and a reply (the result is laid out after its call)."""
    c = Conversation()
    c.task("Read.")
    for i in range(10):
        call = ToolCall.create(f"toolu_s{i}", "read_file", {"path": f"s{i}.md"})
        c.add(AssistantResponse((TextPart(f"Reading {i}."), call)))
        if i in (4, 6):
            c.task(f"Meanwhile {i}.")
            c.answer(f"Noted {i}.")
        if i == 8:
            c.answer("Still reading.")  # a reply right after the call, before its result
        c.add(ToolResult.for_call(call, synthetic_text(f"s{i}.md", 200)))
    # Two calls in one reply whose results come in reverse order, a reply between them.
    first, second = (ToolCall.create(f"toolu_p{i}", "read_file", {"path": f"p{i}.md"}) for i in range(2))
    c.add(AssistantResponse((TextPart("Both."), first, second)))
    c.add(ToolResult.for_call(second, synthetic_text("p1.md", 200)))
    c.answer("One is in.")
    c.add(ToolResult.for_call(first, synthetic_text("p0.md", 200)))
    c.task("Sum up.")
    return c


# _window mutmut_20, _21, _22 (the walk back from a start that a call before it reaches past), _47, _48 (the walk
# forward), build mutmut_18, _35, _41 (how far each call's result lies): where a reply starts a rendered message
# between a call and its result (and where two results come in reverse order around a reply), the window widens to
# the starts no call crosses, so a note put anywhere is spliced; every window cut out or replaced counts as whole or
# declines.
def test_a_window_widens_past_a_call_whose_result_comes_later() -> None:
    c = _delayed()
    branch = c.branch()
    view = list(branch.view())
    counter = TokenCounter()
    base = _base(view, branch.system, counter)
    for at in range(len(view) + 1):
        spliced = _spliced_or_whole(base, view[:at] + [_note(f"at {at}")] + view[at:], branch.system, counter)
        # (A note put in the last rendered message's window would end it in a user message joined by the closing
        # instruction: declined, and the same window is the whole tail.)
        assert spliced is not None or at >= len(view) - 2, at
    for lo in range(len(view)):
        for hi in range(lo + 1, len(view) + 1):
            for replacement in ([], [_note(f"{lo}-{hi}")]):
                _spliced_or_whole(base, view[:lo] + replacement + view[hi:], branch.system, counter)


# _count mutmut_41, _42 (the count going on over the base's messages after the window although the running state
# agreed with the base's): a note over the oldest round of a long view counts the window and the message after it,
# not the rest of the view (its message after the window is a call unlike the one before it).
def test_a_spliced_count_stops_where_the_running_state_agrees_again() -> None:
    c = Conversation()
    c.task("Read the files and report.")
    for i in range(40):  # two tools in turn: no two calls in a row end in the same characters
        tool = "read_file" if i % 2 else "open_file"
        c.round([(tool, {"path": f"f{i}.md"}, synthetic_text(f"f{i}.md", 200))])
    branch = c.branch()
    view = list(branch.view())
    counter = TokenCounter()
    base = _base(view, branch.system, counter)
    candidate = view[:1] + [_note("oldest round")] + view[3:]
    before = counter.stats()
    spliced = base.counted_for(candidate, counter, None)
    after = counter.stats()
    assert spliced == _whole(candidate, branch.system)
    looked_up = after.hits + after.misses + after.junction_hits + after.junction_misses
    looked_up -= before.hits + before.misses + before.junction_hits + before.junction_misses
    pieces_of_view = len(list(base.request.pieces()))
    assert looked_up < 40 < pieces_of_view


def _text(lines: int, end: str = ".") -> str:
    """A JSON-escaped text of ``lines`` lines, each ending in ``end`` (a hard split before each break if alphanumeric)."""
    return "\\n".join(f"item {i} of the list is done{end}" for i in range(lines))


# count_lines mutmut_1, _2, _3 (which texts are counted by lines), _7, _8 (two lines), _10, _11, _12 (the whole text
# a miss), _17 (the whole text cached with its count), _lines_of mutmut_3 (the cut): a long text never counted is
# counted line by line and then known whole, and a text that repeats its lines costs only its new one.
def test_a_long_text_is_counted_by_its_lines_and_a_longer_one_costs_its_new_line() -> None:
    counter = TokenCounter()
    text = _text(60, end="x")
    assert len(text) >= LINE_COUNT_MIN_CHARS and len(_lines_of(text)) == 60
    assert counter.count_lines(text) == count_tokens(text)
    stats = counter.stats()
    assert (stats.misses, stats.hits, stats.entries) == (61, 0, 61)  # the text, then each line
    assert counter.count_lines(text) == count_tokens(text)
    assert (counter.stats().misses, counter.stats().hits) == (61, 1)  # known whole
    longer = text + "\\nitem 60 of the list is donex"
    assert counter.count_lines(longer) == count_tokens(longer)
    assert (counter.stats().misses, counter.stats().hits) == (63, 61)  # the text and its new line; 60 lines known


def test_the_line_count_bounds_are_inclusive_where_documented() -> None:
    # A text of exactly LINE_COUNT_MIN_CHARS characters is counted by lines; one shorter is counted whole.
    two = "a" * 600 + "\\n" + "b" * (LINE_COUNT_MIN_CHARS - 602)
    assert len(two) == LINE_COUNT_MIN_CHARS and len(_lines_of(two)) == 2
    counter = TokenCounter()
    assert counter.count_lines(two) == count_tokens(two)
    assert counter.stats().entries == 3  # the text and its two lines
    short = TokenCounter()
    assert short.count_lines(two[1:]) == count_tokens(two[1:])
    assert short.stats().entries == 1
    # One line (no break after a letter or digit): counted whole.
    single = TokenCounter()
    one_line = _text(60, end=".")
    assert len(_lines_of(one_line)) == 1
    assert single.count_lines(one_line) == count_tokens(one_line)
    assert single.stats().entries == 1


# _lines_of mutmut_9 (a line cut where the character before the break is not a letter or digit): the lines' counts
# would no longer add up; "done.\\nitem" is one pre-token run across the break.
def test_a_break_after_punctuation_is_not_a_cut() -> None:
    text = _text(60, end=".")
    assert TokenCounter().count_lines(text) == count_tokens(text)
    assert _lines_of("ab.\\ncd1\\nef") == ["ab.\\ncd1", "\\nef"]


# extend mutmut_1, _5, _6 (which pieces are counted by lines), _21 (the tail after a long piece): extend counts by
# lines only when asked, and hands back the payload's last JUNCTION_WINDOW characters.
def test_extend_counts_by_lines_only_when_asked_and_returns_the_tail() -> None:
    pieces = [("m1", _text(60, end="x")), ("m2", '","type":"text"}'), ("m3", "z" * 130)]
    payload = "".join(piece for _, piece in pieces)
    plain = TokenCounter()
    total, tail = plain.extend("", pieces)
    assert total == count_tokens(payload) and tail == payload[-64:]
    assert plain.stats().entries == 3
    by_lines = TokenCounter()
    assert by_lines.extend("", pieces, lines=True) == (total, tail)
    assert by_lines.stats().entries == 3 + 60


# measure mutmut_5 (the segmented measurement's None taken as a result): a view holding one message twice (a label
# in two segments) is measured piece by piece.
def test_a_view_with_a_message_twice_is_measured_piece_by_piece() -> None:
    c, view = _small()
    request = compile_request(system=c.branch().system, tools=(), view=[*view, view[0]], settings=SETTINGS)
    counter = TokenCounter()
    assert counter.measure_segmented(request.pieces()) is None
    measured = measure(request.pieces(), counter, 1.25)
    assert measured == measure(list(request.pieces()), TokenCounter(), 1.25)
    assert measured.counted == count_tokens("".join(piece for _, piece in request.pieces()))


# _count mutmut_20, _23, _25 (the window's pieces counted whole, not by lines): a long note in a window is counted
# line by line, so the next candidate, whose note repeats those lines and adds one, costs its new line.
def test_a_window_counts_a_long_note_by_its_lines() -> None:
    branch = _conversation(12).branch()
    view = list(branch.view())
    counter = TokenCounter()
    base = _base(view, branch.system, counter)
    lines = [f"Round {i} read f{i}.md and found 3 sections" for i in range(40)]
    entries = counter.stats().entries
    for count in (39, 40):
        note = Note("\n".join(lines[:count]), ("m",), 0, "tool_io")
        candidate = view[:1] + [note] + view[5:]
        spliced = base.counted_for(candidate, counter, None)
        assert spliced is not None
        assert spliced == _whole(candidate, branch.system)
    assert counter.stats().entries >= entries + 40  # each line of the notes is known by itself
