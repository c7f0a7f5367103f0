"""The flow scheduler's rules, sans I/O: one place for both engines.

The in-process scheduler (:mod:`runtime.flows.flow`) and the Temporal flow
workflow (:mod:`runtime.temporal.scheduler`) run nodes differently (tasks on
shared branches; child workflows), but decide alike, by these functions:

- :func:`blocked_by`: why a top-level node is skipped (a dependency that did not finish ok, unless it
  accepts failures; the dependency it inherits from must always have finished ok);
- :func:`unknown_tools`: why a node cannot start (its profile names a tool the registry lacks);
- :func:`spawn_refusal`: why an emitter's spawn of a child is refused;
- :func:`never_spawned`: the declared children an emitter finished without spawning (skipped).

Each takes the flow's nodes and the scheduler's state as plain values and
returns a decision (the same texts on both engines); the caller publishes
the events and starts the nodes. A node start that needs its finished
dependencies' results takes them from the caller's outcomes, as the
dependencies are named here.

Pure: no I/O, no clock, no anyio.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Protocol

from runtime.config.checks import _did_you_mean


class FlowNode(Protocol):
    """What the rules read of a node (:class:`runtime.flows.flow.Node` is one)."""

    @property
    def id(self) -> str: ...

    @property
    def depends_on(self) -> tuple[str, ...]: ...

    @property
    def spawned_by(self) -> str | None: ...

    @property
    def accept_failures(self) -> bool: ...

    @property
    def inherits_from(self) -> str | None: ...


def blocked_by(node: FlowNode, statuses: Mapping[str, str]) -> str | None:
    """Why ``node`` is skipped: the first dependency whose status is not ``ok`` (None: it may start).

    ``statuses``: every finished node's status (``ok``, ``failed``, ``skipped``); every dependency must be in it.
    """
    blocked = [d for d in node.depends_on if statuses[d] != "ok"]
    if not blocked:
        return None
    source = node.inherits_from
    if source is not None and statuses[source] != "ok":
        return f"dependency {source!r} {statuses[source]}: the node starts from its view"
    if node.accept_failures:
        return None
    return f"dependency {blocked[0]!r} {statuses[blocked[0]]}"


def unknown_tools(node_id: str, tools: Iterable[object], registry: Collection[str]) -> str | None:
    """Why a node cannot start: the first tool name its profile lists that the registry lacks (None: all known).

    A tool given as an object (not a name) is its own; only names are looked up.
    """
    for i, tool in enumerate(tools):
        if isinstance(tool, str) and tool not in registry:
            available = ", ".join(sorted(registry)) or "none"
            return (
                f"node {node_id!r}: profile.tools[{i}]: {tool!r} names no tool in the registry"
                f"{_did_you_mean(tool, sorted(registry))}; tools available: {available}"
            )
    return None


def spawn_refusal(
    nodes: Mapping[str, FlowNode], emitter: str, child_id: str, spawned: Collection[str], spawn_limit: int
) -> str | None:
    """Why the flow refuses ``emitter``'s spawn of ``child_id`` (None: the child may start)."""
    child = nodes.get(child_id)
    if child is None or child.spawned_by != emitter:
        mine = sorted(n.id for n in nodes.values() if n.spawned_by == emitter)
        return f"node {emitter!r} cannot spawn {child_id!r}: its declared children are {mine or 'none'}"
    if child_id in spawned:
        return f"child {child_id!r} was already spawned"
    if len(spawned) >= spawn_limit:
        return f"spawn limit reached ({spawn_limit} children per run)"
    return None


def spawn_accepted(child_id: str) -> str:
    """What the spawn tool returns when the flow starts ``child_id``."""
    return f"spawned child node {child_id!r}"


def never_spawned(
    nodes: Iterable[FlowNode], emitter: str, spawned: Collection[str], finished: Collection[str]
) -> list[tuple[str, str]]:
    """The children of ``emitter`` (just finished) it never spawned, each with the reason it is skipped."""
    reason = f"never spawned: emitter {emitter!r} finished without spawning it"
    return [
        (node.id, reason)
        for node in nodes
        if node.spawned_by == emitter and node.id not in spawned and node.id not in finished
    ]
