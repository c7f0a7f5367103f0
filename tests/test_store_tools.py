"""A stored run loads the same tools as one without a store, and so does its resume (issue 14).

``foldline run --store`` loads the built-ins, ``read_image`` beside the
scenario file, the workspace tools and a ``--tools`` registry; the store keeps
the ``--tools`` spec, so ``foldline resume`` (and ``replay``, ``inspect`` and
``report``) load them again.
"""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime.cli import main
from runtime.config.loader import load_scenario
from runtime.scenarios.tools import TOOL_NAMES_KEY, TOOLS_SPEC_KEY, run_tools, stored_tool_names, tools_meta
from runtime.store.reader import StoreReader
from runtime.store.run import run_scenario_stored
from runtime.values.messages import ToolResult

TESTS = Path(__file__).resolve().parent
SCENARIOS = TESTS.parent / "scenarios"
VISION = SCENARIOS / "vision.toml"
FIGURES = ("vision/chart.png", "vision/diagram.png", "vision/photo.png")

USER_SCENARIO = """
schema = "foldline.scenario/v1"
[provider]
kind = "scripted"
[profiles.default]
tools = ["add", "synthetic_read"]
[[nodes]]
id = "user"
instruction = "Add, read, add."
script = [
  { tool_calls = [{ name = "add", arguments = { a = 2, b = 3 } }] },
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "a.md", size = 300 } }] },
  { tool_calls = [{ name = "add", arguments = { a = 5, b = 8 } }] },
  { text = "Thirteen." },
]
"""


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


async def cut_run(scenario: Path, store: Path, *, tools_spec: str | None, after: int) -> None:
    """Run ``scenario`` with a store as the CLI does, and stop it (Ctrl-C) after ``after`` responses."""
    tools = run_tools(scenario, tools_spec)
    loaded = load_scenario(scenario, tool_names=tools.names())
    seen = 0
    with anyio.CancelScope() as scope:

        def progress(event: Any) -> None:
            nonlocal seen
            if getattr(event, "type", None) == "ResponseReceived":
                seen += 1
                if seen >= after:
                    scope.cancel()

        await run_scenario_stored(
            loaded, store_path=store, progress=progress, registry=tools.registry(loaded), tools_meta=tools_meta(tools)
        )
    assert scope.cancelled_caught


def replay_all(store: Path) -> str:
    code, out, err = cli("replay", str(store), "--all")
    assert code == 0, err + out
    return out


def test_vision_runs_with_a_store_and_replays_and_resume_verifies(tmp_path: Path) -> None:
    store = tmp_path / "vision.db"
    code, out, err = cli("run", str(VISION), "--store", str(store), "--quiet")
    assert code == 0, err
    assert "folds: 2" in out  # look-small folded its images into notes under its small ceiling
    with StoreReader(store) as reader:
        calls = [e.data["name"] for e in reader.events(types=("ToolCallFinished",))]
        assert calls.count("read_image") == 6
        assert TOOLS_SPEC_KEY not in reader.meta()  # no --tools: nothing to import again
    assert "9 of 9 requests verified" in replay_all(store)
    code, out, err = cli("resume", str(store), "--quiet")
    assert code == 0 and "nothing to resume" in err and "9 of 9 requests verified" in err
    code, out, err = cli("inspect", str(store), "--branch", "look")
    assert code == 0 and "read_image result" in out
    code, out, err = cli("report", str(store), "--html", str(tmp_path / "r.html"))
    assert code == 0, err


@pytest.mark.parametrize("after", [1, 2])
def test_a_stopped_vision_run_resumes_with_read_image(tmp_path: Path, after: int) -> None:
    store = tmp_path / "cut.db"
    anyio.run(lambda: cut_run(VISION, store, tools_spec=None, after=after))
    code, out, err = cli("resume", str(store), "--quiet")
    assert code == 0, err + out
    with StoreReader(store) as reader:
        assert [e.data["status"] for e in reader.events(types=("RunFinished",))] == ["ok"]
        nodes = reader.node_of_branches()
        for branch_id, branch in reader.restore_branches().items():
            read = [
                m
                for m in (branch.message_at(i) for i in range(branch.record_length()))
                if isinstance(m, ToolResult) and m.name == "read_image" and not m.is_error
            ]
            # each node read its three figures (a call the stop cancelled ran again on resume)
            assert {json.loads(m.arguments_json)["path"] for m in read} == set(FIGURES), nodes[branch_id]
            assert all(len(m.images) == 1 for m in read)
    assert "requests verified" in replay_all(store)


def test_the_workspace_scenario_runs_with_a_store_and_replays(tmp_path: Path) -> None:
    store = tmp_path / "ws.db"
    code, out, err = cli("run", str(SCENARIOS / "workspace.toml"), "--store", str(store), "--quiet")
    assert code == 0, err
    with StoreReader(store) as reader:
        names = {e.data["name"] for e in reader.events(types=("ToolCallFinished",))}
    assert {"list_files", "read_file", "grep"} <= names
    replay_all(store)


@pytest.fixture
def in_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from the tests directory, as a user runs from the directory holding their package."""
    monkeypatch.chdir(TESTS)


def test_user_tools_are_stored_by_spec_and_loaded_again_on_resume(in_tests: None, tmp_path: Path) -> None:
    scenario, store = tmp_path / "user.toml", tmp_path / "user.db"
    scenario.write_text(USER_SCENARIO)
    spec = "tests_support.user_tools:registry"
    anyio.run(lambda: cut_run(scenario, store, tools_spec=spec, after=2))
    with StoreReader(store) as reader:
        meta = reader.meta()
    assert meta[TOOLS_SPEC_KEY] == spec and "add" in json.loads(meta[TOOL_NAMES_KEY])
    assert "add" in stored_tool_names(meta)  # readers load the scenario without importing the module

    code, out, err = cli("resume", str(store), "--quiet")
    assert code == 0, err + out
    with StoreReader(store) as reader:
        assert [e.data["status"] for e in reader.events(types=("RunFinished",))] == ["ok"]
        (branch,) = reader.restore_branches().values()
    results = [m for m in branch.view() if isinstance(m, ToolResult)]
    assert [(m.name, m.is_error) for m in results] == [("add", False), ("synthetic_read", False), ("add", False)]
    assert [m.output for m in results if m.name == "add"] == ["5", "13"]  # the user's add ran after the resume
    replay_all(store)


def test_run_with_store_and_tools_on_the_command_line(in_tests: None, tmp_path: Path) -> None:
    scenario, store = tmp_path / "user.toml", tmp_path / "user.db"
    scenario.write_text(USER_SCENARIO)
    code, out, err = cli(
        "run", str(scenario), "--store", str(store), "--tools", "tests_support.user_tools:registry", "--quiet"
    )
    assert code == 0, err + out
    connection = sqlite3.connect(store)
    spec = connection.execute("SELECT value FROM meta WHERE key = ?", (TOOLS_SPEC_KEY,)).fetchone()
    connection.close()
    assert spec == ("tests_support.user_tools:registry",)
    replay_all(store)
    code, _out, err = cli("run", str(scenario), "--store", str(tmp_path / "b.db"), "--tools", "x:y", "--quiet")
    assert code == 2 and "--tools: cannot import 'x'" in err
