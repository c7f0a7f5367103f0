"""The flow workflow's scheduler: each node's branch in a child workflow of its own.

It keeps :mod:`runtime.flow`'s rules and events, with a node's run being a
``foldline.Node`` child workflow (:mod:`runtime.temporal.node_host`) instead
of a task on a shared branch: dependencies (a node starts when its
dependencies finish; a dependent of a failed or skipped node is skipped), the
concurrency limit (a workflow-side limiter held while a node runs), the spawn
limit and the declared children (checked here, for the whole flow, when an
emitter asks), and the children an emitter never spawned (skipped when it
finishes). The events a node publishes reach the flow's bus through the
``node_items`` signal, in order; the flow numbers them (``seq``), so a
node's ``NodeFinished`` follows every event of its own. A node's result
carries its final calibration evidence; a node starts with its dependencies'
(:func:`runtime.model_calibration.shared_evidence`), as in process.

Only called from inside a workflow; asyncio only, as every Temporal workflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import attrs
from temporalio import workflow

from actors.tools import BUILTIN_TOOLS
from runtime.config.loader import loads_scenario
from runtime.flow import Flow, Node
from runtime.ids import CountingIds
from runtime.model_calibration import CalibrationBook, shared_evidence
from runtime.pricing import PricingTable
from runtime.report import ReportBuilder
from runtime.scenario_run import build_flow
from runtime.temporal.flow_host import AFFINITY_SLOTS, EventPump, affinity_queue
from runtime.temporal.node_host import ANSWER_SIGNAL, NODE_WORKFLOW, node_workflow_id
from signals.bus import Gap, SignalBus
from signals.envelope import Event
from signals.events import ChildSpawned, NodeFailed, NodeFinished, NodeSkipped, NodeStarted, RunFinished, RunStarted


@attrs.frozen
class Forwarded:
    """An event a node workflow published, published again on the flow's bus (which numbers it)."""

    TYPE: str
    data: Mapping[str, Any]

    def to_data(self) -> Mapping[str, Any]:
        return self.data


