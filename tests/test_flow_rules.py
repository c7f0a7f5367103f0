"""The flow scheduler's rules (runtime/flows/rules.py), which both engines decide by."""

from __future__ import annotations

import attrs

from runtime.flows.rules import blocked_by, never_spawned, spawn_refusal


@attrs.frozen
class N:
    id: str
    depends_on: tuple[str, ...] = ()
    spawned_by: str | None = None


NODES = {n.id: n for n in (N("lead"), N("a", spawned_by="lead"), N("b", spawned_by="lead"), N("x", ("lead", "a")))}


def test_a_node_is_blocked_by_its_first_dependency_not_ok() -> None:
    assert blocked_by(NODES["x"], {"lead": "ok", "a": "ok"}) is None
    assert blocked_by(NODES["x"], {"lead": "ok", "a": "skipped"}) == "dependency 'a' skipped"
    assert blocked_by(NODES["x"], {"lead": "failed", "a": "skipped"}) == "dependency 'lead' failed"


def test_spawns_are_refused_as_in_process() -> None:
    assert spawn_refusal(NODES, "lead", "a", [], 2) is None
    assert spawn_refusal(NODES, "lead", "x", [], 2) == (
        "node 'lead' cannot spawn 'x': its declared children are ['a', 'b']"
    )
    assert spawn_refusal(NODES, "a", "b", [], 2) == "node 'a' cannot spawn 'b': its declared children are none"
    assert spawn_refusal(NODES, "lead", "a", ["a"], 2) == "child 'a' was already spawned"
    assert spawn_refusal(NODES, "lead", "b", ["a"], 1) == "spawn limit reached (1 children per run)"


def test_children_never_spawned_are_skipped_once() -> None:
    reason = "never spawned: emitter 'lead' finished without spawning it"
    assert never_spawned(NODES.values(), "lead", [], []) == [("a", reason), ("b", reason)]
    assert never_spawned(NODES.values(), "lead", ["a"], []) == [("b", reason)]
    assert never_spawned(NODES.values(), "lead", ["a"], ["b"]) == []
    assert never_spawned(NODES.values(), "a", [], []) == []
