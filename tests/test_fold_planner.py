"""The fold planner's stages, in the seed's own test cases (seed 000, Amendments 1, 2 and 4)."""

from __future__ import annotations

import pytest

from actors.tools import synthetic_text
from runtime.bench.conversations import Conversation, fold_input, measurer_for, run_planner
from runtime.fold.formats import call_line, parse_clip_marker, parse_note_calls, read_call
from runtime.fold.marks import FoldMark
from runtime.fold.planner import FoldPlanner, SummaryResult
from runtime.fold.protected import protected_ids
from runtime.fold.recovery import verify
from runtime.fold.settings import FoldSettings
from runtime.measuring.measure import TokenCounter
from runtime.values.messages import Instruction, Note, ToolResult
from tests.pairing import check_pairing

BIG = synthetic_text("listing", 100_045)


def read(path: str, size: int) -> tuple[str, dict, str]:
    return ("read_file", {"path": path, "size": size}, synthetic_text(path, size))


def plan_for(conversation: Conversation, settings: FoldSettings, answer=None, **overrides):
    branch = conversation.branch()
    measurer = measurer_for(branch, counter=COUNTER)
    planner = FoldPlanner(fold_input(branch, settings, **overrides), measurer)
    plan, needs = run_planner(planner, answer)
    return branch, measurer, plan, needs


COUNTER = TokenCounter()


def test_a_100045_character_result_in_the_newest_round_is_clipped_to_the_target_without_a_summary() -> None:
    c = Conversation()
    c.task("List the repository and find the config files.")
    c.round([read("README.md", 3000)])
    c.round([read("setup.cfg", 2000)])
    c.deliver()
    _, (big,) = c.round([("run_shell", {"command": "ls -R /"}, BIG)])  # newest: undelivered
    settings = FoldSettings(ceiling=25_000)
    branch, measurer, plan, needs = plan_for(c, settings)  # run_planner fails on any summary request
    assert needs == []
    assert plan.estimate_before >= settings.fold_line
    assert plan.estimate_after <= settings.target_tokens and plan.target_reached
    assert "clip" in plan.stages
    # The original is unchanged in the record; a copy stands for it in the view.
    index = branch.index_of(big.id)
    assert index is not None and branch.message_at(index) is big
    verify(big, index)
    c.land(plan)
    copies = [m for m in c.messages() if isinstance(m, ToolResult) and m.clipped_from == big.id]
    assert len(copies) == 1 and big.id not in c.view
    request = measurer.compile(c.messages())
    check_pairing(request.payload())
    text = request.payload_text()
    (marker,) = parse_clip_marker(copies[0].output)
    assert marker.index == index
    assert read_call(index, marker.offset, marker.limit).replace('"', '\\"') in text


def test_sixteen_results_of_one_round_with_a_tail_of_two_are_all_still_in_the_next_request() -> None:
    c = Conversation()
    c.task("Read the sixteen parts.")
    c.deliver()
    _, results = c.round([read(f"part-{i:02d}.md", 6000) for i in range(16)])
    settings = FoldSettings(ceiling=25_000)
    _, measurer, plan, needs = plan_for(c, settings)
    assert needs == [] and plan.estimate_before >= settings.fold_line
    assert plan.target_reached
    assert "tool_io" not in plan.stages and "all" not in plan.stages
    c.land(plan)
    view = c.messages()
    payload = measurer.compile(view).payload()
    check_pairing(payload)
    answered = {b["tool_use_id"] for m in payload["messages"] for b in m["content"] if b.get("type") == "tool_result"}
    assert answered == {r.call_id for r in results}
    represented = {m.clipped_from or m.id for m in view if isinstance(m, ToolResult)}
    assert represented == {r.id for r in results}


