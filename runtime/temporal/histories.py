"""How large a Temporal run's histories grew: the flow workflow's runs and every branch workflow's runs.

``foldline run --engine temporal`` and ``foldline attach`` say the largest on
stderr; ``scripts/temporal_overhead.py`` measures them. Bodies are digests in
history (:mod:`runtime.temporal.bodies`), so the sizes are the engine's own.
"""

from __future__ import annotations

from typing import Any, TextIO


async def history_size(client: Any, workflow_id: str, run_id: str | None = None) -> dict[str, int]:
    """A workflow run's history: its events, its bytes, its largest event's bytes (bodies are digests there)."""
    from temporalio.api.history.v1 import History

    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    events = list(history.events)
    return {
        "events": len(events),
        "bytes": History(events=events).ByteSize(),
        "largest_event_bytes": max((e.ByteSize() for e in events), default=0),
    }


async def run_histories(client: Any, workflow_id: str) -> list[dict[str, int]]:
    """The history size of every run of a workflow, first run first (a run that continued as new, then its next)."""
    sizes: list[dict[str, int]] = []
    run_id: str | None = None
    while True:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        sizes.append(await history_size(client, workflow_id, history.run_id))
        started = history.events[0].workflow_execution_started_event_attributes
        run_id = started.continued_execution_run_id or None
        if run_id is None:
            return sizes[::-1]


async def branch_histories(client: Any, workflow_id: str, report: dict[str, Any]) -> dict[str, list[dict[str, int]]]:
    """Each run node's branch workflow: the history sizes of its runs (more than one: it continued as new)."""
    from runtime.temporal.node_host import node_workflow_id

    ran = [node for node, value in report["nodes"].items() if value["status"] != "skipped"]
    return {node: await run_histories(client, node_workflow_id(workflow_id, node)) for node in ran}


def largest_branch_history(branches: dict[str, list[dict[str, int]]]) -> str:
    """One line naming the largest history among the branches' runs."""
    runs = [
        (h["events"], h["bytes"], node, n, len(sizes)) for node, sizes in branches.items() for n, h in enumerate(sizes)
    ]
    if not runs:
        return "temporal: no branch ran"
    events, size, node, n, total = max(runs)
    return f"temporal: largest branch history: {events} events, {size} bytes (node {node}, run {n + 1} of {total})"


def say_histories(result: dict[str, Any], err: TextIO) -> None:
    """Two lines on stderr: the flow workflow's history size, and the largest branch history."""
    h = result["history"]
    print(
        f"temporal: history of the flow workflow: {h['events']} events, {h['bytes']} bytes, "
        f"largest event {h['largest_event_bytes']} bytes (its largest run of {h['runs']})",
        file=err,
    )
    print(largest_branch_history(result["branches"]), file=err)
