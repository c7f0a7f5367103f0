"""The compaction strategy at the planner: one summary of everything delivered but the task.

The view becomes the task instruction, one ``compaction`` note, and whatever
must stay for delivery (the undelivered round); the note lands only when it
strictly lowers the estimate.
"""

from __future__ import annotations

from typing import Any

from actors.tools import synthetic_text
from runtime.bench.conversations import Conversation, fold_input, measurer_for, run_planner
from runtime.fold.planner import FoldPlan, FoldPlanner, NeedSummary, SummaryResult
from runtime.fold.settings import FoldSettings
from runtime.measuring.measure import TokenCounter
from runtime.values.messages import Note
from runtime.values.usage import Usage

COUNTER = TokenCounter()


def read(path: str, size: int) -> tuple[str, dict[str, Any], str]:
    return ("read_file", {"path": path, "size": size}, synthetic_text(path, size))


def history(size: int = 3000) -> tuple[Conversation, list[str]]:
    """A task, three delivered rounds of ``size`` characters and an answer, then one undelivered round."""
    c = Conversation()
    c.task("Read the sources and report.")
    for i in range(3):
        c.round([read(f"src/m{i}.py", size)])
    c.answer("Read three modules so far.")
    c.deliver()
    call, results = c.round([read("src/last.py", 800)])
    return c, [call.id, *(r.id for r in results)]


def plan_compaction(c: Conversation, answer: Any) -> tuple[FoldPlan, list[NeedSummary]]:
    branch = c.branch()
    estimate = measurer_for(branch, counter=COUNTER).estimate(branch.view())
    settings = FoldSettings(ceiling=int(estimate / 0.85), strategy="compaction")
    planner = FoldPlanner(fold_input(branch, settings), measurer_for(branch, counter=COUNTER))
    return run_planner(planner, answer)


def test_compaction_replaces_everything_delivered_but_the_task_with_one_summary_note() -> None:
    c, undelivered = history()
    task_id, *rest = c.view
    delivered = [mid for mid in rest if mid not in undelivered]
    usage = Usage(input_tokens=40, output_tokens=12)
    plan, needs = plan_compaction(c, lambda need: SummaryResult(text="Three modules read; all fine.", usage=usage))
    (need,) = needs
    assert need.stage == "compaction" and list(need.span_ids) == delivered
    (note,) = plan.added
    assert isinstance(note, Note) and note.stage == "compaction"
    assert "Three modules read; all fine." in note.text and list(note.replaced) == delivered
    assert need.prompt.count("[result #") == 3 and "Read three modules so far." in need.prompt
    assert plan.view_ids == (task_id, note.id, *undelivered)
    assert plan.stages == ("compaction",) and plan.summaries == 1 and plan.landed
    assert list(plan.folded_ids) == delivered
    (record,) = plan.passes
    assert (record.stage, record.outcome, record.summary_usage) == ("compaction", "landed", usage)
    assert (record.estimate_before, record.estimate_after) == (plan.estimate_before, plan.estimate_after)
    assert plan.estimate_after < plan.estimate_before


def test_a_failed_compaction_summary_still_folds_with_a_note_saying_so() -> None:
    c, undelivered = history()
    plan, needs = plan_compaction(c, lambda need: SummaryResult(failure="the summary request failed"))
    assert len(needs) == 1
    (note,) = plan.added
    assert isinstance(note, Note) and note.stage == "compaction"
    assert "(No summary: the summary request failed.)" in note.text
    assert plan.view_ids[1] == note.id and plan.view_ids[2:] == tuple(undelivered)


def test_a_compaction_summary_that_costs_more_than_the_span_is_rolled_back() -> None:
    c, _ = history(size=300)
    long = SummaryResult(text="A summary longer than what it summarizes. " * 400)
    plan, _ = plan_compaction(c, lambda need: long)
    (record,) = plan.passes
    assert record.outcome == "rolled_back" and record.estimate_after >= record.estimate_before
    assert plan.view_ids == tuple(c.view) and not plan.landed and plan.stages == ()


def test_nothing_delivered_but_the_task_asks_for_no_summary() -> None:
    c = Conversation()
    c.task("Read the sources and report.")
    c.deliver()
    c.round([read("src/only.py", 900)])
    plan, needs = plan_compaction(c, None)  # run_planner fails on any summary request
    assert needs == [] and plan.view_ids == tuple(c.view) and plan.added == () and plan.passes == ()


def test_a_unit_that_is_all_that_was_delivered_is_still_taken() -> None:
    c, _ = history()
    branch = c.branch()
    first_round = set(c.view[1:3])  # the first call and its result: a unit of their own
    estimate = measurer_for(branch, counter=COUNTER).estimate(branch.view())
    settings = FoldSettings(ceiling=int(estimate / 0.85), strategy="compaction")
    fold = fold_input(branch, settings, delivered=frozenset(first_round))
    planner = FoldPlanner(fold, measurer_for(branch, counter=COUNTER))
    _, needs = run_planner(planner, lambda need: SummaryResult(text="s"))
    assert [set(need.span_ids) for need in needs] == [first_round]


def test_compaction_measures_the_view_again_at_the_scale_its_summary_left() -> None:
    c, _ = history()
    branch = c.branch()
    measurer = measurer_for(branch, counter=COUNTER)
    settings = FoldSettings(ceiling=int(measurer.estimate(branch.view()) / 0.85), strategy="compaction")
    raised = measurer.with_scale(1.25)
    planner = FoldPlanner(fold_input(branch, settings), measurer)
    plan, _ = run_planner(planner, lambda need: SummaryResult(text="short"), measurer=raised)
    (record,) = plan.passes
    assert record.estimate_before == raised.estimate(branch.view()) > measurer.estimate(branch.view())
