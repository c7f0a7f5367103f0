"""The flow scheduler's rules (runtime/flows/rules.py), which both engines decide by."""

from __future__ import annotations

import attrs

from runtime.flows.rules import blocked_by, never_spawned, spawn_refusal, unknown_tools


@attrs.frozen
class N:
    id: str
    depends_on: tuple[str, ...] = ()
    spawned_by: str | None = None
    accept_failures: bool = False
    inherits_from: str | None = None


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


def test_a_node_that_accepts_failures_runs_unless_the_node_it_inherits_from_did_not_finish_ok() -> None:
    accepting = N("y", ("lead", "a"), accept_failures=True)
    assert blocked_by(accepting, {"lead": "failed", "a": "skipped"}) is None
    inheriting = N("z", ("lead", "a"), accept_failures=True, inherits_from="lead")
    assert blocked_by(inheriting, {"lead": "ok", "a": "failed"}) is None
    assert (
        blocked_by(inheriting, {"lead": "failed", "a": "ok"})
        == "dependency 'lead' failed: the node starts from its view"
    )
    strict = N("w", ("lead",), inherits_from="lead")
    assert blocked_by(strict, {"lead": "skipped"}) == "dependency 'lead' skipped: the node starts from its view"


def test_a_tool_name_the_registry_lacks_is_named_with_the_names_available() -> None:
    assert unknown_tools("n", ("synthetic_read", object()), {"synthetic_read"}) is None
    reason = unknown_tools("n", ("synthetic_read", "synthetic_raed2"), {"synthetic_read", "spawn"})
    assert reason == (
        "node 'n': profile.tools[1]: 'synthetic_raed2' names no tool in the registry "
        '(did you mean "synthetic_read"?); tools available: spawn, synthetic_read'
    )
