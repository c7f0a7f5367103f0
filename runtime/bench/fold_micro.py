"""Micro-benchmarks of the fold (called by ``foldline bench --micro``).

- :func:`bench_tool_io_fold`: one fold of a 98,000-token branch that lands a
  ``tool_io`` pass (target: a median under 50 ms);
- :func:`bench_clip_pass`: one clip pass over a 100,045-character result.

Each repeat builds its branch and a fresh token counter, measures the view
once as the send path would have before folding (not timed), then times the
fold alone. These functions read a monotonic clock: they are benchmarks, not
part of the pure core.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from actors.branch import Branch
from actors.tools import synthetic_text
from runtime.bench.conversations import Conversation
from runtime.fold.clip import clip_stage
from runtime.fold.measurer import ViewMeasurer
from runtime.fold.planner import FoldInput, FoldPlan, FoldPlanner
from runtime.fold.settings import FoldSettings
from runtime.measuring.measure import TokenCounter
from runtime.request.compiler import RequestSettings
from runtime.values.messages import SystemMessage

MODEL = "claude-haiku-5-5"
SYSTEM = "You read files and report what they say."
CLIP_RESULT_CHARS = 100_045


def reading_branch(rounds: int, chars: int, *, delivered: bool = True) -> Branch:
    """A branch: system, task, then ``rounds`` one-read rounds of ``chars`` characters each."""
    conversation = Conversation(system=SystemMessage(SYSTEM))
    conversation.task("Read the files under docs/ and summarize them.")
    for i in range(rounds):
        path = f"docs/file_{i:03d}.md"
        conversation.round(
            [("read_file", {"path": path, "size": chars}, synthetic_text(path, chars))], say=f"Reading file {i}."
        )
    if delivered:
        conversation.deliver()
    return conversation.branch()


def _measurer(branch: Branch, counter: TokenCounter) -> ViewMeasurer:
    return ViewMeasurer(branch.system, (), RequestSettings(model=MODEL), counter, branch.scale)


def _input(branch: Branch, settings: FoldSettings) -> FoldInput:
    state = branch.state
    return FoldInput(
        record=branch,
        view=branch.view(),
        delivered=state.delivered,
        recovered=state.recovered,
        protected=frozenset(),
        marks=(),
        settings=settings,
    )


def _run(planner: FoldPlanner) -> FoldPlan:
    step = planner.start()
    if not isinstance(step, FoldPlan):
        raise RuntimeError(f"the benchmark fold asked for a summary ({step.stage}); it should land tool_io alone")
    return step


def tool_io_fold_once() -> tuple[float, FoldPlan, int]:
    """One timed tool_io fold of a ~98,000-token branch: (seconds, plan, estimate before)."""
    branch = reading_branch(rounds=40, chars=8_950)
    counter = TokenCounter()
    measurer = _measurer(branch, counter)
    before = measurer.estimate(branch.view())  # the send path measured this request already
    settings = FoldSettings(ceiling=100_000)
    start = time.perf_counter()
    plan = _run(FoldPlanner(_input(branch, settings), measurer))
    elapsed = time.perf_counter() - start
    return elapsed, plan, before


def bench_tool_io_fold(repeats: int) -> list[float]:
    """Seconds per fold of a 98,000-token branch (a tool_io pass landing), one figure per repeat."""
    _check_repeats(repeats)
    samples = []
    for _ in range(repeats):
        elapsed, plan, _ = tool_io_fold_once()
        if "tool_io" not in plan.stages:
            raise RuntimeError(f"the benchmark fold landed {plan.stages}, not tool_io")
        samples.append(elapsed)
    return samples


def clip_pass_once() -> tuple[float, int, int]:
    """One timed clip pass over a 100,045-character result: (seconds, estimate before, after)."""
    conversation = Conversation(system=SystemMessage(SYSTEM))
    conversation.task("List everything and find the config files.")
    conversation.round([("run_shell", {"command": "ls -R /"}, synthetic_text("listing", CLIP_RESULT_CHARS))])
    branch = conversation.branch()
    counter = TokenCounter()
    measurer = _measurer(branch, counter)
    before = measurer.estimate(branch.view())
    settings = FoldSettings(ceiling=20_000)
    start = time.perf_counter()
    outcome = clip_stage(
        branch.view(),
        estimate=before,
        target=settings.target_tokens,
        eligible=lambda result: True,
        record=branch,
        measurer=measurer,
        bound=None,
    )
    elapsed = time.perf_counter() - start
    return elapsed, before, outcome.estimate


def bench_clip_pass(repeats: int) -> list[float]:
    """Seconds per clip pass over one 100,045-character result, one figure per repeat."""
    _check_repeats(repeats)
    return [clip_pass_once()[0] for _ in range(repeats)]


def _check_repeats(repeats: int) -> None:
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats: {repeats!r} is not a positive integer")


def median(samples: Sequence[float]) -> float:
    ordered = sorted(samples)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