@attrs.define(eq=False)
class FlowScheduler:
    """Runs a flow's nodes as child workflows; see the module docstring."""

    flow: Flow
    bus: SignalBus
    node_arg: Mapping[str, Any]
    """What every node workflow is given (the scenario, the run id, the provider); the node's own keys are added."""
    ids: CountingIds
    inbox: list[dict[str, Any]]
    """``node_items`` signals as they arrive (the workflow's signal handler appends)."""
    nodes: dict[str, Node] = attrs.field(init=False)
    outcomes: dict[str, str] = attrs.field(factory=dict)
    done: dict[str, anyio.Event] = attrs.field(init=False)
    spawned: set[str] = attrs.field(factory=set)
    branch_ids: dict[str, str] = attrs.field(factory=dict)
    roots: dict[str, str] = attrs.field(factory=dict)
    """Each node's root branch: its own for a top-level node, its emitter's root for a spawned child."""
    received: dict[str, int] = attrs.field(factory=dict)
    unrecoverable: int = 0
    branches: dict[str, Any] = attrs.field(factory=dict)
    """Each run node's final branch as digests, in the order the nodes started (only when the run is stored)."""
    evidence: dict[str, CalibrationBook] = attrs.field(factory=dict)
    """Each finished node's final calibration evidence (from its workflow's result)."""
    limiter: anyio.CapacityLimiter = attrs.field(init=False)
    running: anyio.abc.TaskGroup | None = None
    closing: bool = False

    def __attrs_post_init__(self) -> None:
        self.nodes = {n.id: n for n in self.flow.nodes}
        self.done = {nid: anyio.Event() for nid in self.nodes}
        self.limiter = anyio.CapacityLimiter(self.flow.concurrency)

    async def run(self) -> dict[str, str]:
        """Run every node; return each node's status."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.drain)
            async with anyio.create_task_group() as running:
                self.running = running
                for node in self.nodes.values():
                    if node.spawned_by is None:
                        running.start_soon(self.run_top_level, node)
            self.closing = True
        return dict(self.outcomes)

    async def drain(self) -> None:
        """Handle what nodes sent, in arrival order: publish their events, answer their spawn requests."""
        while True:
            await workflow.wait_condition(lambda: bool(self.inbox) or self.closing)
            if not self.inbox:
                return
            batch = self.inbox.pop(0)
            node_id = str(batch["node"])
            for item in batch["items"]:
                if "event" in item:
                    e = item["event"]
                    await self.bus.publish(
                        Forwarded(e["type"], e["data"]),
                        node_id=e["node_id"],
                        branch_id=e["branch_id"],
                        request_id=e["request_id"],
                    )
                else:
                    await self.spawn(self.nodes[node_id], item["spawn"])
                self.received[node_id] = self.received.get(node_id, 0) + 1

    async def publish(self, event: object, node_id: str, branch_id: str | None = None) -> None:
        await self.bus.publish(event, node_id=node_id, branch_id=branch_id)

    async def finish(self, node_id: str, status: str) -> None:
        self.outcomes[node_id] = status
        self.done[node_id].set()
        for node in self.nodes.values():
            if node.spawned_by == node_id and node.id not in self.spawned and node.id not in self.outcomes:
                reason = f"never spawned: emitter {node_id!r} finished without spawning it"
                await self.publish(NodeSkipped(reason=reason), node.id)
                await self.finish(node.id, "skipped")

    async def run_top_level(self, node: Node) -> None:
        for dep in node.depends_on:
            await self.done[dep].wait()
        blocked = [d for d in node.depends_on if self.outcomes[d] != "ok"]
        if blocked:
            await self.publish(NodeSkipped(reason=f"dependency {blocked[0]!r} {self.outcomes[blocked[0]]}"), node.id)
            await self.finish(node.id, "skipped")
            return
        await self.supervise(node, None)

    async def supervise(self, node: Node, seed: Mapping[str, Any] | None) -> None:
        """Run one node as a child workflow; its failure is its own, as in process."""
        branch_id = self.ids.branch_id()
        self.branch_ids[node.id] = branch_id
        root = self.roots[node.spawned_by] if node.spawned_by is not None else branch_id
        self.roots[node.id] = root
        async with self.limiter:
            await self.publish(NodeStarted(operation=node.operation.kind, parent=node.spawned_by), node.id, branch_id)
            arg = dict(self.node_arg) | {"node": node.id, "branch_id": branch_id, "seed": seed, "root_branch": root}
            # The calibration evidence its dependencies finished with (all finished: deterministic).
            arg["evidence"] = shared_evidence(self.evidence[d] for d in node.depends_on if d in self.evidence).to_json()
            handle = await workflow.start_child_workflow(
                NODE_WORKFLOW,
                arg,
                id=node_workflow_id(workflow.info().workflow_id, node.id),
                task_queue=workflow.info().task_queue,
                result_type=dict,
            )
            outcome: dict[str, Any] = await handle
            sent = int(outcome["items"])
            await workflow.wait_condition(lambda: self.received.get(node.id, 0) >= sent)
            self.unrecoverable += int(outcome["unrecoverable"])
            if "calibrations" in outcome:
                self.evidence[node.id] = CalibrationBook.from_json(outcome["calibrations"])
            if "branch" in outcome:
                self.branches[node.id] = outcome["branch"] | {"branch_id": branch_id}
            if outcome["status"] != "ok":
                failed = NodeFailed(error_type=outcome["error_type"], message=outcome["message"])
                await self.publish(failed, node.id, branch_id)
                await self.finish(node.id, "failed")
                return
        finished = NodeFinished(rounds=outcome["rounds"], answer_chars=outcome["answer_chars"])
        await self.publish(finished, node.id, branch_id)
        await self.finish(node.id, "ok")

    def refusal(self, emitter: Node, child_id: str) -> str | None:
        """Why the flow refuses ``emitter``'s spawn of ``child_id`` (None: it does not); the in-process texts."""
        child = self.nodes.get(child_id)
        if child is None or child.spawned_by != emitter.id:
            mine = sorted(n.id for n in self.nodes.values() if n.spawned_by == emitter.id)
            return f"node {emitter.id!r} cannot spawn {child_id!r}: its declared children are {mine or 'none'}"
        if child_id in self.spawned:
            return f"child {child_id!r} was already spawned"
        if len(self.spawned) >= self.flow.spawn_limit:
            return f"spawn limit reached ({self.flow.spawn_limit} children per run)"
        return None

    async def spawn(self, emitter: Node, request: Mapping[str, Any]) -> None:
        """Answer an emitter's spawn request; on yes, start the child from the seed it sent (digests only)."""
        child_id = str(request["child"])
        refused = self.refusal(emitter, child_id)
        answer: dict[str, Any] = {"ref": request["ref"]}
        if refused is not None:
            answer["refused"] = refused
        else:
            child = self.nodes[child_id]
            seed = request.get("seed") if child.inherit == "view" else None
            self.spawned.add(child_id)
            view_length = len(seed["view"]) if seed is not None else 0
            spawned = ChildSpawned(child=child_id, inherit=child.inherit, view_length=view_length)
            await self.publish(spawned, emitter.id, self.branch_ids[emitter.id])
            assert self.running is not None
            self.running.start_soon(self.supervise, child, seed)
            answer["ok"] = f"spawned child node {child_id!r}"
        # To the emitter's current run (it may have continued as new since it started).
        target = node_workflow_id(workflow.info().workflow_id, emitter.id)
        await workflow.get_external_workflow_handle(target).signal(ANSWER_SIGNAL, answer)


