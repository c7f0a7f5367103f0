"""The ``node_items`` signal a flow workflow reads, checked before it is read.

Node workflows send it (:class:`runtime.temporal.node_host.Outbox`), but it is
a signal anyone who reaches the Temporal namespace can send the flow's
workflow id (``temporal workflow signal``). A batch that is not what a node
sends is refused with a :class:`~runtime.errors.ConfigError` naming the key
path, the value and what was expected: the flow workflow fails with it, as it
fails on any bad input (a batch it cannot read would fail every workflow task
of the flow, retried for ever, since the signal stays in its history).

Pure: only called by the flow's scheduler (:mod:`runtime.temporal.scheduler`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from runtime.config.checks import bad_value, join_index, join_key, render_value, wrong_type
from runtime.errors import ConfigError

SIGNAL = "the flow's node_items signal"
KINDS = ("event", "finished", "lost", "request", "spawn")
"""An item's one key: what it carries (an event, the node's outcome, tries lost with a worker, a request
record, a spawn request)."""
EVENT_IDS = ("node_id", "branch_id", "request_id")


def checked_batch(batch: Any, nodes: Collection[str]) -> tuple[str, list[dict[str, Any]]]:
    """``(node, items)`` of a ``node_items`` batch; a ConfigError naming what is wrong in it."""
    if not isinstance(batch, Mapping):
        raise wrong_type(SIGNAL, batch, "a table with node and items")
    node = batch.get("node")
    if not isinstance(node, str) or node not in nodes:
        raise bad_value(join_key(SIGNAL, "node"), node, f"a node of the flow ({', '.join(sorted(nodes))})")
    where = f"{SIGNAL} from node {node!r}"
    items = batch.get("items")
    if not isinstance(items, list):
        raise wrong_type(f"{where}: items", items, "a list")
    for index, item in enumerate(items):
        _check_item(item, nodes, where, join_index("items", index))
    return node, items


def _check_item(item: Any, nodes: Collection[str], where: str, path: str) -> None:
    if not isinstance(item, Mapping) or len(item) != 1 or next(iter(item)) not in KINDS:
        got = sorted(map(str, item)) if isinstance(item, Mapping) else render_value(item)
        raise ConfigError(f"{where}: {path}: an item has one of the keys {', '.join(KINDS)}; got {got}")
    [(kind, value)] = item.items()
    path = join_key(path, kind)
    if kind == "lost":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise bad_value(f"{where}: {path}", value, "a number of tries >= 0")
        return
    if not isinstance(value, Mapping):
        raise wrong_type(f"{where}: {path}", value, "a table")
    if kind == "event":
        _field(value, "type", str, where, path)
        _field(value, "data", Mapping, where, path)
        for key in EVENT_IDS:  # each present (the scheduler reads all three), a string or null
            if key not in value or value[key] is not None:
                _field(value, key, str, where, path)
    elif kind == "request":
        _field(value, "branch_id", str, where, path)
        _field(value, "record", str, where, path)
    elif kind == "finished":
        status = _field(value, "status", str, where, path)
        if status not in ("ok", "failed"):
            raise bad_value(f"{where}: {join_key(path, 'status')}", status, "ok or failed")
        _field(value, "unrecoverable", int, where, path)
        for key in ("rounds", "answer_chars") if status == "ok" else ("error_type", "message"):
            _field(value, key, int if status == "ok" else str, where, path)
    elif kind == "spawn":
        child = _field(value, "child", str, where, path)
        if child not in nodes:
            raise bad_value(f"{where}: {join_key(path, 'child')}", child, "a node of the flow")
        _field(value, "ref", int, where, path)


def _field(table: Mapping[str, Any], key: str, kind: type, where: str, path: str) -> Any:
    value = table.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        expected = {str: "a string", int: "an integer"}.get(kind, "a table")
        raise wrong_type(f"{where}: {join_key(path, key)}", value, expected)
    return value
