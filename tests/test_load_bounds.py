"""Issue 28, item 17: bad input that would reach the wire is bounded at load, with its key path.

Before: tool arguments nested 300 deep, a node id of a million characters
(sent in the ``x-foldline-node`` header) and a model name of 100,000
characters were all accepted; ``instructions = []`` was reported as a
missing ``instruction``.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from runtime.cli.main import main
from runtime.config import NodeSpec
from runtime.config.loader import loads_scenario
from runtime.errors import ConfigError
from runtime.inputs.bounds import MAX_ARGUMENT_DEPTH, MAX_MODEL_NAME_CHARS, MAX_NAME_CHARS
from runtime.scripted.policies import ScriptCall, ScriptStep

HEAD = 'schema = "foldline.scenario/v1"\nname = "bounds"\n[provider]\nkind = "scripted"\nmodel = "{model}"\n[profiles.default]\ntools = ["synthetic_read"]\n'


def scenario(node: str, model: str = "claude-haiku-5-5") -> str:
    return HEAD.format(model=model) + node


def nested(depth: int) -> str:
    return "{ a = " * (depth - 1) + "{ b = 1 }" + " }" * (depth - 1)


def load(text: str) -> None:
    loads_scenario(text, path_label="s.toml", tool_names=frozenset({"synthetic_read"}))


@pytest.mark.parametrize("depth", [MAX_ARGUMENT_DEPTH + 1, 300])
def test_tool_arguments_nested_too_deep_are_refused_at_load(depth: int) -> None:
    text = scenario(
        f'[[nodes]]\nid = "n"\ninstruction = "go"\n'
        f'script = [{{ tool_calls = [{{ name = "synthetic_read", arguments = {nested(depth)} }}] }}]\n'
    )
    with pytest.raises(ConfigError, match=r"nodes\[0\]\.script\[0\]\.tool_calls\[0\]\.arguments: nested deeper"):
        load(text)


def test_tool_arguments_at_the_bound_load() -> None:
    load(
        scenario(
            f'[[nodes]]\nid = "n"\ninstruction = "go"\n'
            f'script = [{{ tool_calls = [{{ name = "synthetic_read", arguments = {nested(MAX_ARGUMENT_DEPTH)} }}] }}]\n'
        )
    )


def test_scripted_arguments_built_in_code_are_bounded_too() -> None:
    deep: dict = {"b": 1}
    for _ in range(MAX_ARGUMENT_DEPTH):
        deep = {"a": deep}
    step = ScriptStep(tool_calls=(ScriptCall.create("synthetic_read", deep),))
    with pytest.raises(ConfigError, match=r"NodeSpec\.script\[0\]\.tool_calls\[0\]\.arguments: nested deeper"):
        NodeSpec(id="n", instruction="go", script=(step,))


def test_a_node_id_of_a_million_characters_is_refused_by_its_length() -> None:
    node_id = "n" * 1_000_000
    with pytest.raises(ConfigError) as refused:
        load(scenario(f'[[nodes]]\nid = "{node_id}"\ninstruction = "go"\n'))
    message = str(refused.value)
    assert message.startswith("s.toml: nodes[0].id: ") and f"above the upper bound {MAX_NAME_CHARS}" in message
    assert "1000000 characters long" in message and len(message) < 300  # the value is not echoed whole
    load(scenario(f'[[nodes]]\nid = "{"n" * MAX_NAME_CHARS}"\ninstruction = "go"\n'))


def test_a_model_name_of_100000_characters_is_refused() -> None:
    with pytest.raises(ConfigError, match=rf"provider\.model: .* above the upper bound {MAX_MODEL_NAME_CHARS}"):
        load(scenario('[[nodes]]\nid = "n"\ninstruction = "go"\n', model="m" * 100_000))
    with pytest.raises(ConfigError, match=rf"profiles\.p\.model: .* above the upper bound {MAX_MODEL_NAME_CHARS}"):
        load(
            scenario(
                f'[profiles.p]\nmodel = "{"m" * 100_000}"\n[[nodes]]\nid = "n"\nprofile = "p"\ninstruction = "go"\n'
            )
        )


def test_an_empty_instructions_array_is_named_as_such() -> None:
    with pytest.raises(ConfigError) as refused:
        load(scenario('[[nodes]]\nid = "n"\noperation = "bounded"\ninstructions = []\n'))
    message = str(refused.value)
    assert "nodes[0].instructions: an empty array" in message and "missing" not in message


def test_the_command_line_exits_2_with_the_key_path(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(scenario(f'[[nodes]]\nid = "{"n" * 5_000}"\ninstruction = "go"\n'), encoding="utf-8")
    err = io.StringIO()
    assert main(["run", str(path), "--provider", "scripted", "--quiet"], out=io.StringIO(), err=err) == 2
    assert "nodes[0].id" in err.getvalue() and len(err.getvalue()) < 1_000
