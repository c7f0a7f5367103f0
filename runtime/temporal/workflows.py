"""The workflow definitions (a replay's sandbox re-imports this module: it only defines).

Everything foldline is passed through the sandbox (it is imported once, by
the worker, outside it); :mod:`runtime.temporal.scheduler` (the flow) and
:mod:`runtime.temporal.node_host` (one node's branch) hold the logic.
Workflows run on asyncio only.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from runtime.errors import FoldlineError
    from runtime.temporal.node_end import REPORT_SIGNAL, SIGNALLED, failed_outcome
    from runtime.temporal.node_host import (
        ANSWER_SIGNAL,
        ITEMS_SIGNAL,
        NODE_WORKFLOW,
        NodeHost,
        run_node_workflow,
        send_outcome,
    )
    from runtime.temporal.reconnect import sole_error
    from runtime.temporal.scheduler import run_flow_workflow

FLOW_WORKFLOW = "foldline.Flow"


def _failed(exc: FoldlineError, *details: object) -> ApplicationError:
    return ApplicationError(str(exc), *details, type=type(exc).__name__, non_retryable=True)


@workflow.defn(name=FLOW_WORKFLOW)
class FlowWorkflow:
    """One flow: foldline's scheduler, run deterministically; each node's branch a child workflow.

    A foldline error that escapes the flow (a scenario the workflow cannot
    load, a refused setting, a ``node_items`` signal it cannot read), alone in
    the task groups' exception groups, fails the workflow with its message;
    any other exception is a bug and fails only the workflow task, which
    Temporal retries (a fixed worker then carries the flow on).
    """

    def __init__(self) -> None:
        self.inbox: list[dict[str, Any]] = []

    @workflow.signal(name=ITEMS_SIGNAL)
    def node_items(self, arg: dict[str, Any]) -> None:
        """A node workflow's events and spawn requests, in its order."""
        self.inbox.append(arg)

    @workflow.run
    async def run(self, arg: dict[str, Any]) -> dict[str, Any]:
        try:
            return await run_flow_workflow(arg, self.inbox)
        except Exception as raised:
            exc = sole_error(raised)
            if isinstance(exc, FoldlineError):
                raise _failed(exc) from exc
            raise


@workflow.defn(name=NODE_WORKFLOW)
class NodeWorkflow:
    """One node's branch: its single thread is the branch lock (a child workflow of its flow)."""

    def __init__(self) -> None:
        self.host = NodeHost()

    @workflow.signal(name=ANSWER_SIGNAL)
    def spawn_answer(self, arg: dict[str, Any]) -> None:
        """The flow's answer to one of this node's spawn requests."""
        self.host.answer(arg)

    @workflow.signal(name=REPORT_SIGNAL)
    def report_by_signal(self) -> None:
        """The flow continues as new: the node's last items go by signal (its next run is not this one's parent)."""
        self.host.told = True

    @workflow.run
    async def run(self, arg: dict[str, Any]) -> dict[str, Any]:
        try:
            return await run_node_workflow(self.host, arg)
        except FoldlineError as exc:  # the flow hears of it as of any node's failure, then the workflow fails
            if not self.host.by_signal:  # the flow reads the failure as the node's outcome
                raise _failed(exc) from exc
            await send_outcome(str(arg["node"]), failed_outcome(type(exc).__name__, str(exc)))
            raise _failed(exc, SIGNALLED) from exc
