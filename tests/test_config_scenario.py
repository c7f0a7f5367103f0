"""Scenario values built in code: profiles, helpers and every graph check."""

from __future__ import annotations

import re
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.config import NodeSpec, Profile, ProviderSpec, RunSettings, Scenario
from runtime.errors import ConfigError
from runtime.scripted.policies import ScriptCall, ScriptStep


def node(node_id: str, **fields) -> NodeSpec:
    return NodeSpec(id=node_id, instruction=f"Task of {node_id}.", **fields)


def scenario(*nodes: NodeSpec, **fields) -> Scenario:
    return Scenario(name="test", nodes=nodes, **fields)


def refusal(*nodes: NodeSpec, **fields) -> str:
    with pytest.raises(ConfigError) as info:
        scenario(*nodes, **fields)
    return str(info.value)


SPAWNER = Profile(tools=("spawn",))


def spawn_step(*targets: str) -> ScriptStep:
    return ScriptStep(tool_calls=tuple(ScriptCall.create("spawn", {"node": t}) for t in targets))


def test_defaults_and_the_default_profile() -> None:
    s = scenario(node("a"))
    assert (s.path, s.description) == (None, "")
    assert s.run == RunSettings() and s.provider == ProviderSpec()
    assert dict(s.profiles) == {"default": Profile()}
    custom = Profile(system="mine")
    assert scenario(node("a"), profiles={"default": custom}).profiles["default"] == custom
    both = scenario(node("a", profile="reader"), profiles={"reader": custom})
    assert set(both.profiles) == {"default", "reader"}


def test_profiles_mapping_is_read_only_and_nodes_are_a_tuple() -> None:
    source = {"reader": Profile()}
    s = Scenario(name="t", nodes=[node("a")], profiles=source)
    source["late"] = Profile()
    assert "late" not in s.profiles
    with pytest.raises(TypeError):
        s.profiles["x"] = Profile()  # type: ignore[index]
    assert isinstance(s.nodes, tuple)
    assert hash(s) == hash(Scenario(name="t", nodes=[node("a")], profiles={"reader": Profile()}))


def test_helpers() -> None:
    s = scenario(
        node("lead", script=(spawn_step("kid-a"),)),
        node("kid-a", spawned_by="lead"),
        node("side"),
        node("kid-b", spawned_by="lead", profile="small"),
        node("grandkid", spawned_by="kid-a"),
        profiles={"default": SPAWNER, "small": Profile(max_tokens=64)},
    )
    assert s.node("side").id == "side"
    assert [n.id for n in s.top_level_nodes()] == ["lead", "side"]
    assert [n.id for n in s.children_of("lead")] == ["kid-a", "kid-b"]
    assert [n.id for n in s.children_of("kid-a")] == ["grandkid"]
    assert s.children_of("side") == ()
    assert s.profile_of("kid-b").max_tokens == 64
    assert s.profile_of("lead") == SPAWNER
    with pytest.raises(KeyError) as info:
        s.node("kid-aa")
    assert str(info.value) == (
        'scenario "test" has no node "kid-aa" (did you mean "kid-a"?); nodes: lead, kid-a, side, kid-b, grandkid'
    )
    with pytest.raises(KeyError):
        s.children_of("nobody")


