"""The shipped bench workload files run as they are under `foldline run`, and `bench --workload` takes a scenario."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from runtime.cli import main
from runtime.config.loader import load_scenario
from runtime.scenarios.tools import run_tools, stored_tool_names

ROOT = Path(__file__).resolve().parents[1]
BENCH_FILES = sorted((ROOT / "scenarios" / "bench").glob("*.toml"))


@pytest.mark.parametrize("path", BENCH_FILES, ids=lambda p: p.stem)
def test_every_bench_file_loads_with_the_tools_run_offers_without_tools(path: Path) -> None:
    scenario = load_scenario(path, tool_names=run_tools(path).names())
    used = {t for profile in scenario.profiles.values() for t in profile.tools if isinstance(t, str)}
    assert used & {"read_doc", "stage", "answer"}  # the bench's own tools, offered by foldline run itself
    assert used <= stored_tool_names({"scenario_path": str(path)})  # a store of the run loads it again


@pytest.mark.slow
def test_a_bench_file_runs_under_foldline_run_as_shipped(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    err = io.StringIO()
    code = main(
        ["run", str(ROOT / "scenarios/bench/fits.toml"), "--report", str(report), "--quiet"], out=io.StringIO(), err=err
    )
    assert code == 0, err.getvalue()
    data = json.loads(report.read_text())
    assert data["status"] == "ok" and data["cost"]["usd"] is not None


@pytest.mark.slow
def test_bench_takes_the_quickstart_as_a_workload_on_its_own_model() -> None:
    out, err = io.StringIO(), io.StringIO()
    argv = [
        "bench",
        "--provider",
        "scripted",
        "--workload",
        str(ROOT / "scenarios/quickstart.toml"),
        "--strategies",
        "naive",
    ]
    code = main(argv, out=out, err=err)
    assert code == 0, err.getvalue()
    assert "== quickstart" in out.getvalue()
