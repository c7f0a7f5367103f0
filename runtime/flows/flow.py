"""Flows: graphs of nodes, and the scheduler that runs them.

A :class:`Flow` is a set of :class:`Node` values with dependencies. The
scheduler starts each top-level node as soon as its dependencies finish, up to
``concurrency`` nodes at once (requests out at once are the provider's own
bound, shared by all the nodes: :mod:`runtime.contract.in_flight`). A running node may spawn children (nodes
declared with ``spawned_by``) up to ``spawn_limit`` per run; a dependent child
(``inherit="view"``) starts from a clone of its emitter's *view* as the model
last saw it (an incomplete round, whose calls have no results yet, is left
out), then runs its own setup (system text, tools, profile; by default as an
instruction after the inherited view, keeping the emitter's cached prefix:
:mod:`actors.inherit`), and its requests are measured under its own ceiling. A top-level node starts with the
calibration evidence the nodes it depends on finished with
(:func:`runtime.measuring.model_calibration.shared_evidence`), so a model one of them
calibrated is measured at its scale from the node's first request.

Results along the graph (DESIGN.md section 13): a top-level node's first
request carries, after its instruction, the results of the dependencies it
reads (``inputs``; by default all but the one it inherits from), rendered by
:mod:`runtime.flows.inputs` and put on the branch by :mod:`runtime.flows.start`.
A node with ``inherit="NODE"`` starts from a clone of that dependency's view,
set up as a spawned child is. A failed or skipped dependency skips the node
unless it has ``accept_failures``; ``when`` (a predicate over the
dependencies' outcomes) may skip it too. A profile naming a tool the registry
lacks fails that node before it starts.

Supervision: every node runs under a supervisor that catches ``Exception``
(never ``BaseException``: cancellation passes through), records the failure
as a ``NodeFailed`` event and lets the flow go on. Dependents of a failed or
skipped node are skipped with a reason. All tasks live in one task group that
the flow owns, so no task outlives its flow.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Literal

import anyio
import attrs

from runtime.config.ceilings import check_call_under_profile, check_output_limit
from runtime.config.checks import check_int, check_name
from runtime.config.graph import GraphNode, check_graph
from runtime.config.operation import Operation, OperationResult
from runtime.config.profile import Profile
from runtime.config.reads import check_reads, dependencies_read, inherited_dependency
from runtime.errors import ConfigError, FoldlineError
from runtime.flows.rules import blocked_by, never_spawned, spawn_accepted, spawn_refusal, unknown_tools
from runtime.inputs.bounds import MAX_CONCURRENCY, MAX_SPAWN_LIMIT
from runtime.logs import bound_contextvars, get_logger
from runtime.measuring.model_calibration import shared_evidence
from signals.events import (
    ChildSpawned,
    NodeFailed,
    NodeFinished,
    NodeSkipped,
    NodeStarted,
)

if TYPE_CHECKING:
    from actors.branch import Branch
    from actors.env import RunEnv

# The node engine (``actors.operations``, ``actors.inherit``, ``runtime.flows.start`` and what they import: the send
# pipeline, folding, the tool executor) is imported by the scheduler's methods, so it loads with the first node a
# flow runs: ``import runtime.runtime`` and building a flow's values do not pay for it (tests/test_import_cost.py).

log = get_logger("foldline.flow")

Status = Literal["ok", "failed", "skipped"]


# Typed converters: mypy's attrs plugin cannot type a generic ``converter=tuple``.
def _node_ids(ids: Iterable[str]) -> tuple[str, ...]:
    return tuple(ids)


def _nodes(nodes: Iterable[Node]) -> tuple[Node, ...]:
    return tuple(nodes)


def _optional_ids(ids: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if ids is None else tuple(ids)


Condition = Callable[[Mapping[str, "NodeOutcome"]], object]
"""A node's ``when``: given its dependencies' outcomes by node id, true when the node should run."""


class SpawnRefused(FoldlineError):
    """A spawn request the flow cannot honour (unknown child, limit reached, already spawned)."""


@attrs.frozen
class Node:
    """One agent operation on a branch, with its place in the graph.

    ``branch``: run on this branch (a caller's own); ``None`` gives the node a
    fresh branch, or, for a child with ``inherit="view"``, a clone of its
    emitter's view. ``inherit`` on a top-level node names the dependency whose
    view it starts from (left at ``"view"``: a fresh branch). ``inputs``: the
    dependencies whose results its first request carries (None: all but the
    inherited one; ``()``: none); ``accept_failures``: run even when a
    dependency failed or was skipped; ``when``: run only if it returns true
    given the dependencies' outcomes by node id (else skipped; raising fails
    the node). See :mod:`runtime.config.reads` for the rules.
    """

    id: str
    operation: Operation
    profile: Profile = attrs.field(factory=Profile)
    depends_on: tuple[str, ...] = attrs.field(default=(), converter=_node_ids)
    branch: Branch | None = attrs.field(default=None, eq=False)
    spawned_by: str | None = None
    inherit: str = "view"
    inputs: tuple[str, ...] | None = attrs.field(default=None, converter=_optional_ids)
    accept_failures: bool = False
    when: Condition | None = attrs.field(default=None, eq=False)

    def __attrs_post_init__(self) -> None:
        where = f"Node {self.id!r}" if isinstance(self.id, str) else "Node"
        check_name(self.id, f"{where}.id", expected='a node id made of letters, digits, "_", "." and "-"')
        if not isinstance(self.operation, Operation):
            raise ConfigError(f"{where}.operation: {self.operation!r} is not an Operation")
        if not isinstance(self.profile, Profile):
            raise ConfigError(f"{where}.profile: {self.profile!r} is not a Profile")
        check_reads(
            where,
            depends_on=self.depends_on,
            child=self.spawned_by is not None,
            inherit=self.inherit,
            inputs=self.inputs,
            accept_failures=self.accept_failures,
        )
        if self.when is not None and not callable(self.when):
            raise ConfigError(f"{where}.when: {self.when!r} is not callable; expected a predicate over the results")
        check_call_under_profile(
            self.operation.max_input_tokens, self.profile, where=f"{where}.operation.max_input_tokens"
        )
        if self.profile.model is not None:
            check_output_limit(self.profile.max_tokens, where=f"{where}.profile.max_tokens", model=self.profile.model)

    @property
    def inherits_from(self) -> str | None:
        """The dependency whose folded view this top-level node starts from (None: a fresh branch)."""
        return inherited_dependency(self.spawned_by, self.inherit)

    @property
    def reads(self) -> tuple[str, ...]:
        """The dependencies whose results its first request carries, in dependency order."""
        return dependencies_read(self.depends_on, self.inputs, self.inherits_from)


@attrs.frozen
class NodeOutcome:
    id: str
    status: Status
    reason: str | None = None
    result: OperationResult | None = None
    branch_id: str | None = None
    error: BaseException | None = attrs.field(default=None, eq=False)


@attrs.frozen
class Restored:
    """A node's state carried over from an interrupted run (see ``run_flow``).

    ``outcome`` set: the node finished before; it is not run again (its
    ``branch`` may be None, e.g. a child that was never spawned).
    ``outcome`` None: the node had started; it resumes on ``branch`` (its
    interrupted turn continues from the branch's stored state).
    """

    branch: Branch | None = attrs.field(eq=False)
    outcome: NodeOutcome | None = None
    spawned: bool = False

    def __attrs_post_init__(self) -> None:
        if self.outcome is None and self.branch is None:
            raise ValueError("a node that resumes needs its restored branch")


@attrs.frozen
class FlowResult:
    outcomes: Mapping[str, NodeOutcome]
    branches: Mapping[str, Branch] = attrs.field(factory=dict, eq=False)

    @property
    def status(self) -> Literal["ok", "failed"]:
        return "ok" if all(o.status == "ok" for o in self.outcomes.values()) else "failed"

    def __getitem__(self, node_id: str) -> NodeOutcome:
        return self.outcomes[node_id]


def _check_graph(nodes: Iterable[Node]) -> dict[str, Node]:
    """The graph check scenarios use (iterative: any depth), naming ``flow: nodes[i]...``."""
    listed = tuple(nodes)
    check_graph([GraphNode(n.id, n.depends_on, n.spawned_by) for n in listed], prefix="flow: ")
    return {n.id: n for n in listed}


@attrs.frozen
class Flow:
    nodes: tuple[Node, ...] = attrs.field(converter=_nodes)
    concurrency: int = 4
    spawn_limit: int = 16

    def __attrs_post_init__(self) -> None:
        for i, node in enumerate(self.nodes):
            if not isinstance(node, Node):
                raise ConfigError(f"flow: nodes[{i}]: {node!r} is not a Node")
        _check_graph(self.nodes)
        check_int(
            self.concurrency, "flow: concurrency", minimum=1, maximum=MAX_CONCURRENCY, expected="a positive integer"
        )
        check_int(self.spawn_limit, "flow: spawn_limit", minimum=0, maximum=MAX_SPAWN_LIMIT, expected="an integer >= 0")


BranchFactory = Callable[[Node], "Branch"]


@attrs.define(eq=False)
class _Scheduler:
    flow: Flow
    env: RunEnv
    new_branch: BranchFactory
    restored: Mapping[str, Restored] = attrs.field(factory=dict)
    nodes: dict[str, Node] = attrs.field(init=False)
    outcomes: dict[str, NodeOutcome] = attrs.field(factory=dict)
    done: dict[str, anyio.Event] = attrs.field(factory=dict)
    branches: dict[str, Branch] = attrs.field(factory=dict)
    spawned: set[str] = attrs.field(factory=set)
    limiter: anyio.CapacityLimiter = attrs.field(init=False)
    tg: anyio.abc.TaskGroup | None = None

    def __attrs_post_init__(self) -> None:
        self.nodes = {n.id: n for n in self.flow.nodes}
        self.done = {nid: anyio.Event() for nid in self.nodes}
        self.limiter = anyio.CapacityLimiter(self.flow.concurrency)

    async def publish(self, event: object, node_id: str, branch_id: str | None = None) -> None:
        await self.env.bus.publish(event, node_id=node_id, branch_id=branch_id)

    async def finish(self, outcome: NodeOutcome) -> None:
        self.outcomes[outcome.id] = outcome
        self.done[outcome.id].set()
        await self._skip_unspawned_children(outcome.id)

    async def _skip_unspawned_children(self, emitter: str) -> None:
        for node_id, reason in never_spawned(self.nodes.values(), emitter, self.spawned, self.outcomes):
            await self.publish(NodeSkipped(reason=reason), node_id)
            await self.finish(NodeOutcome(node_id, "skipped", reason))

    def _attach(self, branch: Branch) -> Branch:
        if self.env.journal is not None and branch.journal is None:
            branch.attach_journal(self.env.journal)
        return branch

    async def run(self) -> FlowResult:
        async with anyio.create_task_group() as tg:
            self.tg = tg
            for node_id, restored in self.restored.items():
                if restored.branch is not None:
                    self.branches[node_id] = restored.branch
                if restored.spawned or self.nodes[node_id].spawned_by is not None:
                    self.spawned.add(node_id)
                if restored.outcome is not None:
                    self.outcomes[node_id] = restored.outcome
                    self.done[node_id].set()
            for node_id, restored in self.restored.items():
                if restored.outcome is None and self.nodes[node_id].spawned_by is not None:
                    assert restored.branch is not None
                    tg.start_soon(self.supervise, self.nodes[node_id], restored.branch, True)
            for node in self.nodes.values():
                if node.spawned_by is None and node.id not in self.outcomes:
                    missing = unknown_tools(node.id, node.profile.tools, self.env.registry.names())
                    if missing is not None:  # refused before it starts; its dependents skip as usual
                        tg.start_soon(self.fail, node, None, ConfigError(missing))
                    else:
                        tg.start_soon(self.run_top_level, node)
        return FlowResult(dict(self.outcomes), dict(self.branches))

    async def run_top_level(self, node: Node) -> None:
        for dep in node.depends_on:
            await self.done[dep].wait()
        reason = blocked_by(node, {d: self.outcomes[d].status for d in node.depends_on})
        if reason is None and node.when is not None:
            try:
                held = node.when({d: self.outcomes[d] for d in node.depends_on})
            except Exception as exc:
                await self.fail(node, None, exc, "its condition (when) raised: ")
                return
            if not held:
                reason = f"condition not met: when returned {held!r} on the results of {', '.join(node.depends_on)}"
        if reason is not None:
            await self.publish(NodeSkipped(reason=reason), node.id)
            await self.finish(NodeOutcome(node.id, "skipped", reason))
            return
        # The calibration evidence its dependencies finished with (all finished: deterministic).
        evidence = shared_evidence(self.branches[d].calibrations for d in node.depends_on if d in self.branches)
        restored = self.restored.get(node.id)
        if restored is not None and restored.branch is not None:
            restored.branch.take_evidence(evidence)  # it took it when it first started: nothing changes
            await self.supervise(node, restored.branch, True)
            return
        try:
            branch = self._start_branch(node)
        except Exception as exc:  # e.g. a profile naming a tool the registry lacks: this node's mistake
            await self.fail(node, None, exc)
            return
        branch.take_evidence(evidence)
        await self.supervise(node, self._attach(branch))

    def _start_branch(self, node: Node) -> Branch:
        from runtime.flows.start import inherited_branch

        source = node.inherits_from
        if node.branch is not None:
            return node.branch
        if source is not None:
            return inherited_branch(
                self.branches[source], self.nodes[source].profile, self.new_branch(node), node.profile
            )
        return self.new_branch(node)

    async def fail(self, node: Node, branch_id: str | None, exc: Exception, prefix: str = "") -> None:
        """Record ``node``'s failure as its own (never raised into the flow)."""
        message = prefix + (str(exc) or type(exc).__name__)
        await self.publish(NodeFailed(error_type=type(exc).__name__, message=message), node.id, branch_id)
        log.info("node failed", node=node.id, error=type(exc).__name__, message=message)
        await self.finish(NodeOutcome(node.id, "failed", message, None, branch_id, exc))

    async def supervise(self, node: Node, branch: Branch, resume: bool = False) -> None:
        """Run one node; a failure is recorded as its own, never raised into the flow."""
        with bound_contextvars(node=node.id, branch=branch.id):
            await self._supervise(node, branch, resume)

    async def _supervise(self, node: Node, branch: Branch, resume: bool) -> None:
        from actors.operations import run_operation
        from runtime.flows.start import dependency_results, instruction_pending, with_inputs

        self.branches[node.id] = branch
        async with self.limiter:
            await self.publish(NodeStarted(operation=node.operation.kind, parent=node.spawned_by), node.id, branch.id)
            log.info("node started", node=node.id, branch=branch.id, operation=node.operation.kind)
            try:
                operation = node.operation
                if node.reads and instruction_pending(branch, resume):
                    results = dependency_results(node.reads, self._finished(node.reads))
                    operation = await with_inputs(branch, operation, node.profile, results, self.env)
                result = await run_operation(
                    branch,
                    operation,
                    env=self.env,
                    profile=node.profile,
                    node_id=node.id,
                    spawn=self._spawner(node),
                    resume=resume,
                )
            except Exception as exc:
                await self.fail(node, branch.id, exc)
                return
        await self.publish(NodeFinished(rounds=result.rounds, answer_chars=len(result.answer)), node.id, branch.id)
        log.info("node finished", node=node.id, rounds=result.rounds, requests=result.requests)
        await self.finish(NodeOutcome(node.id, "ok", None, result, branch.id))

    def _finished(self, reads: Iterable[str]) -> dict[str, tuple[str, str | None, str | None]]:
        """Each of ``reads``' (finished) outcome as ``(status, reason, result text)``."""
        from runtime.flows.start import result_text

        out: dict[str, tuple[str, str | None, str | None]] = {}
        for nid in reads:
            outcome = self.outcomes[nid]
            out[nid] = (outcome.status, outcome.reason, None if outcome.result is None else result_text(outcome.result))
        return out

    def _spawner(self, emitter: Node) -> Callable[[str], Awaitable[str]] | None:
        async def spawn(child_id: str) -> str:
            return await self.spawn(emitter, child_id)

        return spawn

    async def spawn(self, emitter: Node, child_id: str) -> str:
        refused = spawn_refusal(self.nodes, emitter.id, child_id, self.spawned, self.flow.spawn_limit)
        if refused is not None:
            raise SpawnRefused(refused)
        child = self.nodes[child_id]
        self.spawned.add(child_id)
        emitter_branch = self.branches[emitter.id]
        try:
            branch = self._child_branch(child, emitter_branch)
        except Exception as exc:  # the child's own mistake (e.g. an unknown tool): it fails, the emitter goes on
            await self.fail(child, None, exc)
            return f"child node {child_id!r} failed before it started: {exc}"
        self._attach(branch)
        from actors.inherit import setup_ids

        await self.publish(
            ChildSpawned(
                child=child_id, inherit=child.inherit, view_length=len(branch.view_ids()) - len(setup_ids(branch))
            ),
            emitter.id,
            emitter_branch.id,
        )
        assert self.tg is not None
        self.tg.start_soon(self.supervise, child, branch)
        return spawn_accepted(child_id)

    def _child_branch(self, child: Node, emitter_branch: Branch) -> Branch:
        from runtime.flows.start import inherited_branch

        missing = unknown_tools(child.id, child.profile.tools, self.env.registry.names())
        if missing is not None:
            raise ConfigError(missing)
        if child.branch is not None:
            return child.branch
        if child.inherit == "view":
            emitter = self.nodes[child.spawned_by or ""]
            return inherited_branch(emitter_branch, emitter.profile, self.new_branch(child), child.profile)
        return self.new_branch(child)


async def run_flow(
    flow: Flow, env: RunEnv, new_branch: BranchFactory, restored: Mapping[str, Restored] | None = None
) -> FlowResult:
    """Run a flow to completion; returns every node's outcome.

    ``restored`` carries nodes over from an interrupted run: finished nodes
    keep their outcome and are not run again; started ones resume on their
    restored branch. Their dependents wait and skip as usual.
    """
    return await _Scheduler(flow, env, new_branch, dict(restored or {})).run()
