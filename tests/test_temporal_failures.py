"""A flow workflow whose body raises fails at once with the body's error (Temporal is asyncio-only).

The body raises here on a real input: a ``node_items`` signal that is not what a node workflow sends (anyone
who can reach the Temporal namespace can send one, e.g. ``temporal workflow signal``). Before, the body's
error cancelled the flow's tasks through anyio's cancel scope while one of them was awaiting a Temporal
operation (the event pump's local activity, a node's child workflow start); the SDK answers each cancel with
a cancel command and waits on, anyio cancels again, and the workflow task never yielded until Temporal's
deadlock detector failed it; Temporal then retried the task, over and over.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")

from test_temporal_outcomes import on_temporal

SLOW = """
schema = "foldline.scenario/v1"
name = "slow"
[provider]
kind = "simulated"
model = "claude-haiku-5-5"
faults = [{ kind = "slow", node = "slow", on_request = 1, delay_s = 60 }]
[profiles.default]
system = "You answer briefly."
[[nodes]]
id = "slow"
operation = "bounded"
instruction = "Take your time."
script = [{ text = "Done." }]
[[nodes]]
id = "quick"
operation = "bounded"
instruction = "Answer."
script = [{ text = "Answered." }]
"""
BAD_ITEMS = {"node": "slow", "items": [{"bogus": 1}]}
"""A ``node_items`` batch with an item of no kind the flow knows."""
REASON = "items[0]: an item has one of the keys event, finished, lost, request, spawn; got ['bogus']"
FAIL_WITHIN_S = 30.0
"""A bound for the failure to arrive (the deadlock detector fires after 2 s and the task is retried for ever)."""


@contextlib.asynccontextmanager
async def _served(address: str, tmp_path: Path, queue: str) -> AsyncIterator[Any]:
    """A client of the session's server and a worker of this process on ``queue`` (the slow scenario's provider)."""
    from actors.tools import BUILTIN_TOOLS
    from runtime.config.loader import load_scenario
    from runtime.providers.factory import open_provider
    from runtime.scenarios.run import build_policies
    from runtime.temporal.activities import ActivityHost
    from runtime.temporal.bodies import DirectoryBodyStore
    from runtime.temporal.worker import build_worker, connect

    path = tmp_path / "slow.toml"
    path.write_text(SLOW, encoding="utf-8")
    scenario = load_scenario(str(path), tool_names=BUILTIN_TOOLS.names())
    client = await connect(address, DirectoryBodyStore(tmp_path / "bodies"))
    async with open_provider(scenario.provider, build_policies(scenario), clock=time.time) as provider:
        host = ActivityHost({scenario.provider.kind: provider}, BUILTIN_TOOLS)
        async with build_worker(client, host, task_queue=queue):
            yield client


async def _failure_of(flow: Any) -> str:
    """The flow's failure message, within :data:`FAIL_WITHIN_S`."""
    import anyio
    from temporalio.client import WorkflowFailureError

    with anyio.fail_after(FAIL_WITHIN_S), pytest.raises(WorkflowFailureError) as failed:
        await flow.result()
    cause = failed.value.cause
    return str(getattr(cause, "message", cause))


async def _task_failures(flow: Any) -> list[str]:
    """The messages of the flow's failed workflow tasks (a deadlock is one)."""
    history = await flow.fetch_history()
    field = "workflow_task_failed_event_attributes"
    return [e.workflow_task_failed_event_attributes.failure.message for e in history.events if e.HasField(field)]


async def _end_nodes(client: Any, flow_id: str) -> None:
    """Terminate the node workflows the failed flow abandoned (they outlive it; the server is the session's)."""
    from temporalio.service import RPCError

    from runtime.temporal.node_host import node_workflow_id

    for node in ("slow", "quick"):
        with contextlib.suppress(RPCError):
            await client.get_workflow_handle(node_workflow_id(flow_id, node)).terminate(reason="the test ends")


def _arg(**extra: Any) -> dict[str, Any]:
    return {"scenario_text": SLOW, "scenario_label": "slow.toml", "run_id": "r"} | extra


@on_temporal
async def test_a_bad_signal_while_the_nodes_start_fails_the_flow_with_its_reason(
    temporal_server: str, tmp_path: Path, anyio_backend: str
) -> None:
    """The signal comes with the flow's start: the body raises while both nodes' child workflows are starting."""
    from runtime.temporal.workflows import FLOW_WORKFLOW

    flow_id, queue = f"bad-signal-start-{time.time_ns()}", f"bad-signal-start-{time.time_ns()}"
    async with _served(temporal_server, tmp_path, queue) as client:
        flow = await client.start_workflow(
            FLOW_WORKFLOW,
            _arg(),
            id=flow_id,
            task_queue=queue,
            start_signal="node_items",
            start_signal_args=[BAD_ITEMS],
        )
        try:
            message = await _failure_of(flow)
        finally:
            await _end_nodes(client, flow_id)
        assert message == f"the flow's node_items signal from node 'slow': {REASON}"
        assert await _task_failures(flow) == []


