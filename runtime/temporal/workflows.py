"""The workflow definitions (the sandbox re-imports this module: it only defines).

Everything foldline is passed through the sandbox (it is imported once, by
the worker, outside it); :mod:`runtime.temporal.flow_host` holds the logic.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from runtime.temporal.flow_host import run_flow_workflow

FLOW_WORKFLOW = "foldline.Flow"


@workflow.defn(name=FLOW_WORKFLOW)
class FlowWorkflow:
    """One flow: foldline's scheduler, run deterministically; provider, tool and sink I/O as activities."""

    @workflow.run
    async def run(self, arg: dict[str, Any]) -> dict[str, Any]:
        return await run_flow_workflow(arg)
