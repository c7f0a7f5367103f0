"""The workflow definitions (the sandbox re-imports this module: it only defines).

Everything foldline is passed through the sandbox (it is imported once, by
the worker, outside it); :mod:`runtime.temporal.flow_host` holds the logic.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from runtime.errors import FoldlineError
    from runtime.temporal.flow_host import run_flow_workflow

FLOW_WORKFLOW = "foldline.Flow"


@workflow.defn(name=FLOW_WORKFLOW)
class FlowWorkflow:
    """One flow: foldline's scheduler, run deterministically; provider, tool and sink I/O as activities.

    A foldline error that escapes the flow (a scenario the workflow cannot
    load, a refused setting) fails the workflow with its message; any other
    exception is a bug and fails only the workflow task, which Temporal
    retries (a fixed worker then carries the flow on).
    """

    @workflow.run
    async def run(self, arg: dict[str, Any]) -> dict[str, Any]:
        try:
            return await run_flow_workflow(arg)
        except FoldlineError as exc:
            raise ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True) from exc
