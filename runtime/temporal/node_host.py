"""One node's branch inside its own child workflow (``foldline.Node``).

The flow workflow (:mod:`runtime.temporal.flow_host`) starts one child
workflow per node it runs; the child's single thread of execution is the
branch lock: the node's operation runs there, on a branch no other workflow
holds, with the same :func:`actors.operations.run_operation`, send pipeline
and pure core as in process. Its I/O edges are activities
(:mod:`runtime.temporal.flow_host`: provider attempts, tool calls).

What the child tells its flow goes through one ordered channel (the
``node_items`` signal to the parent, in batches): the node's events, which
the flow numbers on its bus (``seq`` is the flow's), and its spawn requests.
Its last items (its last events and its outcome) go in the child workflow's
result when the flow asked for that, else by signal (:mod:`runtime.temporal.node_end`).
A spawn request carries the clone of the emitter's view as a seed of message
digests (:mod:`runtime.temporal.seed`), the bodies put in the body store
first; the flow answers with the ``spawn_answer`` signal. Because a spawn
request follows every event the node published before it, the events of the
emitter come before its ``ChildSpawned`` as in process.

Only called from inside a workflow; asyncio only, as every Temporal workflow.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

import anyio
import attrs
from temporalio import workflow
from temporalio.common import RetryPolicy

from actors.branch import Branch, Change
from actors.env import RunEnv
from actors.inherit import set_up_inherited
from actors.operations import Operation, OperationResult, run_operation
from actors.request_record import RequestRecord
from actors.shape import offered_tools
from actors.tools import BUILTIN_TOOLS
from runtime.flows.flow import Flow, Node, SpawnRefused
from runtime.flows.rules import spawn_accepted, spawn_refusal
from runtime.flows.start import (
    completed_view_length,
    dependency_results,
    instruction_pending,
    result_text,
    with_inputs,
)
from runtime.measuring.measure import TokenCounter
from runtime.measuring.model_calibration import CalibrationBook
from runtime.runtime import audit_recoverability
from runtime.scenarios.run import build_flow
from runtime.store.codec import dumps_value
from runtime.temporal.flow_host import EVENT_BATCH, ActivityProvider, ActivityRoute, activity_registry
from runtime.temporal.node_end import LAST_ITEMS, OUTCOME_BY_RESULT
from runtime.temporal.parsed import default_pricing, scenario_of
from runtime.temporal.seed import branch_from_seed, seed_digests, seed_of
from runtime.temporal.settle import shielded
from runtime.values.canonical import sha256_hex
from runtime.values.ids import CountingIds, use_ids
from signals.bus import Gap, SignalBus
from signals.envelope import Event

NODE_WORKFLOW = "foldline.Node"
ITEMS_SIGNAL = "node_items"
ANSWER_SIGNAL = "spawn_answer"
SPAWNS_BY_EMITTER = "emitter"
"""A node input's ``spawns`` value: the node applies the flow's spawn rule itself and does not wait for an answer
(the flow gives it when its spawn limit cannot be reached by its declared children: the rule's other checks are
the emitter's own, declared children and which of them it spawned)."""
FLUSH_EVERY = timedelta(seconds=1)
"""How long a node holds its events before it sends them to the flow (unless a spawn request or its end is due)."""
BODY_RETRIES = RetryPolicy(
    initial_interval=timedelta(seconds=0.5), maximum_interval=timedelta(seconds=8), maximum_attempts=5
)


def node_workflow_id(flow_workflow_id: str, node_id: str) -> str:
    """The child workflow id of a node (node ids are unique in a flow and each node runs once)."""
    return f"{flow_workflow_id}/{node_id}"


def flow_handle() -> workflow.ExternalWorkflowHandle[Any]:
    """The node's flow, by workflow id: its current run (the flow may have continued as new since it started the node)."""
    parent = workflow.info().parent
    assert parent is not None, "a node workflow runs as a child of its flow"
    return workflow.get_external_workflow_handle(parent.workflow_id)


async def send_outcome(node_id: str, outcome: Mapping[str, Any]) -> None:
    """Tell the flow how the node ended: the node's last item, after every event it sent."""
    await flow_handle().signal(ITEMS_SIGNAL, {"node": node_id, "items": [{"finished": dict(outcome)}]})


@attrs.define(eq=False)
class Outbox:
    """What a node sends its flow, in order: its events and spawn requests, as ``node_items`` signal batches."""

    node_id: str
    pending: list[dict[str, Any]] = attrs.field(factory=list)
    taken_seq: int = 0
    """The local seq of the last event the bus handed over (a spawn request waits for every earlier event)."""
    sent: int = 0
    """Items sent to the flow, over every run of this node workflow (a continued run carries the count)."""
    closing: bool = False
    urgent: bool = False
    """Send what is pending now: a spawn request waits for its answer."""
    ended: bool = False
    """Closing at the node's end (not at a cut to continue as new, which sends everything first)."""
    by_signal: Callable[[], bool] = lambda: True
    """Whether the node's last items go by signal (else they stay pending, for its workflow's result)."""

    def take(self, item: Event | Gap) -> None:
        if isinstance(item, Gap):
            raise TypeError("the node's blocking subscription lost events")
        self.taken_seq = item.seq
        self.pending.append(
            {
                "event": {
                    "type": item.type,
                    "data": item.to_json()["data"],
                    "node_id": item.node_id,
                    "branch_id": item.branch_id,
                    "request_id": item.request_id,
                }
            }
        )

    def lost(self, tries: int) -> None:
        """Tries of a provider attempt lost with their worker: the flow counts them as attempts."""
        self.pending.append({"lost": tries})

    def due(self) -> bool:
        return self.closing or self.urgent or len(self.pending) >= EVENT_BATCH

    async def run(self) -> None:
        """Send pending items in batches: at once when due, else once they have waited :data:`FLUSH_EVERY`.

        Each signal costs the node a workflow task (its completion is an event
        of the node's history) and the flow one more; holding items up to the
        interval sends a node's events of a burst of quick requests in one
        signal, and a node's last events with its outcome (in its workflow's result when the flow asked for that).

        A flush sends what was pending when it began; what the node publishes
        while a signal is on its way waits for the next interval (sending it
        as well would chain one signal per workflow task for as long as the
        node keeps publishing, which is what a busy node does).
        """
        handle = flow_handle()
        while True:
            await workflow.wait_condition(lambda: bool(self.pending) or self.closing)
            if not self.due():
                with contextlib.suppress(TimeoutError):  # the interval passed: send what is there
                    await workflow.wait_condition(self.due, timeout=FLUSH_EVERY)
            if not self.pending or (self.ended and not self.by_signal()):
                return  # nothing to send, or the rest goes in the workflow's result
            self.urgent = False
            items, self.pending = self.pending, []
            for start in range(0, len(items), EVENT_BATCH):
                batch = items[start : start + EVENT_BATCH]
                self.sent += len(batch)
                await shielded(handle.signal(ITEMS_SIGNAL, {"node": self.node_id, "items": batch}))


@attrs.define(eq=False)
class RequestTap:
    """The node's branch journal when the run is stored: each request record goes to the flow, in the outbox.

    The flow writes it into the store's ``requests`` table through the same
    activity as the events (once per request id), so ``foldline replay``
    verifies a Temporal run's requests as a local run's. The rest of the
    branch (record, view, state, ledger) is stored whole when the flow ends.
    """

    outbox: Outbox

    def branch_created(self, branch: Branch) -> None:
        return None

    def changed(self, branch: Branch, changes: Sequence[Change]) -> None:
        for change in changes:
            if isinstance(change, RequestRecord):
                record = dumps_value(change, f"request {change.request_id}")
                self.outbox.pending.append({"request": {"branch_id": branch.id, "record": record}})


@attrs.define(eq=False)
class NodeHost:
    """A node workflow's state: its outbox, the spawn answers it waits for, the bodies it has stored."""

    outbox: Outbox | None = None
    route: ActivityRoute | None = None
    answers: dict[int, dict[str, Any]] = attrs.field(factory=dict)
    asked: int = 0
    stored: set[str] = attrs.field(factory=set)
    by_result: bool = False
    """The flow asked for the node's last items in its workflow's result (:data:`OUTCOME_BY_RESULT`)."""
    told: bool = False
    """The flow said (:data:`REPORT_SIGNAL`) that they go by signal after all."""
    spawn_rule: Callable[[str, list[str]], str | None] | None = None
    """Why the flow refuses a spawn of this node's (``runtime.flows.rules.spawn_refusal``), when the node applies it
    itself (:data:`SPAWNS_BY_EMITTER`); None: the flow answers each request."""
    spawned: list[str] = attrs.field(factory=list)
    """The children this node spawned by its own rule."""

    def restore(self, arg: Mapping[str, Any], flow: Flow, node_id: str) -> None:
        """Take over what the previous run of this node workflow carried (:meth:`carried`), and the flow's asks."""
        carry = arg.get("carry") or {}
        self.asked, self.stored = int(carry.get("asked", 0)), set(carry.get("stored", ()))
        self.by_result = not carry.get("by_signal", arg.get("outcome") != OUTCOME_BY_RESULT)
        self.spawned = list(carry.get("spawned", ()))
        if arg.get("spawns") == SPAWNS_BY_EMITTER:
            nodes = {n.id: n for n in flow.nodes}
            self.spawn_rule = lambda child, spawned: spawn_refusal(nodes, node_id, child, spawned, flow.spawn_limit)

    def carried(self) -> dict[str, Any]:
        """What the node's next run takes over when it continues as new (besides its branch and its outbox's count)."""
        carry = {"asked": self.asked, "stored": sorted(self.stored), "by_signal": self.by_signal}
        return carry | {"spawned": self.spawned}

    @property
    def by_signal(self) -> bool:
        """Whether the node's last items go to the flow by signal (else in its workflow's result)."""
        return self.told or not self.by_result

    def answer(self, arg: Mapping[str, Any]) -> None:
        self.answers[int(arg["ref"])] = dict(arg)

    async def spawn(self, bus: SignalBus, branch: Branch, inherits_view: bool, child_id: str) -> str:
        """Ask the flow to spawn ``child_id`` from this node's view (as digests); return its answer or raise."""
        outbox = self.outbox
        assert outbox is not None
        last = bus.next_seq - 1
        await workflow.wait_condition(lambda: outbox.taken_seq >= last)  # every earlier event goes first
        request: dict[str, Any] = {"child": child_id, "ref": self.asked + 1}
        if self.spawn_rule is not None:  # the flow's rule, applied here: no answer to wait for
            refused = self.spawn_rule(child_id, self.spawned)
            if refused is not None:
                raise SpawnRefused(refused)
            request["decided"] = True
        if inherits_view:
            seed, bodies = seed_of(branch.clone(upto=completed_view_length(branch), cache=True))
            await _put_bodies(self, bodies)
            request["seed"] = seed
        self.asked += 1
        outbox.pending.append({"spawn": request})
        outbox.urgent = True
        if self.spawn_rule is not None:
            self.spawned.append(child_id)
            return spawn_accepted(child_id)
        ref = self.asked
        await workflow.wait_condition(lambda: ref in self.answers)
        answer = self.answers.pop(ref)
        if "refused" in answer:
            raise SpawnRefused(answer["refused"])
        return str(answer["ok"])


class ContinueCut(BaseException):
    """Raised out of the node's bus where the node continues as new (caught by the node workflow, never seen elsewhere)."""


@attrs.define(eq=False)
class ContinuePoint:
    """Where a long-running branch continues as new: at a fold commit, once its history is long enough.

    The cut is the first main response asking for tool calls after a fold
    commit, once the history holds ``limit`` events (a side summary reply
    never asks for tools): the response is in the branch,
    its calls not run yet, the one point the operation resumes from exactly
    (``run_operation(resume=True)`` runs just those calls, then sends on).
    ``limit`` None: never.
    """

    limit: int | None
    folded: bool = False

    def cut_after(self, event: Event) -> bool:
        if event.type == "FoldCommitted":
            self.folded = True
            return False
        if self.limit is None or not self.folded or event.type != "ResponseReceived":
            return False
        if event.data.get("stop_reason") != "tool_use":
            return False
        return workflow.info().get_current_history_length() >= self.limit


@attrs.define(eq=False)
class NodeBus(SignalBus):
    """The node's bus: a signal bus that stops the operation at its :class:`ContinuePoint`."""

    point: ContinuePoint | None = attrs.field(default=None, kw_only=True)

    async def publish(
        self, event: Any, *, branch_id: str | None = None, node_id: str | None = None, request_id: str | None = None
    ) -> Event:
        envelope = await super().publish(event, branch_id=branch_id, node_id=node_id, request_id=request_id)
        if self.point is not None and self.point.cut_after(envelope):
            raise ContinueCut
        return envelope


async def _put_bodies(host: NodeHost, bodies: Mapping[str, str]) -> None:
    """Put the bodies this node has not stored yet in the body store (by digest)."""
    fresh = {d: b for d, b in bodies.items() if d not in host.stored}
    if fresh:
        assert host.route is not None
        await host.route.local("foldline.put_bodies", {"bodies": fresh}, BODY_RETRIES)
        host.stored.update(fresh)


async def _inputs(route: ActivityRoute, inputs: list[list[Any]]) -> dict[str, tuple[str, str | None, str | None]]:
    """Each dependency's ``(status, reason, result text)`` from the flow's ``[node, status, reason, digest]``
    entries: a result's text comes from the body store (no history event carries it)."""
    digests = sorted({digest for *_, digest in inputs if digest is not None})
    bodies = await route.local("foldline.get_bodies", {"digests": digests}, BODY_RETRIES) if digests else {}
    return {
        node: (status, reason, None if digest is None else bodies[digest]) for node, status, reason, digest in inputs
    }


async def _operation(
    arg: Mapping[str, Any], node: Node, branch: Branch, env: RunEnv, route: ActivityRoute
) -> Operation:
    """The node's operation, with its dependencies' results after its first instruction while that is to come."""
    if not arg.get("inputs") or not instruction_pending(branch, arg.get("resume") is not None):
        return node.operation
    results = dependency_results(node.reads, await _inputs(route, arg["inputs"]))
    return await with_inputs(branch, node.operation, node.profile, results, env)


async def _finished(host: NodeHost, branch: Branch, result: OperationResult, inherited: bool) -> dict[str, Any]:
    """An ok outcome: its result text in the body store by digest (what dependents read), and, when a node
    inherits from it, the seed of its completed view (bodies stored first)."""
    outcome: dict[str, Any] = {"status": "ok", "rounds": result.rounds, "answer_chars": len(result.answer)}
    text = result_text(result)
    outcome["result_digest"] = sha256_hex(text)
    await _put_bodies(host, {outcome["result_digest"]: text})
    if inherited:
        seed, bodies = seed_of(branch.clone(upto=completed_view_length(branch), cache=True))
        await _put_bodies(host, bodies)
        outcome["view_seed"] = seed
    return outcome


async def _fetch(route: ActivityRoute, seed: Mapping[str, Any], branch_id: str) -> Branch:
    arg = {"digests": seed_digests(seed)}
    bodies = await route.local("foldline.get_bodies", arg, BODY_RETRIES)
    return branch_from_seed(seed, bodies, branch_id)


async def _branch(
    arg: Mapping[str, Any], node: Node, emitter: Node | None, registry: Any, route: ActivityRoute
) -> Branch:
    """The node's branch: carried over (a continued run), fresh from its profile, or its emitter's view (a seed),
    set up as :func:`runtime.flows.start.inherited_branch` sets up the local engine's (:mod:`actors.inherit`)."""
    if arg.get("resume") is not None:
        return await _fetch(route, arg["resume"], arg["branch_id"])
    profile = node.profile
    setup = Branch.create(system=profile.system, tools=registry.specs(profile.tools), branch_id=arg["branch_id"])
    if arg.get("seed") is None:
        return setup
    seed = arg["seed"]
    if profile.inherited_setup == "own":  # its own stable segment: the emitter's cache evidence does not apply
        seed = {**seed, "ledger": None}
    branch = await _fetch(route, seed, arg["branch_id"])
    listed = offered_tools(branch, emitter.profile) if emitter is not None else branch.tools
    system = setup.system.text if setup.system else None
    set_up_inherited(branch, profile, listed=listed, system=system, tools=setup.tools)
    return branch


def route_of(arg: Mapping[str, Any]) -> ActivityRoute:
    """How this node's activities run (its root branch as the cache key)."""
    route = ActivityRoute(str(arg.get("root_branch") or arg["branch_id"]))
    if arg.get("heartbeat_s"):
        route.heartbeat = timedelta(seconds=float(arg["heartbeat_s"]))
    return route


def _env(arg: Mapping[str, Any], bus: SignalBus, ids: CountingIds, registry: Any, route: ActivityRoute) -> RunEnv:
    scenario = scenario_of(arg["scenario_text"], arg["scenario_label"])
    spec = scenario.provider if not arg.get("provider") else scenario.provider.with_kind(arg["provider"])
    return RunEnv(
        run_id=str(arg["run_id"]),
        bus=bus,
        provider=ActivityProvider.for_kind(spec.kind, spec.max_retries, route),
        model=spec.model_config,
        pricing=default_pricing(),
        counter=TokenCounter(),
        registry=registry,
        clock=lambda: workflow.now().timestamp(),
        monotonic=workflow.time,
        process_id=str(arg["run_id"]),
        ids=ids,
        jitter=workflow.random().random,
    )


async def run_node_workflow(host: NodeHost, arg: Mapping[str, Any]) -> dict[str, Any]:
    """Run one node of the flow ``arg`` names inside the current (child) workflow; return its outcome.

    A run cut at its :class:`ContinuePoint` flushes its events, puts its
    branch's bodies in the body store and continues as new with the branch as
    digests; the new run resumes the operation where the cut left it.
    """
    scenario = scenario_of(arg["scenario_text"], arg["scenario_label"])
    flow = build_flow(scenario)
    nodes = {n.id: n for n in flow.nodes}
    node = nodes[arg["node"]]
    children = {n.id: n.inherit == "view" and n.branch is None for n in nodes.values() if n.spawned_by == node.id}
    carry = arg.get("carry") or {}
    host.restore(arg, flow, node.id)
    continued = int(carry.get("continued", 0))
    workflow_id = workflow.info().workflow_id
    ids = CountingIds(prefix=workflow_id if not continued else f"{workflow_id}.c{continued}")
    host.outbox = outbox = Outbox(node.id, sent=int(carry.get("sent", 0)), by_signal=lambda: host.by_signal)
    host.route = route = route_of(arg)
    route.on_lost = outbox.lost
    registry = activity_registry(BUILTIN_TOOLS, route)
    outcome: dict[str, Any] | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.run)
        point = ContinuePoint(arg.get("history_limit"))
        async with NodeBus(str(arg["run_id"]), lambda: workflow.now().timestamp(), point=point) as bus:
            bus.add_handler(outbox.take, policy="block", maxsize=4096, name="temporal-node")
            env = _env(arg, bus, ids, registry, route)
            with use_ids(ids):
                emitter = nodes.get(node.spawned_by or node.inherits_from or "")
                branch = await _branch(arg, node, emitter, registry, route)
                if arg.get("evidence"):  # its dependencies' final calibration evidence (again: no change)
                    branch.take_evidence(CalibrationBook.from_json(arg["evidence"]))
                if arg.get("keep_branch"):
                    branch.attach_journal(RequestTap(outbox))

                async def spawn(child_id: str) -> str:
                    return await host.spawn(bus, branch, children.get(child_id, False), child_id)

                try:
                    result = await run_operation(
                        branch,
                        await _operation(arg, node, branch, env, route),
                        env=env,
                        profile=node.profile,
                        node_id=node.id,
                        spawn=spawn,
                        resume=arg.get("resume") is not None,
                    )
                    inherited = any(n.inherits_from == node.id for n in nodes.values())
                    outcome = await _finished(host, branch, result, inherited)
                except ContinueCut:
                    outcome = None
                except Exception as exc:  # a node's failure is its own, as under the in-process supervisor
                    message = str(exc) or type(exc).__name__
                    outcome = {"status": "failed", "error_type": type(exc).__name__, "message": message}
        if outcome is not None:  # the node's end: its outcome goes with its last events
            outcome |= {"items": outbox.sent + len(outbox.pending), "unrecoverable": audit_recoverability([branch])}
            outcome["calibrations"] = branch.calibrations.to_json()  # its final evidence, for its dependents
            if arg.get("keep_branch"):  # the run is stored: its final branch, as digests (the bodies put first)
                snapshot, bodies = seed_of(branch)
                await _put_bodies(host, bodies)
                outcome["branch"] = snapshot
            outbox.pending.append({"finished": outcome})
            outbox.ended = True
        outbox.closing = True
    if outcome is None:
        snapshot, bodies = seed_of(branch)
        await _put_bodies(host, bodies)
        carried = host.carried() | {"sent": outbox.sent, "continued": continued + 1}
        workflow.continue_as_new(dict(arg) | {"resume": snapshot, "seed": None, "carry": carried})
    return outcome if host.by_signal else {LAST_ITEMS: outbox.pending}
