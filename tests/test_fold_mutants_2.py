"""More fold rules a mutation run found unpinned (scripts/mutation): each test names the rule it pins.

Like ``test_fold_mutants.py``: every test here was written against a mutant of
``runtime/fold`` that the module's other tests let through, named in the
comment above it.
"""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.tools import synthetic_text
from runtime.bench.conversations import Conversation, fold_input, measurer_for
from runtime.fold.cost import CostPrices
from runtime.fold.marks import FoldMark
from runtime.fold.planner import SUMMARY_SYSTEM, FoldPlan, FoldPlanner, NeedSummary, SummaryResult
from runtime.fold.protected import decide, first_round, protected_ids, round_end_in_view
from runtime.fold.recovery import RecoveryCorrupted, RecoveryError, plan_restore, read_result, stood_for
from runtime.fold.settings import FoldSettings, fold_settings
from runtime.fold.target import needed_prefix
from runtime.fold.units import chronology_key, is_complete_round, tail_units, units_of
from runtime.values.messages import AssistantResponse, Instruction, Note, TextPart, ToolResult
from runtime.values.usage import Usage
from tests.test_fold_planner import COUNTER, _history_over_the_target, history_after_a_note, plan_for, read


# plan_run PlanRun.never mutmut_6, _16.._24: a mark on the current task or the protected first round is skipped,
# and the skip says which.
def test_marks_on_the_task_or_the_protected_round_are_skipped_naming_why() -> None:
    c = Conversation()
    c.task("Start.")
    first = c.round([read("first.md", 3000)])
    rounds = [c.round([read(f"d/{i}.md", 3000)]) for i in range(4)]
    task = c.task("Now read the rest.")
    for i in range(4):
        c.round([read(f"e/{i}.md", 3000)])
    c.deliver()
    c.round([read("newest.md", 3000)])
    branch = c.branch()
    index = branch.index_of
    marks = (
        FoldMark(index(task.id), index(task.id)),
        FoldMark(index(first[0].id), index(first[1][0].id)),
        FoldMark(index(rounds[1][0].id), index(rounds[1][1][0].id)),
    )
    protected = protected_ids(None, branch.view())
    _, _, plan, _ = plan_for(c, FoldSettings(ceiling=1_000_000), marks=marks, mode="light", protected=protected)
    assert set(plan.skipped_marks) == {(task.id, "the task instruction"), (first[0].id, "the protected first round")}
    assert plan.agent_marks == 1
    # planner _marks_pass mutmut_33, _34: the marks pass writes notes of its own stage.
    assert [m.stage for m in plan.added if isinstance(m, Note)][0] == "marks"
    # plan_run attempt mutmut_2: a pass given no detail records none.
    assert [(p.stage, p.outcome, p.detail) for p in plan.passes if p.stage == "marks"] == [("marks", "landed", "")]


# plan_run PlanRun.before_newest_note mutmut_1, _2, _8.._10, _14, _15: with caching, a round before the newest
# note keeps its place even when nothing protects it, and the first round after the note is foldable.
def test_with_caching_an_unprotected_round_before_the_newest_note_stays() -> None:
    c, early, after, note_position, tight = history_after_a_note(4000)
    _, _, plan, _ = plan_for(c, tight, lambda need: SummaryResult(text="s"))  # nothing protected
    assert plan.landed and plan.stages[0] == "tool_io"
    assert plan.view_ids[: note_position + 1] == tuple(c.view[: note_position + 1])
    assert early.id not in plan.folded_ids
    assert after[0].id in plan.folded_ids
    # Without caching the same round is the first a fold takes.
    _, _, free, _ = plan_for(c, FoldSettings(ceiling=tight.ceiling), lambda need: SummaryResult(text="s"))
    assert early.id in free.folded_ids


def a_brief_then_small_rounds() -> Conversation:
    """A 60k-character brief, two delivered rounds (a stat, a small read), then three undelivered stats: a
    conversation where only a little may fold (so an epoch commit frees little and may be deferred)."""
    c = Conversation()
    c.task("Read. " + synthetic_text("brief", 60_000))
    c.round([("stat", {"path": "first"}, "ok")])
    c.round([read("small.md", 500)])
    c.deliver()
    for i in range(3):
        c.round([("stat", {"path": f"n{i}"}, "ok")])  # not delivered: nothing else may fold
    return c


