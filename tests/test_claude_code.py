"""A real client in the tests: Claude Code completing a scripted task against ``foldline sim``, offline.

Claude Code (npm ``@anthropic-ai/claude-code``, on its default model) runs
non-interactively (``claude -p ... --output-format json``) with
``ANTHROPIC_BASE_URL`` at the simulator, its non-essential traffic off and a
dummy key; ``ANTHROPIC_CUSTOM_HEADERS`` names the script node
(``x-foldline-node: cc``), whose steps list the scratch directory, read a file
and edit it. The test checks that the edit landed on disk and that Claude
Code reported success. It is skipped, saying why, when ``claude`` is not on
PATH (``.ci/run`` installs a pinned Claude Code when ``npm`` is present).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.sim_process import foldline_sim

pytestmark = pytest.mark.slow

CLAUDE = shutil.which("claude")
TIMEOUT_S = 180


def script(scratch: Path) -> str:
    notes = json.dumps(str(scratch / "notes.txt"))
    return f"""schema = "foldline.sim-script/v1"

[[nodes.cc.steps]]
tool_calls = [{{ name = "Glob", arguments = {{ pattern = "*.txt" }} }}]

[[nodes.cc.steps]]
tool_calls = [{{ name = "Read", arguments = {{ file_path = {notes} }} }}]

[[nodes.cc.steps]]
tool_calls = [{{ name = "Edit", arguments = {{ file_path = {notes}, old_string = "hello world", new_string = "goodbye world" }} }}]

[[nodes.cc.steps]]
text = "Done: notes.txt now says goodbye."
"""


@pytest.mark.skipif(
    CLAUDE is None, reason="Claude Code ('claude') is not on PATH: npm install -g @anthropic-ai/claude-code"
)
def test_claude_code_lists_reads_and_edits_files_against_the_simulator(tmp_path: Path) -> None:
    assert CLAUDE is not None
    scratch = tmp_path / "work"
    scratch.mkdir()
    (scratch / "notes.txt").write_text("hello world\n")
    (scratch / "other.txt").write_text("left alone\n")
    script_file = tmp_path / "script.toml"
    script_file.write_text(script(scratch))
    home = tmp_path / "home"
    home.mkdir()
    with foldline_sim("--script", str(script_file)) as sim:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(home),
            "ANTHROPIC_BASE_URL": sim.url,
            "ANTHROPIC_API_KEY": "sk-foldline-sim",
            "ANTHROPIC_CUSTOM_HEADERS": "x-foldline-node: cc",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        finished = subprocess.run(
            [
                CLAUDE,
                "-p",
                "Change hello to goodbye in notes.txt",
                "--output-format",
                "json",
                "--allowedTools",
                "Glob Read Edit",
            ],
            cwd=scratch,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    assert finished.returncode == 0, finished.stderr[-2000:]
    result = json.loads(finished.stdout)
    assert result["is_error"] is False and result["num_turns"] == 4
    assert result["result"] == "Done: notes.txt now says goodbye."
    assert (scratch / "notes.txt").read_text() == "goodbye world\n"
    assert (scratch / "other.txt").read_text() == "left alone\n"