def test_scenario_evolve_reruns_the_graph_checks() -> None:
    s = scenario(node("a"), node("b"))
    assert s.evolve(name="renamed").name == "renamed"
    with pytest.raises(ConfigError, match=r"^nodes\[1\]\.id: \"a\" is already the id of nodes\[0\]$"):
        s.evolve(nodes=(node("a"), node("a")))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": ""}, 'name: "" is not a non-empty scenario name'),
        ({"name": None}, "name: null is not a non-empty scenario name"),
        ({"description": 5}, "description: 5 is an integer, not text"),
        ({"path": 5}, "path: 5 is an integer, not a file path string"),
        ({"run": {"concurrency": 2}}, "run: { concurrency = 2 } is a table, not RunSettings"),
        ({"provider": "simulated"}, 'provider: "simulated" is a string, not a ProviderSpec'),
        ({"profiles": ["x"]}, 'profiles: ["x"] is an array, not a mapping of profile names to Profile values'),
        ({"profiles": {"my profile": Profile()}}, 'profiles."my profile": "my profile" is not a profile name'),
        ({"profiles": {"x": {"system": "s"}}}, 'profiles.x: { system = "s" } is a table, not a Profile'),
    ],
)
def test_scenario_field_refusals(fields: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        Scenario(**{"name": "t", "nodes": (node("a"),), **fields})
    assert str(info.value).startswith(message), str(info.value)


def test_nodes_must_be_present_and_node_specs() -> None:
    assert refusal() == "nodes: no nodes; a scenario needs at least one [[nodes]] entry"
    with pytest.raises(ConfigError, match=r"^nodes\[1\]: \{ id = \"b\" \} is a table, not a NodeSpec$"):
        Scenario(name="t", nodes=(node("a"), {"id": "b"}))
    with pytest.raises(ConfigError, match=r"^nodes: \"a\" is a string, not an array of nodes$"):
        Scenario(name="t", nodes="a")


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        ((node("a"), node("b"), node("a")), 'nodes[2].id: "a" is already the id of nodes[0]'),
        (
            (node("a"), node("b", depends_on=("a", "c"))),
            'nodes[1].depends_on[1]: "c" names no node; nodes: a, b',
        ),
        (
            (node("alpha"), node("b", depends_on=("alpah",))),
            'nodes[1].depends_on[0]: "alpah" names no node (did you mean "alpha"?); nodes: alpha, b',
        ),
        (
            (node("a"), node("kid", spawned_by="lead")),
            'nodes[1].spawned_by: "lead" names no node; nodes: a, kid',
        ),
        (
            (node("lead"), node("x"), node("kid", spawned_by="lead", depends_on=("x",))),
            'nodes[2].depends_on: set on a child of "lead"; a child starts when it is spawned',
        ),
        (
            (node("lead"), node("kid", spawned_by="lead"), node("after", depends_on=("kid",))),
            'nodes[2].depends_on[0]: "kid" is a child of "lead" and runs only if spawned; depend on "lead" instead',
        ),
        (
            (node("a", profile="reader"),),
            'nodes[0].profile: "reader" names no profile; profiles: default',
        ),
        ((node("a", depends_on=("a",)),), "nodes[0].depends_on: dependency cycle a -> a"),
        (
            (node("a", depends_on=("b",)), node("b", depends_on=("a",))),
            "nodes[0].depends_on: dependency cycle a -> b -> a",
        ),
        (
            (node("x"), node("a", depends_on=("x", "b")), node("b", depends_on=("c",)), node("c", depends_on=("a",))),
            "nodes[1].depends_on: dependency cycle a -> b -> c -> a",
        ),
        (
            (node("top"), node("a", spawned_by="b"), node("b", spawned_by="a")),
            "nodes[1].spawned_by: spawn cycle a -> b -> a (each spawned by the next); none of them can ever start",
        ),
        ((node("top"), node("a", spawned_by="a")), "nodes[1].spawned_by: spawn cycle a -> a"),
        (
            (
                node("lead", script=(ScriptStep(text="Reading."), spawn_step("kid", "other"))),
                node("kid", spawned_by="lead"),
                node("other"),
            ),
            'nodes[0].script[1].tool_calls[1].arguments.node: "other" is not a child template of "lead"; '
            'its children (nodes with spawned_by = "lead"): kid',
        ),
        (
            (node("lead", script=(ScriptStep(tool_calls=(ScriptCall.create("spawn", {}),)),)),),
            'nodes[0].script[0].tool_calls[0].arguments.node: null is not a child template of "lead"',
        ),
    ],
)
def test_graph_refusals(nodes: tuple[NodeSpec, ...], message: str) -> None:
    assert refusal(*nodes).startswith(message)


def test_unknown_profile_suggests_a_close_name() -> None:
    message = refusal(node("a", profile="reeder"), profiles={"reader": Profile()})
    assert message == 'nodes[0].profile: "reeder" names no profile (did you mean "reader"?); profiles: default, reader'