# plan_run PlanRun.plan mutmut_4.._12, _29: a deferred plan carries the view as it was and no fold.
def test_a_deferred_plan_is_the_view_unchanged_with_its_estimate() -> None:
    c = a_brief_then_small_rounds()
    branch = c.branch()
    estimate = measurer_for(branch, counter=COUNTER).estimate(branch.view())
    settings = FoldSettings(ceiling=int(estimate / 0.85), caching=True)
    protected = protected_ids(None, branch.view())
    _, _, plan, _ = plan_for(c, settings, protected=protected)
    assert plan.deferred
    assert (plan.stages, plan.folded_ids, plan.added) == ((), (), ())
    assert plan.estimate_before == plan.estimate_after == estimate
    assert plan.target_reached is settings.reached(estimate)
    assert (plan.agent_marks, plan.held_marks, plan.summaries) == (0, (), 0)


# plan_values SummaryResult.__attrs_post_init__ mutmut_4.._7: a result with both or neither is refused, saying so.
@pytest.mark.parametrize("fields", [{}, {"text": "s", "failure": "timeout"}])
def test_a_summary_result_takes_exactly_one_of_text_and_failure(fields) -> None:
    with pytest.raises(ValueError) as refused:
        SummaryResult(**fields)
    assert str(refused.value) == "SummaryResult: give exactly one of text and failure"


# plan_run PlanRun.attempt mutmut_38: a rolled-back summary pass still records the usage its request cost.
def test_a_rolled_back_summary_pass_keeps_its_usage() -> None:
    c = Conversation()
    _history_over_the_target(c)
    branch = c.branch()
    estimate = measurer_for(branch, counter=COUNTER).estimate(branch.view())
    settings = FoldSettings(ceiling=int(estimate / 0.85), target=0.5)
    spent = Usage(input_tokens=1_200, output_tokens=900)
    long_summary = SummaryResult(text="A long summary of the span. " * 400, usage=spent)
    _, _, plan, _ = plan_for(c, settings, lambda need: long_summary)
    (rolled,) = [p for p in plan.passes if p.stage == "all"]
    assert rolled.outcome == "rolled_back"
    assert rolled.summary_usage == spent


# planner FoldPlanner start/resume/_advance mutmut (the protocol's refusals, named) and _summarized_pass
# mutmut_57.._59, _95, _103 (one summary counted, its usage on the landed pass).
def test_the_planner_protocol_refuses_out_of_turn_calls_and_counts_its_summary() -> None:
    c = Conversation()
    _history_over_the_target(c)
    branch = c.branch()
    measurer = measurer_for(branch, counter=COUNTER)
    settings = FoldSettings(ceiling=int(measurer.estimate(branch.view()) / 0.85), target=0.5)
    planner = FoldPlanner(fold_input(branch, settings), measurer)
    with pytest.raises(RuntimeError) as early:
        planner.resume(SummaryResult(text="s"), measurer)
    assert str(early.value) == "FoldPlanner.resume: the planner is not waiting for a summary"
    need = planner.start()
    assert isinstance(need, NeedSummary) and need.stage == "all"
    # planner _summary_need mutmut_34, _46: the summarizer's own instructions; the span named from its first index.
    assert need.system == SUMMARY_SYSTEM
    first = min(branch.index_of(mid) for mid in need.span_ids)
    assert need.prompt.startswith(f"Summarize this span of the conversation, from #{first}, which is being folded")
    with pytest.raises(RuntimeError) as twice:
        planner.start()
    assert str(twice.value) == "FoldPlanner.start: the planner has already started"
    with pytest.raises(TypeError) as wrong:
        planner.resume("a summary", measurer)  # type: ignore[arg-type]
    assert str(wrong.value) == "FoldPlanner.resume: expected a SummaryResult, got str"
    spent = Usage(input_tokens=700, output_tokens=40)
    plan = planner.resume(SummaryResult(text="The span, summarized.", usage=spent), measurer)
    assert isinstance(plan, FoldPlan)
    assert plan.summaries == 1
    (landed,) = [p for p in plan.passes if p.stage == "all"]  # landed or not, its usage is recorded
    assert landed.summary_usage == spent
    with pytest.raises(RuntimeError) as after:
        planner.resume(SummaryResult(text="s"), measurer)
    assert str(after.value) == "FoldPlanner.resume: the planner is not waiting for a summary"


