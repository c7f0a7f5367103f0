"""Measure what running on Temporal costs per request, and how large a flow's history grows.

Usage: ``python scripts/temporal_overhead.py SCENARIO [--repeat N] [--history-limit EVENTS] [--phases]`` (needs
the ``temporal`` extra). Runs the scenario in process and on a Temporal dev
server started from the installed binary (worker in this process, the same
simulated provider), each ``N`` times (default 5) after one warm-up run; prints
the median wall time of each, the overhead per request (Temporal's median minus
the in-process median, over the requests), the same for this process's CPU
time (the worker, the provider and the simulator: steadier than wall time on a
loaded machine; the server's own CPU is not in it), the load average, what a run costs
Temporal (workflow tasks, activity tasks, local activities, signals, over every
workflow of the last run, and per request), and the flow workflow's history size
(events, bytes, largest event: bodies are digests there) and every branch
workflow's (each run, when a branch continued as new at its folds).

``--phases``: where the last Temporal run's time went, per workflow, from its
history's timestamps: workflow tasks waiting for a worker (dispatch) and being
worked (local activities run inside them), and each activity type's wait for a
worker (0 when dispatched eagerly) and run, as count x mean = total ms.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from actors.tools import BUILTIN_TOOLS  # noqa: E402
from runtime.config.loader import load_scenario  # noqa: E402
from runtime.logs import configure_logging  # noqa: E402
from runtime.providers.factory import open_provider  # noqa: E402
from runtime.scenarios.run import build_policies, run_scenario  # noqa: E402
from runtime.temporal.activities import ActivityHost  # noqa: E402
from runtime.temporal.bodies import DirectoryBodyStore  # noqa: E402
from runtime.temporal.histories import branch_histories, history_size, largest_branch_history  # noqa: E402
from runtime.temporal.worker import build_worker, local_server  # noqa: E402
from runtime.temporal.workflows import FLOW_WORKFLOW  # noqa: E402


def _ms(event: Any) -> float:
    return float(event.event_time.ToMicroseconds()) / 1000


def phases(history: Any) -> dict[str, list[float]]:
    """Milliseconds per phase of one workflow run (see the module docstring), each phase's list of durations."""
    by_id = {e.event_id: e for e in history.events}
    out: dict[str, list[float]] = collections.defaultdict(list)
    scheduled = started = 0.0
    for e in history.events:
        if e.HasField("workflow_task_scheduled_event_attributes"):
            scheduled = _ms(e)
        elif e.HasField("workflow_task_started_event_attributes"):
            started = _ms(e)
            out["workflow task: dispatch"].append(started - scheduled)
        elif e.HasField("workflow_task_completed_event_attributes"):
            out["workflow task: work"].append(_ms(e) - started)
        elif e.HasField("activity_task_started_event_attributes"):
            sched = by_id[e.activity_task_started_event_attributes.scheduled_event_id]
            name = sched.activity_task_scheduled_event_attributes.activity_type.name
            out[f"{name}: dispatch"].append(_ms(e) - _ms(sched))
        elif e.HasField("activity_task_completed_event_attributes"):
            done = e.activity_task_completed_event_attributes
            name = by_id[done.scheduled_event_id].activity_task_scheduled_event_attributes.activity_type.name
            out[f"{name}: run"].append(_ms(e) - _ms(by_id[done.started_event_id]))
    return out


COUNTED = {
    "workflow tasks": "workflow_task_completed_event_attributes",
    "activity tasks": "activity_task_scheduled_event_attributes",
    "local activities": "marker_recorded_event_attributes",
    "signals received": "workflow_execution_signaled_event_attributes",
    "signals sent": "signal_external_workflow_execution_initiated_event_attributes",
    "timers": "timer_started_event_attributes",
    "children started": "start_child_workflow_execution_initiated_event_attributes",
}
"""What a run costs Temporal, by the history event that records each."""


def costs(history: Any) -> collections.Counter[str]:
    """How many of each :data:`COUNTED` item one workflow run's history holds."""
    out: collections.Counter[str] = collections.Counter()
    for e in history.events:
        for name, field in COUNTED.items():
            if e.HasField(field):
                out[name] += 1
    return out


async def workflow_phases(
    client: Any, flow_id: str, nodes: list[str]
) -> tuple[dict[str, Any], collections.Counter[str]]:
    """The phases of the flow's last run and of each node workflow's last run, and their costs summed."""
    from runtime.temporal.node_host import node_workflow_id

    ids = {"flow": flow_id} | {node: node_workflow_id(flow_id, node) for node in nodes}
    spent: dict[str, Any] = {}
    total: collections.Counter[str] = collections.Counter()
    for name, wid in ids.items():
        history = await client.get_workflow_handle(wid).fetch_history()
        spent[name] = phases(history)
        total += costs(history)
    return spent, total


