"""Commands that open no provider never import the anthropic SDK (checked in a fresh interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import contextlib, io, json, sys
from runtime.cli import main
codes = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            codes.append(main(argv, out=out, err=err))
        except SystemExit as exc:
            codes.append(exc.code)
anthropic = sorted(m for m in sys.modules if m.split(".")[0] == "anthropic")
print(json.dumps({"codes": codes, "anthropic": anthropic, "structlog": "structlog" in sys.modules}))
"""


def _probe(commands: list[list[str]]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(commands)], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_help_argument_errors_and_a_bad_scenario_leave_the_sdk_unimported(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('schema = "foldline.scenario/v1"\n[flow]\nname = 3\n', encoding="utf-8")
    result = _probe(
        [
            ["--help"],
            ["run", "--no-such-option"],
            ["bench", "--workloads", ""],
            ["run", str(bad)],
            ["run", str(tmp_path / "missing.toml")],
            ["bench", "--help"],
        ]
    )
    assert result["codes"] == [0, 2, 2, 2, 2, 0]
    assert result["anthropic"] == []
    assert result["structlog"] is False  # configured by the command line, imported only by a first log line


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lazy") / "run.db"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "runtime.cli",
            "run",
            str(ROOT / "scenarios" / "quickstart.toml"),
            "--provider",
            "scripted",
            "--quiet",
            "--store",
            str(path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return path


def test_inspect_replay_and_events_leave_the_sdk_unimported(store: Path) -> None:
    result = _probe([["inspect", str(store)], ["replay", str(store), "--all"], ["events", str(store)]])
    assert result["codes"] == [0, 0, 0]
    assert result["anthropic"] == []


def test_opening_the_simulated_provider_imports_the_sdk_then() -> None:
    code = (
        "import sys, anyio\n"
        "from runtime.config import ProviderSpec\n"
        "from runtime.scripted.policies import PolicyRegistry\n"
        "from runtime.providers.factory import open_provider\n"
        "before = 'anthropic' in sys.modules\n"
        "async def main():\n"
        "    async with open_provider(ProviderSpec(kind='simulated'), PolicyRegistry(), clock=lambda: 0.0) as p:\n"
        "        return type(p).__name__\n"
        "name = anyio.run(main)\n"
        "print(before, 'anthropic' in sys.modules, name)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "True", "AnthropicProvider"]