# protected first_round mutmut_4, _9, _15: no instruction, an answer that is not a response, a round of two.
def test_the_first_round_is_an_instruction_and_its_answer_with_no_calls() -> None:
    task, answer = Instruction("Do it."), AssistantResponse((TextPart("Done."),))
    assert first_round([answer]) is None
    assert first_round([task, Instruction("And this.")]) is None
    assert first_round([task, answer]) == (task, answer)


# protected decide mutmut_30: the budget is a whole tenth of the ceiling.
def test_the_protected_rounds_budget_is_a_whole_tenth_of_the_ceiling() -> None:
    round_messages = [Instruction("Do it."), AssistantResponse((TextPart("Done."),))]
    decision = decide(
        round_messages, estimate_of=lambda ms: 100, ceiling=1_005, scale=1.0, result_bound=None, now=0, by="r"
    )
    assert decision.budget == 100 and isinstance(decision.budget, int)
    assert decision.included


# protected round_end_in_view mutmut_3, _7: the last member of an included round still in the view.
def test_the_round_end_is_the_last_included_member_still_in_the_view() -> None:
    round_messages = [Instruction("Do it."), AssistantResponse((TextPart("Done."),))]
    ids = [m.id for m in round_messages]
    included = decide(
        round_messages, estimate_of=lambda ms: 1, ceiling=1_000, scale=1.0, result_bound=None, now=0, by="r"
    )
    assert round_end_in_view(included, [ids[0], ids[1], "later"]) == ids[1]
    assert round_end_in_view(included, [ids[0], "later"]) == ids[0]
    assert round_end_in_view(included, ["later"]) is None
    excluded = attrs.evolve(included, included=False)
    assert round_end_in_view(excluded, ids) is None


# settings fold_settings mutmut_7.._26: every setting given reaches the FoldSettings, and prices default.
def test_fold_settings_passes_every_setting_through() -> None:
    prices = CostPrices(read=0.2, write=1.5, output=4.0)
    given = {
        "ceiling": 50_000,
        "fold_at": 0.75,
        "target": 0.5,
        "tail_margin": 0.03,
        "result_bound": 9_000,
        "caching": True,
        "scheduling": "immediate",
        "strategy": "compaction",
        "policy": "fixed",
    }
    settings = fold_settings(context_management=True, prices=prices, **given)  # type: ignore[arg-type]
    assert settings == FoldSettings(prices=prices, **given)  # type: ignore[arg-type]
    assert settings is not None and settings.prices is prices
    plain = fold_settings(context_management=True, **given)  # type: ignore[arg-type]
    assert plain is not None and plain.prices == CostPrices()
    assert fold_settings(context_management=False, **given) is None  # type: ignore[arg-type]


# settings FoldSettings.__attrs_post_init__ mutmut_5, _9.._12: the ceiling's and the lines' boundaries.
def test_fold_settings_boundaries() -> None:
    assert FoldSettings(ceiling=1).ceiling == 1
    assert FoldSettings(ceiling=100, target=0.5, fold_at=1).fold_at == 1
    for target, fold_at in [(0, 0.5), (0.5, 0.5), (0.5, 1.5)]:
        with pytest.raises(ValueError) as refused:
            FoldSettings(ceiling=100, target=target, fold_at=fold_at)
        assert str(refused.value) == (
            f"FoldSettings: target {target!r} and fold_at {fold_at!r} break 0 < target < fold_at <= 1"
        )


def _one_read() -> tuple[Conversation, ToolResult]:
    c = Conversation()
    c.task("Read.")
    _, (result,) = c.round([read("a.md", 3000)])
    c.answer("Read it.")
    return c, result


# recovery _checked_index mutmut_3, _8, _10, _11; plan_restore mutmut_3, _7, _8, _13, _17, _18, _20: the refusals
# name the argument, and the record's last index is the last allowed.
def test_plan_restore_refuses_bad_indexes_naming_them() -> None:
    c, _ = _one_read()
    branch = c.branch()
    view, last = branch.view(), branch.record_length() - 1
    cases = [
        ({"start": True}, f"index True is not a full-record index; expected an integer 0..{last}"),
        ({"start": 0, "end": last + 1}, f"end {last + 1} is not a full-record index; expected an integer 0..{last}"),
        ({"start": 2, "end": 1}, "end 1 is before start 2; expected start <= end"),
    ]
    for arguments, message in cases:
        with pytest.raises(RecoveryError) as refused:
            plan_restore(view, branch, **arguments)
        assert str(refused.value) == message


