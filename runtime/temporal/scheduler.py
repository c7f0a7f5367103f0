"""The flow workflow's scheduler: each node's branch in a child workflow of its own.

It keeps :mod:`runtime.flows.flow`'s rules (:mod:`runtime.flows.rules`, shared by both) and events, with a node's run being a
``foldline.Node`` child workflow (:mod:`runtime.temporal.node_host`) instead
of a task on a shared branch: dependencies (a node starts when its
dependencies finish; a dependent of a failed or skipped node is skipped), the
concurrency limit (a workflow-side limiter held while a node runs), the spawn
limit and the declared children (checked here when an emitter asks, or by the
emitter when the limit cannot be reached), and the children an emitter never spawned (skipped when it
finishes). The events a node publishes reach the flow's bus through the
``node_items`` signal and, last, its workflow's result, in order; the flow numbers them (``seq``), so a
node's ``NodeFinished`` follows every event of its own. A node's result
carries its final calibration evidence; a node starts with its dependencies'
(:func:`runtime.measuring.model_calibration.shared_evidence`), as in process.

Only called from inside a workflow; asyncio only, as every Temporal workflow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import anyio
import attrs
from temporalio import workflow
from temporalio.exceptions import FailureError
from temporalio.workflow import ParentClosePolicy

from runtime.flows.flow import Flow, Node
from runtime.flows.rules import blocked_by, never_spawned, spawn_accepted, spawn_refusal
from runtime.measuring.model_calibration import CalibrationBook, shared_evidence
from runtime.report import ReportBuilder
from runtime.scenarios.run import build_flow
from runtime.temporal.flow_carry import report_state, restore_report
from runtime.temporal.flow_host import AFFINITY_SLOTS, AFFINITY_WAIT, EventPump, affinity_queue, node_queue
from runtime.temporal.node_end import OUTCOME_BY_RESULT, REPORT_SIGNAL, items_of_end
from runtime.temporal.node_host import ANSWER_SIGNAL, NODE_WORKFLOW, SPAWNS_BY_EMITTER, node_workflow_id
from runtime.temporal.node_items import checked_batch
from runtime.temporal.parsed import default_pricing, scenario_of
from runtime.temporal.settle import shielded
from runtime.values.ids import CountingIds
from signals.bus import Gap, SignalBus
from signals.envelope import Event
from signals.events import ChildSpawned, NodeFailed, NodeFinished, NodeSkipped, NodeStarted, RunFinished, RunStarted

OUTCOME_PATCH = "foldline-node-outcome-as-result"
"""The :func:`workflow.patched` id of nodes' last items coming as their workflow's result (flows started before it
replay with every outcome by signal)."""

SPAWN_PATCH = "foldline-emitter-applies-spawn-rule"
"""The :func:`workflow.patched` id of emitters applying the spawn rule themselves when the limit cannot be reached
(flows started before it replay with every spawn answered by the flow)."""


@attrs.frozen
class Forwarded:
    """An event a node workflow published, published again on the flow's bus (which numbers it)."""

    TYPE: str
    data: Mapping[str, Any]

    def to_data(self) -> Mapping[str, Any]:
        return self.data


