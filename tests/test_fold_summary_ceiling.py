"""A fold's summary request is measured against the ceiling like every other request.

A child cloned from a long emitter, under a small ceiling with the compaction
strategy, must fold its copy before its first request; the summary request for
the whole span would be far over the child's ceiling. It is refused (never
sent): the decision says so, no side request leaves, and the fold still lands
with a note that names why it has no summary. Written through the public
runtime (flows, profiles, signals), not the fold driver's internals.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from support import calls, read, text

from runtime import Flow, Node, Operation, PolicyRegistry, Profile, Runtime, ScriptedProvider, ScriptPolicy
from runtime.sim.clock import ManualClock
from runtime.sim.summary_policy import FoldSummaryPolicy
from runtime.values.messages import Note

CHILD_CEILING = 3_000
LEAD = Profile(system="You read and delegate.", tools=("synthetic_read", "spawn"), max_input_tokens=100_000)
CHILD = Profile(
    system="You digest what you were handed.",
    tools=("synthetic_read",),
    max_input_tokens=CHILD_CEILING,
    context_management=True,
    context_fold_target=0.5,
    context_strategy="compaction",
)


async def run_emitter_and_child() -> tuple[Any, list[Any]]:
    reads = [read(f"src/f{i:02d}.py", 2000) for i in range(12)]
    lead_script = [calls(*reads), calls(("spawn", {"node": "child"})), text("done")]
    registry = PolicyRegistry(
        {"lead": ScriptPolicy("lead", lead_script), "child": ScriptPolicy("child", [text("Digested.")])},
        default=FoldSummaryPolicy(),  # would answer the summary request, were it sent
    )
    clock = ManualClock(1_000.0)
    events: list[Any] = []
    async with Runtime(provider=ScriptedProvider(registry, clock=clock), clock=clock, monotonic=clock) as rt:
        rt.signals.add_handler(events.append, name="test")
        result = await rt.run(
            Flow(
                [
                    Node("lead", Operation("iterative", ("Read the sources, then delegate.",)), profile=LEAD),
                    Node("child", Operation("iterative", ("Digest the sources.",)), profile=CHILD, spawned_by="lead"),
                ]
            )
        )
    return result, events


@pytest.mark.anyio
async def test_a_summary_request_over_the_ceiling_is_refused_and_never_sent() -> None:
    result, events = await run_emitter_and_child()
    assert {node: outcome.status for node, outcome in result.outcomes.items()} == {"lead": "ok", "child": "ok"}
    decisions = [e.data for e in events if e.type == "ContextDecision" and e.node_id == "child"]
    summary = [d for d in decisions if d["reason"].startswith("fold summary request")]
    assert [(d["action"], d["sent"]) for d in summary] == [("refuse", False)], summary
    over = re.fullmatch(r"fold summary request: estimate (\d+) is over the ceiling (\d+)", summary[0]["reason"])
    assert over is not None and int(over[1]) > int(over[2]) == CHILD_CEILING
    # Nothing over the ceiling left: no side request at all, and every request sent was under it.
    assert not [e for e in events if e.type == "RequestSent" and e.data["intent"] == "side"]
    assert all(d["estimate_after"] <= CHILD_CEILING for d in decisions if d["sent"])
    # The fold still landed, with a note that says why it carries no summary.
    assert next(d["action"] for d in decisions if d["sent"]) == "fold"
    (note,) = [m for m in result.branches["child"].view() if isinstance(m, Note)]
    assert note.stage == "compaction" and "would exceed the ceiling" in note.text