# recovery read_result mutmut_1, _15, _23: paging starts at 0; a bool offset or limit is refused, naming it.
def test_read_result_pages_from_the_start_and_refuses_bool_arguments() -> None:
    c, result = _one_read()
    branch = c.branch()
    index = branch.index_of(result.id)
    assert read_result(branch, index) == read_result(branch, index, offset=0)
    with pytest.raises(RecoveryError) as offset:
        read_result(branch, index, offset=True)
    assert str(offset.value).startswith(f"offset True is outside the original #{index}; expected an integer 0..")
    with pytest.raises(RecoveryError) as limit:
        read_result(branch, index, limit=True)
    assert str(limit.value) == "limit True is not a positive integer (at most 16000)"


def _needed_by_search(take: list[int], estimates: list[int], goal: int) -> tuple[int, int]:
    """The rule by trying every prefix: the fewest at or under the goal; all of them when none is."""
    for count in range(1, len(take) + 1):
        if estimates[count - 1] <= goal:
            return count, estimates[count - 1]
    return len(take), estimates[-1]


# target needed_prefix (its survivors): the fewest of the oldest that reach the goal, with their estimate, found
# exactly for falling estimates (each prefix measured once as its own length).
@given(
    drops=st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=12),
    goal=st.integers(min_value=0, max_value=700),
)
def test_needed_prefix_finds_the_fewest_that_reach_the_goal(drops, goal) -> None:
    take = list(range(len(drops)))
    estimates = [700 - sum(drops[: n + 1]) for n in range(len(drops))]
    assert needed_prefix(take, lambda prefix: estimates[len(prefix) - 1], goal) == _needed_by_search(
        take, estimates, goal
    )


def test_needed_prefix_at_its_boundaries() -> None:
    estimates = {1: 90, 2: 80, 3: 70}
    assert needed_prefix([7, 8, 9], lambda p: estimates[len(p)], 80) == (2, 80)  # exactly at the goal
    assert needed_prefix([7, 8, 9], lambda p: estimates[len(p)], 79) == (3, 70)
    assert needed_prefix([7, 8, 9], lambda p: estimates[len(p)], 69) == (3, 70)  # none reaches: all
    assert needed_prefix([7, 8, 9], lambda p: estimates[len(p)], 100) == (1, 90)
    plateau = {1: 90, 2: 80, 3: 80}  # all of them exactly at the goal, and fewer as well: the fewest
    assert needed_prefix([7, 8, 9], lambda p: plateau[len(p)], 80) == (2, 80)
    with pytest.raises(ValueError) as refused:
        needed_prefix([], lambda p: 0, 10)
    assert str(refused.value) == "needed_prefix: nothing to take"


# units units_of mutmut_19.._24, is_complete_round mutmut_2, _3, tail_units mutmut_2, _8, _13: the kinds of units,
# a message unit is complete, and the tail holds the units of the newest messages (a tail of one, of all).
def test_units_their_kinds_and_the_tail() -> None:
    c, result = _one_read()
    branch = c.branch()
    note = Note(text="earlier", replaced=(), first_index=0, stage="tool_io")
    view = [*branch.view(), note]
    units = units_of(view, branch)
    assert [u.kind for u in units] == ["message", "round", "message", "note"]
    assert all(is_complete_round(u) for u in units)
    assert tail_units(units, len(view), 0) == set()
    assert tail_units(units, len(view), 1) == {3}
    assert tail_units(units, len(view), 2) == {2, 3}
    assert tail_units(units, len(view), len(view)) == {0, 1, 2, 3}


# units chronology_key mutmut_3.._6, _10: a clipped copy without clip info sorts at its original; an unknown
# message is refused naming it.
def test_a_clipped_copy_sorts_at_its_original_and_a_stranger_is_refused() -> None:
    c, result = _one_read()
    branch = c.branch()
    copy = ToolResult(result.call_id, result.name, result.arguments_json, "the kept part", clipped_from=result.id)
    assert chronology_key(copy, branch) == branch.index_of(result.id)
    stranger = ToolResult("call-9", "read_file", "{}", "never recorded")
    with pytest.raises(KeyError) as refused:
        chronology_key(stranger, branch)
    assert refused.value.args[0] == f"message {stranger.id} is not in the branch's record"


