"""The graph check a scenario and a code-built flow share (pure, iterative).

Given each node's id, ``depends_on`` and ``spawned_by``, in order: ids are
unique; ``depends_on`` and ``spawned_by`` name existing nodes; a child has no
``depends_on`` and nothing depends on a child; there is no dependency cycle
and no spawn cycle. Every walk keeps an explicit stack, so a chain of any
length (a 1,500-deep dependency chain built in code, say) is checked without
touching the interpreter's recursion limit. Refusals name the node by its key
path, ``nodes[i].depends_on[j]``, after an optional prefix (``"flow: "``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import attrs

from runtime.config.checks import _did_you_mean, join_index, render_value
from runtime.errors import ConfigError


@attrs.frozen
class GraphNode:
    """What the graph check needs of a node."""

    id: str
    depends_on: tuple[str, ...] = ()
    spawned_by: str | None = None


def check_graph(nodes: Sequence[GraphNode], *, prefix: str = "") -> dict[str, int]:
    """Check the graph; returns each id's index. Raises :class:`ConfigError` naming the key path."""
    index: dict[str, int] = {}
    for i, node in enumerate(nodes):
        if node.id in index:
            raise ConfigError(
                f"{prefix}{join_index('nodes', i)}.id: {render_value(node.id)} is already the id of "
                f"nodes[{index[node.id]}]"
            )
        index[node.id] = i
    _check_references(nodes, index, prefix)
    _check_dependency_cycles(nodes, index, prefix)
    _check_spawn_cycles(nodes, index, prefix)
    return index


def _ids(index: Mapping[str, int]) -> str:
    ids = list(index)
    shown = ", ".join(ids[:20])
    return shown + (f", ... ({len(ids)} in all)" if len(ids) > 20 else "")


def _check_references(nodes: Sequence[GraphNode], index: Mapping[str, int], prefix: str) -> None:
    for i, node in enumerate(nodes):
        where = prefix + join_index("nodes", i)
        if node.spawned_by is not None:
            if node.spawned_by not in index:
                raise ConfigError(
                    f"{where}.spawned_by: {render_value(node.spawned_by)} names no node"
                    f"{_did_you_mean(node.spawned_by, list(index))}; nodes: {_ids(index)}"
                )
            if node.depends_on:
                raise ConfigError(
                    f"{where}.depends_on: set on a child of {render_value(node.spawned_by)}; "
                    f"a child starts when it is spawned, so it cannot depend on other nodes"
                )
        for j, dep in enumerate(node.depends_on):
            dep_where = join_index(f"{where}.depends_on", j)
            if dep not in index:
                raise ConfigError(
                    f"{dep_where}: {render_value(dep)} names no node{_did_you_mean(dep, list(index))}; "
                    f"nodes: {_ids(index)}"
                )
            emitter = nodes[index[dep]].spawned_by
            if emitter is not None:
                raise ConfigError(
                    f"{dep_where}: {render_value(dep)} is a child of {render_value(emitter)} and runs only "
                    f"if spawned; depend on {render_value(emitter)} instead"
                )


def _check_dependency_cycles(nodes: Sequence[GraphNode], index: Mapping[str, int], prefix: str) -> None:
    done: set[str] = set()
    for start in nodes:
        if start.id in done:
            continue
        # Iterative depth-first search; ``path`` is the current chain of dependencies.
        path: list[str] = [start.id]
        on_path = {start.id}
        pending: list[Iterator[str]] = [iter(start.depends_on)]
        while pending:
            dep = next(pending[-1], None)
            if dep is None:
                pending.pop()
                finished = path.pop()
                on_path.discard(finished)
                done.add(finished)
                continue
            if dep in on_path:
                cycle = path[path.index(dep) :] + [dep]
                raise ConfigError(
                    f"{prefix}{join_index('nodes', index[cycle[0]])}.depends_on: dependency cycle {' -> '.join(cycle)}"
                )
            if dep in done:
                continue
            path.append(dep)
            on_path.add(dep)
            pending.append(iter(nodes[index[dep]].depends_on))


def _check_spawn_cycles(nodes: Sequence[GraphNode], index: Mapping[str, int], prefix: str) -> None:
    reaches_top: set[str] = set()
    for node in nodes:
        chain = [node.id]
        on_chain = {node.id}
        current = node
        while current.spawned_by is not None and current.id not in reaches_top:
            if current.spawned_by in on_chain:
                cycle = chain[chain.index(current.spawned_by) :] + [current.spawned_by]
                raise ConfigError(
                    f"{prefix}{join_index('nodes', index[cycle[0]])}.spawned_by: spawn cycle {' -> '.join(cycle)} "
                    f"(each spawned by the next); none of them can ever start"
                )
            current = nodes[index[current.spawned_by]]
            chain.append(current.id)
            on_chain.add(current.id)
        reaches_top.update(chain)