async def run_flow_workflow(arg: Mapping[str, Any], inbox: list[dict[str, Any]]) -> dict[str, Any]:
    """Run the scenario ``arg`` describes inside the current (flow) workflow; return its report.

    The run's frame is :class:`runtime.runtime.Runtime`'s: ``RunStarted``, every
    node, the recoverability audit (each node workflow audits its own branch),
    ``RunFinished``; the report is rebuilt from the events as in process.
    """
    scenario = loads_scenario(arg["scenario_text"], path_label=arg["scenario_label"], tool_names=BUILTIN_TOOLS.names())
    spec = scenario.provider if not arg.get("provider") else scenario.provider.with_kind(arg["provider"])
    flow = build_flow(scenario)
    info = workflow.info()
    sinks = (arg.get("signals_path"), arg.get("events_db"))
    pump = EventPump(*sinks) if any(sinks) else None
    report = ReportBuilder(PricingTable.load_default(), spec.model_config.name)

    def feed(item: Event | Gap) -> None:
        if isinstance(item, Gap):
            raise TypeError("the report's blocking subscription lost events")
        report.feed(item)

    keys = ["scenario_text", "scenario_label", "provider", "run_id", "history_limit", "affinity_wait_s", "heartbeat_s"]
    keys.append("keep_branch")
    node_arg = {k: arg.get(k) for k in keys}
    slots = arg.get("affinity_slots", AFFINITY_SLOTS)
    node_arg["affinity_queue"] = affinity_queue(info.task_queue, info.workflow_id, slots) if slots else None
    async with anyio.create_task_group() as tg:
        if pump is not None:
            tg.start_soon(pump.run)
        async with SignalBus(str(arg["run_id"]), lambda: workflow.now().timestamp()) as bus:
            bus.add_handler(feed, policy="block", maxsize=4096, name="report")
            if pump is not None:
                bus.add_handler(pump.take, policy="block", maxsize=4096, name="temporal-sink")
            scheduler = FlowScheduler(flow, bus, node_arg, CountingIds(prefix=info.workflow_id), inbox)
            await bus.publish(RunStarted(scenario=scenario.name, provider=spec.kind, nodes=[n.id for n in flow.nodes]))
            statuses = await scheduler.run()
            status = "ok" if all(s == "ok" for s in statuses.values()) else "failed"
            await bus.publish(RunFinished(status=status, nodes=statuses, bytes_unrecoverable=scheduler.unrecoverable))
        if pump is not None:
            pump.closing = True
    written = pump.written if pump is not None else 0
    return {"report": report.to_json(), "events_written": written, "final_branches": scheduler.branches}