CARRIED = (
    "outcomes",
    "spawned",
    "branch_ids",
    "roots",
    "unrecoverable",
    "branches",
    "started",
    "seeds",
    "finished",
    "evidence",
    "queue",
    "results",
)
"""The scheduler's state a continued flow run takes over (see :meth:`FlowScheduler.carried`)."""


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
    requests: Callable[[dict[str, Any]], None]
    """Where a node's request records go (the event pump's store writes; nowhere when the run is not stored)."""
    quiet: Callable[[], bool] = lambda: True
    """Whether every published event has reached the report and the sinks (a cut waits for it)."""
    limit: int | None = None
    """Continue as new at the first quiet point once the history holds this many events (None: never)."""
    nodes: dict[str, Node] = attrs.field(init=False)
    outcomes: dict[str, str] = attrs.field(factory=dict)
    done: dict[str, anyio.Event] = attrs.field(init=False)
    spawned: list[str] = attrs.field(factory=list)
    branch_ids: dict[str, str] = attrs.field(factory=dict)
    roots: dict[str, str] = attrs.field(factory=dict)
    """Each node's root branch: its own for a top-level node, its emitter's root for a spawned child."""
    lost: Callable[[int], None] = attrs.field(default=lambda _: None, kw_only=True)
    """Told of provider-attempt tries lost with their worker (the report counts them)."""
    unrecoverable: int = 0
    branches: dict[str, Any] = attrs.field(factory=dict)
    """Each run node's final branch as digests, in the order the nodes started (only when the run is stored)."""
    started: list[str] = attrs.field(factory=list)
    """Nodes whose child workflow has started and whose outcome has not been handled."""
    seeds: dict[str, Any] = attrs.field(factory=dict)
    """A spawned child's seed (digests), kept until its workflow starts."""
    finished: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    """Outcomes the nodes sent (their last item), not handled yet."""
    steps: int = 0
    """Scheduling steps under way (a node starting, a node's end being published): no cut while any is."""
    evidence: dict[str, str] = attrs.field(factory=dict)
    """Each finished node's final calibration evidence (:meth:`CalibrationBook.to_json`, from its outcome)."""
    results: dict[str, list[Any]] = attrs.field(factory=dict)
    """Each finished node's ``[status, reason, digest of its result text in the body store, seed of its completed
    view (digests; only when a node inherits from it)]``: what its dependents read (:mod:`runtime.flows.start`)."""
    by_result: list[str] | None = None
    """Nodes this run started whose last items (events, outcome) come as their workflow's result, until told
    otherwise (:meth:`report_by_signal`); None: every node sends them by signal (a run from before results)."""
    emitters_decide: bool = False
    """Whether an emitter applies the spawn rule itself (:data:`~runtime.temporal.node_host.SPAWNS_BY_EMITTER`)."""
    queue: str | None = None
    """The task queue the node workflows run on (:func:`runtime.temporal.flow_host.node_queue`; None: the flow's)."""
    limiter: anyio.CapacityLimiter = attrs.field(init=False)
    running: anyio.abc.TaskGroup | None = None
    closing: bool = False
    cut: bool = False

    def __attrs_post_init__(self) -> None:
        self.nodes = {n.id: n for n in self.flow.nodes}
        self.done = {nid: anyio.Event() for nid in self.nodes}
        self.limiter = anyio.CapacityLimiter(self.flow.concurrency)

    def carried(self) -> dict[str, Any]:
        """The state the next run takes over when this one continues as new (JSON-ready)."""
        return {name: getattr(self, name) for name in CARRIED}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Take over a previous run's state (what :meth:`carried` gave)."""
        for name in CARRIED:
            setattr(self, name, state[name])
        for node_id in self.outcomes:
            self.done[node_id].set()

    async def run(self) -> dict[str, str] | None:
        """Run every node; return each node's status (None: the run was cut to continue as new)."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.drain)
            async with anyio.create_task_group() as running:
                self.running = running
                for node in self.nodes.values():
                    if node.id in self.outcomes:
                        continue
                    if node.id in self.started:  # running in its workflow since an earlier run of the flow
                        running.start_soon(self.resume_running, node)
                    elif node.spawned_by is None:
                        running.start_soon(self.run_top_level, node)
                    elif node.id in self.spawned:  # spawned, waiting for a slot when the earlier run was cut
                        running.start_soon(self.supervise, node)
            self.closing = True
        return None if self.cut else dict(self.outcomes)

    def can_cut(self) -> bool:
        """A quiet point past the limit: nothing received unhandled, no step under way, every event delivered."""
        if self.limit is None or self.inbox or self.steps or self.running is None or not self.quiet():
            return False
        return workflow.info().get_current_history_length() >= self.limit

    async def drain(self) -> None:
        """Handle what nodes sent, in arrival order: publish their events, answer their spawn requests.

        At a quiet point past the history limit it cuts the run (the flow then continues as new).
        """
        while True:
            await workflow.wait_condition(lambda: bool(self.inbox) or self.closing or self.can_cut())
            if not self.inbox:
                if not self.closing and await self.report_by_signal():
                    continue  # look again: a node may have ended meanwhile
                if not self.closing:
                    assert self.running is not None
                    self.cut = True
                    self.running.cancel_scope.cancel()
                return
            node_id, items = checked_batch(self.inbox.pop(0), self.nodes)
            for item in items:
                if "request" in item:
                    self.requests(item["request"])
                elif "event" in item:
                    e = item["event"]
                    await self.bus.publish(
                        Forwarded(e["type"], e["data"]),
                        node_id=e["node_id"],
                        branch_id=e["branch_id"],
                        request_id=e["request_id"],
                    )
                elif "finished" in item:
                    self.finished[node_id] = item["finished"]
                elif "lost" in item:
                    self.lost(int(item["lost"]))
                else:
                    await self.spawn(self.nodes[node_id], item["spawn"])

    async def publish(self, event: object, node_id: str, branch_id: str | None = None) -> None:
        await self.bus.publish(event, node_id=node_id, branch_id=branch_id)

    async def finish(
        self, node_id: str, status: str, reason: str | None = None, digest: str | None = None, seed: Any = None
    ) -> None:
        self.outcomes[node_id] = status
        self.results[node_id] = [status, reason, digest, seed]
        self.done[node_id].set()
        for child_id, why in never_spawned(self.nodes.values(), node_id, self.spawned, self.outcomes):
            await self.publish(NodeSkipped(reason=why), child_id)
            await self.finish(child_id, "skipped", why)

    async def run_top_level(self, node: Node) -> None:
        for dep in node.depends_on:
            await self.done[dep].wait()
        reason = blocked_by(node, self.outcomes)
        if reason is not None:
            self.steps += 1
            await self.publish(NodeSkipped(reason=reason), node.id)
            await self.finish(node.id, "skipped", reason)
            self.steps -= 1
            return
        source = node.inherits_from
        if source is not None and node.id not in self.seeds:  # a clone of its dependency's completed view
            self.seeds[node.id] = self.results[source][3]
        await self.supervise(node)

    async def supervise(self, node: Node) -> None:
        """Run one node as a child workflow (a spawned child from its seed); its failure is its own, as in process."""
        if node.id not in self.branch_ids:  # kept by an earlier run that was cut while the node waited for a slot
            self.branch_ids[node.id] = self.ids.branch_id()
        branch_id = self.branch_ids[node.id]
        parent = node.spawned_by or node.inherits_from  # a clone shares its source's root (its cache key)
        root = self.roots[parent] if parent is not None else branch_id
        self.roots[node.id] = root
        async with self.limiter:
            self.steps += 1
            await self.publish(NodeStarted(operation=node.operation.kind, parent=node.spawned_by), node.id, branch_id)
            seed = self.seeds.get(node.id)
            arg = dict(self.node_arg) | {"node": node.id, "branch_id": branch_id, "seed": seed, "root_branch": root}
            # The calibration evidence its dependencies finished with (all finished: deterministic).
            books = (CalibrationBook.from_json(self.evidence[d]) for d in node.depends_on if d in self.evidence)
            arg["evidence"] = shared_evidence(books).to_json()
            if node.spawned_by is None and node.reads:  # its dependencies' results, for its first request
                arg["inputs"] = [[d, *self.results[d][:3]] for d in node.reads]
            if self.by_result is not None:
                arg["outcome"] = OUTCOME_BY_RESULT
            if self.emitters_decide:
                arg["spawns"] = SPAWNS_BY_EMITTER
            start = workflow.start_child_workflow(
                NODE_WORKFLOW,
                arg,
                id=node_workflow_id(workflow.info().workflow_id, node.id),
                task_queue=self.queue or workflow.info().task_queue,
                parent_close_policy=ParentClosePolicy.ABANDON,  # it outlives a run of the flow that continues as new
            )
            handle = await shielded(start)
            if self.by_result is not None:
                self.by_result.append(node.id)
                handle.add_done_callback(lambda done: self.take_result(node.id, done))
            self.started.append(node.id)
            self.seeds.pop(node.id, None)
            self.steps -= 1
            outcome = await self.outcome_of(node)
            if outcome["status"] != "ok":
                failed = NodeFailed(error_type=outcome["error_type"], message=outcome["message"])
                await self.publish(failed, node.id, branch_id)
                await self.finish(node.id, "failed", outcome["message"])
                self.steps -= 1
                return
        await self.finished_ok(node, outcome)

    async def resume_running(self, node: Node) -> None:
        """A node whose workflow an earlier run of the flow started: hold its slot until it ends, then publish it."""
        async with self.limiter:
            outcome = await self.outcome_of(node)
            if outcome["status"] != "ok":
                failed = NodeFailed(error_type=outcome["error_type"], message=outcome["message"])
                await self.publish(failed, node.id, self.branch_ids[node.id])
                await self.finish(node.id, "failed", outcome["message"])
                self.steps -= 1
                return
        await self.finished_ok(node, outcome)

    def take_result(self, node_id: str, handle: Any) -> None:
        """A node workflow ended (its handle's callback): its last items join the inbox, after every batch it
        signalled before (a signal is applied before the child's end in the same workflow task).

        A node told to send them by signal (:meth:`report_by_signal`) gives none here
        (:func:`~runtime.temporal.node_end.items_of_end`).
        """
        if self.by_result is not None and node_id in self.by_result:
            self.by_result.remove(node_id)
        items = items_of_end(handle)
        if items is not None:
            self.inbox.append({"node": node_id, "items": items})

    async def report_by_signal(self) -> bool:
        """Before the run continues as new: tell each node whose last items would come as its result to send
        them by signal (the next run is not its parent); return whether any was told.

        A node told so sends them by signal (the signal is in its history before it ends: an end completed
        meanwhile is refused by the server and worked again with the signal); a node that ended first fails
        the signal, and this waits for its result (it comes to this run, which may not cut before it has it).
        """
        if not self.by_result:
            return False
        async with anyio.create_task_group() as tg:
            for node_id in list(self.by_result):
                tg.start_soon(self._tell, node_id)
        return True

    async def _tell(self, node_id: str) -> None:
        assert self.by_result is not None
        target = node_workflow_id(workflow.info().workflow_id, node_id)
        try:
            await shielded(workflow.get_external_workflow_handle(target).signal(REPORT_SIGNAL))
        except FailureError:  # it has ended: its result is on its way to this run
            await workflow.wait_condition(lambda: self.by_result is None or node_id not in self.by_result)
            return
        if node_id in self.by_result:  # its result (no items: they go by signal) may have come already
            self.by_result.remove(node_id)

    async def outcome_of(self, node: Node) -> dict[str, Any]:
        """The outcome the node's workflow sent as its last item; from here on a step is under way."""
        await workflow.wait_condition(lambda: node.id in self.finished)
        self.steps += 1
        outcome = self.finished.pop(node.id)
        self.started.remove(node.id)
        self.unrecoverable += int(outcome["unrecoverable"])
        if "calibrations" in outcome:
            self.evidence[node.id] = outcome["calibrations"]
        if "branch" in outcome:
            self.branches[node.id] = outcome["branch"] | {"branch_id": self.branch_ids[node.id]}
        return outcome

    async def finished_ok(self, node: Node, outcome: Mapping[str, Any]) -> None:
        finished = NodeFinished(rounds=outcome["rounds"], answer_chars=outcome["answer_chars"])
        await self.publish(finished, node.id, self.branch_ids[node.id])
        await self.finish(node.id, "ok", None, outcome.get("result_digest"), outcome.get("view_seed"))
        self.steps -= 1

    async def spawn(self, emitter: Node, request: Mapping[str, Any]) -> None:
        """Answer an emitter's spawn request; on yes, start the child from the seed it sent (digests only)."""
        child_id = str(request["child"])
        refused = spawn_refusal(self.nodes, emitter.id, child_id, self.spawned, self.flow.spawn_limit)
        if refused is not None and request.get("decided"):  # the emitter applied the same rule: a bug
            raise RuntimeError(f"node {emitter.id!r} spawned {child_id!r}, which the flow refuses: {refused}")
        answer: dict[str, Any] = {"ref": request["ref"]}
        if refused is not None:
            answer["refused"] = refused
        else:
            child = self.nodes[child_id]
            seed = request.get("seed") if child.inherit == "view" else None
            self.spawned.append(child_id)
            if seed is not None:
                self.seeds[child_id] = seed
            view_length = len(seed["view"]) if seed is not None else 0
            spawned = ChildSpawned(child=child_id, inherit=child.inherit, view_length=view_length)
            await self.publish(spawned, emitter.id, self.branch_ids[emitter.id])
            assert self.running is not None
            self.running.start_soon(self.supervise, child)
            answer["ok"] = spawn_accepted(child_id)
        if request.get("decided"):  # the emitter does not wait for an answer
            return
        # To the emitter's current run (it may have continued as new since it started).
        target = node_workflow_id(workflow.info().workflow_id, emitter.id)
        await shielded(workflow.get_external_workflow_handle(target).signal(ANSWER_SIGNAL, answer))


@attrs.define(eq=False)
class ReportFeed:
    """The report's subscription to the flow's bus (it remembers the last seq it took: a cut waits for the last)."""

    report: ReportBuilder
    taken_seq: int = 0

    def take(self, item: Event | Gap) -> None:
        if isinstance(item, Gap):
            raise TypeError("the report's blocking subscription lost events")
        self.report.feed(item)
        self.taken_seq = item.seq

    def lost(self, tries: int) -> None:
        """Provider-attempt tries lost with their worker: sent, maybe billed, so counted as attempts."""
        self.report.attempts += tries


def _node_arg(arg: Mapping[str, Any]) -> dict[str, Any]:
    """What every node workflow of the flow is given (the node's own keys are added when it starts)."""
    keys = ["scenario_text", "scenario_label", "provider", "run_id", "history_limit", "heartbeat_s", "keep_branch"]
    return {k: arg.get(k) for k in keys}


async def nodes_queue(arg: Mapping[str, Any]) -> str:
    """The queue the flow's node workflows run on: its affinity queue (``QUEUE@n``) when a worker serves it."""
    info = workflow.info()
    slots = arg.get("affinity_slots", AFFINITY_SLOTS)
    affinity = affinity_queue(info.task_queue, info.workflow_id, slots) if slots else None
    wait = timedelta(seconds=float(arg["affinity_wait_s"])) if arg.get("affinity_wait_s") else AFFINITY_WAIT
    return await node_queue(affinity, wait)


async def run_flow_workflow(arg: Mapping[str, Any], inbox: list[dict[str, Any]]) -> dict[str, Any]:
    """Run the scenario ``arg`` describes inside the current (flow) workflow; return its report.

    The run's frame is :class:`runtime.runtime.Runtime`'s: ``RunStarted``, every
    node, the recoverability audit (each node workflow audits its own branch),
    ``RunFinished``; the report is rebuilt from the events as in process.

    Past ``flow_history_limit`` history events (else ``history_limit``), the
    flow continues as new at its next quiet point (every event delivered, no
    scheduling step under way): the next run takes over the event numbering,
    the report's counters, the scheduler's state and the sinks' count
    (``carry``), and the nodes' workflows (abandoned by the closing run, which
    they outlive) go on signalling the flow's workflow id, now the new run.
    """
    scenario = scenario_of(arg["scenario_text"], arg["scenario_label"])
    spec = scenario.provider if not arg.get("provider") else scenario.provider.with_kind(arg["provider"])
    flow = build_flow(scenario)
    info = workflow.info()
    carry: Mapping[str, Any] = arg.get("carry") or {}
    continued = int(carry.get("continued", 0))
    sinks = (arg.get("signals_path"), arg.get("events_db"))
    pump = EventPump(*sinks, written=int(carry.get("written", 0))) if any(sinks) else None
    feed = ReportFeed(ReportBuilder(default_pricing(), spec.model_config.name))
    if carry:
        restore_report(feed.report, carry["report"])
    limit = arg.get("flow_history_limit") or arg.get("history_limit")
    ids = CountingIds(prefix=info.workflow_id if not continued else f"{info.workflow_id}.c{continued}")
    first_seq = int(carry.get("next_seq", 1))
    async with anyio.create_task_group() as tg:
        if pump is not None:
            tg.start_soon(pump.run)
        async with SignalBus(str(arg["run_id"]), lambda: workflow.now().timestamp(), first_seq=first_seq) as bus:
            bus.add_handler(feed.take, policy="block", maxsize=4096, name="report")
            if pump is not None:
                bus.add_handler(pump.take, policy="block", maxsize=4096, name="temporal-sink")

            def quiet() -> bool:
                last = bus.next_seq - 1
                return feed.taken_seq >= last and (pump is None or pump.idle(last))

            requests = pump.take_request if pump is not None else lambda _: None
            scheduler = FlowScheduler(flow, bus, _node_arg(arg), ids, inbox, requests, quiet, limit, lost=feed.lost)
            if workflow.patched(OUTCOME_PATCH):  # a history from before it replays as it ran
                scheduler.by_result = []
            if workflow.patched(SPAWN_PATCH):
                declared = sum(1 for n in flow.nodes if n.spawned_by is not None)
                scheduler.emitters_decide = declared <= flow.spawn_limit
            if carry:
                scheduler.restore(carry["scheduler"])
            else:
                nodes = [n.id for n in flow.nodes]
                await bus.publish(RunStarted(scenario=scenario.name, provider=spec.kind, nodes=nodes))
                scheduler.queue = await nodes_queue(arg)
            statuses = await scheduler.run()
            if statuses is not None:
                status = "ok" if all(s == "ok" for s in statuses.values()) else "failed"
                finished = RunFinished(status=status, nodes=statuses, bytes_unrecoverable=scheduler.unrecoverable)
                await bus.publish(finished)
            next_seq = bus.next_seq
        if pump is not None:
            pump.closing = True
    written = pump.written if pump is not None else 0
    if statuses is None:  # cut at a quiet point: every event is delivered and written
        state = {"report": report_state(feed.report), "scheduler": scheduler.carried(), "written": written}
        workflow.continue_as_new(dict(arg) | {"carry": state | {"next_seq": next_seq, "continued": continued + 1}})
    return {"report": feed.report.to_json(), "events_written": written, "final_branches": scheduler.branches}
