"""After a flow, what can be read is all there, and what only a running node needed is let go.

A run of many nodes (as ``scripts/scale.py`` runs them, through the
simulator in process) leaves every node's outcome, result, branch (record and
view, each tool result's whole output) and report figures; it leaves no branch
holding a lock, no per-request entry in the report, and the simulator keeps
the step that answered each request, not the reply. asyncio and trio.
"""

from __future__ import annotations

import pytest

from runtime import Flow, Node, Operation, PolicyRegistry, Profile, Runtime, ScriptedProvider, ScriptPolicy, ScriptStep
from runtime.values.messages import ToolResult

pytestmark = pytest.mark.anyio

ROUNDS = 3


def _script(node_id: str) -> list[ScriptStep]:
    reads = [
        ScriptStep.from_obj(
            {"tool_calls": [{"name": "synthetic_read", "arguments": {"path": f"{node_id}-{i}.md", "size": 800}}]},
            node_id,
        )
        for i in range(ROUNDS)
    ]
    return [*reads, ScriptStep.from_obj({"text": f"{node_id}: read {ROUNDS} files."}, node_id)]


async def test_a_settled_run_keeps_what_is_read_and_lets_go_of_what_only_running_needed() -> None:
    ids = [f"n{i}" for i in range(24)]
    policies = PolicyRegistry({nid: ScriptPolicy(nid, _script(nid)) for nid in ids})
    profile = Profile(system="You read files.", tools=("synthetic_read",), max_input_tokens=50_000)
    flow = Flow(
        [Node(nid, Operation("iterative", ("Read your files.",)), profile=profile) for nid in ids], concurrency=8
    )
    provider = ScriptedProvider(policies, clock=lambda: 0.0)
    async with Runtime(provider=provider, model="claude-haiku-5-5") as rt:
        result = await rt.run(flow)
        report = rt.report()
    assert result.status == "ok" and report["requests"] == 4 * len(ids)
    for nid in ids:
        outcome = result[nid]
        assert outcome.result is not None and outcome.result.answer == f"{nid}: read {ROUNDS} files."
        branch = result.branches[nid]
        assert branch.id == outcome.branch_id and not branch.busy and branch._lock is None
        results = [m for m in branch.view() if isinstance(m, ToolResult)]
        assert [len(r.output) for r in results] == [800] * ROUNDS  # every output whole, readable and renderable
        assert all(r.output_json.startswith('"') and len(r.output_json) >= 802 for r in results)
        assert report["nodes"][nid]["status"] == "ok" and report["nodes"][nid]["requests"] == 4
    assert rt._report is not None and rt._report._request_models == {} and rt._report._request_intents == {}
    answers = provider.app._scripts._answers
    assert len(answers) == 4 * len(ids) and all(isinstance(step, int) for step in answers.values())