# planner _tool_io mutmut_67 and _clip mutmut_29, _31, _36, _41: each landed pass records what it did (the rounds a
# partial tool_io pass took of how many; the bodies the clip cut, with their sizes and what they kept).
def test_partial_tool_io_and_clip_passes_record_their_details() -> None:
    c = Conversation()
    c.task("Read.")
    for i in range(8):
        c.round([read(f"d/{i}.md", 4000)])
    c.deliver()
    c.round([read("newest.md", 4000)])
    branch = c.branch()
    estimate = measurer_for(branch, counter=COUNTER).estimate(branch.view())
    passes = {}
    for share in (0.9, 0.7):
        _, _, plan, _ = plan_for(c, FoldSettings(ceiling=int(estimate / share)))
        passes[share] = [(p.stage, p.outcome, p.detail) for p in plan.passes]
    assert passes[0.7] == [("tool_io", "landed", "tail 6, the oldest 2 of 6 rounds")]
    assert passes[0.9] == [
        ("tool_io", "landed", "tail 6, the oldest 3 of 6 rounds"),
        ("clip", "landed", "#9 4000 chars kept 3296"),
    ]


# recovery read_result mutmut_58.._62: the outcome says what it read.
def test_a_read_outcome_names_its_original_and_page() -> None:
    c, result = _one_read()
    branch = c.branch()
    index = branch.index_of(result.id)
    outcome = read_result(branch, index, limit=1000)
    assert (outcome.original_id, outcome.index, outcome.offset, outcome.limit) == (result.id, index, 0, 1000)
    assert (outcome.total, outcome.next_offset) == (3000, 1000)


# recovery _closure mutmut_7, _12, _13, _15.._22, _25: a note stands for the originals of its copies, of the notes
# it replaced (each once) and of its plain members; a member missing from the record is refused, named.
def test_a_note_stands_for_originals_through_copies_and_nested_notes() -> None:
    c = Conversation()
    c.task("Read.")
    response, (first,) = c.round([read("a.md", 500)])
    _, (second,) = c.round([read("b.md", 500)])
    copy = ToolResult(second.call_id, second.name, second.arguments_json, "kept", clipped_from=second.id)
    c.add(copy, in_view=False)
    inner = Note(text="inner", replaced=(first.id,), first_index=1, stage="tool_io")
    c.add(inner, in_view=False)
    outer = Note(text="outer", replaced=(copy.id, inner.id, first.id, response.id), first_index=1, stage="tool_io")
    c.add(outer)
    branch = c.branch()
    assert stood_for([outer], branch) == {second.id, first.id, response.id}
    stray = Note(text="stray", replaced=("no-such-id",), first_index=1, stage="tool_io")
    with pytest.raises(RecoveryCorrupted) as refused:
        stood_for([stray], branch)
    assert str(refused.value) == f"note {stray.id} replaced message no-such-id, which is missing from the record"


# recovery original_at mutmut_16.._18: a copy whose original the record lacks is refused, naming both.
def test_a_copy_whose_original_is_missing_is_refused_naming_both() -> None:
    c, _ = _one_read()
    copy = ToolResult("call-7", "read_file", "{}", "kept", clipped_from="gone-id")
    c.add(copy)
    branch = c.branch()
    index = branch.index_of(copy.id)
    with pytest.raises(RecoveryCorrupted) as refused:
        read_result(branch, index)
    assert str(refused.value) == (
        f"clipped copy #{index} (id {copy.id}) names original gone-id, which is missing from the record"
    )


# recovery _restore_targets mutmut_13, _42, _43: restoring a note outside the view, or a message nothing stands
# for, is refused saying why.
def test_restore_refuses_a_note_outside_the_view_and_a_message_nothing_stands_for() -> None:
    c, result = _one_read()
    outside = Note(text="folded once", replaced=(result.id,), first_index=2, stage="tool_io")
    c.add(outside, in_view=False)
    dropped = Instruction("Dropped from the view, and nothing stands for it.")
    c.add(dropped, in_view=False)
    branch = c.branch()
    view = branch.view()
    note_index = branch.index_of(outside.id)
    with pytest.raises(RecoveryError) as note:
        plan_restore(view, branch, start=note_index)
    assert str(note.value) == (f"note #{note_index} is not in the conversation; restore the originals it names instead")
    index = branch.index_of(dropped.id)
    with pytest.raises(RecoveryError) as plain:
        plan_restore(view, branch, start=index)
    assert str(plain.value) == (
        f"#{index} is not a folded or clipped message (no note or copy in the conversation stands for it), "
        "so there is nothing to restore"
    )