def test_tool_io_folds_only_delivered_rounds_outside_the_tail_and_lists_every_call() -> None:
    c = Conversation()
    task = c.task("Read the docs.")
    folded = [c.round([read(f"docs/{i}.md", 5000)])[1][0] for i in range(8)]
    c.deliver()
    _, (newest,) = c.round([read("docs/new.md", 5000)])
    settings = FoldSettings(ceiling=12_000)
    branch, _, plan, _ = plan_for(c, settings)
    assert plan.stages[0] == "tool_io"
    c.land(plan)
    view = c.messages()
    assert view[0] is task and newest in view
    notes = [m for m in view if isinstance(m, Note)]
    assert len(notes) == 1
    listed = {call.index for call in parse_note_calls(notes[0].text)}
    kept = {m.id for m in view} | {m.clipped_from for m in view if isinstance(m, ToolResult) and m.clipped_from}
    assert listed == {branch.index_of(r.id) for r in folded if r.id not in kept}  # a clipped one keeps a copy
    first_folded = min(branch.index_of(mid) for mid in notes[0].replaced)
    assert notes[0].first_index == first_folded and view[1] is notes[0]


def test_a_pass_that_does_not_lower_the_estimate_is_rolled_back_exactly() -> None:
    c = Conversation()
    c.task("t")
    c.round([("stat", {"path": "f0"}, "ok")])
    c.deliver()
    for i in range(2):
        c.round([("stat", {"path": f"new{i}"}, "ok")])  # not delivered yet: never folded
    branch = c.branch()
    estimate = measurer_for(branch, counter=COUNTER).estimate(branch.view())
    settings = FoldSettings(ceiling=int(estimate / 0.85))
    failed = SummaryResult(failure="the summary request failed")
    _, _, plan, needs = plan_for(c, settings, lambda need: failed)
    rolled = [p for p in plan.passes if p.stage in ("tool_io", "all")]
    assert [p.stage for p in rolled] == ["tool_io", "all"]  # tail 6 holds every round; tail 2 frees f0
    assert all(p.outcome == "rolled_back" and p.estimate_after >= p.estimate_before for p in rolled)
    assert plan.view_ids == tuple(c.view) and plan.added == () and not plan.landed
    assert plan.estimate_after == plan.estimate_before


def _history_over_the_target(c: Conversation) -> None:
    """Old answers the tool stages cannot take, then a newest round of small results no clip can cut."""
    c.task("Work through the requests.")
    for i in range(3):
        c.answer(f"Answer {i}: done.")
        c.add(Instruction(f"Next request {i}."))
    c.deliver()
    c.round([read(f"small/{i}.txt", 1000) for i in range(36)])


def test_a_summary_that_raises_the_estimate_is_rolled_back_and_its_note_stays_outside_the_view() -> None:
    c = Conversation()
    _history_over_the_target(c)
    branch = c.branch()
    estimate = measurer_for(branch, counter=COUNTER).estimate(branch.view())
    settings = FoldSettings(ceiling=int(estimate / 0.85), target=0.5)
    long_summary = SummaryResult(text="A long summary of the span. " * 400)
    _, _, plan, needs = plan_for(c, settings, lambda need: long_summary)
    assert [n.stage for n in needs] == ["all"]
    (rolled,) = [p for p in plan.passes if p.stage == "all"]
    assert rolled.outcome == "rolled_back" and rolled.estimate_after >= rolled.estimate_before
    assert plan.view_ids == tuple(c.view)
    notes = [m for m in plan.added if isinstance(m, Note)]
    assert len(notes) == 1 and notes[0].id not in plan.view_ids  # kept in the record, outside the view
    assert "all" not in plan.stages and not plan.target_reached


