"""scripts/scale.py runs (tiny sizes: it is a benchmark, timed by no test) and refuses bad arguments."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "scale.py"


def test_the_scale_script_reports_every_figure_per_provider() -> None:
    args = ["--providers", "scripted,simulated", "--nodes", "3", "--runs", "1", "--json", "--max-in-flight", "2"]
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    runs = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [run["provider"] for run in runs] == ["scripted", "simulated"]
    for run in runs:
        assert run["nodes"] == 3 and run["requests"] == 12  # three tool rounds and an answer per node
        assert run["cpu_per_request_ms"] > 0 and run["requests_per_s"] > 0 and run["peak_rss_mb"] > 0
        assert 0 <= run["gc_share"] < 1
    rows = [line for line in done.stdout.splitlines() if line.startswith(("scripted ", "simulated "))]
    assert len(rows) == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nodes", "0"], "--nodes: '0': every size must be from 1 to 50,000"),
        (["--nodes", "2,x"], "--nodes: '2,x' is not a comma-separated list of integers"),
        (["--providers", "openai"], "--providers: 'openai': expected scripted and/or simulated"),
        (["--runs", "0"], "--runs: 0 must be from 1 to 20"),
        (["--providers", "simulated", "--nodes", "1", "--max-in-flight", "0"], "ProviderSpec.max_in_flight: 0"),
    ],
)
def test_the_scale_script_refuses_bad_arguments(args: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode != 0 and message in done.stderr


def test_the_first_request_probe_reports_no_sdk_import() -> None:
    args = ["--first-request", "--runs", "1"]
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("anthropic imported: False")
