"""How a node workflow ends and spawns on Temporal, in signals and answers (Temporal is asyncio-only).

A node's last items (its last events and its outcome) come as its workflow's
result, not in a signal; an emitter applies the flow's spawn rule itself when
the flow's spawn limit cannot be reached by its declared children, so it sends
its spawn requests without waiting for an answer; with a limit its children
can reach, the flow answers each request as before. Both runs end as in process.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from test_temporal import needs_server

pytest.importorskip("temporalio")

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"


def on_temporal(test: Any) -> Any:
    """A slow test against a dev server this process starts, on asyncio only (Temporal's workflows are)."""
    marked = pytest.mark.anyio(pytest.mark.parametrize("anyio_backend", ["asyncio"])(test))
    return needs_server(pytest.mark.slow(marked))


@contextlib.asynccontextmanager
async def _served(path: Path, tmp_path: Path, queue: str) -> AsyncIterator[Any]:
    """A dev server and a worker of this process for the scenario at ``path`` (its provider); yields the client."""
    from actors.tools import BUILTIN_TOOLS
    from runtime.config.loader import load_scenario
    from runtime.providers.factory import open_provider
    from runtime.scenarios.run import build_policies
    from runtime.temporal.activities import ActivityHost
    from runtime.temporal.bodies import DirectoryBodyStore
    from runtime.temporal.worker import build_worker, local_server

    scenario = load_scenario(str(path), tool_names=BUILTIN_TOOLS.names())
    async with local_server(DirectoryBodyStore(tmp_path / "bodies")) as client:
        async with open_provider(scenario.provider, build_policies(scenario), clock=time.time) as provider:
            host = ActivityHost({scenario.provider.kind: provider}, BUILTIN_TOOLS)
            async with build_worker(client, host, task_queue=queue):
                yield client


def _received(history: Any, name: str) -> int:
    return sum(
        1
        for e in history.events
        if e.HasField("workflow_execution_signaled_event_attributes")
        and e.workflow_execution_signaled_event_attributes.signal_name == name
    )


def _sent(history: Any) -> int:
    return sum(1 for e in history.events if e.HasField("signal_external_workflow_execution_initiated_event_attributes"))


async def _run(path: Path, tmp_path: Path, **extra: Any) -> tuple[dict[str, Any], dict[str, Any], Any, dict[str, Any]]:
    """The in-process report, the Temporal report, the flow's history, each started node's (history, result)."""
    import anyio

    from actors.tools import BUILTIN_TOOLS
    from runtime.config.loader import load_scenario
    from runtime.scenarios.run import run_scenario
    from runtime.temporal.node_host import node_workflow_id
    from runtime.temporal.workflows import FLOW_WORKFLOW

    local = (await run_scenario(load_scenario(str(path), tool_names=BUILTIN_TOOLS.names()))).report
    nodes: dict[str, Any] = {}
    async with _served(path, tmp_path, "outcomes") as client:
        arg = {"scenario_text": path.read_text(encoding="utf-8"), "scenario_label": path.name, "run_id": "r"}
        with anyio.fail_after(120):
            result = await client.execute_workflow(FLOW_WORKFLOW, arg | extra, id="flow", task_queue="outcomes")
        flow = await client.get_workflow_handle("flow").fetch_history()
        for node, figures in result["report"]["nodes"].items():
            if figures["status"] != "skipped":
                handle = client.get_workflow_handle(node_workflow_id("flow", node))
                nodes[node] = (await handle.fetch_history(), await handle.result())
    return local, result["report"], flow, nodes


@on_temporal
async def test_a_node_ends_with_its_result_and_an_emitter_spawns_without_waiting(
    tmp_path: Path, anyio_backend: str
) -> None:
    from runtime.temporal.node_end import LAST_ITEMS

    local, remote, flow, nodes = await _run(QUICKSTART, tmp_path)
    assert {n: v["status"] for n, v in remote["nodes"].items()} == {n: v["status"] for n, v in local["nodes"].items()}
    assert remote["requests"] == local["requests"] == 9
    assert set(nodes) == {"lead", "review-design", "review-tests", "survey", "summary"}
    for node, (history, result) in nodes.items():
        assert result[LAST_ITEMS][-1]["finished"]["status"] == "ok", node  # its outcome, after its last events
        assert any("event" in item for item in result[LAST_ITEMS]), node
        assert _received(history, "spawn_answer") == 0, node  # no node waits for the flow's answer
    # Only the lead signals (its spawn requests, with the events before them); every other node's items are its result.
    assert {node: _sent(history) for node, (history, _) in nodes.items() if _sent(history)} == {
        "lead": _sent(nodes["lead"][0])
    }
    assert _received(flow, "node_items") == _sent(nodes["lead"][0]) >= 1


@on_temporal
async def test_a_spawn_limit_the_children_can_reach_is_answered_by_the_flow(tmp_path: Path, anyio_backend: str) -> None:
    """With the flow continuing as new at every quiet point: nodes it told to signal end while it still runs too."""
    path = tmp_path / "limited.toml"
    text = QUICKSTART.read_text(encoding="utf-8").replace("concurrency = 4\n", "concurrency = 4\nspawn_limit = 1\n")
    path.write_text(text, encoding="utf-8")
    stored = {
        "keep_branch": True,
        "signals_path": str(tmp_path / "events.jsonl"),
        "events_db": str(tmp_path / "run.db"),
    }
    local, remote, _, nodes = await _run(path, tmp_path, history_limit=1, **stored)
    statuses = {n: v["status"] for n, v in remote["nodes"].items()}
    assert statuses == {n: v["status"] for n, v in local["nodes"].items()}
    assert statuses["review-tests"] == "skipped"  # the second spawn was refused: never spawned
    assert remote["requests"] == local["requests"]
    lead_history, _ = nodes["lead"]
    assert _received(lead_history, "spawn_answer") == 2  # one answer per request: accepted, then refused


STUCK = """
schema = "foldline.scenario/v1"
name = "terminated"
[provider]
kind = "simulated"
model = "claude-haiku-5-5"
faults = [{ kind = "slow", node = "stuck", on_request = 1, delay_s = 30 }]
[profiles.default]
system = "You answer briefly."
[[nodes]]
id = "stuck"
operation = "bounded"
instruction = "Take your time."
script = [{ text = "Done." }]
[[nodes]]
id = "after"
depends_on = ["stuck"]
operation = "bounded"
instruction = "Go on."
script = [{ text = "Went on." }]
"""


@on_temporal
async def test_a_terminated_node_workflow_is_a_failed_node(tmp_path: Path, anyio_backend: str) -> None:
    """Its end reaches the flow as its workflow's failure (before, the flow waited for a signal that never came)."""
    import anyio
    from temporalio.service import RPCError

    from runtime.temporal.node_host import node_workflow_id
    from runtime.temporal.workflows import FLOW_WORKFLOW

    path = tmp_path / "stuck.toml"
    path.write_text(STUCK, encoding="utf-8")
    async with _served(path, tmp_path, "stuck") as client:
        arg = {"scenario_text": STUCK, "scenario_label": path.name, "run_id": "r"}
        flow = await client.start_workflow(FLOW_WORKFLOW, arg, id="flow", task_queue="stuck")
        node = client.get_workflow_handle(node_workflow_id("flow", "stuck"))
        with anyio.fail_after(20):  # its workflow starts, its first attempt waits on the slow simulator
            while True:
                try:
                    await node.describe()
                    break
                except RPCError:
                    await anyio.sleep(0.1)
        await node.terminate(reason="an operator stopped it")
        with anyio.fail_after(20):
            result = await flow.result()
    statuses = {n: v["status"] for n, v in result["report"]["nodes"].items()}
    assert statuses == {"stuck": "failed", "after": "skipped"}


def _ended(result: Any = None, error: BaseException | None = None) -> Any:
    """A finished task, as a node's child workflow handle is when its done callback runs (the handle is a task)."""
    import asyncio

    async def end() -> Any:
        if error is not None:
            raise error
        return result

    loop = asyncio.new_event_loop()
    try:
        task = loop.create_task(end())
        loop.run_until_complete(asyncio.wait([task]))
        return task
    finally:
        loop.close()


def _child_failure(cause: BaseException) -> BaseException:
    from temporalio.exceptions import ChildWorkflowError

    error = ChildWorkflowError(
        "child failed",
        namespace="default",
        workflow_id="flow/n",
        run_id="r",
        workflow_type="foldline.Node",
        initiated_event_id=1,
        started_event_id=2,
        retry_state=None,
    )
    error.__cause__ = cause
    return error


def test_a_node_ends_last_items_are_read_from_its_result_or_its_failure() -> None:
    """A told node's outcome (whose ``items`` is a count) gives no items: they came by signal (a count read as
    items failed every workflow task of a flow that told a node which then ended while the flow still ran)."""
    from temporalio.exceptions import ApplicationError, TerminatedError

    from runtime.temporal.node_end import LAST_ITEMS, SIGNALLED, items_of_end

    last = [{"event": {"type": "X"}}, {"finished": {"status": "ok"}}]
    assert items_of_end(_ended({LAST_ITEMS: last})) == last
    assert items_of_end(_ended({"status": "ok", "items": 7, "rounds": 1})) is None
    signalled = ApplicationError("boom", SIGNALLED, type="ConfigError", non_retryable=True)
    assert items_of_end(_ended(error=_child_failure(signalled))) is None
    unsent = ApplicationError("boom", type="ConfigError", non_retryable=True)
    assert items_of_end(_ended(error=_child_failure(unsent))) == [
        {"finished": {"status": "failed", "error_type": "ConfigError", "message": "boom", "unrecoverable": 0}}
    ]
    [terminated] = items_of_end(_ended(error=_child_failure(TerminatedError("Terminated")))) or []
    assert terminated["finished"]["error_type"] == "TerminatedError"
