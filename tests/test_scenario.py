"""The scenario file loader: files in, frozen values or named refusals out."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from runtime.config import ModelConfig, NodeSpec, Profile, ProviderSpec, RunSettings, Scenario
from runtime.config.loader import SCHEMA, ScenarioError, load_scenario, loads_scenario
from runtime.errors import ConfigError
from runtime.scripted.faults import FaultRule
from runtime.scripted.policies import ScriptCall, ScriptStep

TOOLS = frozenset({"read_file", "search", "spawn", "fail"})
HEAD = 'schema = "foldline.scenario/v1"\n'
ONE_NODE = '\n[[nodes]]\nid = "solo"\ninstruction = "Answer."\n'

QUICKSTART = """\
schema = "foldline.scenario/v1"
name = "quickstart"
description = "A lead reads, spawns two dependent children; an independent node runs beside it."

[run]
concurrency = 4

[provider]
kind = "simulated"
model = "claude-haiku-5-5"

[profiles.default]
system = "You are a careful research agent."
tools = ["read_file", "spawn"]
prompt_caching = true

[[nodes]]
id = "lead"
instruction = "Read the design notes and delegate two reviews."
script = [
  { tool_calls = [{ name = "read_file", arguments = { path = "notes/design.md", size = 6000 } }] },
  { tool_calls = [{ name = "spawn", arguments = { node = "review-a" } }, { name = "spawn", arguments = { node = "review-b" } }] },
  { text = "Delegated both reviews." },
]

[[nodes]]
id = "review-a"
spawned_by = "lead"
operation = "bounded"
instruction = "Review the notes for errors."
script = [{ text = "No errors found." }]

[[nodes]]
id = "review-b"
spawned_by = "lead"
operation = "bounded"
instruction = "Review the notes for style."
script = [{ text = "The style is consistent." }]

[[nodes]]
id = "side"
instruction = "Search for prior art."
script = [{ text = "None found." }]
"""


def write(tmp_path: Path, text: str, name: str = "x.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def refuse(text: str, label: str = "scenarios/x.toml", tools=TOOLS) -> str:
    with pytest.raises(ScenarioError) as info:
        loads_scenario(text, path_label=label, tool_names=tools)
    assert info.value.file == label
    assert str(info.value) == f"{label}: {info.value.detail}"
    return str(info.value)


# -- valid files ----------------------------------------------------------------


def test_quickstart_loads_into_values(tmp_path: Path) -> None:
    path = write(tmp_path, QUICKSTART, "quickstart.toml")
    s = load_scenario(path, tool_names=TOOLS)
    assert s.path == os.fspath(path)
    assert (s.name, s.description) == (
        "quickstart",
        "A lead reads, spawns two dependent children; an independent node runs beside it.",
    )
    assert s.run == RunSettings(concurrency=4)
    assert s.provider == ProviderSpec(kind="simulated", model="claude-haiku-5-5")
    assert dict(s.profiles) == {
        "default": Profile(
            system="You are a careful research agent.", tools=("read_file", "spawn"), prompt_caching=True
        )
    }
    assert [n.id for n in s.top_level_nodes()] == ["lead", "side"]
    assert [n.id for n in s.children_of("lead")] == ["review-a", "review-b"]
    assert s.node("lead").script == (
        ScriptStep(tool_calls=(ScriptCall.create("read_file", {"path": "notes/design.md", "size": 6000}),)),
        ScriptStep(
            tool_calls=(
                ScriptCall.create("spawn", {"node": "review-a"}),
                ScriptCall.create("spawn", {"node": "review-b"}),
            )
        ),
        ScriptStep(text="Delegated both reviews."),
    )
    assert s.node("review-a") == NodeSpec(
        id="review-a",
        spawned_by="lead",
        operation="bounded",
        instruction="Review the notes for errors.",
        script=(ScriptStep(text="No errors found."),),
    )


FULL = """\
schema = "foldline.scenario/v1"
name = "everything"
description = "Every key of every table."

[run]
concurrency = 2
spawn_limit = 3

[provider]
kind = "simulated"
model = "claude-sonnet-4-5"
max_input_tokens = 150000
api_key_env = "FOLDLINE_KEY"
token_factor = 1.2
latency_s = 0.25
lookback_collapse = false
max_retries = 0
faults = [{ kind = "529", on_request = 2, retry_after_ms = 5 }, { kind = "slow", every = 3, delay_s = 1 }]

[profiles.default]
system = "Default."

