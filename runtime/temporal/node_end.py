"""How a node workflow's end reaches its flow: as its workflow's result, or by signal.

A node's last items (its last events, then its outcome) come as its child
workflow's result when the flow asks for that in the node's input
(:data:`OUTCOME_BY_RESULT`): no signal, and no workflow task on either side
to deliver and acknowledge one. The flow's run that started the node is the
only one the result reaches, so before a flow continues as new it sends each
such node :data:`REPORT_SIGNAL`, and the node sends its last items by signal
instead, as every node did before results (a flow recorded then replays so).
A node that sent its outcome by signal and then fails says so in its
failure's details (:data:`SIGNALLED`): the flow reads the signalled outcome.

Pure values and one function of a finished child handle; safe inside a workflow.
"""

from __future__ import annotations

from typing import Any

from temporalio.exceptions import ApplicationError, ChildWorkflowError, FailureError

REPORT_SIGNAL = "report_by_signal"
"""The flow's word to a node that its last items go by signal (the flow continues as new: its next run gets them)."""
OUTCOME_BY_RESULT = "result"
"""A node input's ``outcome`` value: its last items go in its workflow's result."""
LAST_ITEMS = "last_items"
"""The key of a node workflow's result that holds its last items (a node that sent them by signal returns its
outcome, whose ``items`` is a count)."""
SIGNALLED = "outcome signalled"
"""The detail of a node workflow's failure whose outcome went to the flow by signal (the flow reads that one)."""


def failed_outcome(error_type: str, message: str) -> dict[str, Any]:
    """A node's outcome when its operation could not run (the flow publishes ``NodeFailed`` from it)."""
    return {"status": "failed", "error_type": error_type, "message": message or error_type, "unrecoverable": 0}


def items_of_end(handle: Any) -> list[dict[str, Any]] | None:
    """The last items a finished node workflow's handle gives its flow (None: they came by signal).

    A result with :data:`LAST_ITEMS`: those. A result without (a node told to signal) or a failure that says
    :data:`SIGNALLED`: none. Any other failure (a node that could not run, a workflow terminated or
    timed out) is the node's outcome, failed, with the error's type and message.
    """
    if handle.cancelled():
        return None
    error = handle.exception()
    if error is None:
        items: list[dict[str, Any]] | None = handle.result().get(LAST_ITEMS)
        return items
    cause = error.cause if isinstance(error, ChildWorkflowError) and error.cause is not None else error
    if isinstance(cause, ApplicationError) and SIGNALLED in cause.details:
        return None
    error_type = cause.type if isinstance(cause, ApplicationError) and cause.type else type(cause).__name__
    message = cause.message if isinstance(cause, FailureError) else str(cause)
    return [{"finished": failed_outcome(error_type, message)}]
