"""Scripted policies: step validation, deterministic replies, exhaustion, the registry."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.errors import ConfigError
from runtime.scripted.policies import (
    PolicyExhausted,
    PolicyRegistry,
    Reply,
    ScriptCall,
    ScriptPolicy,
    ScriptStep,
    UnknownPolicy,
    tool_use_id,
)
from runtime.values.canonical import canonical_json, sha256_hex

PAYLOAD = {"model": "claude-haiku-5-5", "max_tokens": 10, "messages": [{"role": "user", "content": []}]}


def test_from_obj_reads_text_and_calls_with_canonical_arguments() -> None:
    step = ScriptStep.from_obj(
        {"text": "looking", "tool_calls": [{"name": "read", "arguments": {"z": 1, "a": [2, "é"]}}]},
        "nodes[0].script[0]",
    )
    assert step.text == "looking"
    assert step.tool_calls == (ScriptCall("read", canonical_json({"a": [2, "é"], "z": 1})),)
    assert step.tool_calls[0].arguments == {"a": [2, "é"], "z": 1}


def test_from_obj_allows_calls_without_arguments_and_text_alone() -> None:
    assert ScriptStep.from_obj({"tool_calls": [{"name": "status"}]}, "w").tool_calls == (ScriptCall("status", "{}"),)
    assert ScriptStep.from_obj({"text": "done"}, "w") == ScriptStep(text="done")


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({}, "nodes[2].script[0]: a step needs 'text' (or 'output'), 'tool_calls', or both; it has neither"),
        ({"tool_calls": []}, "nodes[2].script[0]: a step needs"),
        ({"text": "x", "tools": []}, "nodes[2].script[0]: unknown key 'tools'"),
        ({"text": ""}, "nodes[2].script[0].text: '' is not a non-empty string"),
        ({"text": 3}, "nodes[2].script[0].text: 3 is not a non-empty string"),
        ("hello", "nodes[2].script[0]: 'hello' is not a table"),
        ({"tool_calls": {"name": "x"}}, "nodes[2].script[0].tool_calls: {'name': 'x'} is not a list"),
        ({"tool_calls": [{"arguments": {}}]}, "nodes[2].script[0].tool_calls[0].name: None is not a non-empty string"),
        ({"tool_calls": [{"name": "x", "args": {}}]}, "nodes[2].script[0].tool_calls[0]: unknown key 'args'"),
        (
            {"tool_calls": [{"name": "x", "arguments": [1]}]},
            "nodes[2].script[0].tool_calls[0].arguments: [1] is not a table",
        ),
        (
            {"tool_calls": [{"name": "x", "arguments": {"v": float("nan")}}]},
            "nodes[2].script[0].tool_calls[0].arguments: {'v': nan} is not JSON-compatible",
        ),
        ({"tool_calls": ["x"]}, "nodes[2].script[0].tool_calls[0]: 'x' is not a table"),
    ],
)
def test_from_obj_refuses_bad_steps_naming_the_key_path(obj: object, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        ScriptStep.from_obj(obj, "nodes[2].script[0]")
    assert isinstance(info.value, ValueError)
    assert str(info.value).startswith(message)


def test_direct_construction_is_validated_too() -> None:
    with pytest.raises(ValueError, match=r"needs text \(or an output\), tool calls, or both"):
        ScriptStep()
    with pytest.raises(ValueError, match="is not canonical JSON"):
        ScriptCall("x", '{"b":1, "a":2}')
    with pytest.raises(ValueError, match="is not a JSON object"):
        ScriptCall("x", "[1]")
    with pytest.raises(ValueError, match="stop_reason: 'done' is not one of"):
        Reply(content=(), stop_reason="done")
    with pytest.raises(ValueError, match="output_tokens: -1"):
        Reply(content=(), stop_reason="end_turn", output_tokens=-1)


def test_script_policy_answers_in_order_with_deterministic_tool_ids() -> None:
    steps = [
        ScriptStep(tool_calls=(ScriptCall.create("read", {"path": "a"}), ScriptCall.create("read", {"path": "b"}))),
        ScriptStep(text="the answer"),
    ]
    policy = ScriptPolicy("reader", steps)
    first = policy.respond(PAYLOAD)
    assert first.stop_reason == "tool_use"
    assert first.output_tokens is None
    assert first.content == (
        {"type": "tool_use", "id": "toolu_" + sha256_hex("reader:0:0")[:24], "name": "read", "input": {"path": "a"}},
        {"type": "tool_use", "id": "toolu_" + sha256_hex("reader:0:1")[:24], "name": "read", "input": {"path": "b"}},
    )
    second = policy.respond(PAYLOAD)
    assert second == Reply(content=({"type": "text", "text": "the answer"},), stop_reason="end_turn")
    assert policy.steps_taken == 2
    # A second policy over the same script gives the same bytes.
    again = ScriptPolicy("reader", steps).respond(PAYLOAD)
    assert json.dumps(again.content) == json.dumps(first.content)


def test_text_comes_before_tool_uses_in_a_mixed_step() -> None:
    reply = ScriptPolicy("n", [ScriptStep(text="let me look", tool_calls=(ScriptCall.create("ls"),))]).respond(PAYLOAD)
    assert [block["type"] for block in reply.content] == ["text", "tool_use"]
    assert reply.stop_reason == "tool_use"


def test_exhausted_script_names_the_node_and_its_step_count() -> None:
    policy = ScriptPolicy("writer", [ScriptStep(text="one")])
    policy.respond(PAYLOAD)
    with pytest.raises(PolicyExhausted, match=r"node 'writer': its script had 1 step\(s\)"):
        policy.respond(PAYLOAD)
    assert policy.steps_taken == 1


def test_registry_routes_by_node_and_refuses_unknown_nodes() -> None:
    default = ScriptPolicy("default", [ScriptStep(text="d")])
    registry = PolicyRegistry.from_scripts({"a": [ScriptStep(text="a")], "b": [ScriptStep(text="b")]}, default)
    assert registry.policy_for("a").respond(PAYLOAD).content[0]["text"] == "a"
    assert registry.policy_for(None) is default
    with pytest.raises(UnknownPolicy, match=r"no policy for node 'c' \(nodes with a policy: a, b\)"):
        registry.policy_for("c")
    with pytest.raises(UnknownPolicy, match="names no node and the policy registry has no default"):
        PolicyRegistry().policy_for(None)


def test_registry_is_immutable_and_with_policy_returns_a_new_one() -> None:
    registry = PolicyRegistry()
    extended = registry.with_policy("x", ScriptPolicy("x", [ScriptStep(text="x")]))
    with pytest.raises(UnknownPolicy):
        registry.policy_for("x")
    assert extended.policy_for("x").respond(PAYLOAD).content[0]["text"] == "x"
    with pytest.raises(TypeError):
        extended.policies["y"] = extended.policy_for("x")  # type: ignore[index]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=10,
)


@given(
    name=st.text(min_size=1, max_size=10),
    arguments=st.dictionaries(st.text(max_size=6), json_values, max_size=4),
    text=st.none() | st.text(min_size=1, max_size=20),
)
def test_from_obj_round_trips_any_json_arguments(name: str, arguments: dict, text: str | None) -> None:
    obj: dict = {"tool_calls": [{"name": name, "arguments": arguments}]}
    if text is not None:
        obj["text"] = text
    step = ScriptStep.from_obj(obj, "s")
    assert step.tool_calls[0].arguments == arguments
    assert step.text == text


@given(st.text(min_size=1, max_size=12), st.integers(0, 50), st.integers(0, 50))
def test_tool_use_ids_are_deterministic_and_well_formed(node: str, step: int, index: int) -> None:
    value = tool_use_id(node, step, index)
    assert value == tool_use_id(node, step, index)
    assert value.startswith("toolu_") and len(value) == 30
    int(value[6:], 16)
    assert value != tool_use_id(node, step, index + 1)
