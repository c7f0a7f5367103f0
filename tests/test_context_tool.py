"""The model's context tool: its fixed schema, argument checks and answers (pure)."""

from __future__ import annotations

import json

import pytest

from actors.tools import synthetic_text
from runtime.bench.conversations import Conversation, measurer_for
from runtime.fold.context_tool import (
    CONTEXT_TOOL,
    STATUS_MAX_CHARS,
    ContextToolError,
    parse_action,
    run_context_call,
    settled_view,
)
from runtime.fold.formats import parse_read_result
from runtime.fold.marks import FoldMark
from runtime.fold.projection import clipped_copy
from runtime.fold.settings import FoldSettings
from runtime.measuring.measure import TokenCounter
from runtime.values.messages import AssistantResponse, Instruction, ToolCall

COUNTER = TokenCounter()
SETTINGS = FoldSettings(ceiling=20_000)


def test_the_schema_is_the_fixed_one_the_readers_call() -> None:
    schema = json.loads(CONTEXT_TOOL.input_schema_json)
    assert CONTEXT_TOOL.name == "context"
    assert schema["required"] == ["action"]
    assert schema["properties"]["action"]["enum"] == ["status", "read_result", "restore", "fold"]
    assert set(schema["properties"]) == {"action", "index", "offset", "limit", "start", "end"}
    assert schema["properties"]["limit"]["maximum"] == 16_000


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "action is None; expected one of status, read_result, restore, fold"),
        ({"action": "evict"}, "action is 'evict'"),
        ({"action": "read_result"}, 'read_result needs "index"'),
        ({"action": "read_result", "index": -2}, "index is -2; expected a non-negative integer"),
        ({"action": "read_result", "index": True}, "index is True"),
        ({"action": "read_result", "index": 1, "limit": 0}, "limit is 0; expected a positive integer"),
        ({"action": "read_result", "index": 1, "offset": "5"}, "offset is '5'"),
        ({"action": "restore"}, 'restore needs "index"'),
        ({"action": "fold", "start": 4}, 'fold needs "start" and "end"'),
        ({"action": "fold", "start": 9, "end": 4}, "fold end 4 is before start 9"),
        ({"action": "status", "verbose": True}, "unknown argument 'verbose'"),
    ],
)
def test_bad_arguments_are_refused_naming_the_key_the_value_and_the_expectation(arguments: dict, message: str) -> None:
    with pytest.raises(ContextToolError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_action(arguments)


def test_defaults_and_the_limit_cap() -> None:
    action = parse_action({"action": "read_result", "index": 3, "limit": 99_999})
    assert (action.index, action.offset, action.limit) == (3, 0, 16_000)


def conversation(*, running: bool = True) -> Conversation:
    """Four reads, then (as when the engine runs a context call) the round whose tools are running."""
    c = Conversation()
    c.task("Read.")
    for i in range(4):
        c.round([("read_file", {"path": f"d/{i}.md"}, synthetic_text(f"d/{i}.md", 3000))])
    if running:
        c.add(AssistantResponse((ToolCall.create("toolu_running", "context", {"action": "status"}),)))
    return c


def call(c: Conversation, arguments: dict, *, settings: FoldSettings | None = SETTINGS, marks=()):
    branch = c.branch()
    return run_context_call(
        arguments,
        view=branch.view(),
        record=branch,
        settings=settings,
        marks=marks,
        completed=3,
        estimator=measurer_for(branch, counter=COUNTER),
    )


def test_status_is_bounded_and_names_sizes_notes_and_marks() -> None:
    c = conversation()
    outcome = call(c, {"action": "status"}, marks=(FoldMark(2, 5),))
    assert not outcome.is_error and outcome.view_ids is None
    assert outcome.text.startswith("context status: about ") and "20000-token ceiling" in outcome.text
    assert "pending fold marks: #2-#5" in outcome.text and len(outcome.text) <= STATUS_MAX_CHARS


def test_read_result_protects_what_it_read_and_its_own_answer() -> None:
    c = conversation()
    outcome = call(c, {"action": "read_result", "index": 3, "offset": 5, "limit": 40})
    page = parse_read_result(outcome.text)
    branch = c.branch()
    assert page.text == branch.message_at(3).output[5:45]
    assert outcome.recovered == {branch.message_at(3).id} and outcome.protect_answer


def test_a_fold_mark_is_recorded_and_moves_nothing() -> None:
    c = conversation()
    outcome = call(c, {"action": "fold", "start": 2, "end": 5}, marks=(FoldMark(6, 7),))
    assert outcome.marks == (FoldMark(6, 7), FoldMark(2, 5, 3)) and outcome.view_ids is None
    assert "2 mark(s) pending; nothing moves now" in outcome.text
    beyond = call(c, {"action": "fold", "start": 2, "end": 500})
    assert beyond.is_error and "beyond the record" in beyond.text


def test_restore_is_refused_over_the_ceiling_naming_read_result_and_admitted_under_it() -> None:
    c = conversation()
    branch = c.branch()
    original = branch.message_at(3)
    copy = clipped_copy(original, index=3, allowance=1024, bound=None)
    c.add(copy, in_view=False)
    c.view[c.view.index(original.id)] = copy.id
    estimate = measurer_for(c.branch(), counter=COUNTER).estimate(settled_view(c.messages()))
    tight = FoldSettings(ceiling=estimate + 10)
    refused = call(c, {"action": "restore", "index": 3}, settings=tight)
    assert refused.view_ids is None and refused.text.startswith("restore of #3 refused")
    assert 'context {"action":"read_result","index":3,"offset":0,"limit":16000}' in refused.text
    admitted = call(c, {"action": "restore", "index": 3})
    assert admitted.view_ids is not None and original.id in admitted.view_ids and copy.id not in admitted.view_ids
    assert admitted.rewrite_cause == "restore #3" and admitted.recovered == {original.id}
    again = call(c, {"action": "restore", "index": 1})
    assert again.view_ids is None and "already in the conversation" in again.text


def test_without_a_fold_every_action_is_an_error_answer() -> None:
    outcome = call(conversation(), {"action": "status"}, settings=None)
    assert outcome.is_error and outcome.text == (
        "context: this operation has no fold installed (a bounded operation, or no ceiling), "
        "so there is nothing to read back, restore or mark"
    )


def test_the_settled_view_leaves_out_the_round_whose_tools_are_running() -> None:
    c = conversation()
    view = c.messages()
    assert settled_view(view) == view[:-1]
    answered = conversation(running=False)
    answered.answer("All four read.")
    assert settled_view(answered.messages()) == answered.messages()


# --- the status page, exactly ------------------------------------------------------------


def test_the_status_page_lists_the_newest_notes_and_marks_and_the_five_largest_results() -> None:
    from runtime.fold.context_tool import status_answer
    from runtime.values.messages import Note

    c = Conversation()
    c.task("Read.")
    sizes = [700, 3000, 100, 2500, 900, 1800, 400]
    results = [
        c.round([("read_file", {"path": f"d/{i}.md"}, synthetic_text(f"d/{i}.md", n))])[1][0]
        for i, n in enumerate(sizes)
    ]
    copy = clipped_copy(results[1], index=c.branch().index_of(results[1].id), allowance=1500, bound=None)
    c.add(copy)
    notes = [Note(f"note {i}", ("x",) * (i + 1), 1, "tool_io" if i % 2 else "all") for i in range(9)]
    for note in notes:
        c.add(note)
    branch = c.branch()
    view = [m for m in branch.view() if m.id != results[1].id]  # the copy stands for #4
    marks = tuple(FoldMark(i, i + 1) for i in range(1, 10))
    text = status_answer(view=view, record=branch, estimate=12_345, settings=SETTINGS, marks=marks)
    index = branch.index_of
    largest = sorted([r for r in view if r in results or r is copy], key=lambda r: len(r.output), reverse=True)[:5]
    expected = [
        "context status: about 12345 tokens of a 20000-token ceiling (61%); fold line 16000, target 12000.",
        f"view: {len(view)} messages of {branch.record_length()} recorded.",
        "notes in view: 9: " + ", ".join(f"#{index(n.id)} ({n.stage}, {len(n.replaced)} msgs)" for n in notes[1:]),
        "pending fold marks: " + ", ".join(f"#{m.start}-#{m.end}" for m in marks[1:]),
        "largest results in view: "
        + "; ".join(
            f"{'clipped copy of ' if r is copy else ''}#{index(results[1].id) if r is copy else index(r.id)} "
            f"read_file {len(r.output)} chars"
            for r in largest
        ),
        "read_result(index, offset, limit<=16000) reads an original exactly; restore(index) brings one back "
        "if it fits; fold(start, end) marks a span you are done with.",
    ]
    assert text == "\n".join(expected)
    assert copy in largest and results[2] not in largest  # 100 characters: not among the five largest


def test_a_status_page_over_its_bound_is_cut_with_an_ellipsis() -> None:
    from runtime.fold.context_tool import status_answer

    c = Conversation()
    c.task("Read.")
    for i in range(5):
        c.round([(f"tool_with_a_very_long_name_{i}_" + "x" * 300, {"n": i}, synthetic_text(f"t{i}", 500))])
    branch = c.branch()
    text = status_answer(view=branch.view(), record=branch, estimate=1, settings=SETTINGS, marks=())
    assert len(text) == STATUS_MAX_CHARS and text.endswith("...")
    assert text.startswith("context status: about 1 tokens of a 20000-token ceiling (0%)")
    short = Conversation()
    short.task("Read.")
    exact = status_answer(view=short.branch().view(), record=short.branch(), estimate=1, settings=SETTINGS, marks=())
    assert not exact.endswith("...") and len(exact) < STATUS_MAX_CHARS


# --- every answer, exactly ---------------------------------------------------------------


def _with_copy_for_3() -> tuple[Conversation, object, object]:
    c = conversation()
    original = c.branch().message_at(3)
    copy = clipped_copy(original, index=3, allowance=1024, bound=None)
    c.add(copy, in_view=False)
    c.view[c.view.index(original.id)] = copy.id
    return c, original, copy


def test_restore_answers_name_the_index_the_count_and_the_numbers() -> None:
    c, original, copy = _with_copy_for_3()
    admitted = call(c, {"action": "restore", "index": 3})
    restored_view = [c.branch().message_at(c.branch().index_of(mid)) for mid in admitted.view_ids]
    estimate = measurer_for(c.branch(), counter=COUNTER).estimate(settled_view(restored_view))
    assert admitted.text == (
        f"restored #3: 1 message(s) back in the conversation at their place; "
        f"the request is now about {estimate} tokens of its 20000-token ceiling."
    )
    at_ceiling = call(c, {"action": "restore", "index": 3}, settings=FoldSettings(ceiling=estimate))
    assert at_ceiling.view_ids is not None  # equal to the ceiling is admitted
    refused = call(c, {"action": "restore", "index": 3}, settings=FoldSettings(ceiling=estimate - 1))
    assert refused.text == (
        f"restore of #3 refused: the request would be about {estimate} tokens, over its {estimate - 1}-token "
        'ceiling. Read it in ranges instead with context {"action":"read_result","index":3,"offset":0,'
        '"limit":16000} and continue from next_offset.'
    )
    unchanged = call(c, {"action": "restore", "index": 5})
    assert unchanged.text == (
        "#5 is already in the conversation as it was recorded; nothing to restore. "
        'Read parts of it with context {"action":"read_result","index":5,"offset":0,"limit":16000}.'
    )
    assert unchanged.view_ids is None and not unchanged.is_error


def test_a_restored_range_names_its_span_and_brings_back_each_original() -> None:
    c = conversation()
    originals = [c.branch().message_at(i) for i in (3, 5)]
    for index, original in zip((3, 5), originals, strict=True):
        copy = clipped_copy(original, index=index, allowance=1024, bound=None)
        c.add(copy, in_view=False)
        c.view[c.view.index(original.id)] = copy.id
    ranged = call(c, {"action": "restore", "start": 3, "end": 5})
    assert ranged.rewrite_cause == "restore #3-#5" and ranged.recovered == {m.id for m in originals}
    assert ranged.text.startswith("restored #3: 2 message(s) back")
    single = call(c, {"action": "restore", "start": 3, "end": 3})
    assert single.rewrite_cause == "restore #3" and single.recovered == {originals[0].id}
    by_index = call(c, {"action": "restore", "index": 3, "end": 5})  # an index restores one message, end or not
    assert by_index.rewrite_cause == "restore #3" and by_index.recovered == {originals[0].id}


def test_fold_mark_answers_say_when_the_marks_land() -> None:
    c = conversation()
    epoch = call(c, {"action": "fold", "start": 2, "end": 5})
    assert epoch.text == (
        "fold mark recorded: #2-#5. 1 mark(s) pending; nothing moves now: they land together at the next fold "
        "commit, when the request reaches its fold line."
    )
    immediate = call(
        c, {"action": "fold", "start": 4, "end": 4}, settings=FoldSettings(ceiling=20_000, scheduling="immediate")
    )
    assert immediate.text == (
        "fold mark recorded: #4-#4. 1 mark(s) pending; nothing moves now: it lands before the next request."
    )
    last = c.branch().record_length() - 1
    assert not call(c, {"action": "fold", "start": 2, "end": last}).is_error
    beyond = call(c, {"action": "fold", "start": 2, "end": last + 1})
    assert beyond.is_error and beyond.text == (f"context: fold end {last + 1} is beyond the record (indices 0..{last})")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("status", "context: arguments 'status' are not an object"),
        ({"action": "read_result"}, 'context: read_result needs "index", the full-record index of the original (#N)'),
        ({"action": "restore"}, 'context: restore needs "index" (or "start" and "end" for a range)'),
        ({"action": "fold", "start": 2}, 'context: fold needs "start" and "end", full-record indices of the span'),
        ({"action": "fold", "start": 3, "end": 2}, "context: fold end 2 is before start 3; expected start <= end"),
        (
            {"action": "read_result", "index": 3, "limit": 0},
            "context: limit is 0; expected a positive integer (at most 16000)",
        ),
        (
            {"action": "read_result", "index": 3, "limit": "9"},
            "context: limit is '9'; expected a positive integer (at most 16000)",
        ),
    ],
)
def test_bad_calls_are_answered_with_the_exact_error(arguments: object, message: str) -> None:
    outcome = call(conversation(), arguments)  # type: ignore[arg-type]
    assert outcome.is_error and outcome.text == message


