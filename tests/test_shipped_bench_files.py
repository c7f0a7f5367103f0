"""The shipped bench workload files run as they are under `foldline run`, and `bench --workload` takes a scenario."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from runtime.bench.strategies import STRATEGIES
from runtime.bench.tools import BENCH_TOOLS
from runtime.bench.workloads import RUN_AS_IS, SMALL, WORKLOADS, render
from runtime.cli import main
from runtime.config import Profile
from runtime.config.loader import load_scenario, loads_scenario
from runtime.scenarios.tools import run_tools, stored_tool_names

ROOT = Path(__file__).resolve().parents[1]
BENCH_FILES = sorted((ROOT / "scenarios" / "bench").glob("*.toml"))


@pytest.mark.parametrize("path", BENCH_FILES, ids=lambda p: p.stem)
def test_every_bench_file_loads_with_the_tools_run_offers_without_tools(path: Path) -> None:
    scenario = load_scenario(path, tool_names=run_tools(path).names())
    used = {t for profile in scenario.profiles.values() for t in profile.tools if isinstance(t, str)}
    assert used & {"read_doc", "stage", "answer"}  # the bench's own tools, offered by foldline run itself
    assert used <= stored_tool_names({"scenario_path": str(path)})  # a store of the run loads it again


RUN_AS_SHIPPED = ("fits", "reading-20k", "reading-40k", "fanout", "emitter")
"""The files the README says ``foldline run`` runs as they are (the staged ones need the bench's reader)."""


@pytest.mark.slow
@pytest.mark.parametrize("name", RUN_AS_SHIPPED)
def test_a_bench_file_runs_under_foldline_run_as_shipped(tmp_path: Path, name: str) -> None:
    report = tmp_path / "r.json"
    err = io.StringIO()
    path = ROOT / "scenarios" / "bench" / f"{name}.toml"
    code = main(["run", str(path), "--report", str(report), "--quiet"], out=io.StringIO(), err=err)
    assert code == 0, err.getvalue()
    data = json.loads(report.read_text())
    assert data["status"] == "ok" and data["cost"]["usd"] is not None
    if name != "fits":  # each of the others is over a ceiling somewhere unless it folds
        assert data["folds"] > 0, data


@pytest.mark.parametrize("name", ["staged-64", "staged-curl"])
def test_a_staged_file_under_foldline_run_names_the_command_that_resolves_its_recalls(
    tmp_path: Path, name: str
) -> None:
    err = io.StringIO()
    path = ROOT / "scenarios" / "bench" / f"{name}.toml"
    code = main(["run", str(path), "--report", str(tmp_path / "r.json"), "--quiet"], out=io.StringIO(), err=err)
    data = json.loads((tmp_path / "r.json").read_text())
    assert code == 1 and data["status"] == "failed"
    reason = json.dumps(data)
    assert "a recall only the bench's reader resolves" in reason and "foldline bench --workload FILE" in reason


@pytest.mark.parametrize("workload", WORKLOADS)
def test_the_files_own_settings_change_no_strategy(workload: str) -> None:
    """Each file carries foldline's settings (RUN_AS_IS) for ``foldline run``; every strategy sets them
    itself, so a strategy applied to the file as shipped and to the file without them gives the same profiles."""
    shipped = loads_scenario(render(workload, SMALL), path_label=f"{workload}.toml", tool_names=BENCH_TOOLS.names())
    bare = shipped.evolve(
        profiles={
            name: profile.evolve(**{key: getattr(Profile(), key) for key in RUN_AS_IS})
            for name, profile in shipped.profiles.items()
        }
    )
    assert any(getattr(p, key) != getattr(Profile(), key) for p in shipped.profiles.values() for key in RUN_AS_IS)
    for strategy in STRATEGIES.values():
        assert strategy.apply(shipped).profiles == strategy.apply(bare).profiles, strategy.name


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
