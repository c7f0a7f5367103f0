"""Histories recorded by an earlier version of the Temporal engine still replay (Temporal is asyncio-only).

``temporal_histories/quickstart-outcome-by-signal.tar.gz`` holds the quickstart's
flow workflow history and its five node workflow histories, recorded before a
node's last items (events, outcome) came as its workflow's result, with the body
store they point into (the worker identities scrubbed). A flow that ran then
replays with every outcome by signal (``workflow.patched``,
:data:`runtime.temporal.scheduler.OUTCOME_PATCH`); its nodes had no ``outcome``
key in their input, so they send by signal as then. Replayed in the workflow
sandbox, as the harness replays fresh runs; no server is needed.
"""

from __future__ import annotations

import tarfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

pytest.importorskip("temporalio")

HISTORIES = Path(__file__).parent / "temporal_histories"
NODES = ("lead", "review-design", "review-tests", "summary", "survey")


def _unpack(tmp_path: Path, name: str) -> Path:
    with tarfile.open(HISTORIES / name) as archive:
        archive.extractall(tmp_path, filter="data")
    return tmp_path / name.split("-")[0]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # Temporal's workflows run on asyncio only
@pytest.mark.anyio
async def test_a_flow_recorded_before_outcomes_came_as_results_replays(tmp_path: Path, anyio_backend: str) -> None:
    from temporalio.client import WorkflowHistory
    from temporalio.worker import Replayer

    from runtime.temporal.bodies import DirectoryBodyStore
    from runtime.temporal.node_host import node_workflow_id
    from runtime.temporal.worker import data_converter, sandbox_runner, warm
    from runtime.temporal.workflows import FlowWorkflow, NodeWorkflow

    warm()
    root = _unpack(tmp_path, "quickstart-outcome-by-signal.tar.gz")
    ids = {"flow": "fixture"} | {node: node_workflow_id("fixture", node) for node in NODES}
    histories = [
        WorkflowHistory.from_json(wid, (root / f"{name}.json").read_text(encoding="utf-8")) for name, wid in ids.items()
    ]
    # The old shape: every node signals its outcome, and no patch marker is in the flow's history.
    signalled = sum(1 for e in histories[0].events if e.HasField("workflow_execution_signaled_event_attributes"))
    assert signalled >= len(NODES)
    replayer = Replayer(
        workflows=[FlowWorkflow, NodeWorkflow],
        workflow_runner=sandbox_runner(),
        data_converter=data_converter(DirectoryBodyStore(str(root / "bodies"))),
    )

    async def each() -> AsyncIterator[WorkflowHistory]:
        for history in histories:
            yield history

    results = await replayer.replay_workflows(each(), raise_on_replay_failure=False)
    failures = {wid: str(err) for wid, err in results.replay_failures.items()}
    assert failures == {}
