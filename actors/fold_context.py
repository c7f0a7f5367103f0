"""The model's ``context`` tool on the send path: run one call against the branch and apply it.

The tool itself (schema, actions) is pure: :mod:`runtime.fold.context_tool`. This shell hands it
the branch's view, record, marks and the fold settings, and lands what it changes in one batch.
"""

from __future__ import annotations

from actors.branch import Turn
from actors.shape import RequestShape
from runtime.fold.context_tool import run_context_call
from runtime.fold.settings import FoldSettings
from runtime.values.messages import ToolCall, ToolResult


def context_call(
    turn: Turn, call: ToolCall, *, settings: FoldSettings | None, shape: RequestShape, completed: int
) -> ToolResult:
    """Run one call of the model's context tool against the branch and apply what it changes.

    ``settings`` is None when no fold is installed for the operation (the
    tool still answers reads; a fold or restore says why it cannot).
    """
    branch = turn.branch
    outcome = run_context_call(
        call.arguments,
        view=branch.view(),
        record=branch,
        settings=settings,
        marks=tuple(branch.state.pending_marks),
        completed=completed,
        estimator=shape.measurer("continuing"),
    )
    result = ToolResult.for_call(call, outcome.text, is_error=outcome.is_error)
    recovered = outcome.recovered | ({result.id} if outcome.protect_answer else set())
    with turn.batch():
        if outcome.view_ids is not None:
            turn.set_view(outcome.view_ids)
        if recovered:
            turn.recover(recovered)
        if outcome.marks is not None:
            turn.hold_marks(outcome.marks)
        if outcome.rewrite_cause is not None:
            turn.explain_rewrite(outcome.rewrite_cause)
    return result