async def measure(path: str, repeat: int, history_limit: int | None, eager: bool) -> dict[str, Any]:
    scenario = load_scenario(path, tool_names=BUILTIN_TOOLS.names())
    text = Path(path).read_text(encoding="utf-8")
    local: list[float] = []
    local_cpu: list[float] = []
    requests = 0
    for n in range(repeat + 1):
        start, cpu = time.perf_counter(), time.process_time()
        report = (await run_scenario(scenario)).report
        if n:
            local.append(time.perf_counter() - start)
            local_cpu.append(time.process_time() - cpu)
        requests = int(report["requests"])
    remote: list[float] = []
    remote_cpu: list[float] = []
    history: dict[str, int] = {}
    branches: dict[str, Any] = {}
    spent: dict[str, Any] = {}
    cost: collections.Counter[str] = collections.Counter()
    with tempfile.TemporaryDirectory() as bodies:
        async with local_server(DirectoryBodyStore(bodies)) as client:
            async with open_provider(scenario.provider, build_policies(scenario), clock=time.time) as provider:
                host = ActivityHost({scenario.provider.kind: provider}, BUILTIN_TOOLS)
                async with build_worker(client, host, task_queue="overhead"):
                    for n in range(repeat + 1):
                        arg: dict[str, Any] = {"scenario_text": text, "scenario_label": path, "run_id": f"run-o{n}"}
                        if history_limit is not None:
                            arg["history_limit"] = history_limit
                        start, cpu = time.perf_counter(), time.process_time()
                        result = await client.execute_workflow(
                            FLOW_WORKFLOW, arg, id=f"overhead-{n}", task_queue="overhead", request_eager_start=eager
                        )
                        if n:
                            remote.append(time.perf_counter() - start)
                            remote_cpu.append(time.process_time() - cpu)
                        history = await history_size(client, f"overhead-{n}")
                        branches = await branch_histories(client, f"overhead-{n}", result["report"])
                        spent, cost = await workflow_phases(client, f"overhead-{n}", list(branches))
    return {
        "requests": requests,
        "local_s": statistics.median(local),
        "local_cpu_s": statistics.median(local_cpu),
        "temporal_cpu_s": statistics.median(remote_cpu),
        "temporal_s": statistics.median(remote),
        "cost": cost,
        "history": history,
        "branches": branches,
        "phases": spent,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--history-limit", type=int, help="continue a branch as new at its folds past this many events")
    parser.add_argument("--phases", action="store_true", help="where the last Temporal run's time went, per workflow")
    parser.add_argument("--no-eager", action="store_true", help="start the flow without eager workflow start")
    args = parser.parse_args()
    configure_logging(level="error", fmt="console", stream=sys.stderr)
    r = anyio.run(measure, args.scenario, args.repeat, args.history_limit, not args.no_eager)
    per = (r["temporal_s"] - r["local_s"]) / r["requests"] * 1000
    h = r["history"]
    print(f"{args.scenario}: {r['requests']} requests (provider attempts; tool calls are activities too)")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"medians of {args.repeat} runs: in process: {r['local_s']:.3f} s   on Temporal: {r['temporal_s']:.3f} s   "
        f"overhead: {per:.1f} ms/request   (load average {load})"
    )
    n = r["requests"]
    cpu = (r["temporal_cpu_s"] - r["local_cpu_s"]) / n * 1000
    print(
        f"this process's CPU (worker, provider, simulator; not the server's): in process {r['local_cpu_s']:.3f} s, "
        f"on Temporal {r['temporal_cpu_s']:.3f} s: {cpu:.1f} ms/request more"
    )
    print("per run (per request): " + ", ".join(f"{k} {v} ({v / n:.1f})" for k, v in r["cost"].items()))
    print(
        f"flow workflow history: {h['events']} events, {h['bytes']} bytes, largest event {h['largest_event_bytes']} B"
    )
    print(largest_branch_history(r["branches"]).removeprefix("temporal: "))
    for node, runs in r["branches"].items():
        sizes = ", ".join(f"{run['events']} events/{run['bytes']:,} B" for run in runs)
        print(f"  branch {node}: {len(runs)} run(s): {sizes}")
    if args.phases:
        for name, spent in r["phases"].items():
            cells = ", ".join(f"{k} {len(v)}x{sum(v) / len(v):.1f}={sum(v):.0f}" for k, v in spent.items())
            print(f"phases of {name} (ms): {cells}")
    sys.stdout.flush()
    os._exit(0)  # the SDK's native threads can abort the interpreter at exit (temporalio/sdk-python#300)


if __name__ == "__main__":
    main()
