"""Counting a candidate view from the view counted before it (runtime.measuring.measure_splice).

The count of a spliced candidate must be the number compiling and counting the
candidate whole gives, for any view and any window; where the splice cannot
show that, it declines and the whole count is taken.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.tools import synthetic_text
from runtime.bench.conversations import Conversation, measurer_for
from runtime.fold.notes import build_note
from runtime.fold.plan_run import rebuild_view
from runtime.fold.units import units_of
from runtime.measuring.image_count import measure_request
from runtime.measuring.measure import TokenCounter
from runtime.measuring.measure_splice import SpliceBase
from runtime.measuring.tokenizer import count_tokens
from runtime.request.compiler import RequestSettings, compile_request
from runtime.request.rendering import CompileError
from runtime.values.messages import AssistantResponse, Instruction, Message, TextPart, ToolResult

SETTINGS = RequestSettings(model="claude-haiku-5-5")


def _conversation(rounds: list[tuple[int, bool]], answers: set[int]) -> Conversation:
    conversation = Conversation()
    conversation.task("Read the files and report.")
    for i, (chars, say) in enumerate(rounds):
        path = f"docs/f{i}.md"
        conversation.round(
            [("read_file", {"path": path}, synthetic_text(path, chars))], say=f"Reading {i}." if say else None
        )
        if i in answers:
            conversation.answer(f"So far {i} files.")
        if i == len(rounds) // 2:
            conversation.task("Also note the sizes.")
    conversation.deliver()
    return conversation


def _whole(view: list[Message], branch_system: object) -> int:
    """The count of ``view`` compiled and counted from nothing (a fresh counter)."""
    request = compile_request(system=branch_system, tools=(), view=view, settings=SETTINGS)  # type: ignore[arg-type]
    return measure_request(request, TokenCounter(), 1.0).counted


def _base(view: list[Message], system: object, counter: TokenCounter) -> SpliceBase:
    request = compile_request(system=system, tools=(), view=view, settings=SETTINGS)  # type: ignore[arg-type]
    base = SpliceBase.build(view, request, counter)
    assert base is not None
    return base


rounds_st = st.lists(st.tuples(st.integers(0, 400), st.booleans()), min_size=3, max_size=12)


@settings(max_examples=60, deadline=None)
@given(rounds=rounds_st, answers=st.sets(st.integers(0, 11), max_size=4), data=st.data())
def test_a_spliced_count_equals_the_whole_count(rounds, answers, data) -> None:
    conversation = _conversation(rounds, answers)
    branch = conversation.branch()
    view = list(branch.view())
    counter = TokenCounter()
    base = _base(view, branch.system, counter)
    units = units_of(view, branch)
    takeable = [i for i, unit in enumerate(units) if unit.kind == "round"]
    # One or two runs of rounds, each becoming a note (what a tool_io candidate is), or removed outright.
    first = data.draw(st.integers(0, len(takeable) - 1))
    last = data.draw(st.integers(first, len(takeable) - 1))
    chosen = takeable[first : last + 1]
    if data.draw(st.booleans()) and len(chosen) > 2:
        chosen = chosen[:1] + chosen[2:]
    runs: list[list[int]] = []
    for i in chosen:
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    with_notes = data.draw(st.booleans())
    note_at = {run[0]: build_note("tool_io", [units[i] for i in run], branch) for run in runs} if with_notes else {}
    candidate = rebuild_view(view, units, set(chosen), note_at)
    spliced = base.counted_for(candidate, counter, None)
    if with_notes and len(chosen) <= len(takeable) // 4:  # a note standing for a few rounds: always spliced
        assert spliced is not None  # (a window over half the view is counted whole, as documented)
    if spliced is not None:
        assert spliced == _whole(candidate, branch.system)


def test_a_note_over_the_oldest_rounds_is_spliced() -> None:
    """The case the fold's search measures over and over is taken by the splice (not the whole count)."""
    conversation = _conversation([(300, True)] * 8, set())
    branch = conversation.branch()
    view = list(branch.view())
    counter = TokenCounter()
    base = _base(view, branch.system, counter)
    units = units_of(view, branch)
    for count in (1, 3, 5):
        chosen = [i for i, unit in enumerate(units) if unit.kind == "round"][:count]
        note = build_note("tool_io", [units[i] for i in chosen], branch)
        candidate = rebuild_view(view, units, set(chosen), {chosen[0]: note})
        spliced = base.counted_for(candidate, counter, None)
        assert spliced is not None
        assert spliced == _whole(candidate, branch.system)
    assert base.counted_for(view, counter, None) == base.counted == _whole(view, branch.system)