def test_a_summary_request_that_raises_the_scale_is_judged_at_the_new_scale() -> None:
    c = Conversation()
    _history_over_the_target(c)
    branch = c.branch()
    estimate = measurer_for(branch, counter=COUNTER).estimate(branch.view())
    settings = FoldSettings(ceiling=int(estimate / 0.85), target=0.5)
    scaled = measurer_for(branch, counter=COUNTER, scale=1.5)
    planner = FoldPlanner(fold_input(branch, settings), measurer_for(branch, counter=COUNTER))
    plan, _ = run_planner(planner, lambda need: SummaryResult(text="x " * 3000), measurer=scaled)
    (rolled,) = [p for p in plan.passes if p.stage == "all"]
    assert rolled.outcome == "rolled_back"
    assert rolled.estimate_before == scaled.estimate(branch.view())
    assert plan.view_ids == tuple(c.view)


def test_a_failed_summary_leaves_the_call_lists_alone_in_the_note() -> None:
    c = Conversation()
    c.task("Read everything.")
    for i in range(6):
        c.round([("stat", {"path": f"docs/{i}.md"}, "ok")])  # a note would be larger: tool_io rolls back
        c.answer(f"Part {i} read. " + synthetic_text(f"answer {i}", 2500))
        c.add(Instruction(f"Continue with part {i + 1}."))
    c.deliver()
    c.round([read(f"small/{i}.txt", 1000) for i in range(30)])
    branch = c.branch()
    estimate = measurer_for(branch, counter=COUNTER).estimate(branch.view())
    settings = FoldSettings(ceiling=int(estimate / 0.82), target=0.7)
    failed = SummaryResult(failure="the summary request failed: HTTP 500")
    _, _, plan, needs = plan_for(c, settings, lambda need: failed)
    assert needs and all("Summarize" in n.prompt for n in needs)
    notes = [m for m in plan.added if isinstance(m, Note) and m.stage == "all"]
    assert notes, plan.passes
    assert "No summary: the summary request failed" in notes[0].text
    assert parse_note_calls(notes[0].text)


def test_a_floor_view_over_the_ceiling_sends_no_summary_request() -> None:
    c = Conversation()
    _history_over_the_target(c)
    branch = c.branch()
    estimate = measurer_for(branch, counter=COUNTER).estimate(branch.view())
    settings = FoldSettings(ceiling=int(estimate * 0.9))  # the undelivered round alone is over it
    _, _, plan, needs = plan_for(c, settings)  # any summary request fails the test
    assert needs == [] and not plan.target_reached and plan.estimate_after > settings.ceiling


def test_a_floor_view_between_target_and_ceiling_sends_exactly_one_summary_with_tail_two() -> None:
    c = Conversation()
    _history_over_the_target(c)
    branch = c.branch()
    estimate = measurer_for(branch, counter=COUNTER).estimate(branch.view())
    settings = FoldSettings(ceiling=int(estimate / 0.85), target=0.5)
    _, _, plan, needs = plan_for(c, settings, lambda need: SummaryResult(text="Three answers were given."))
    assert len(needs) == 1
    assert [p.detail for p in plan.passes if p.stage == "all"] == ["tail 2"]


def test_the_summary_request_carries_only_the_folded_span() -> None:
    c = Conversation()
    task = c.task("Work through the requests. TASK-MARKER")
    for i in range(3):
        c.answer(f"Answer {i}: SPAN-MARKER-{i}.")
        c.add(Instruction(f"Next request {i}."))
    c.deliver()
    c.round([read(f"small/{i}.txt", 1000) for i in range(36)])
    branch = c.branch()
    estimate = measurer_for(branch, counter=COUNTER).estimate(branch.view())
    settings = FoldSettings(ceiling=int(estimate / 0.85), target=0.5)
    _, _, _, needs = plan_for(c, settings, lambda need: SummaryResult(text="ok"))
    (need,) = needs
    assert all(f"SPAN-MARKER-{i}" in need.prompt for i in range(3))
    assert "TASK-MARKER" not in need.prompt and "small/0.txt" not in need.prompt
    assert task.id not in need.span_ids


