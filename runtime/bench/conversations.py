"""Building conversations outside a run: for benchmarks, tests and examples (pure).

:class:`Conversation` holds a record and a view as plain values and hands out
:class:`~actors.branch.Branch` snapshots of them, so the pure fold can be
exercised without an event loop: append rounds, take a snapshot, plan a fold,
:meth:`Conversation.land` the plan (its notes and copies into the record, its
view as the view), and go on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from actors.branch import Branch, ContextState
from actors.record import Record
from runtime.fold.measurer import ViewMeasurer
from runtime.fold.planner import FoldInput, FoldPlan, FoldPlanner, NeedSummary, SummaryResult
from runtime.fold.projection import record_projection
from runtime.fold.settings import FoldSettings
from runtime.measuring.measure import TokenCounter
from runtime.request.compiler import RequestSettings, ToolSpec
from runtime.values.messages import (
    AssistantResponse,
    Instruction,
    Message,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResult,
)

MODEL = "claude-haiku-5-5"

Call = tuple[str, Mapping[str, Any], Any]
"""A tool call and its output: (function, arguments, output)."""


@attrs.define(eq=False)
class Conversation:
    """A record and a view being built (see the module docstring)."""

    system: SystemMessage | None = attrs.field(factory=lambda: SystemMessage("You read files and answer briefly."))
    record: Record = attrs.field(factory=Record)
    view: list[str] = attrs.field(factory=list)
    delivered: set[str] = attrs.field(factory=set)
    _calls: int = 0

    def __attrs_post_init__(self) -> None:
        if self.system is not None and len(self.record) == 0:
            self.record.append(self.system)

    def add(self, message: Message, *, in_view: bool = True) -> int:
        index = self.record.append(message)
        if in_view:
            self.view.append(message.id)
        return index

    def task(self, text: str) -> Instruction:
        message = Instruction(text)
        self.add(message)
        return message

    def round(self, calls: Iterable[Call], *, say: str | None = None) -> tuple[AssistantResponse, list[ToolResult]]:
        """Append one round: a response making ``calls`` and their results."""
        tool_calls = []
        outputs = []
        for name, arguments, output in calls:
            self._calls += 1
            tool_calls.append(ToolCall.create(f"toolu_{self._calls:05d}", name, arguments))
            outputs.append(output)
        parts: list[TextPart | ToolCall] = [TextPart(say)] if say else []
        response = AssistantResponse((*parts, *tool_calls))
        self.add(response)
        results = [ToolResult.for_call(call, output) for call, output in zip(tool_calls, outputs, strict=True)]
        for r in results:
            self.add(r)
        return response, results

    def answer(self, text: str) -> AssistantResponse:
        message = AssistantResponse((TextPart(text),))
        self.add(message)
        return message

    def deliver(self) -> None:
        """Mark the whole view delivered (a completed main request carried it)."""
        self.delivered |= set(self.view)

    def messages(self) -> tuple[Message, ...]:
        return tuple(self.record.get(mid) for mid in self.view)

    def branch(self, **state: Any) -> Branch:
        """A branch snapshot of the record (shared) and the view (copied)."""
        context = ContextState(delivered=frozenset(self.delivered), **state)
        return Branch(system=self.system, record=self.record, view=list(self.view), state=context)

    def land(self, plan: FoldPlan) -> None:
        """Apply a fold plan: its new messages enter the record, its view becomes the view."""
        for message in plan.added:
            self.record.append(message)
        for mid in plan.view_ids:
            if self.record.index_of(mid) is None:
                raise KeyError(f"plan view id {mid} is not in the record")
        self.view = list(plan.view_ids)


def measurer_for(
    branch: Branch,
    *,
    counter: TokenCounter | None = None,
    tools: Sequence[ToolSpec] = (),
    bound: int | None = None,
    scale: float | None = None,
) -> ViewMeasurer:
    """A measurer compiling ``branch``'s views as the send path would (optionally under a result bound)."""
    projection = record_projection(branch, bound)
    return ViewMeasurer(
        branch.system,
        tuple(tools),
        RequestSettings(model=MODEL),
        counter or TokenCounter(),
        branch.scale if scale is None else scale,
        projection,
    )


def fold_input(branch: Branch, settings: FoldSettings, **overrides: Any) -> FoldInput:
    """The fold input for a branch snapshot (its view, delivery, recovery and marks)."""
    state = branch.state
    values: dict[str, Any] = {
        "record": branch,
        "view": branch.view(),
        "delivered": state.delivered,
        "recovered": state.recovered,
        "protected": frozenset(),
        "marks": tuple(state.pending_marks),
        "settings": settings,
    }
    values.update(overrides)
    return FoldInput(**values)


def run_planner(
    planner: FoldPlanner, answer: Any = None, *, measurer: ViewMeasurer | None = None
) -> tuple[FoldPlan, list[NeedSummary]]:
    """Drive a planner to its plan; ``answer(need) -> SummaryResult`` answers summary requests.

    Without ``answer`` a summary request is an error (the caller expected none).
    """
    needs: list[NeedSummary] = []
    step = planner.start()
    while isinstance(step, NeedSummary):
        needs.append(step)
        if answer is None:
            raise AssertionError(f"the fold asked for a summary ({step.stage}) where none was expected")
        result = answer(step)
        if not isinstance(result, SummaryResult):
            raise TypeError(f"answer returned {type(result).__name__}, expected a SummaryResult")
        step = planner.resume(result, measurer or planner.measurer)
    return step, needs