def test_the_measurer_estimates_candidates_as_a_fresh_measurer_does() -> None:
    conversation = _conversation([(500, i % 2 == 0) for i in range(10)], {3})
    branch = conversation.branch()
    view = list(branch.view())
    measurer = measurer_for(branch, scale=1.37)
    assert measurer.estimate(view) == measurer_for(branch, scale=1.37).measure(view).estimate
    units = units_of(view, branch)
    rounds = [i for i, unit in enumerate(units) if unit.kind == "round"]
    for count in range(1, len(rounds)):
        chosen = rounds[:count]
        note = build_note("tool_io", [units[i] for i in chosen], branch)
        candidate = rebuild_view(view, units, set(chosen), {chosen[0]: note})
        assert measurer.estimate(candidate) == measurer_for(branch, scale=1.37).measure(candidate).estimate


def test_a_reply_with_thinking_context_is_counted_whole() -> None:
    conversation = _conversation([(200, True)] * 4, set())
    thinking = AssistantResponse((TextPart("Done."),), context="c" * 64)
    conversation.add(thinking)
    branch = conversation.branch()
    view = list(branch.view())
    counter = TokenCounter()
    base = _base(view, branch.system, counter)
    units = units_of(view, branch)
    chosen = [i for i, unit in enumerate(units) if unit.kind == "round"][:2]
    candidate = rebuild_view(
        view, units, set(chosen), {chosen[0]: build_note("tool_io", [units[i] for i in chosen], branch)}
    )
    assert base.counted_for(candidate, counter, None) is None


def test_a_new_reply_or_an_orphan_is_counted_whole() -> None:
    conversation = _conversation([(200, True)] * 4, set())
    branch = conversation.branch()
    view = list(branch.view())
    counter = TokenCounter()
    base = _base(view, branch.system, counter)
    # A reply the base never had: declined.
    assert base.counted_for([*view[:3], AssistantResponse((TextPart("new"),)), *view[3:]], counter, None) is None
    # A result left without its call: declined, and compiling it whole says why.
    orphaned = [m for m in view if not (isinstance(m, AssistantResponse) and m is view[3])]
    assert isinstance(view[4], ToolResult)
    assert base.counted_for(orphaned, counter, None) is None
    with pytest.raises(CompileError, match="orphaned tool result"):
        compile_request(system=branch.system, tools=(), view=orphaned, settings=SETTINGS)
    # A new instruction: declined too (counted whole).
    assert base.counted_for([*view, Instruction("more")], counter, None) is None


@settings(max_examples=80, deadline=None)
@given(
    lines=st.lists(
        st.tuples(
            st.text(alphabet="ab7 )\"'\\é-#{}:", max_size=30), st.sampled_from(["chars", "x9", ")", '"', "é", ""])
        ),
        min_size=1,
        max_size=60,
    )
)
def test_counting_by_lines_equals_counting_whole(lines) -> None:
    text = "\\n".join(body + end for body, end in lines) * 8
    counter = TokenCounter()
    assert counter.count_lines(text) == count_tokens(text)
    assert counter.count_lines(text) == count_tokens(text)  # the cached whole


def test_the_running_totals_are_the_piece_by_piece_sums() -> None:
    conversation = _conversation([(250, True)] * 5, {1})
    branch = conversation.branch()
    request = compile_request(system=branch.system, tools=(), view=branch.view(), settings=SETTINGS)
    counter = TokenCounter()
    running = counter.running(request.pieces())
    assert running is not None
    counted, totals, tails = running
    pieces = request.pieces()
    contributions = TokenCounter().count_each([text for _, text in pieces])
    assert counted == sum(contributions) == measure_request(request, TokenCounter(), 1.0).counted
    before = len(pieces.head)
    flat = [text for _, text in pieces.flat()]
    for index in range(len(request.messages) + 1):
        assert totals[index] == sum(contributions[:before])
        assert tails[index] == "".join(flat[:before])[-64:]
        if index < len(request.messages):
            before += len(pieces.segment(index))
    # extend() continues a running state exactly as counting on would.
    rest, _ = counter.extend(
        tails[2], [p for i in range(2, len(request.messages)) for p in pieces.segment(i)] + list(pieces.foot)
    )
    assert totals[2] + rest == counted
