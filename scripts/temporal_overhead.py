"""Measure what running on Temporal costs per request, and how large a flow's history grows.

Usage: ``python scripts/temporal_overhead.py SCENARIO [--repeat N] [--history-limit EVENTS]`` (needs the
``temporal`` extra). Runs the scenario in process and on a Temporal dev
server started from the installed binary (worker in this process, the same
simulated provider), each ``N`` times after one warm-up run; prints the best
wall time of each, the overhead per request, and the flow workflow's history
size (events, bytes, largest event: bodies are digests there) and every branch
workflow's (each run, when a branch continued as new at its folds).
"""

from __future__ import annotations

import argparse
import os
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
from runtime.scenario_run import build_policies, run_scenario  # noqa: E402
from runtime.temporal.activities import ActivityHost  # noqa: E402
from runtime.temporal.bodies import DirectoryBodyStore  # noqa: E402
from runtime.temporal.command import branch_histories, history_size, largest_branch_history  # noqa: E402
from runtime.temporal.worker import build_worker, local_server  # noqa: E402
from runtime.temporal.workflows import FLOW_WORKFLOW  # noqa: E402


async def measure(path: str, repeat: int, history_limit: int | None) -> dict[str, Any]:
    scenario = load_scenario(path, tool_names=BUILTIN_TOOLS.names())
    text = Path(path).read_text(encoding="utf-8")
    local: list[float] = []
    requests = 0
    for n in range(repeat + 1):
        start = time.perf_counter()
        report = (await run_scenario(scenario)).report
        if n:
            local.append(time.perf_counter() - start)
        requests = int(report["requests"])
    remote: list[float] = []
    history: dict[str, int] = {}
    branches: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as bodies:
        async with local_server(DirectoryBodyStore(bodies)) as client:
            async with open_provider(scenario.provider, build_policies(scenario), clock=time.time) as provider:
                host = ActivityHost({scenario.provider.kind: provider}, BUILTIN_TOOLS)
                async with build_worker(client, host, task_queue="overhead"):
                    for n in range(repeat + 1):
                        arg: dict[str, Any] = {"scenario_text": text, "scenario_label": path, "run_id": f"run-o{n}"}
                        if history_limit is not None:
                            arg["history_limit"] = history_limit
                        start = time.perf_counter()
                        result = await client.execute_workflow(
                            FLOW_WORKFLOW, arg, id=f"overhead-{n}", task_queue="overhead"
                        )
                        if n:
                            remote.append(time.perf_counter() - start)
                        history = await history_size(client, f"overhead-{n}")
                        branches = await branch_histories(client, f"overhead-{n}", result["report"])
    return {
        "requests": requests,
        "local_s": min(local),
        "temporal_s": min(remote),
        "history": history,
        "branches": branches,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--history-limit", type=int, help="continue a branch as new at its folds past this many events")
    args = parser.parse_args()
    configure_logging(level="error", fmt="console", stream=sys.stderr)
    r = anyio.run(measure, args.scenario, args.repeat, args.history_limit)
    per = (r["temporal_s"] - r["local_s"]) / r["requests"] * 1000
    h = r["history"]
    print(f"{args.scenario}: {r['requests']} requests (provider attempts; tool calls are activities too)")
    print(f"in process: {r['local_s']:.3f} s   on Temporal: {r['temporal_s']:.3f} s   overhead: {per:.1f} ms/request")
    print(
        f"flow workflow history: {h['events']} events, {h['bytes']} bytes, largest event {h['largest_event_bytes']} B"
    )
    print(largest_branch_history(r["branches"]).removeprefix("temporal: "))
    for node, runs in r["branches"].items():
        sizes = ", ".join(f"{run['events']} events/{run['bytes']:,} B" for run in runs)
        print(f"  branch {node}: {len(runs)} run(s): {sizes}")
    sys.stdout.flush()
    os._exit(0)  # the SDK's native threads can abort the interpreter at exit (temporalio/sdk-python#300)


if __name__ == "__main__":
    main()
