"""Issue 11, cases 2, 3, 5 and 8 in code: every limit bounded, checked when the value is built."""

from __future__ import annotations

import pytest

from actors.tools import BUILTIN_TOOLS
from runtime.config import (
    NodeSpec,
    Profile,
    ProviderSpec,
    RunSettings,
    Scenario,
    loads_scenario,
)
from runtime.config.loader import ScenarioError
from runtime.config.operation import Operation
from runtime.errors import ConfigError
from runtime.flows.flow import Flow, Node


@pytest.mark.parametrize("value", [True, 0, -1, 1.5, "100", "many", 10**30])
def test_operation_refuses_a_bad_ceiling_when_built(value: object) -> None:
    with pytest.raises(ConfigError, match=r"^Operation\.max_input_tokens: "):
        Operation("bounded", ("x",), max_input_tokens=value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"max_rounds": 0}, "Operation.max_rounds: 0 is not a positive integer"),
        ({"max_rounds": 10**30}, "Operation.max_rounds: 1000000000000000000000000000000 is above the upper bound"),
        ({"max_rounds": True}, "Operation.max_rounds: true is a boolean"),
    ],
)
def test_operation_refuses_bad_rounds(kw: dict, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        Operation("iterative", ("x",), **kw)
    assert str(info.value).startswith(says)


@pytest.mark.parametrize("call", ["none", 2000])
def test_a_node_cannot_raise_its_profiles_ceiling_when_built(call: object) -> None:
    with pytest.raises(ConfigError, match="would raise the profile's ceiling of 1000"):
        Node("n", Operation("bounded", ("x",), max_input_tokens=call), profile=Profile(max_input_tokens=1000))  # type: ignore[arg-type]


def test_a_call_auto_under_a_profile_integer_is_resolved_when_the_profile_names_its_model() -> None:
    profile = Profile(max_input_tokens=1000, model="claude-haiku-5-5")
    with pytest.raises(ConfigError, match=r"'auto' \(resolves to 100000\) would raise the ceiling 1000"):
        Node("n", Operation("bounded", ("x",), max_input_tokens="auto"), profile=profile)


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"concurrency": 0}, "flow: concurrency: 0 is not a positive integer"),
        ({"concurrency": 10**30}, "flow: concurrency: 1000000000000000000000000000000 is above the upper bound 1024"),
        ({"spawn_limit": -1}, "flow: spawn_limit: -1 is not an integer >= 0"),
        ({"spawn_limit": 2.0}, "flow: spawn_limit: 2.0 is a float"),
    ],
)
def test_flow_bounds(kw: dict, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        Flow([Node("a", Operation("bounded", ("x",)))], **kw)
    assert str(info.value).startswith(says)


def test_a_1500_deep_chain_built_in_code_is_checked_without_recursion() -> None:
    op = Operation("bounded", ("x",))
    chain = [Node("n0", op)] + [Node(f"n{i}", op, depends_on=(f"n{i - 1}",)) for i in range(1, 1500)]
    assert len(Flow(chain).nodes) == 1500  # main raised RecursionError here
    cyclic = [Node("n0", op, depends_on=("n1499",))] + chain[1:]
    with pytest.raises(ConfigError, match=r"^flow: nodes\[0\]\.depends_on: dependency cycle n0 -> n1499 -> "):
        Flow(cyclic)
    specs = [NodeSpec(id="n0", instruction="x")] + [
        NodeSpec(id=f"n{i}", instruction="x", depends_on=(f"n{i - 1}",)) for i in range(1, 1500)
    ]
    assert len(Scenario(name="deep", nodes=specs).nodes) == 1500


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (
            lambda: Profile(max_tokens=10**30),
            "Profile.max_tokens: 1000000000000000000000000000000 is above the upper bound",
        ),
        (
            lambda: Profile(max_input_tokens=10**30),
            "Profile.max_input_tokens: 1000000000000000000000000000000 is above",
        ),
        (
            lambda: NodeSpec(id="a", instruction="x", max_rounds=10**30),
            "NodeSpec.max_rounds: 1000000000000000000000000000000",
        ),
        (lambda: RunSettings(concurrency=10**30), "RunSettings.concurrency: 1000000000000000000000000000000"),
        (lambda: ProviderSpec(max_retries=10**30), "ProviderSpec.max_retries: 1000000000000000000000000000000"),
        (
            lambda: ProviderSpec(max_input_tokens=10**30),
            "ProviderSpec.max_input_tokens: 1000000000000000000000000000000",
        ),
    ],
)
def test_huge_integers_are_refused_in_code(build, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        build()
    assert str(info.value).startswith(says)


HEAD = 'schema = "foldline.scenario/v1"\n'


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            (
                '[provider]\nkind = "scripted"\nmax_input_tokens = 1000\n[[nodes]]\nid = "a"\ninstruction = "x"\n'
                '[[nodes]]\nid = "b"\ninstruction = "y"\nmax_input_tokens = 2000\n'
            ),
            "f.toml: nodes[1].max_input_tokens: 2000 would raise the ceiling 1000 (model max_input_tokens: 1000)",
        ),
        (
            '[profiles.default]\nmax_input_tokens = "auto"\n[[nodes]]\nid = "a"\ninstruction = "x"\nmax_input_tokens = 200000\n',
            "f.toml: nodes[0].max_input_tokens: 200000 would raise the ceiling 100000 (auto (profile)",
        ),
        (
            '[profiles.default]\nmax_input_tokens = 5000\n[[nodes]]\nid = "a"\ninstruction = "x"\nmax_input_tokens = "auto"\n',
            "f.toml: nodes[0].max_input_tokens: 'auto' (resolves to 100000) would raise the ceiling 5000",
        ),
        (
            '[profiles.default]\nmax_tokens = 1000000000000000000000000000000\n[[nodes]]\nid = "a"\ninstruction = "x"\n',
            "f.toml: profiles.default.max_tokens: 1000000000000000000000000000000 is beyond 64 bits",
        ),
        (
            '[[nodes]]\nid = "a"\ninstruction = "x"\nscript = [{ txt = "hi" }]\n',
            'f.toml: nodes[0].script[0].txt: unknown key; expected one of compaction, output, stop_reason, text, tool_calls (did you mean "text"?)',
        ),
    ],
)
def test_files_refuse_at_load_naming_file_and_key_path(text: str, says: str) -> None:
    with pytest.raises(ScenarioError) as info:
        loads_scenario(HEAD + text, path_label="f.toml", tool_names=BUILTIN_TOOLS.names())
    assert str(info.value).startswith(says), str(info.value)


def test_code_and_files_refuse_the_same_value_with_the_same_words() -> None:
    with pytest.raises(ConfigError) as in_code:
        Profile(max_tokens=0)
    with pytest.raises(ScenarioError) as in_file:
        loads_scenario(
            HEAD + '[profiles.p]\nmax_tokens = 0\n[[nodes]]\nid = "a"\ninstruction = "x"\n',
            path_label="f.toml",
            tool_names=BUILTIN_TOOLS.names(),
        )
    assert str(in_code.value).split(": ", 1)[1] == str(in_file.value).split(": ", 2)[2]