def test_a_system_prompt_and_task_over_the_target_change_nothing_in_the_task() -> None:
    c = Conversation()
    task = c.task("The brief. " * 3000)
    c.round([read("a.md", 2000)])
    c.deliver()
    c.round([read("b.md", 2000)])
    branch = c.branch()
    estimate = measurer_for(branch, counter=COUNTER).estimate(branch.view())
    settings = FoldSettings(ceiling=int(estimate / 0.9))
    _, _, plan, _ = plan_for(c, settings, lambda need: SummaryResult(text="s"))
    assert not plan.target_reached
    assert plan.view_ids[0] == task.id


def test_the_protected_first_round_is_never_folded_or_clipped() -> None:
    c = Conversation()
    c.task("Read the big file first, then the rest.")
    _, (first,) = c.round([read("first.md", 30_000)])
    for i in range(6):
        c.round([read(f"later/{i}.md", 5000)])
    c.deliver()
    c.round([read("newest.md", 5000)])
    branch = c.branch()
    protected = protected_ids(None, branch.view())  # pending: protected
    assert first.id in protected
    estimate = measurer_for(branch, counter=COUNTER).estimate(branch.view())
    settings = FoldSettings(ceiling=int(estimate / 0.85), caching=True)
    _, _, plan, _ = plan_for(c, settings, lambda need: SummaryResult(text="s"), protected=protected)
    assert plan.landed
    assert set(protected) <= set(plan.view_ids)
    assert all(getattr(m, "clipped_from", None) != first.id for m in plan.added)


def history_after_a_note(first_size: int) -> tuple[Conversation, ToolResult, list[ToolResult], int, FoldSettings]:
    """A history whose earlier fold's note stands after the first round, then six new rounds and a newest one.

    Returns the conversation, the first round's result, the new rounds' results, the note's position in
    the view, and caching settings whose ceiling puts the history at 85% of it (a fold is due).
    """
    c = Conversation()
    c.task("Read.")
    early = c.round([read("first.md", first_size)])[1][0]
    before = [c.round([read(f"old/{i}.md", 4000)])[1][0] for i in range(4)]
    for i in range(3):
        c.round([read(f"filler/{i}.md", 300)])
    c.deliver()
    branch = c.branch()
    earlier, _ = run_planner(
        FoldPlanner(
            fold_input(
                branch,
                FoldSettings(ceiling=100_000, caching=True),
                mode="light",
                protected=protected_ids(None, branch.view()),
            ),
            measurer_for(branch, counter=COUNTER),
        )
    )
    c.land(earlier)  # an earlier fold's note stands after the first round
    assert {r.id for r in before} <= set(earlier.folded_ids)
    note_position = next(i for i, m in enumerate(c.messages()) if isinstance(m, Note))
    after = [c.round([read(f"new/{i}.md", 4000)])[1][0] for i in range(6)]
    c.deliver()
    c.round([read("newest.md", 4000)])
    branch = c.branch()
    estimate = measurer_for(branch, counter=COUNTER).estimate(branch.view())
    return c, early, after, note_position, FoldSettings(ceiling=int(estimate / 0.85), caching=True)


def test_with_caching_the_ordinary_stages_take_only_what_follows_the_newest_note() -> None:
    c, _, after, note_position, tight = history_after_a_note(500)
    branch = c.branch()
    protected = protected_ids(None, branch.view())
    _, _, plan, _ = plan_for(c, tight, lambda need: SummaryResult(text="s"), protected=protected)
    assert plan.landed and plan.stages[0] == "tool_io"
    # Everything through the earlier note keeps its place: a byte prefix for the cache.
    assert plan.view_ids[: note_position + 1] == tuple(c.view[: note_position + 1])
    assert any(r.id in plan.folded_ids for r in after)


