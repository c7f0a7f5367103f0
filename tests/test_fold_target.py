"""Issue 11, case 11: a fold stops at its target; it takes the oldest spans needed, clipping only what it must."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.tools import synthetic_text
from runtime.bench.conversations import (
    Conversation,
    fold_input,
    measurer_for,
    run_planner,
)
from runtime.fold.planner import TARGET_LOW, FoldPlanner
from runtime.fold.settings import FoldSettings
from runtime.measuring.measure import TokenCounter

COUNTER = TokenCounter()


def read(path: str, size: int) -> tuple[str, dict, str]:
    return ("read_file", {"path": path, "size": size}, synthetic_text(path, size))


def conversation(sizes: list[int]) -> Conversation:
    c = Conversation()
    c.task("Read the docs and report what the fold keeps.")
    for i, size in enumerate(sizes):
        c.round([read(f"docs/{i}.md", size)])
    c.deliver()
    c.round([read("docs/new.md", 2000)])  # the newest round: undelivered, never folded
    return c


def fold(c: Conversation, fold_settings: FoldSettings):
    branch = c.branch()
    planner = FoldPlanner(fold_input(branch, fold_settings), measurer_for(branch, counter=COUNTER))
    plan, needs = run_planner(planner, None)
    return plan, needs


def test_a_fold_asked_for_12000_tokens_lands_within_ten_percent_of_it() -> None:
    # Main folded every round older than the tail here and landed near 2,000 tokens.
    c = conversation([4000] * 14)
    fold_settings = FoldSettings(ceiling=20_000)
    plan, needs = fold(c, fold_settings)
    assert needs == [] and plan.estimate_before >= fold_settings.fold_line
    target = fold_settings.target_tokens
    assert target == 12_000
    assert TARGET_LOW * target <= plan.estimate_after <= target, (plan.estimate_before, plan.estimate_after)
    assert plan.target_reached
    assert "tool_io" in plan.stages


@settings(max_examples=15, deadline=None)
@given(
    sizes=st.lists(st.integers(1500, 9000), min_size=12, max_size=24),
    ceiling=st.integers(12_000, 30_000),
)
def test_with_enough_foldable_material_the_fold_lands_within_ten_percent_of_its_target(
    sizes: list[int], ceiling: int
) -> None:
    c = conversation(sizes)
    fold_settings = FoldSettings(ceiling=ceiling)
    start = measurer_for(c.branch(), counter=COUNTER).estimate(c.messages())
    if start < fold_settings.fold_line:
        return  # not due: nothing to fold
    plan, _ = fold(c, fold_settings)
    target = fold_settings.target_tokens
    floor = measurer_for(c.branch(), counter=COUNTER).estimate(c.messages()[:1] + c.messages()[-2:])
    if floor > TARGET_LOW * target:
        return  # not enough foldable material to land in the band
    assert plan.estimate_after <= target
    assert plan.estimate_after >= TARGET_LOW * target, (plan.stages, plan.estimate_before, plan.estimate_after, target)
