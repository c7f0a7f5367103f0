"""Code and files refuse exactly the same values, in the same words.

For random values of random keys, a table written into a scenario file and
the same keys passed to the constructor in code either both succeed with
equal values or both fail; a refusal reads the same after its key path
(``Profile.x: ...`` in code, ``<file>: profiles.p.x: ...`` from the file).
"""

from __future__ import annotations

import math
import tomllib
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from runtime.config import NodeSpec, Profile, ProviderSpec, RunSettings
from runtime.config.loader import ScenarioError, loads_scenario
from runtime.errors import ConfigError
from runtime.models.limits import default_model_table

LABEL = "scenarios/prop.toml"
NODE = '\n[[nodes]]\nid = "solo"\ninstruction = "Answer."\n'


def toml_value(value: Any) -> str:
    """Render a value as TOML (the few shapes the strategies below produce)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{toml_string(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(value)


def toml_string(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.integers(min_value=-3, max_value=5000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-0.1, max_value=1.1),
    st.sampled_from(["auto", "none", "0.8", "1024", "true", "", " ", "read_file", "search", "a b", "x"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8),
)
values = st.one_of(
    scalars,
    st.lists(scalars, max_size=3),
    st.lists(st.sampled_from(["read_file", "search", "spawn", "fail"]), max_size=4),
    st.dictionaries(st.sampled_from(["a", "text"]), scalars, max_size=2),
)

TOOLS = frozenset({"read_file", "search", "spawn", "fail"})
fractions = st.one_of(st.floats(min_value=0.0, max_value=1.0), st.sampled_from([0.5, 0.7, 0.8, 0.9, 1.0]))
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8)
ceilings = st.one_of(st.integers(min_value=-2, max_value=200_000), st.sampled_from(["auto", "none"]))

# Near-valid values per key, so accepted tables are common too, not only refusals.
PLAUSIBLE = {
    "system": texts,
    "tools": st.lists(st.sampled_from(sorted(TOOLS)), max_size=3),
    "max_input_tokens": ceilings,
    "prompt_caching": st.booleans(),
    "context_management": st.booleans(),
    "context_fold_at": fractions,
    "context_fold_target": fractions,
    "context_fold_tail_margin": st.floats(min_value=0.0, max_value=0.2),
    "tool_result_max_chars": st.integers(min_value=1000, max_value=5000),
    "fold_scheduling": st.sampled_from(["epoch", "immediate", "epochs"]),
    "context_strategy": st.sampled_from(["fold", "compaction", "compact"]),
    "fold_policy": st.sampled_from(["cost", "fixed", "cheapest"]),
    "fold_tail": st.sampled_from(["cost", "verbatim", "after-read", "masked"]),
    "inherited_setup": st.sampled_from(["instruction", "own", "replace"]),
    "server_context_edits": st.lists(
        st.fixed_dictionaries(
            {"type": st.sampled_from(["clear_tool_uses_20250919", "compact_20260112", "clear_thinking_20251015", "x"])},
            optional={"trigger": st.fixed_dictionaries({"type": st.just("input_tokens"), "value": ceilings})},
        ),
        max_size=2,
    ),
    "max_tokens": st.integers(min_value=-1, max_value=5000),
    "model": texts,
    "thinking": st.fixed_dictionaries(
        {"type": st.sampled_from(["enabled", "adaptive", "disabled", "on"])},
        optional={"budget_tokens": st.integers(min_value=0, max_value=5000)},
    ),
    "concurrency": st.integers(min_value=-1, max_value=8),
    "spawn_limit": st.integers(min_value=-1, max_value=8),
    "workspace": st.sampled_from(["workspace", "", " ", "a/b"]),
    "tool_errors": st.sampled_from(["model", "fail", "fails"]),
    "kind": st.sampled_from(["scripted", "simulated", "anthropic", "openai", "simulate"]),
    "base_url": st.sampled_from(["https://api.example.test", "http://127.0.0.1:8080/", "ftp://x", "https://"]),
    "api_key_env": st.sampled_from(["ANTHROPIC_API_KEY", "MY_KEY", "1BAD", ""]),
    "token_factor": st.floats(min_value=-0.5, max_value=3.0),
    "latency_s": st.floats(min_value=-0.5, max_value=3.0),
    "lookback_collapse": st.booleans(),
    "max_retries": st.integers(min_value=-1, max_value=5),
    "max_in_flight": st.integers(min_value=-1, max_value=1_100),
    "reasoning": st.sampled_from(["none", "reasoning_content", "reasoning_details", "thinking"]),
    "cache_key": st.sampled_from(["session", "header", "off", "on"]),
    "cache_control": st.sampled_from(["ephemeral", "1h", "5m"]),
    "reasoning_effort": st.sampled_from(["low", "high", ""]),
}


def tables(keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """Tables of 1-3 of ``keys``, each value near-valid for its key or anything at all."""

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        chosen = draw(st.lists(st.sampled_from(keys), min_size=1, max_size=3, unique=True))
        return {key: draw(st.one_of(PLAUSIBLE[key], PLAUSIBLE[key], PLAUSIBLE[key], values)) for key in chosen}

    return build()


PROFILE_KEYS = [a.name for a in Profile.__attrs_attrs__]  # type: ignore[attr-defined]


def file_outcome(text: str, table_path: str) -> tuple[str, Any]:
    try:
        return "ok", loads_scenario(text, path_label=LABEL, tool_names=TOOLS)
    except ScenarioError as exc:
        prefix = f"{LABEL}: {table_path}."
        assert str(exc).startswith(prefix), str(exc)
        return "refused", str(exc)[len(prefix) :]


def code_outcome(build: Any, class_name: str, fields: dict[str, Any]) -> tuple[str, Any]:
    try:
        return "ok", build(**fields)
    except ConfigError as exc:
        prefix = f"{class_name}."
        assert str(exc).startswith(prefix), str(exc)
        return "refused", str(exc)[len(prefix) :]


def known_tools_only(fields: dict[str, Any]) -> bool:
    """The registry check is the loader's alone; keep generated tool names inside the registry."""
    tools = fields.get("tools")
    return not (isinstance(tools, list) and any(isinstance(t, str) and t.strip() and t not in TOOLS for t in tools))