@on_temporal
async def test_a_bad_signal_while_the_event_pump_writes_fails_the_flow_with_its_reason(
    temporal_server: str, tmp_path: Path, anyio_backend: str
) -> None:
    """The event file cannot be written (its directory is a file), so the pump stays inside its write (a local
    activity retried with backoff) when the signal comes, while the slow node waits on its simulator."""
    from temporalio.service import RPCError

    from runtime.temporal.node_host import node_workflow_id
    from runtime.temporal.workflows import FLOW_WORKFLOW

    (tmp_path / "not-a-dir").write_text("", encoding="utf-8")
    signals = str(tmp_path / "not-a-dir" / "events.jsonl")
    flow_id, queue = f"bad-signal-pump-{time.time_ns()}", f"bad-signal-pump-{time.time_ns()}"
    async with _served(temporal_server, tmp_path, queue) as client:
        import anyio

        flow = await client.start_workflow(FLOW_WORKFLOW, _arg(signals_path=signals), id=flow_id, task_queue=queue)
        try:
            slow = client.get_workflow_handle(node_workflow_id(flow_id, "slow"))
            with anyio.fail_after(20):  # the body runs: the slow node's workflow has started
                while True:
                    try:
                        await slow.describe()
                        break
                    except RPCError:
                        await anyio.sleep(0.1)
            await flow.signal("node_items", BAD_ITEMS)
            message = await _failure_of(flow)
        finally:
            await _end_nodes(client, flow_id)
        assert message == f"the flow's node_items signal from node 'slow': {REASON}"
        assert await _task_failures(flow) == []


NODES = ("lead", "child")
EVENT = {"type": "NodeStarted", "data": {}, "node_id": "lead", "branch_id": "b", "request_id": None}


def test_a_node_items_batch_a_node_sends_is_read_as_it_came() -> None:
    from runtime.temporal.node_items import checked_batch

    items = [
        {"event": EVENT},
        {"request": {"branch_id": "b", "record": "{}"}},
        {"lost": 2},
        {"spawn": {"child": "child", "ref": 1, "seed": None}},
        {"finished": {"status": "ok", "unrecoverable": 0, "rounds": 1, "answer_chars": 5}},
        {"finished": {"status": "failed", "unrecoverable": 0, "error_type": "E", "message": "m"}},
    ]
    assert checked_batch({"node": "lead", "items": items}, NODES) == ("lead", items)


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        ([1], "the flow's node_items signal: [1] is an array, not a table with node and items"),
        ({"node": "x", "items": []}, 'the flow\'s node_items signal.node: "x" is not a node of the flow (child, lead)'),
        ({"node": "lead", "items": {}}, "from node 'lead': items: {  } is a table, not a list"),
        ({"node": "lead", "items": [{"lost": -1}]}, "items[0].lost: -1 is not a number of tries >= 0"),
        ({"node": "lead", "items": [{"lost": True}]}, "items[0].lost: true is not a number of tries >= 0"),
        ({"node": "lead", "items": [{"event": EVENT, "lost": 1}]}, "got ['event', 'lost']"),
        ({"node": "lead", "items": [{"event": []}]}, "items[0].event: [] is an array, not a table"),
        (
            {"node": "lead", "items": [{"event": EVENT | {"data": 1}}]},
            "items[0].event.data: 1 is an integer, not a table",
        ),
        ({"node": "lead", "items": [{"event": EVENT | {"node_id": 1}}]}, "items[0].event.node_id: 1 is an integer"),
        (
            {"node": "lead", "items": [{"event": {k: v for k, v in EVENT.items() if k != "branch_id"}}]},
            "items[0].event.branch_id: null is",
        ),
        ({"node": "lead", "items": [{"request": {"branch_id": "b"}}]}, "items[0].request.record: null is"),
        ({"node": "lead", "items": [{"request": {"branch_id": 2, "record": "{}"}}]}, "request.branch_id: 2 is an"),
        (
            {"node": "lead", "items": [{"finished": {"status": "done"}}]},
            'items[0].finished.status: "done" is not ok or',
        ),
        ({"node": "lead", "items": [{"finished": {"status": "ok", "unrecoverable": 0}}]}, "finished.rounds: null is"),
        ({"node": "lead", "items": [{"spawn": {"child": "other", "ref": 1}}]}, 'spawn.child: "other" is not a node'),
        ({"node": "lead", "items": [{"spawn": {"child": "child", "ref": "1"}}]}, 'spawn.ref: "1" is a string'),
    ],
)
def test_a_node_items_batch_no_node_sends_is_refused_naming_where(batch: Any, message: str) -> None:
    from runtime.errors import ConfigError
    from runtime.temporal.node_items import checked_batch

    with pytest.raises(ConfigError) as refused:
        checked_batch(batch, NODES)
    assert message in str(refused.value)
