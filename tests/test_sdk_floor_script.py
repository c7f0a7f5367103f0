"""scripts/sdk_floor.py runs (tiny sizes: it is a benchmark, timed by no test) and refuses bad arguments."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "sdk_floor.py"


def test_the_floor_script_sends_scale_payloads_to_a_canned_server_and_reports_both_sides() -> None:
    clients = "httpx,aiohttp" if importlib.util.find_spec("aiohttp") is not None else "httpx"
    args = ["--requests", "30", "--concurrency", "8", "--runs", "1", "--clients", clients, "--json"]
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    runs = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [run["client"] for run in runs] == clients.split(",")
    for run in runs:
        assert run["requests"] == 30 and run["concurrency"] == 8
        # scale.py's node: a system prompt, the synthetic_read tool and up to three 800-character results
        assert 1_000 < run["payload_bytes"] < 10_000
        assert run["reply_bytes"] > 500  # the simulator's streamed tool call, message_start to message_stop
        assert run["cpu_per_request_ms"] > 0 and run["server_cpu_per_request_ms"] > 0
    rows = [line for line in done.stdout.splitlines() if line.startswith(("httpx ", "aiohttp "))]
    assert len(rows) == len(runs)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--requests", "0"], "--requests: 0 must be from 1 to 200,000"),
        (["--concurrency", "20000"], "--concurrency: 20000 must be from 1 to 10,000"),
        (["--runs", "21"], "--runs: 21 must be from 1 to 20"),
        (["--clients", "requests"], "--clients: 'requests': expected aiohttp and/or httpx"),
    ],
)
def test_the_floor_script_refuses_bad_arguments(args: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode != 0 and message in done.stderr