def test_per_call_ceiling_may_only_lower_an_integer_profile_ceiling() -> None:
    capped = {"capped": Profile(max_input_tokens=50_000)}
    assert refusal(node("a", profile="capped", max_input_tokens="none"), profiles=capped) == (
        'nodes[0].max_input_tokens: "none" would lift profile "capped"\'s ceiling of 50000; '
        "a per-call value may only lower it"
    )
    assert refusal(node("a", profile="capped", max_input_tokens=50_001), profiles=capped).startswith(
        'nodes[0].max_input_tokens: 50001 is above profile "capped"\'s ceiling of 50000'
    )
    for allowed in (50_000, 1):
        assert scenario(node("a", profile="capped", max_input_tokens=allowed), profiles=capped)
    # "auto" on the call resolves to the first price tier (100,000 for the default model): above 50,000.
    assert refusal(node("a", profile="capped", max_input_tokens="auto"), profiles=capped).startswith(
        "nodes[0].max_input_tokens: 'auto' (resolves to 100000) would raise the ceiling 50000"
    )
    # Under "none" any lower value is allowed; under "auto" or unset (100,000 on the default model) only below it.
    assert scenario(node("a", max_input_tokens=900_000), profiles={"default": Profile(max_input_tokens="none")})
    for profile in (Profile(), Profile(max_input_tokens="auto")):
        assert scenario(node("a", max_input_tokens=100_000), profiles={"default": profile})
        assert refusal(node("a", max_input_tokens=200_000), profiles={"default": profile}).startswith(
            "nodes[0].max_input_tokens: 200000 would raise the ceiling 100000"
        )


def test_valid_flows_are_accepted() -> None:
    s = scenario(
        node("lead", script=(spawn_step("kid"), ScriptStep(text="Done."))),
        node("kid", spawned_by="lead", operation="bounded", inherit="none"),
        node("side"),
        node("after", depends_on=("lead", "side")),
        run=RunSettings(concurrency=1, spawn_limit=0),
        profiles={"default": SPAWNER},
    )
    assert [n.id for n in s.nodes] == ["lead", "kid", "side", "after"]


@st.composite
def dependency_graphs(draw: st.DrawFn) -> list[tuple[str, ...]]:
    """Random DAGs: node i may depend only on nodes before it."""
    size = draw(st.integers(min_value=1, max_value=12))
    return [
        tuple(f"n{j}" for j in sorted(draw(st.sets(st.integers(0, i - 1), max_size=3)))) if i else ()
        for i in range(size)
    ]


@given(dependency_graphs(), st.randoms(use_true_random=False))
def test_any_acyclic_graph_is_accepted_in_any_order(deps: list[tuple[str, ...]], rnd) -> None:
    nodes = [node(f"n{i}", depends_on=d) for i, d in enumerate(deps)]
    rnd.shuffle(nodes)
    assert len(scenario(*nodes).nodes) == len(deps)


@given(dependency_graphs(), st.data())
def test_a_back_edge_is_reported_as_a_real_cycle(deps: list[tuple[str, ...]], data: st.DataObject) -> None:
    low = data.draw(st.integers(0, len(deps) - 1))
    high = data.draw(st.integers(low, len(deps) - 1))
    edges = {f"n{i}": list(d) for i, d in enumerate(deps)}
    # Make a path high -> ... -> low exist, then close it with low -> high.
    chain = [f"n{i}" for i in range(high, low - 1, -1)]
    for here, there in pairwise(chain):
        if there not in edges[here]:
            edges[here].append(there)
    if f"n{high}" not in edges[f"n{low}"]:
        edges[f"n{low}"].append(f"n{high}")
    nodes = [node(name, depends_on=tuple(targets)) for name, targets in edges.items()]
    message = refusal(*nodes)
    found = re.fullmatch(r"nodes\[(\d+)\]\.depends_on: dependency cycle (.+)", message)
    assert found, message
    cycle = found[2].split(" -> ")
    assert cycle[0] == cycle[-1] and len(cycle) >= 2
    assert found[1] == cycle[0][1:]  # the path names the node the cycle is reported from
    for here, there in pairwise(cycle):
        assert there in edges[here]