def test_reset_runs_first_when_notes_pass_fifteen_percent_of_the_ceiling() -> None:
    c = Conversation()
    c.task("Read.")
    c.round([read("first.md", 300)])
    for i in range(4):
        c.add(Note(f"[earlier note {i}] " + "listing line\n" * 400, (), 3, "tool_io"))
    for i in range(6):
        c.round([read(f"r/{i}.md", 1500)])
    c.deliver()
    c.round([read("newest.md", 1500)])
    branch = c.branch()
    measurer = measurer_for(branch, counter=COUNTER)
    estimate = measurer.estimate(branch.view())
    notes_tokens = sum(measurer.block_tokens(m)[0] for m in branch.view() if isinstance(m, Note))
    ceiling = int(estimate / 0.85)
    assert notes_tokens > 0.15 * ceiling
    settings = FoldSettings(ceiling=ceiling, caching=True)
    protected = protected_ids(None, branch.view())
    _, _, plan, needs = plan_for(c, settings, lambda need: SummaryResult(text="Reset summary."), protected=protected)
    assert needs[0].stage == "reset"
    assert plan.stages[0] == "reset"
    reset_note = next(m for m in plan.added if isinstance(m, Note) and m.stage == "reset")
    assert not set(protected) & set(reset_note.replaced)


def test_reset_asks_for_no_summary_when_merging_the_notes_could_not_land_one() -> None:
    """Notes of one call line each: a reset would list every call again under one header and add a summary,
    so it cannot lower the estimate; the summary is not asked for (it would only be rolled back)."""
    c = Conversation()
    c.task("Read.")
    c.round([read("first.md", 300)])
    for i in range(40):
        line = call_line(100 + i, "read_file", {"path": f"docs/chapter-{i}/section.md"}, 4000 + i, False)
        c.add(Note(f"[n{i}]\n{line}", (), 3, "tool_io"))
    c.deliver()
    c.round([read("newest.md", 1500)])  # in the tail no reset takes
    branch = c.branch()
    measurer = measurer_for(branch, counter=COUNTER)
    estimate = measurer.estimate(branch.view())
    notes_tokens = sum(measurer.block_tokens(m)[0] for m in branch.view() if isinstance(m, Note))
    ceiling = int(estimate / 0.85)
    assert notes_tokens > 0.15 * ceiling  # the reset's trigger holds
    settings = FoldSettings(ceiling=ceiling, caching=True)
    protected = protected_ids(None, branch.view())
    _, _, plan, needs = plan_for(c, settings, lambda need: SummaryResult(text="Reset summary."), protected=protected)
    assert [need.stage for need in needs if need.stage == "reset"] == []
    assert "reset" not in plan.stages


def test_pending_marks_land_together_and_marks_in_the_tail_or_on_the_task_wait_or_are_skipped() -> None:
    c = Conversation()
    task = c.task("Read.")
    rounds = [c.round([read(f"d/{i}.md", 3000)]) for i in range(8)]
    c.deliver()
    newest = c.round([read("newest.md", 3000)])
    branch = c.branch()
    index = branch.index_of
    marks = (
        FoldMark(index(rounds[1][0].id), index(rounds[2][1][0].id)),  # two old rounds
        FoldMark(index(newest[0].id), index(newest[1][0].id)),  # undelivered, in the tail: it waits
        FoldMark(index(task.id), index(task.id)),  # the task: never
    )
    settings = FoldSettings(ceiling=1_000_000)  # far below the line: only the marks matter here
    _, _, plan, _ = plan_for(c, settings, marks=marks, mode="light")
    assert plan.stages[0] == "marks" and plan.agent_marks == 1
    assert plan.held_marks == (marks[1],)
    assert plan.skipped_marks == ((task.id, "the view's first message"),)
    assert rounds[1][0].id in plan.folded_ids and rounds[2][0].id in plan.folded_ids