[profiles.reader]
system = "You read."
tools = ["read_file", "search", "spawn"]
max_input_tokens = 40000
prompt_caching = true
context_management = true
context_fold_at = 0.9
context_fold_target = 0.5
context_fold_tail_margin = 0
tool_result_max_chars = 4096
max_tokens = 512
model = "claude-haiku-5-5"

[[nodes]]
id = "lead"
profile = "reader"
operation = "iterative"
instruction = "Lead."
depends_on = []
max_rounds = 7
max_input_tokens = 30000
script = [{ text = "Spawning.", tool_calls = [{ name = "spawn", arguments = { node = "kid" } }] }, { text = "Done." }]

[[nodes]]
id = "kid"
spawned_by = "lead"
inherit = "none"
operation = "bounded"
instructions = ["First.", "Second."]

[[nodes]]
id = "after"
depends_on = ["lead"]
instruction = "After."
max_input_tokens = 120000
"""


def test_every_key_round_trips_into_the_same_values_as_code() -> None:
    loaded = loads_scenario(FULL, path_label="scenarios/everything.toml", tool_names=TOOLS)
    expected = Scenario(
        path=None,
        name="everything",
        description="Every key of every table.",
        run=RunSettings(concurrency=2, spawn_limit=3),
        provider=ProviderSpec(
            kind="simulated",
            model="claude-sonnet-4-5",
            max_input_tokens=150_000,
            api_key_env="FOLDLINE_KEY",
            token_factor=1.2,
            latency_s=0.25,
            lookback_collapse=False,
            max_retries=0,
            faults=(
                FaultRule(kind="529", on_request=2, retry_after_ms=5),
                FaultRule(kind="slow", every=3, delay_s=1.0),
            ),
        ),
        profiles={
            "default": Profile(system="Default."),
            "reader": Profile(
                system="You read.",
                tools=("read_file", "search", "spawn"),
                max_input_tokens=40_000,
                prompt_caching=True,
                context_management=True,
                context_fold_at=0.9,
                context_fold_target=0.5,
                context_fold_tail_margin=0.0,
                tool_result_max_chars=4096,
                max_tokens=512,
                model="claude-haiku-5-5",
            ),
        },
        nodes=(
            NodeSpec(
                id="lead",
                profile="reader",
                instruction="Lead.",
                max_rounds=7,
                max_input_tokens=30_000,
                script=(
                    ScriptStep(text="Spawning.", tool_calls=(ScriptCall.create("spawn", {"node": "kid"}),)),
                    ScriptStep(text="Done."),
                ),
            ),
            NodeSpec(
                id="kid", spawned_by="lead", inherit="none", operation="bounded", instructions=("First.", "Second.")
            ),
            NodeSpec(id="after", depends_on=("lead",), instruction="After.", max_input_tokens=120_000),
        ),
    )
    assert loaded == expected
    assert loaded.provider.model_config == ModelConfig(name="claude-sonnet-4-5", max_input_tokens=150_000)
    assert loaded.node("kid").planned_instructions() == ("First.", "Second.")


def test_defaults_name_from_the_file_stem_and_empty_tables(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, HEAD + ONE_NODE, "night-run.toml"), tool_names=())
    assert (s.name, s.description) == ("night-run", "")
    assert (s.run, s.provider, dict(s.profiles)) == (RunSettings(), ProviderSpec(), {"default": Profile()})
    from_string = loads_scenario(HEAD + ONE_NODE, path_label="flows/evening.toml", tool_names=())
    assert (from_string.name, from_string.path) == ("evening", None)


def test_accepts_a_path_as_a_string(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + ONE_NODE)
    assert load_scenario(str(path), tool_names=()).path == str(path)


# -- files that cannot be read ----------------------------------------------------


def test_missing_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    with pytest.raises(ScenarioError) as info:
        load_scenario(path, tool_names=TOOLS)
    assert str(info.value) == f"{path}: no such file"
    assert isinstance(info.value, ConfigError) and isinstance(info.value, ValueError)


def test_directory_and_non_utf8_are_named(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r": is a directory, not a scenario file$"):
        load_scenario(tmp_path, tool_names=TOOLS)
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(HEAD.encode() + b'name = "caf\xe9"\n')
    with pytest.raises(ScenarioError) as info:
        load_scenario(bad, tool_names=TOOLS)
    assert str(info.value) == f"{bad}: is not UTF-8 text (byte {len(HEAD) + 11} cannot be decoded)"


def test_syntax_error_names_file_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + "\n[run]\nconcurrency = = 4\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path, tool_names=TOOLS)
    assert str(info.value).startswith(f"{path}: line 4, column 15: TOML syntax error: ")


def test_syntax_error_at_end_of_file_names_the_last_line() -> None:
    message = refuse(HEAD + 'name = "unterminated')
    assert message.startswith("scenarios/x.toml: line 2")
    assert "TOML syntax error" in message
    assert refuse(HEAD + "[run]\nconcurrency = 1\nconcurrency = 2").startswith(
        "scenarios/x.toml: line 4 (end of file): TOML syntax error: Cannot overwrite a value"
    )


# -- the schema and unknown keys ---------------------------------------------------


def test_schema_is_required_and_exact() -> None:
    assert refuse(ONE_NODE) == (
        'scenarios/x.toml: schema: missing; a scenario file starts with schema = "foldline.scenario/v1"'
    )
    assert refuse('schema = "foldline.scenario/v2"\n' + ONE_NODE) == (
        'scenarios/x.toml: schema: "foldline.scenario/v2" is not a schema this loader reads; '
        'expected "foldline.scenario/v1"'
    )
    assert refuse("schema = 1\n" + ONE_NODE).startswith("scenarios/x.toml: schema: 1 is not a schema")
    assert SCHEMA == "foldline.scenario/v1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            HEAD + 'nmae = "x"\n' + ONE_NODE,
            'nmae: unknown key; expected one of description, mcp, name, nodes, pricing, profiles, provider, run, schema (did you mean "name"?)',
        ),
        (
            HEAD + "[runs]\nconcurrency = 1\n" + ONE_NODE,
            'runs: unknown key; expected one of description, mcp, name, nodes, pricing, profiles, provider, run, schema (did you mean "run"?)',
        ),
        (
            HEAD + "exec = 1\n" + ONE_NODE,
            "exec: unknown key; expected one of description, mcp, name, nodes, pricing, profiles, provider, run, schema",
        ),
        (
            HEAD + "[run]\nconcurency = 1\n" + ONE_NODE,
            'run.concurency: unknown key; expected one of concurrency, spawn_limit, workspace (did you mean "concurrency"?)',
        ),
        (HEAD + '[provider]\nmodle = "m"\n' + ONE_NODE, "provider.modle: unknown key; expected one of "),
        (
            HEAD + "[profiles.reader]\ncontext_fold = 0.7\n" + ONE_NODE,
            "profiles.reader.context_fold: unknown key; expected one of ",
        ),
        (
            HEAD + ONE_NODE + '\n[[nodes]]\nid = "b"\ninstrution = "x"\n',
            "nodes[1].instrution: unknown key; expected one of accept_failures, depends_on, id, inherit, inputs, "
            "instruction, instructions, max_input_tokens, max_rounds, operation, output, profile, script, spawned_by "
            '(did you mean "instruction"?)',
        ),
        (HEAD + '[profiles."odd key"]\n' + ONE_NODE, 'profiles."odd key": "odd key" is not a profile name'),
        (HEAD + '[profiles.reader]\n"we ird" = 1\n' + ONE_NODE, 'profiles.reader."we ird": unknown key'),
    ],
)
def test_unknown_keys_are_refused_by_name_at_every_level(text: str, message: str) -> None:
    assert refuse(text).startswith(f"scenarios/x.toml: {message}")


# -- table shapes -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (HEAD + "run = 3\n" + ONE_NODE, "run: 3 is an integer, not a table"),
        (HEAD + 'provider = "simulated"\n' + ONE_NODE, 'provider: "simulated" is a string, not a table'),
        (HEAD + "profiles = []\n" + ONE_NODE, "profiles: [] is an array, not a table"),
        (HEAD + "[profiles]\nreader = 1\n" + ONE_NODE, "profiles.reader: 1 is an integer, not a table"),
        (HEAD, "nodes: missing; a scenario needs at least one [[nodes]] entry"),
        (HEAD + "nodes = []\n", "nodes: no nodes; a scenario needs at least one [[nodes]] entry"),
        (HEAD + '[nodes]\nid = "a"\n', "nodes: a single table; write each node as an [[nodes]] entry"),
        (HEAD + "nodes = [1]\n", "nodes[0]: 1 is an integer, not a table"),
        (HEAD + 'name = ""\n' + ONE_NODE, 'name: "" is not a non-empty scenario name'),
        (HEAD + "name = 1979-05-27\n" + ONE_NODE, "name: 1979-05-27 is a date, not a non-empty scenario name"),
        (HEAD + "description = []\n" + ONE_NODE, "description: [] is an array, not text"),
    ],
)
def test_table_shapes(text: str, message: str) -> None:
    assert refuse(text).startswith(f"scenarios/x.toml: {message}")


# -- values: each refusal names the file and the key path ---------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            ONE_NODE
            + '\n[[nodes]]\nid = "b"\ninstruction = "x"\n\n[[nodes]]\nid = "c"\ninstruction = "x"\nmax_input_tokens = 0\n',
            'nodes[2].max_input_tokens: 0 is not a positive integer, "auto" or "none"',
        ),
        (
            "[profiles.reader]\ncontext_fold_at = 1.5\n" + ONE_NODE,
            "profiles.reader.context_fold_at: 1.5 is not a finite number",
        ),
        (
            "[profiles.reader]\ncontext_fold_at = true\n" + ONE_NODE,
            "profiles.reader.context_fold_at: true is a boolean, not a finite number",
        ),
        (
            '[profiles.reader]\ncontext_fold_at = "0.8"\n' + ONE_NODE,
            'profiles.reader.context_fold_at: "0.8" is a string, not a finite number',
        ),
        (
            "[profiles.reader]\ncontext_fold_at = nan\n" + ONE_NODE,
            "profiles.reader.context_fold_at: nan is not a finite number",
        ),
        (
            "[profiles.reader]\ncontext_fold_target = 0.7\ncontext_fold_at = 0.7\n" + ONE_NODE,
            "profiles.reader.context_fold_target: 0.7 is not below context_fold_at (0.7)",
        ),
        (
            "[profiles.reader]\ncontext_fold_tail_margin = 0.9\n" + ONE_NODE,
            "profiles.reader.context_fold_tail_margin: 0.9 is not below context_fold_at (0.8)",
        ),
        (
            "[profiles.reader]\ntool_result_max_chars = 1000\n" + ONE_NODE,
            "profiles.reader.tool_result_max_chars: 1000 is not an integer >= 1024",
        ),
        (
            "[profiles.reader]\ntool_result_max_chars = 2048.0\n" + ONE_NODE,
            "profiles.reader.tool_result_max_chars: 2048.0 is a float",
        ),
        (
            "[profiles.reader]\nmax_input_tokens = -1\n" + ONE_NODE,
            "profiles.reader.max_input_tokens: -1 is not a positive integer",
        ),
        (
            '[profiles.reader]\nmax_input_tokens = "50000"\n' + ONE_NODE,
            'profiles.reader.max_input_tokens: "50000" is not a positive integer',
        ),
        (
            '[profiles.reader]\nprompt_caching = "yes"\n' + ONE_NODE,
            'profiles.reader.prompt_caching: "yes" is a string, not a boolean',
        ),
        (
            '[profiles.reader]\ntools = ["read_file", "grep"]\n' + ONE_NODE,
            'profiles.reader.tools[1]: "grep" is not a known tool; known tools: fail, read_file, search, spawn',
        ),
        (
            '[profiles.reader]\ntools = ["serch"]\n' + ONE_NODE,
            'profiles.reader.tools[0]: "serch" is not a known tool (did you mean "search"?); known tools: fail, read_file, search, spawn',
        ),
        (
            '[provider]\nkind = "openia"\n' + ONE_NODE,
            'provider.kind: "openia" is not one of "scripted", "simulated", "anthropic", "openai"',
        ),
        (
            '[provider]\nbase_url = "http://127.0.0.1:1"\n' + ONE_NODE,
            'provider.base_url: set for provider kind "simulated"',
        ),
        (
            '[provider]\nkind = "anthropic"\nfaults = [{ kind = "429", every = 1 }]\n' + ONE_NODE,
            'provider.faults: set for provider kind "anthropic"; fault injection applies only to kind "simulated"',
        ),
        ('[provider]\nfaults = [{ kind = "429" }]\n' + ONE_NODE, "provider.faults[0]."),
        ("[provider]\nmax_retries = -1\n" + ONE_NODE, "provider.max_retries: -1 is not an integer >= 0"),
        ("[run]\nconcurrency = 0\n" + ONE_NODE, "run.concurrency: 0 is not a positive integer"),
        ("[run]\nspawn_limit = 1.5\n" + ONE_NODE, "run.spawn_limit: 1.5 is a float, not an integer >= 0"),
        ('[[nodes]]\nid = "a b"\ninstruction = "x"\n', 'nodes[0].id: "a b" is not a node id'),
        ('[[nodes]]\ninstruction = "x"\n', "nodes[0].id: missing; this key is required"),
        ('[[nodes]]\nid = "a"\n', "nodes[0].instruction: missing"),
        (
            '[[nodes]]\nid = "a"\ninstructions = ["x"]\n',
            'nodes[0].instructions: a planned sequence is a bounded operation, but operation is "iterative"',
        ),
        (
            '[[nodes]]\nid = "a"\noperation = "bounded"\ninstruction = "x"\ninstructions = ["y"]\n',
            "nodes[0].instructions: set together with instruction",
        ),
        (
            '[[nodes]]\nid = "a"\ninstruction = "x"\ninherit = "view"\n',
            'nodes[0].inherit: "view" applies to a child (with spawned_by)',
        ),
        (
            '[[nodes]]\nid = "a"\ninstruction = "x"\nmax_rounds = 0\n',
            "nodes[0].max_rounds: 0 is not a positive integer",
        ),
        ('[[nodes]]\nid = "a"\ninstruction = "x"\nscript = [{ text = "" }]\n', "nodes[0].script[0].text: "),
        (
            '[[nodes]]\nid = "a"\ninstruction = "x"\nscript = [{ tool_calls = [{ name = "read_file", args = {} }] }]\n',
            "nodes[0].script[0].tool_calls[0].args: unknown key",
        ),
    ],
)
def test_value_refusals_name_file_and_key_path(text: str, message: str) -> None:
    assert refuse(HEAD + text).startswith(f"scenarios/x.toml: {message}"), refuse(HEAD + text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '\n[[nodes]]\nid = "a"\ninstruction = "x"\n[[nodes]]\nid = "a"\ninstruction = "y"\n',
            'nodes[1].id: "a" is already the id of nodes[0]',
        ),
        ('\n[[nodes]]\nid = "a"\ninstruction = "x"\ndepends_on = ["b"]\n', 'nodes[0].depends_on[0]: "b" names no node'),
        (
            '\n[[nodes]]\nid = "a"\ninstruction = "x"\ndepends_on = ["b"]\n[[nodes]]\nid = "b"\ninstruction = "y"\ndepends_on = ["a"]\n',
            "nodes[0].depends_on: dependency cycle a -> b -> a",
        ),
        (
            '\n[[nodes]]\nid = "a"\ninstruction = "x"\nspawned_by = "lead"\n',
            'nodes[0].spawned_by: "lead" names no node',
        ),
        (
            ONE_NODE + '[[nodes]]\nid = "kid"\ninstruction = "x"\nspawned_by = "solo"\ndepends_on = ["solo"]\n',
            'nodes[1].depends_on: set on a child of "solo"',
        ),
        (
            '\n[[nodes]]\nid = "a"\ninstruction = "x"\nprofile = "reader"\n',
            'nodes[0].profile: "reader" names no profile; profiles: default',
        ),
        (
            '\n[profiles.capped]\nmax_input_tokens = 1000\n[[nodes]]\nid = "a"\nprofile = "capped"\ninstruction = "x"\nmax_input_tokens = "none"\n',
            'nodes[0].max_input_tokens: "none" would lift profile "capped"\'s ceiling of 1000',
        ),
        (
            '\n[[nodes]]\nid = "a"\ninstruction = "x"\nscript = [{ tool_calls = [{ name = "spawn", arguments = { node = "ghost" } }] }]\n',
            'nodes[0].script[0].tool_calls[0].arguments.node: "ghost" is not a child template of "a"',
        ),
    ],
)
def test_graph_refusals_name_file_and_key_path(text: str, message: str) -> None:
    assert refuse(HEAD + text).startswith(f"scenarios/x.toml: {message}")


def test_file_label_is_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "scenarios").mkdir()
    write(tmp_path / "scenarios", HEAD + '[run]\nconcurrency = "4"\n' + ONE_NODE, "bad.toml")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ScenarioError) as info:
        load_scenario(Path("scenarios/bad.toml"), tool_names=TOOLS)
    assert str(info.value) == 'scenarios/bad.toml: run.concurrency: "4" is a string, not a positive integer'


def test_tool_names_must_be_a_collection_of_names() -> None:
    with pytest.raises(TypeError, match="tool_names must be a collection of tool names"):
        loads_scenario(HEAD + ONE_NODE, path_label="x", tool_names="read_file")
    with pytest.raises(TypeError, match="tool_names must hold strings"):
        loads_scenario(HEAD + ONE_NODE, path_label="x", tool_names=[1])
    with pytest.raises(TypeError, match="text must be a str"):
        loads_scenario(b"schema", path_label="x", tool_names=())  # type: ignore[arg-type]


def test_scenario_error_survives_pickling() -> None:
    error = ScenarioError("scenarios/x.toml", "run.concurrency: 0 is not a positive integer")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.file, copy.detail, str(copy)) == (error.file, error.detail, str(error))