def within_window(fields: dict[str, Any]) -> bool:
    """The context-window check needs the run's model, so it is the loader's alone (like the registry's)."""
    ceiling = fields.get("max_input_tokens")
    window = default_model_table().context_window(ProviderSpec().model)
    return not (type(ceiling) is int and window is not None and ceiling > window)


@settings(max_examples=400, deadline=None)
@given(tables(PROFILE_KEYS))
def test_profile_in_code_refuses_exactly_what_the_file_refuses(fields: dict[str, Any]) -> None:
    text = 'schema = "foldline.scenario/v1"\n[profiles.p]\n'
    text += "".join(f"{key} = {toml_value(value)}\n" for key, value in fields.items()) + NODE
    parsed = tomllib.loads(text)["profiles"]["p"]  # exactly what the loader sees (e.g. -0.0, nan)
    from_file = file_outcome(text, "profiles.p")
    if not known_tools_only(parsed) or not within_window(parsed):
        assert from_file[0] == "refused"
        return
    in_code = code_outcome(Profile, "Profile", dict(parsed))
    from_obj = code_outcome(lambda **kw: Profile.from_obj(kw, "Profile"), "Profile", dict(parsed))
    assert in_code[0] == from_file[0] == from_obj[0], (in_code, from_file, from_obj)
    event(in_code[0])
    if in_code[0] == "ok":
        assert in_code[1] == from_file[1].profiles["p"] == from_obj[1]
    else:
        assert in_code[1] == from_file[1] == from_obj[1]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["run", "provider"]), st.data())
