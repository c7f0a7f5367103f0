"""Tools of the user's code on the command line, and what a failing tool becomes.

A tool that raises, one that times out and one given arguments that fail its
schema each become an ``is_error`` result the model sees; the loop goes on and
the run exits 0. With ``tool_errors = "fail"`` the node fails as before.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from runtime.cli import main
from runtime.config import load_scenario
from runtime.scenarios.run import run_scenario
from runtime.scenarios.tools import load_user_tools, scenario_registry, tool_names_for_loading
from runtime.values.messages import ToolResult
from signals.sinks import read_jsonl

TESTS = Path(__file__).resolve().parent
TOKEN = "tok-7f3a9c1e5b2d4f60"

SCENARIO = """
schema = "foldline.scenario/v1"

[provider]
kind = "{kind}"

[profiles.default]
tools = ["add", "explode", "stall", "leak", "synthetic_read"]
{extra}

[[nodes]]
id = "user"
instruction = "Use the tools."
script = [
  {{ tool_calls = [
      {{ name = "add", arguments = {{ a = 2, b = 3 }} }},
      {{ name = "explode", arguments = {{ message = "the disk is on fire" }} }},
      {{ name = "stall", arguments = {{ seconds = 30.0 }} }},
      {{ name = "add", arguments = {{ a = "two", b = 3 }} }},
      {{ name = "leak", arguments = {{}} }},
  ] }},
  {{ tool_calls = [{{ name = "synthetic_read", arguments = {{ path = "a.md", size = 300 }} }}] }},
  {{ text = "Five went in; three failed and I carried on." }},
]
"""


def write(tmp_path: Path, *, kind: str = "scripted", extra: str = "") -> Path:
    path = tmp_path / "user.toml"
    path.write_text(SCENARIO.format(kind=kind, extra=extra))
    return path


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def in_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from the tests directory, as a user runs from the directory holding their package."""
    monkeypatch.chdir(TESTS)
    monkeypatch.setenv("FOLDLINE_TEST_TOKEN", TOKEN)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["scripted", "simulated"])
def test_user_tools_run_and_their_errors_go_to_the_model(in_tests: None, tmp_path: Path, kind: str) -> None:
    signals, report = tmp_path / "s.jsonl", tmp_path / "r.json"
    code, out, err = cli(
        "run",
        str(write(tmp_path, kind=kind)),
        "--tools",
        "tests_support.user_tools:registry",
        "--signals",
        str(signals),
        "--report",
        str(report),
        "--quiet",
    )
    assert code == 0, err + out
    finished = [e.data for e in read_jsonl(signals) if e.type == "ToolCallFinished"]
    assert [(d["name"], d["is_error"]) for d in finished] == [
        ("add", False),
        ("explode", True),
        ("stall", True),
        ("add", True),
        ("leak", True),
        ("synthetic_read", False),
    ]
    data = json.loads(report.read_text())
    assert data["nodes"]["user"]["status"] == "ok"
    assert data["tools"]["calls"] == 6 and data["tools"]["errors"] == 4
    assert "explode: 1 call, 1 error, " in out and "add: 2 calls, 1 error, " in out


@pytest.mark.anyio
async def test_the_model_sees_each_error_by_its_message_without_a_traceback_or_a_secret(
    in_tests: None, tmp_path: Path
) -> None:
    user = load_user_tools("tests_support.user_tools:registry")
    scenario = load_scenario(write(tmp_path), tool_names=tool_names_for_loading(user))
    run = await run_scenario(scenario, registry=scenario_registry(scenario, user))
    view = run.result.branches["user"].view()
    results = {r.call_id: r for r in view if isinstance(r, ToolResult)}
    by_order = list(results.values())
    assert by_order[0].output == "5" and not by_order[0].is_error
    assert by_order[1].is_error and by_order[1].output == "RuntimeError: the disk is on fire"
    assert by_order[2].is_error and by_order[2].output == "stall: timed out after 0.2 s"
    assert by_order[3].is_error and "add: argument 'a'" in by_order[3].output and "'two'" in by_order[3].output
    assert by_order[4].is_error and TOKEN not in by_order[4].output
    assert "[FOLDLINE_TEST_TOKEN redacted]" in by_order[4].output
    assert all("Traceback" not in r.output for r in by_order)
    assert run.report["status"] == "ok"


def test_with_tool_errors_fail_the_node_fails_as_before(in_tests: None, tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    path = write(tmp_path, extra='tool_errors = "fail"')
    code, _out, err = cli(
        "run", str(path), "--tools", "tests_support.user_tools:registry", "--report", str(report), "--quiet"
    )
    assert code == 1, err
    node = json.loads(report.read_text())["nodes"]["user"]
    assert node["status"] == "failed"
    assert node["reason"] == "ToolFailed: tool 'explode' raised RuntimeError: the disk is on fire"


def test_an_unknown_tool_exits_2_naming_the_key_and_the_available_names(in_tests: None, tmp_path: Path) -> None:
    path = tmp_path / "unknown.toml"
    path.write_text(
        'schema = "foldline.scenario/v1"\n[profiles.default]\ntools = ["add", "subtract"]\n'
        '[[nodes]]\nid = "a"\ninstruction = "x"\n'
    )
    code, out, err = cli("run", str(path), "--tools", "tests_support.user_tools:registry", "--quiet")
    assert code == 2 and out == ""
    assert f'{path}: profiles.default.tools[1]: "subtract" is not a known tool' in err
    for name in ("add", "explode", "grep", "leak", "list_files", "read_file", "stall", "synthetic_read"):
        assert name in err.split("known tools:")[1]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("tests_support.user_tools", "is not of the form package.module:attribute"),
        ("tests_support.nowhere:registry", "cannot import 'tests_support.nowhere'"),
        ("tests_support.user_tools:missing", "module 'tests_support.user_tools' has no attribute 'missing'"),
        ("tests_support.user_tools:not_a_registry", "is a int, not a ToolRegistry, a Tool or a list of tools"),
    ],
)
def test_a_bad_tools_option_exits_2(in_tests: None, tmp_path: Path, spec: str, message: str) -> None:
    code, _out, err = cli("run", str(write(tmp_path)), "--tools", spec, "--quiet")
    assert code == 2 and message in err and err.startswith("foldline: --tools: ")


def test_a_workspace_tool_without_a_workspace_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "nows.toml"
    path.write_text(
        'schema = "foldline.scenario/v1"\n[profiles.default]\ntools = ["read_file"]\n'
        '[[nodes]]\nid = "a"\ninstruction = "x"\n'
    )
    code, _out, err = cli("run", str(path), "--quiet")
    assert code == 2
    assert f"{path}: profiles.default.tools[0]: 'read_file' is a workspace tool; set [run] workspace" in err
