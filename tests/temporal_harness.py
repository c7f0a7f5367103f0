"""Processes the Temporal tests start and kill (not a test module).

``python tests/temporal_harness.py worker ADDRESS BODIES SIM_URL KEY COUNT_FILE [CRASH_AFTER]``:
a foldline worker (two activities at a time) whose ``simulated`` provider is that simulator; it writes
how many provider responses it completed to COUNT_FILE after each one and,
with CRASH_AFTER, SIGKILLs itself right after that many responses (the
response is completed at the simulator, never reported to Temporal).

``python tests/temporal_harness.py replay ADDRESS BODIES SCENARIO FALLBACK_SCENARIO SIGNALS``: run
the scenario on the server (every branch workflow continuing as new at each fold commit
it can; its events to SIGNALS; its report and every branch workflow run's history size
printed), then replay the flow's history and every run of every branch workflow against
the workflow code (Temporal's Replayer raises on any nondeterminism); meanwhile, on task queues
of their own, run the second scenario with a worker that serves no affinity slot (and with a
probe that finds a remote worker); print what was replayed, the seeds
spawned children started from, where every branch's activities were scheduled, and how
a flow the workflow cannot load failed (with a worker of this process).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


async def serve_worker(address: str, bodies: str, sim_url: str, key: str, count_file: str, crash: int) -> None:
    from actors.tools import BUILTIN_TOOLS
    from runtime.providers.anthropic import AnthropicProvider
    from runtime.temporal.activities import ActivityHost
    from runtime.temporal.bodies import open_body_store
    from runtime.temporal.worker import build_worker, connect

    done = 0

    def on_response() -> None:
        nonlocal done
        done += 1
        Path(count_file).write_text(str(done))
        if crash and done >= crash:
            os.kill(os.getpid(), signal.SIGKILL)

    provider = AnthropicProvider.create(api_key=key, base_url=sim_url, name="simulated")
    client = await connect(address, open_body_store(bodies))
    host = ActivityHost({"simulated": provider}, BUILTIN_TOOLS, on_response=on_response)
    worker = build_worker(client, host, max_activities=2)  # two at once: a second worker gets the rest
    print("ready", flush=True)
    await worker.run()


async def _runs(client: Any, workflow_id: str) -> list[Any]:
    """The history of every run of a workflow, last run first."""
    run_id, histories = None, []
    while True:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        histories.append(history)
        run_id = history.events[0].workflow_execution_started_event_attributes.continued_execution_run_id or None
        if run_id is None:
            return histories


async def _node_runs(client: Any, store: Any, flow_id: str, nodes: Any) -> list[tuple[str, Any, dict[str, Any]]]:
    """(node, history, first run's input) of every run of every node's branch workflow."""
    from runtime.temporal.node_host import node_workflow_id
    from runtime.temporal.worker import data_converter

    runs = []
    for node in nodes:
        run_id, histories = None, []
        while True:  # every run of the node's branch workflow, last first
            history = await client.get_workflow_handle(node_workflow_id(flow_id, node), run_id=run_id).fetch_history()
            histories.append(history)
            started = history.events[0].workflow_execution_started_event_attributes
            run_id = started.continued_execution_run_id or None
            if run_id is None:
                [first] = await data_converter(store).decode(started.input.payloads)
                break
        runs += [(node, history, first) for history in histories]
    return runs


def _signals_sent(node: str, history: Any) -> dict[str, Any]:
    """How many signals a run of a node's workflow sent its flow, over how many seconds of workflow time."""
    events = list(history.events)
    sent = sum(1 for e in events if e.HasField("signal_external_workflow_execution_initiated_event_attributes"))
    micros = events[-1].event_time.ToMicroseconds() - events[0].event_time.ToMicroseconds()
    return {"node": node, "signals": sent, "seconds": micros / 1e6}


async def _scheduled(store: Any, runs: list[tuple[str, Any, dict[str, Any]]]) -> dict[str, Any]:
    """Where the branch workflows' activities were scheduled, and the cache keys provider attempts carried."""
    from runtime.temporal.worker import data_converter

    queues: dict[str, list[str]] = {}
    keys: dict[str, set[str]] = {}
    node_queues: dict[str, set[str]] = {}
    for node, history, _ in runs:
        started = history.events[0].workflow_execution_started_event_attributes
        node_queues.setdefault(node, set()).add(started.task_queue.name)
        for event in history.events:
            if event.HasField("activity_task_scheduled_event_attributes"):
                scheduled = event.activity_task_scheduled_event_attributes
                queues.setdefault(node, []).append(scheduled.task_queue.name)
                if scheduled.activity_type.name == "foldline.provider_attempt":
                    [arg] = await data_converter(store).decode(scheduled.input.payloads)
                    keys.setdefault(node, set()).add(arg["cache_key"])
    return {
        "queues": queues,
        "cache_keys": {node: sorted(k) for node, k in keys.items()},
        "node_queues": {node: sorted(q) for node, q in node_queues.items()},
    }


def _flow_activities(history: Any) -> list[list[str]]:
    """[type, task queue, how it ended] of every activity a flow run scheduled."""
    out: dict[int, list[str]] = {}
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            scheduled = event.activity_task_scheduled_event_attributes
            out[event.event_id] = [scheduled.activity_type.name, scheduled.task_queue.name, "open"]
        for name in ("completed", "failed", "timed_out"):
            field = f"activity_task_{name}_event_attributes"
            if event.HasField(field):
                out[getattr(event, field).scheduled_event_id][2] = name
    return list(out.values())


async def _run_flow(client: Any, scenario_path: str, flow_id: str, queue: str, slots: Any, **extra: Any) -> Any:
    from actors.tools import BUILTIN_TOOLS
    from runtime.config.loader import load_scenario
    from runtime.providers.factory import open_provider
    from runtime.scenarios.run import build_policies
    from runtime.temporal.activities import ActivityHost
    from runtime.temporal.worker import build_worker
    from runtime.temporal.workflows import FLOW_WORKFLOW

    scenario = load_scenario(scenario_path, tool_names=BUILTIN_TOOLS.names())
    arg = {
        "scenario_text": Path(scenario_path).read_text(),
        "scenario_label": scenario_path,
        "run_id": "run-" + flow_id,
    }
    async with open_provider(scenario.provider, build_policies(scenario), clock=time.time) as provider:
        host = ActivityHost({scenario.provider.kind: provider}, BUILTIN_TOOLS)
        async with build_worker(client, host, task_queue=queue, slots=slots):
            return await client.execute_workflow(FLOW_WORKFLOW, arg | extra, id=flow_id, task_queue=queue)


async def _remote_probe(address: str, client: Any, store: Any, scenario_path: str) -> dict[str, Any]:
    """The flow's worker serves no slot; a worker serving only the flow's slot starts once the flow's probe waits there
    (the history says when), so the probe, not the flow's own worker, finds the queue served."""
    from actors.tools import BUILTIN_TOOLS
    from runtime.config.loader import load_scenario
    from runtime.providers.factory import open_provider
    from runtime.scenarios.run import build_policies
    from runtime.temporal.activities import ActivityHost
    from runtime.temporal.flow_host import affinity_queue
    from runtime.temporal.worker import build_worker, connect
    from runtime.temporal.workflows import FLOW_WORKFLOW

    flow_id, queue = "remote-1", "remote"
    slot = int(affinity_queue(queue, flow_id).rpartition("@")[2])
    scenario = load_scenario(scenario_path, tool_names=BUILTIN_TOOLS.names())
    arg = {"scenario_text": Path(scenario_path).read_text(), "scenario_label": scenario_path, "run_id": "run-remote"}
    async with open_provider(scenario.provider, build_policies(scenario), clock=time.time) as provider:
        host = ActivityHost({scenario.provider.kind: provider}, BUILTIN_TOOLS)
        async with build_worker(client, host, task_queue=queue, slots=[]):
            handle = await client.start_workflow(
                FLOW_WORKFLOW, arg | {"affinity_wait_s": 300}, id=flow_id, task_queue=queue
            )
            while not any(a[0] == "foldline.serves" for a in _flow_activities(await handle.fetch_history())):
                await anyio.sleep(0.1)
            other = await connect(address, store)  # another worker (one client registers one worker a queue)
            async with build_worker(other, host, task_queue=queue, slots=[slot]):
                result = await handle.result()
    runs = await _node_runs(client, store, flow_id, result["report"]["nodes"])
    return {
        "status": result["report"]["status"],
        "queue": affinity_queue(queue, flow_id),
        "flow_activities": _flow_activities(await handle.fetch_history()),
    } | await _scheduled(store, runs)


async def replay(address: str, bodies: str, scenario_path: str, fallback_path: str, signals: str) -> None:
    from temporalio.worker import Replayer

    from runtime.temporal.bodies import DirectoryBodyStore
    from runtime.temporal.flow_host import affinity_queue
    from runtime.temporal.histories import branch_histories
    from runtime.temporal.worker import connect, data_converter, sandbox_runner
    from runtime.temporal.workflows import FlowWorkflow, NodeWorkflow

    store = DirectoryBodyStore(bodies)
    client = await connect(address, store)
    # Every branch workflow continues as new at each fold commit it can; the workers serve every affinity slot.
    # The other flows (each on a task queue of its own) run meanwhile: the fold flow mostly waits on the server.
    Path(signals).write_text("", encoding="utf-8")
    others: dict[str, Any] = {}
    async with anyio.create_task_group() as group:
        group.start_soon(_other_flows, address, client, store, bodies, fallback_path, others)
        result = await _run_flow(
            client, scenario_path, "replay-1", "replay", None, history_limit=1, flow_history_limit=40,
            signals_path=signals,
        )  # fmt: skip
    branches = await branch_histories(client, "replay-1", result["report"])
    runs = await _node_runs(client, store, "replay-1", result["report"]["nodes"])
    flow_runs = await _runs(client, "replay-1")
    histories = flow_runs + [h for _, h, _ in runs]
    replayer = Replayer(
        workflows=[FlowWorkflow, NodeWorkflow], workflow_runner=sandbox_runner(), data_converter=data_converter(store)
    )

    async def each() -> Any:
        for history in histories:
            yield history

    await replayer.replay_workflows(each())  # raises the first replay failure
    seeds = [first["seed"] for node, _, first in runs if first.get("seed") is not None]
    seeds = list({json.dumps(seed, sort_keys=True): seed for seed in seeds}.values())
    rows = [row for seed in seeds for row in seed["record"]]
    out = {
        "report": result["report"],
        "branch_histories": branches,
        "replayed_histories": len(histories),
        "flow_runs": [len(list(h.events)) for h in flow_runs[::-1]],
        "replayed_events": sum(len(list(h.events)) for h in histories),
        "node_signals": [_signals_sent(node, history) for node, history, _ in runs],
        "flow_signals": sum(
            1 for h in flow_runs for e in h.events if e.HasField("workflow_execution_signaled_event_attributes")
        ),
        "seeds": len(seeds),
        "seed_rows": rows,
        "seed_bytes": max(len(json.dumps(seed)) for seed in seeds),
        "seed_bodies_in_store": all(store.get(row[2]) for row in rows),
        "seed_bodies_bytes": sum(len(store.get(row[2])) for row in rows),
        "affinity_queue": affinity_queue("replay", "replay-1"),
        "branch_ids": {node: value.get("branch_id") for node, value in result["report"]["nodes"].items()},
        "roots": {node: first["root_branch"] for node, _, first in runs},
        "flow_activities": [a for h in flow_runs for a in _flow_activities(h)],
    } | await _scheduled(store, runs)
    out |= others  # fallback_*, remote, bad
    print(json.dumps(out), flush=True)


async def _other_flows(
    address: str, client: Any, store: Any, bodies: str, fallback_path: str, out: dict[str, Any]
) -> None:
    """The fallback flow, the remote probe and the bad flow, one after the other (into ``out``)."""
    from runtime.temporal.flow_host import affinity_queue

    # A worker serving no affinity slot: the flow's probe waits 1 s on its slot, then its nodes run on the shared queue.
    fallback = await _run_flow(client, fallback_path, "fallback-1", "fallback", [], affinity_wait_s=1)
    fallback_runs = await _node_runs(client, store, "fallback-1", fallback["report"]["nodes"])
    fallback_flow = await client.get_workflow_handle("fallback-1").fetch_history()
    out["fallback_status"] = fallback["report"]["status"]
    out["fallback_queue"] = affinity_queue("fallback", "fallback-1")
    out["fallback"] = await _scheduled(store, fallback_runs)
    out["fallback_flow_activities"] = _flow_activities(fallback_flow)
    out["remote"] = await _remote_probe(address, client, store, fallback_path)
    out["bad"] = await submit_bad(address, bodies)


async def submit_bad(address: str, bodies: str) -> str:
    """Submit a scenario the workflow cannot load (with a worker of this process); how it failed."""
    from runtime.temporal.command import EngineOptions, FlowFailed, submit

    args = EngineOptions(scenario="bad.toml", temporal=address, bodies=bodies, task_queue="bad")
    try:
        await submit(args, 'schema = "foldline.scenario/v0"', "bad.toml", {})
    except FlowFailed as exc:
        return str(exc)
    raise AssertionError("the bad flow did not fail")


if __name__ == "__main__":
    if sys.argv[1] == "replay":
        anyio.run(replay, *sys.argv[2:7])
    else:
        crash_after = int(sys.argv[7]) if len(sys.argv) > 7 else 0
        anyio.run(serve_worker, *sys.argv[2:7], crash_after)
    sys.stdout.flush()
    os._exit(0)