def test_run_and_provider_in_code_refuse_exactly_what_the_file_refuses(table: str, data: st.DataObject) -> None:
    cls, class_name = {"run": (RunSettings, "RunSettings"), "provider": (ProviderSpec, "ProviderSpec")}[table]
    fields = data.draw(tables([a.name for a in cls.__attrs_attrs__ if a.name != "faults"]))
    text = f'schema = "foldline.scenario/v1"\n[{table}]\n'
    text += "".join(f"{key} = {toml_value(value)}\n" for key, value in fields.items()) + NODE
    parsed = tomllib.loads(text)[table]
    from_file = file_outcome(text, table)
    in_code = code_outcome(cls, class_name, dict(parsed))
    assert in_code[0] == from_file[0], (in_code, from_file)
    event(in_code[0])
    if in_code[0] == "ok":
        assert in_code[1] == getattr(from_file[1], table)
    else:
        assert in_code[1] == from_file[1]


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "profile",
                "operation",
                "instruction",
                "instructions",
                "depends_on",
                "max_rounds",
                "max_input_tokens",
                "spawned_by",
                "inherit",
            ]
        ),
        st.one_of(values, st.sampled_from(["bounded", "iterative", "view", "none", "solo"])),
        max_size=3,
    )
)
def test_node_fields_in_code_refuse_exactly_what_the_file_refuses(fields: dict[str, Any]) -> None:
    """Checked on the node alone (no graph): NodeSpec in code against NodeSpec.from_obj on the parsed table."""
    fields = {"id": "n", **({"instruction": "Do it."} if "instructions" not in fields else {}), **fields}
    text = "[[nodes]]\n" + "".join(f"{key} = {toml_value(value)}\n" for key, value in fields.items())
    parsed = tomllib.loads(text)["nodes"][0]
    in_code = code_outcome(NodeSpec, "NodeSpec", dict(parsed))
    from_table = code_outcome(lambda **kw: NodeSpec.from_obj(kw, "NodeSpec"), "NodeSpec", dict(parsed))
    if "inherit" in parsed and parsed.get("spawned_by") is None and parsed["inherit"] == "view":
        # The one intended difference: a file that writes inherit on a non-child is refused even
        # with the default value; in code the default cannot be told from an absent key.
        assert from_table[0] == "refused"
        return
    if parsed.get("instructions") == [] and "instruction" not in parsed:
        # Likewise: a file's instructions = [] is named as an empty array (issue 28); in code an empty
        # tuple cannot be told from the default, so it is the missing instruction. Both refuse.
        assert from_table[0] == in_code[0] == "refused"
        return
    assert in_code == from_table
    event(in_code[0])


def test_toml_renderer_round_trips() -> None:
    sample = {"a": [True, -0.0, math.inf, 'q"\\\x01\x7f', 7]}
    parsed = tomllib.loads(f"v = {toml_value(sample)}")["v"]
    assert parsed["a"][0] is True and math.copysign(1, parsed["a"][1]) == -1
    assert parsed["a"][2:] == [math.inf, 'q"\\\x01\x7f', 7]


@pytest.mark.parametrize("bad", [True, "0.8", math.nan, 0, 1.01, None])
def test_profile_from_code_and_file_agree_on_fold_line_examples(bad: Any) -> None:
    with pytest.raises(ConfigError) as code:
        Profile(context_fold_at=bad)
    if bad is None:  # TOML has no null; a dict can still carry one
        with pytest.raises(ConfigError, match=r"^profiles\.p\.context_fold_at: null is not allowed"):
            Profile.from_obj({"context_fold_at": None}, "profiles.p")
        return
    with pytest.raises(ScenarioError) as file:
        loads_scenario(
            f'schema = "foldline.scenario/v1"\n[profiles.p]\ncontext_fold_at = {toml_value(bad)}\n{NODE}',
            path_label=LABEL,
            tool_names=(),
        )
    assert str(code.value).removeprefix("Profile.") == str(file.value).removeprefix(f"{LABEL}: profiles.p.")