def test_an_epoch_commit_that_frees_almost_nothing_is_deferred_unless_the_ceiling_refuses() -> None:
    c = Conversation()
    c.task("Read. " + synthetic_text("brief", 60_000))
    c.round([("stat", {"path": "first"}, "ok")])  # the protected first round
    c.round([read("small.md", 500)])
    c.deliver()
    for i in range(3):
        c.round([("stat", {"path": f"n{i}"}, "ok")])  # not delivered: nothing else may fold
    branch = c.branch()
    estimate = measurer_for(branch, counter=COUNTER).estimate(branch.view())
    settings = FoldSettings(ceiling=int(estimate / 0.85), caching=True)
    protected = protected_ids(None, branch.view())
    _, _, plan, needs = plan_for(c, settings, protected=protected)
    assert needs == []
    assert plan.deferred and not plan.landed and plan.view_ids == tuple(c.view) and plan.added == ()
    assert any(p.stage == "tool_io" and p.outcome == "landed" for p in plan.passes)
    _, _, urgent, _ = plan_for(c, settings, protected=protected, refusal=True)
    assert not urgent.deferred and urgent.stages == ("tool_io",)
    immediate = FoldSettings(ceiling=settings.ceiling, caching=True, scheduling="immediate")
    _, _, at_once, _ = plan_for(c, immediate, protected=protected)
    assert not at_once.deferred and at_once.landed


@pytest.mark.parametrize("mode", ["light"])
def test_light_mode_runs_only_the_marks_and_tool_io_with_tail_six(mode: str) -> None:
    c = Conversation()
    c.task("Read.")
    for i in range(6):
        c.round([read(f"d/{i}.md", 3000)])
    c.deliver()
    c.round([("run_shell", {"command": "ls"}, BIG)])
    settings = FoldSettings(ceiling=1_000_000, scheduling="immediate")
    _, _, plan, needs = plan_for(c, settings, mode=mode)
    assert needs == [] and plan.stages == ("tool_io",)
    assert [p.detail for p in plan.passes] == ["tail 6"]


def test_a_pass_that_leaves_the_estimate_unchanged_is_rolled_back() -> None:
    """A pass lands only when it strictly lowers the estimate: at equality it is rolled back exactly.

    The summary's length moves the ``all`` pass's estimate one token a word, so a search finds the
    summary whose note costs exactly what the span it replaces cost."""
    c = Conversation()
    c.task("Work through the requests.")
    for i in range(3):
        c.answer(f"Answer {i}: " + synthetic_text(f"answer{i}", 600))
        c.add(Instruction(f"Next request {i}."))
    c.deliver()
    c.round([read(f"small/{i}.txt", 1000) for i in range(36)])
    branch = c.branch()
    estimate = measurer_for(branch, counter=COUNTER).estimate(branch.view())
    settings = FoldSettings(ceiling=int(estimate / 0.85), target=0.5)

    def all_pass(words: int):
        _, _, plan, _ = plan_for(c, settings, lambda need: SummaryResult(text=" ".join(["word"] * words)))
        (record,) = [p for p in plan.passes if p.stage == "all"]
        return plan, record

    low, high = 0, 900
    assert all_pass(low)[1].estimate_after < all_pass(low)[1].estimate_before
    assert all_pass(high)[1].estimate_after > all_pass(high)[1].estimate_before
    while low < high:  # the fewest words whose note costs at least the span
        middle = (low + high) // 2
        _, record = all_pass(middle)
        low, high = (low, middle) if record.estimate_after >= record.estimate_before else (middle + 1, high)
    plan, equal = all_pass(low)
    assert equal.estimate_after == equal.estimate_before, f"no summary ties the estimate (at {low} words: {equal})"
    assert equal.outcome == "rolled_back" and "all" not in plan.stages
    assert plan.view_ids == tuple(c.view) and plan.estimate_after == plan.estimate_before
    notes = [m for m in plan.added if isinstance(m, Note)]
    assert len(notes) == 1 and notes[0].id not in plan.view_ids
    _, lower = all_pass(low - 1)  # one word fewer: strictly lower, so it lands
    assert lower.estimate_after < equal.estimate_before and lower.outcome == "landed"
