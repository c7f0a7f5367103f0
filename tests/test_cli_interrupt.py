"""No traceback where an exit status belongs (issue 28, item 14).

- Ctrl-C during ``run --store``: one line saying the run was interrupted and
  how to resume it, exit 130 (before: two chained tracebacks); the resume it
  names then finishes the run.
- ``foldline events`` on an event row that is not UTF-8: named, no traceback.
- A ``base_url`` holding a tab or a newline: exit 2 naming it (before: it
  passed both checks and failed inside the HTTP client).
"""

from __future__ import annotations

import io
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.cli.main import main

ROOT = Path(__file__).resolve().parents[1]

TOOLS = '''
from pathlib import Path

import anyio

from runtime import tool


@tool(timeout_s=None)
async def wait_once(marker: str) -> str:
    """Wait a long time the first time it is called (the test interrupts the run then)."""
    path = Path(marker)
    if path.exists():
        return "second call: no wait"
    path.write_text("started")
    await anyio.sleep(60)
    return "waited"


registry = [wait_once]
'''

SCENARIO = """
schema = "foldline.scenario/v1"

[provider]
kind = "scripted"

[profiles.default]
tools = ["wait_once"]

[[nodes]]
id = "n"
instruction = "Call the tool."
script = [
  {{ tool_calls = [{{ name = "wait_once", arguments = {{ marker = "{marker}" }} }}] }},
  {{ text = "done" }},
]
"""


def test_ctrl_c_during_run_store_prints_one_line_naming_the_resume_and_exits_130(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    (tmp_path / "interrupt_tools.py").write_text(TOOLS, encoding="utf-8")
    scenario = tmp_path / "s.toml"
    scenario.write_text(SCENARIO.format(marker=marker), encoding="utf-8")
    store = tmp_path / "run.db"
    argv = [sys.executable, "-m", "runtime.cli", "run", str(scenario), "--store", str(store), "--quiet"]
    argv += ["--tools", "interrupt_tools:registry"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the tool never started"
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err
    assert "Traceback" not in err and out == ""
    assert err == (
        f"foldline: run interrupted; the store keeps every step it finished: continue with `foldline resume {store}`\n"
    )
    resumed = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "resume", str(store), "--quiet"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr


def test_events_on_a_row_that_is_not_utf8_names_the_row(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    code = main(
        [
            "run",
            str(ROOT / "scenarios" / "quickstart.toml"),
            "--provider",
            "scripted",
            "--quiet",
            "--store",
            str(store),
        ],
        out=io.StringIO(),
        err=io.StringIO(),
    )
    assert code == 0
    with sqlite3.connect(store) as connection:
        connection.execute("UPDATE events SET body = CAST(X'7B2274797065223A22FF227D' AS TEXT) WHERE rowid = 3")
    out, err = io.StringIO(), io.StringIO()
    assert main(["events", str(store)], out=out, err=err) == 1
    assert err.getvalue() == f"foldline: malformed store: {store}: events row 3: not UTF-8 text (byte 0xff at 9)\n"


@pytest.mark.parametrize("bad", ["\\t", "\\n", "\\r", " "])
def test_a_base_url_with_a_tab_or_newline_exits_2_naming_it(tmp_path: Path, bad: str) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        'schema = "foldline.scenario/v1"\n[provider]\nkind = "anthropic"\n'
        f'base_url = "http://127.0.0.1:9/{bad}v1"\n[[nodes]]\nid = "a"\ninstruction = "Hello."\n',
        encoding="utf-8",
    )
    out, err = io.StringIO(), io.StringIO()
    assert main(["run", str(scenario), "--quiet"], out=out, err=err) == 2
    message = err.getvalue()
    assert message.startswith(f"foldline: {scenario}: provider.base_url: ") and "Traceback" not in message
    assert message.rstrip().endswith("with no spaces, tabs, newlines or control characters")
