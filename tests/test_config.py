"""Configuration values built in code: defaults, accepted values and every refusal."""

from __future__ import annotations

import math

import attrs
import pytest

from runtime.config import ModelConfig, NodeSpec, Profile, ProviderSpec, RunSettings
from runtime.config.checks import render_value
from runtime.errors import ConfigError
from runtime.scripted.faults import FaultRule
from runtime.scripted.policies import ScriptCall, ScriptStep


def refusal(build, **kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        build(**kwargs)
    return str(info.value)


# -- Profile ----------------------------------------------------------------


def test_profile_defaults() -> None:
    profile = Profile()
    assert profile.system is None
    assert profile.tools == ()
    assert profile.max_input_tokens is None
    assert profile.prompt_caching is False
    assert profile.context_management is False
    assert (profile.context_fold_at, profile.context_fold_target) == (0.8, 0.6)
    assert profile.context_fold_tail_margin == 0.045
    assert profile.tool_result_max_chars is None
    assert profile.max_tokens == 1024
    assert profile.model is None


def test_profile_is_frozen_and_hashable() -> None:
    profile = Profile(tools=["read_file"])
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        profile.max_tokens = 5  # type: ignore[misc]
    assert profile.tools == ("read_file",)
    assert hash(profile) == hash(Profile(tools=("read_file",)))


@pytest.mark.parametrize(
    ("changes", "field", "stored"),
    [
        ({"context_fold_at": 1}, "context_fold_at", 1.0),
        ({"context_fold_at": 1.0, "context_fold_target": 0.999}, "context_fold_target", 0.999),
        ({"context_fold_tail_margin": 0}, "context_fold_tail_margin", 0.0),
        ({"tool_result_max_chars": 1024}, "tool_result_max_chars", 1024),
        ({"max_input_tokens": 1}, "max_input_tokens", 1),
        ({"max_input_tokens": "auto"}, "max_input_tokens", "auto"),
        ({"max_input_tokens": "none"}, "max_input_tokens", "none"),
        ({"max_tokens": 1}, "max_tokens", 1),
        ({"system": "Be brief."}, "system", "Be brief."),
        ({"model": "claude-sonnet-4-5"}, "model", "claude-sonnet-4-5"),
        ({"prompt_caching": True, "context_management": True}, "context_management", True),
    ],
)
def test_profile_accepts_boundaries(changes: dict, field: str, stored: object) -> None:
    value = getattr(Profile(**changes), field)
    assert value == stored and type(value) is type(stored)


PROFILE_REFUSALS = [
    ({"system": ""}, "Profile.system", '"" is not non-empty text'),
    ({"system": "   "}, "Profile.system", "is not non-empty text"),
    ({"system": 5}, "Profile.system", "5 is an integer, not non-empty text"),
    ({"tools": "read_file"}, "Profile.tools", '"read_file" is a string, not an array of tool names'),
    ({"tools": [1]}, "Profile.tools[0]", "1 is an integer, not non-empty text"),
    ({"tools": ["a", "b", "a"]}, "Profile.tools[2]", '"a" is listed twice'),
    ({"max_input_tokens": 0}, "Profile.max_input_tokens", "positive integer"),
    ({"max_input_tokens": -5}, "Profile.max_input_tokens", "positive integer"),
    ({"max_input_tokens": True}, "Profile.max_input_tokens", "positive integer"),
    ({"max_input_tokens": 1000.0}, "Profile.max_input_tokens", "positive integer"),
    ({"max_input_tokens": "100000"}, "Profile.max_input_tokens", "positive integer"),
    ({"prompt_caching": "true"}, "Profile.prompt_caching", '"true" is a string, not a boolean'),
    ({"prompt_caching": 1}, "Profile.prompt_caching", "1 is an integer, not a boolean"),
    ({"prompt_caching": None}, "Profile.prompt_caching", "null is not a boolean"),
    ({"context_management": None}, "Profile.context_management", "null is not a boolean"),
    ({"context_fold_at": True}, "Profile.context_fold_at", "true is a boolean, not a finite number"),
    ({"context_fold_at": "0.8"}, "Profile.context_fold_at", '"0.8" is a string, not a finite number'),
    ({"context_fold_at": 0}, "Profile.context_fold_at", "0.0 is not a finite number with 0 < context_fold_at <= 1"),
    ({"context_fold_at": 1.5}, "Profile.context_fold_at", "1.5 is not a finite number"),
    ({"context_fold_at": math.nan}, "Profile.context_fold_at", "nan is not a finite number"),
    ({"context_fold_at": math.inf}, "Profile.context_fold_at", "inf is not a finite number"),
    ({"context_fold_at": None}, "Profile.context_fold_at", "null is not a finite number"),
    (
        {"context_fold_target": 0.0},
        "Profile.context_fold_target",
        "0.0 is not a finite number with 0 < context_fold_target",
    ),
    ({"context_fold_target": False}, "Profile.context_fold_target", "false is a boolean"),
    (
        {"context_fold_target": 0.8},
        "Profile.context_fold_target",
        "0.8 is not below context_fold_at (0.8); expected 0 < context_fold_target < context_fold_at <= 1",
    ),
    (
        {"context_fold_at": 0.5},
        "Profile.context_fold_at",
        "0.5 is not above context_fold_target (0.6); expected 0 < context_fold_target < context_fold_at <= 1",
    ),
    ({"context_fold_tail_margin": -0.01}, "Profile.context_fold_tail_margin", "-0.01 is not a finite number"),
    ({"context_fold_tail_margin": 1.0}, "Profile.context_fold_tail_margin", "1.0 is not a finite number"),
    (
        {"context_fold_tail_margin": 0.8},
        "Profile.context_fold_tail_margin",
        "0.8 is not below context_fold_at (0.8); expected 0 <= context_fold_tail_margin < context_fold_at",
    ),
    (
        {"context_fold_at": 0.04, "context_fold_target": 0.02},
        "Profile.context_fold_at",
        "0.04 is not above context_fold_tail_margin (0.045)",
    ),
    ({"tool_result_max_chars": 1023}, "Profile.tool_result_max_chars", "1023 is not an integer >= 1024"),
    ({"tool_result_max_chars": 2048.0}, "Profile.tool_result_max_chars", "2048.0 is a float, not an integer >= 1024"),
    ({"tool_result_max_chars": True}, "Profile.tool_result_max_chars", "true is a boolean"),
    ({"tool_result_max_chars": "2048"}, "Profile.tool_result_max_chars", '"2048" is a string'),
    ({"max_tokens": 0}, "Profile.max_tokens", "0 is not a positive integer"),
    ({"max_tokens": True}, "Profile.max_tokens", "true is a boolean, not a positive integer"),
    ({"max_tokens": 1.0}, "Profile.max_tokens", "1.0 is a float"),
    ({"max_tokens": None}, "Profile.max_tokens", "null is not a positive integer"),
    ({"model": ""}, "Profile.model", '"" is not a model name'),
    ({"model": 3}, "Profile.model", "3 is an integer"),
]


@pytest.mark.parametrize(("changes", "path", "problem"), PROFILE_REFUSALS)
def test_profile_refuses_with_key_value_and_expectation(changes: dict, path: str, problem: str) -> None:
    message = refusal(Profile, **changes)
    assert message.startswith(path + ": "), message
    assert problem in message


def test_profile_evolve_revalidates_and_keeps_other_fields() -> None:
    profile = Profile(system="s", tools=("read_file",), context_management=True)
    changed = profile.evolve(context_fold_at=0.9)
    assert changed.context_fold_at == 0.9
    assert (changed.system, changed.tools, changed.context_management) == ("s", ("read_file",), True)
    assert profile.context_fold_at == 0.8
    with pytest.raises(ConfigError, match=r"^Profile\.context_fold_target: 0\.9 is not below context_fold_at"):
        changed.evolve(context_fold_target=0.9)


def test_profile_evolve_refuses_unknown_field_with_suggestion() -> None:
    with pytest.raises(ConfigError) as info:
        Profile().evolve(context_fold_a=0.9)
    assert str(info.value).startswith("Profile.context_fold_a: unknown key; expected one of ")
    assert 'did you mean "context_fold_at"?' in str(info.value)


def test_profile_from_obj_names_the_key_path() -> None:
    profile = Profile.from_obj({"tools": ["search"], "context_fold_at": 1}, "profiles.reader")
    assert profile == Profile(tools=("search",), context_fold_at=1.0)
    with pytest.raises(ConfigError, match=r"^profiles\.reader\.context_fold_at: true is a boolean"):
        Profile.from_obj({"context_fold_at": True}, "profiles.reader")


def test_profile_from_obj_refuses_explicit_null_unknown_key_and_non_table() -> None:
    with pytest.raises(ConfigError, match=r"^p\.system: null is not allowed; omit the key to leave it unset$"):
        Profile.from_obj({"system": None}, "p")
    with pytest.raises(
        ConfigError, match=r'^p\.prompt_cache: unknown key; expected one of .*did you mean "prompt_caching"'
    ):
        Profile.from_obj({"prompt_cache": True}, "p")
    with pytest.raises(ConfigError, match=r'^p: "fast" is a string, not a table$'):
        Profile.from_obj("fast", "p")  # type: ignore[arg-type]


def test_render_value_is_short_and_toml_like() -> None:
    assert render_value(True) == "true"
    assert render_value(None) == "null"
    assert render_value('a"b') == '"a\\"b"'
    assert render_value(["x", 1, 2.5]) == "[x, 1, 2.5]".replace("x", '"x"')
    assert render_value({"a": 1}) == "{ a = 1 }"
    assert len(render_value(list(range(10_000)))) <= 120
    assert len(render_value("y" * 10_000)) <= 120
    assert render_value(10**5000).startswith("an integer of about")


# -- ModelConfig --------------------------------------------------------------


def test_model_config_values_and_refusals() -> None:
    assert ModelConfig(name="claude-haiku-5-5").max_input_tokens is None
    assert ModelConfig(name="m", max_input_tokens="auto").max_input_tokens == "auto"
    assert refusal(ModelConfig, name="").startswith('ModelConfig.name: "" is not a model name')
    assert refusal(ModelConfig, name="m", max_input_tokens=0).startswith("ModelConfig.max_input_tokens: ")


# -- ProviderSpec -------------------------------------------------------------


def test_provider_defaults() -> None:
    spec = ProviderSpec()
    assert (spec.kind, spec.model, spec.max_input_tokens) == ("simulated", "claude-haiku-5-5", None)
    assert (spec.base_url, spec.api_key_env, spec.key_env) == (None, None, "ANTHROPIC_API_KEY")
    assert (spec.token_factor, spec.latency_s, spec.lookback_collapse) == (1.15, 0.0, True)
    assert (spec.faults, spec.max_retries) == ((), 2)
    assert spec.model_config == ModelConfig(name="claude-haiku-5-5")


def test_provider_model_config_carries_the_model_ceiling() -> None:
    spec = ProviderSpec(model="claude-sonnet-4-5", max_input_tokens=50_000)
    assert spec.model_config == ModelConfig(name="claude-sonnet-4-5", max_input_tokens=50_000)


PROVIDER_REFUSALS = [
    (
        {"kind": "simulate"},
        "ProviderSpec.kind",
        '"simulate" is not one of "scripted", "simulated", "anthropic", "openai" (did you mean "simulated"?)',
    ),
    ({"kind": 1}, "ProviderSpec.kind", "1 is an integer"),
    ({"model": ""}, "ProviderSpec.model", "is not a model name"),
    ({"max_input_tokens": 0}, "ProviderSpec.max_input_tokens", "positive integer"),
    (
        {"base_url": "http://127.0.0.1:9"},
        "ProviderSpec.base_url",
        'set for provider kind "simulated"; base_url applies only to kinds "anthropic" and "openai"',
    ),
    (
        {"kind": "anthropic", "base_url": "ftp://x"},
        "ProviderSpec.base_url",
        '"ftp://x" is not an http:// or https:// URL with a host',
    ),
    ({"kind": "anthropic", "base_url": "https://"}, "ProviderSpec.base_url", "is not an http"),
    ({"kind": "anthropic", "base_url": "http://h:99999"}, "ProviderSpec.base_url", "is not an http"),
    ({"kind": "anthropic", "base_url": 8080}, "ProviderSpec.base_url", "8080 is an integer"),
    ({"api_key_env": "1KEY"}, "ProviderSpec.api_key_env", '"1KEY" is not an environment variable name'),
    ({"api_key_env": ""}, "ProviderSpec.api_key_env", "is not an environment variable name"),
    ({"api_key_env": 5}, "ProviderSpec.api_key_env", "5 is an integer, not an environment variable name"),
    ({"token_factor": 0}, "ProviderSpec.token_factor", "0.0 is not a finite number > 0"),
    ({"token_factor": True}, "ProviderSpec.token_factor", "true is a boolean"),
    ({"latency_s": -1}, "ProviderSpec.latency_s", "-1.0 is not a finite number of seconds >= 0"),
    ({"latency_s": math.inf}, "ProviderSpec.latency_s", "inf is not"),
    ({"lookback_collapse": "yes"}, "ProviderSpec.lookback_collapse", '"yes" is a string, not a boolean'),
    ({"faults": ["429"]}, "ProviderSpec.faults[0]", '"429" is a string, not a FaultRule'),
    ({"faults": "429"}, "ProviderSpec.faults", "is a string, not an array of fault rules"),
    (
        {"kind": "anthropic", "faults": (FaultRule(kind="429", every=2),)},
        "ProviderSpec.faults",
        'set for provider kind "anthropic"; fault injection applies only to kind "simulated"',
    ),
    ({"max_retries": -1}, "ProviderSpec.max_retries", "-1 is not an integer >= 0"),
    ({"max_retries": 2.0}, "ProviderSpec.max_retries", "2.0 is a float"),
]


@pytest.mark.parametrize(("changes", "path", "problem"), PROVIDER_REFUSALS)
def test_provider_refuses_with_key_value_and_expectation(changes: dict, path: str, problem: str) -> None:
    message = refusal(ProviderSpec, **changes)
    assert message.startswith(path + ": "), message
    assert problem in message


def test_provider_accepts_kind_specific_settings() -> None:
    spec = ProviderSpec(kind="anthropic", base_url="https://api.example.test/", max_retries=0, api_key_env="MY_KEY")
    assert spec.base_url == "https://api.example.test/"
    rule = FaultRule(kind="529", on_request=1, retry_after_ms=10)
    assert ProviderSpec(faults=[rule]).faults == (rule,)


def test_provider_from_obj_builds_fault_rules_with_key_paths() -> None:
    spec = ProviderSpec.from_obj({"faults": [{"kind": "429", "every": 3}]}, "provider")
    assert spec.faults == (FaultRule(kind="429", every=3),)
    with pytest.raises(ConfigError, match=r"^provider\.faults\[1\]\.kind: "):
        ProviderSpec.from_obj({"faults": [{"kind": "429", "every": 3}, {"kind": "teapot", "every": 1}]}, "provider")
    # A kind that cannot take faults is named before the rules are read.
    with pytest.raises(ConfigError, match=r'^provider\.faults: set for provider kind "scripted"'):
        ProviderSpec.from_obj({"kind": "scripted", "faults": [{"kind": "teapot"}]}, "provider")


def test_provider_with_kind_drops_settings_of_other_kinds() -> None:
    spec = ProviderSpec(faults=(FaultRule(kind="500", every=2),), latency_s=0.5)
    moved = spec.with_kind("anthropic")
    assert (moved.kind, moved.faults, moved.latency_s) == ("anthropic", (), 0.5)
    remote = ProviderSpec(kind="anthropic", base_url="https://api.example.test")
    assert remote.with_kind("scripted").base_url is None
    assert spec.with_kind("simulated") == spec
    with pytest.raises(ConfigError, match=r'^provider kind: "real" is not one of'):
        spec.with_kind("real")
    with pytest.raises(ConfigError, match=r"^ProviderSpec\.faults: set for provider kind"):
        spec.evolve(kind="anthropic")


# -- NodeSpec -----------------------------------------------------------------


def test_node_defaults_and_helpers() -> None:
    node = NodeSpec(id="lead", instruction="Do it.")
    assert (node.profile, node.operation, node.max_rounds) == ("default", "iterative", 20)
    assert (node.depends_on, node.script, node.spawned_by, node.inherit) == ((), (), None, "view")
    assert node.max_input_tokens is None and node.instructions == ()
    assert node.planned_instructions() == ("Do it.",)
    assert not node.is_child
    planned = NodeSpec(id="p", operation="bounded", instructions=["one", "two"])
    assert planned.instructions == ("one", "two")
    assert planned.planned_instructions() == ("one", "two")
    child = NodeSpec(id="c", instruction="x", spawned_by="lead", inherit="none")
    assert child.is_child and child.inherit == "none"


NODE_REFUSALS = [
    ({"id": "a b"}, "NodeSpec.id", '"a b" is not a node id'),
    ({"id": ""}, "NodeSpec.id", '"" is not a node id'),
    ({"id": 7}, "NodeSpec.id", "7 is an integer, not a node id"),
    ({"profile": "my profile"}, "NodeSpec.profile", '"my profile" is not a profile name'),
    ({"operation": "bound"}, "NodeSpec.operation", 'did you mean "bounded"?'),
    ({"instruction": None}, "NodeSpec.instruction", "missing; a node needs instruction"),
    ({"instruction": " "}, "NodeSpec.instruction", '" " is not non-empty instruction text'),
    ({"instruction": 3}, "NodeSpec.instruction", "3 is an integer"),
    (
        {"operation": "bounded", "instructions": ["a"]},
        "NodeSpec.instructions",
        "set together with instruction; give exactly one of the two",
    ),
    (
        {"instruction": None, "instructions": ["a", "b"]},
        "NodeSpec.instructions",
        'a planned sequence is a bounded operation, but operation is "iterative"',
    ),
    ({"instruction": None, "operation": "bounded", "instructions": []}, "NodeSpec.instruction", "missing"),
    (
        {"instruction": None, "operation": "bounded", "instructions": ["a", ""]},
        "NodeSpec.instructions[1]",
        "is not non-empty",
    ),
    (
        {"instruction": None, "operation": "bounded", "instructions": "a"},
        "NodeSpec.instructions",
        "is a string, not an array",
    ),
    ({"depends_on": "a"}, "NodeSpec.depends_on", '"a" is a string, not an array of node ids'),
    ({"depends_on": ["a", "a"]}, "NodeSpec.depends_on[1]", '"a" is listed twice'),
    ({"depends_on": ["a", "b c"]}, "NodeSpec.depends_on[1]", '"b c" is not a name'),
    ({"max_rounds": 0}, "NodeSpec.max_rounds", "0 is not a positive integer"),
    ({"max_rounds": True}, "NodeSpec.max_rounds", "true is a boolean"),
    ({"max_input_tokens": 0}, "NodeSpec.max_input_tokens", 'is not a positive integer, "auto" or "none"'),
    ({"max_input_tokens": "1000"}, "NodeSpec.max_input_tokens", "positive integer"),
    ({"script": [{"text": "hi"}]}, "NodeSpec.script[0]", "is a table, not a ScriptStep"),
    ({"script": "hi"}, "NodeSpec.script", "is a string, not an array of script steps"),
    ({"spawned_by": ""}, "NodeSpec.spawned_by", "is not a node id"),
    ({"spawned_by": "lead", "inherit": "full"}, "NodeSpec.inherit", '"full" is not one of "view", "none"'),
    (
        {"inherit": "none"},
        "NodeSpec.inherit",
        '"none" applies to a child (with spawned_by); on a top-level node inherit names the dependency',
    ),
    ({"inherit": "lead"}, "NodeSpec.inherit", '"lead" is not a dependency of this node (depends_on: none)'),
    ({"depends_on": ["a"], "inputs": ["b"]}, "NodeSpec.inputs[0]", '"b" is not a dependency of this node'),
    ({"depends_on": ["a"], "inputs": ["a", "a"]}, "NodeSpec.inputs[1]", '"a" is listed twice'),
    ({"depends_on": ["a"], "inputs": "a"}, "NodeSpec.inputs", "an array of dependency node ids"),
    ({"accept_failures": "yes"}, "NodeSpec.accept_failures", "true or false"),
]


@pytest.mark.parametrize(("changes", "path", "problem"), NODE_REFUSALS)
def test_node_refuses_with_key_value_and_expectation(changes: dict, path: str, problem: str) -> None:
    fields = {"id": "n", "instruction": "Do it.", **changes}
    message = refusal(NodeSpec, **fields)
    assert message.startswith(path + ": "), message
    assert problem in message


def test_node_from_obj_builds_script_steps() -> None:
    node = NodeSpec.from_obj(
        {
            "id": "lead",
            "instruction": "Go.",
            "script": [{"tool_calls": [{"name": "spawn", "arguments": {"node": "kid"}}]}, {"text": "Done."}],
        },
        "nodes[0]",
    )
    assert node.script == (
        ScriptStep(tool_calls=(ScriptCall.create("spawn", {"node": "kid"}),)),
        ScriptStep(text="Done."),
    )


def test_node_from_obj_refusals_name_the_path() -> None:
    with pytest.raises(ConfigError, match=r"^nodes\[3\]\.id: missing; this key is required$"):
        NodeSpec.from_obj({"instruction": "x"}, "nodes[3]")
    with pytest.raises(ConfigError, match=r"^nodes\[0\]\.script\[1\]"):
        NodeSpec.from_obj({"id": "a", "instruction": "x", "script": [{"text": "ok"}, {}]}, "nodes[0]")
    with pytest.raises(
        ConfigError, match=r'^nodes\[0\]\.instrution: unknown key; expected one of .*did you mean "instruction"'
    ):
        NodeSpec.from_obj({"id": "a", "instrution": "x"}, "nodes[0]")
    # inherit = "view" written on a non-child is refused (a top-level node's inherit names a dependency).
    with pytest.raises(ConfigError, match=r'^nodes\[0\]\.inherit: "view" applies to a child'):
        NodeSpec.from_obj({"id": "a", "instruction": "x", "inherit": "view"}, "nodes[0]")
    assert (
        NodeSpec.from_obj({"id": "a", "instruction": "x", "spawned_by": "b", "inherit": "view"}, "nodes[0]").inherit
        == "view"
    )


def test_node_evolve_revalidates() -> None:
    node = NodeSpec(id="a", instruction="x")
    assert node.evolve(max_rounds=3).max_rounds == 3
    with pytest.raises(ConfigError, match=r"^NodeSpec\.max_rounds: 0 is not a positive integer"):
        node.evolve(max_rounds=0)


# -- RunSettings --------------------------------------------------------------


def test_run_settings_values_and_refusals() -> None:
    assert (RunSettings().concurrency, RunSettings().spawn_limit) == (4, 16)
    assert RunSettings(spawn_limit=0).spawn_limit == 0
    assert refusal(RunSettings, concurrency=0) == "RunSettings.concurrency: 0 is not a positive integer"
    assert refusal(RunSettings, concurrency=True).startswith("RunSettings.concurrency: true is a boolean")
    assert refusal(RunSettings, spawn_limit=-1) == "RunSettings.spawn_limit: -1 is not an integer >= 0"
    assert refusal(RunSettings, spawn_limit="3").startswith('RunSettings.spawn_limit: "3" is a string')
    with pytest.raises(ConfigError, match=r"^run\.concurency: unknown key; .*did you mean \"concurrency\""):
        RunSettings.from_obj({"concurency": 2}, "run")