def test_the_smallest_limit_and_the_default_offset_read_one_character_from_the_start() -> None:
    c = conversation()
    outcome = call(c, {"action": "read_result", "index": 3, "limit": 1})
    page = parse_read_result(outcome.text)
    assert (page.offset, page.limit, page.text) == (0, 1, c.branch().message_at(3).output[:1])
    one_wide = call(c, {"action": "fold", "start": 3, "end": 3})
    assert not one_wide.is_error


def test_read_result_through_the_tool_keeps_to_the_result_bound() -> None:
    c = conversation()
    bounded = call(c, {"action": "read_result", "index": 3}, settings=FoldSettings(ceiling=20_000, result_bound=1_024))
    assert len(bounded.text) <= 1_024
    unbounded = call(c, {"action": "read_result", "index": 3})
    assert len(unbounded.text) > 1_024


def test_the_settled_view_of_a_view_whose_only_response_is_running_is_empty_of_it() -> None:
    running = AssistantResponse((ToolCall.create("toolu_r", "context", {"action": "status"}),))
    c = Conversation()
    task = c.task("Read.")
    assert settled_view([running]) == () and settled_view([task, running]) == (task,)
    assert settled_view([task]) == (task,) and settled_view([]) == ()
    done = AssistantResponse((ToolCall.create("toolu_d", "context", {}),))
    answer = c.answer("ok")
    assert settled_view([task, done, answer, running]) == (task, done, answer)
    later = Instruction("Then this.")
    assert settled_view([task, running, later]) == (task,)  # the running round is the last response, not message


def test_a_status_page_of_exactly_its_bound_is_not_cut() -> None:
    from runtime.fold.context_tool import status_answer

    def page(name_chars: int) -> str:
        c = Conversation()
        c.task("Read.")
        c.round([("t" * name_chars, {}, "x")])
        branch = c.branch()
        return status_answer(view=branch.view(), record=branch, estimate=1, settings=SETTINGS, marks=())

    base = page(10)
    exact = page(10 + STATUS_MAX_CHARS - len(base))
    assert len(exact) == STATUS_MAX_CHARS and exact.endswith("marks a span you are done with.")
