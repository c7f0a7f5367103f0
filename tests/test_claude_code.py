"""A real client in the tests: Claude Code completing a scripted task against ``foldline sim``, offline.

The README's recipe ("Point your own client at the simulator"), run verbatim
with ``bash`` (its scratch directory and port swapped for the test's): Claude
Code (npm ``@anthropic-ai/claude-code``, on its default model) runs
non-interactively (``claude -p ... --output-format json``) with
``ANTHROPIC_BASE_URL`` at the simulator, its non-essential traffic off and a
dummy key; ``ANTHROPIC_CUSTOM_HEADERS`` names the script node
(``x-foldline-node: cc``), whose steps list the scratch directory, read a file
and edit it. The test checks that the edit landed on disk and that Claude Code
reported success. It is skipped, saying why, when ``claude`` (or ``curl``,
which the recipe polls with) is not on PATH; ``.ci/run`` installs a pinned
Claude Code when ``npm`` is present.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
TIMEOUT_S = 180
MISSING = [tool for tool in ("claude", "curl") if shutil.which(tool) is None]


def recipe() -> str:
    blocks = [b for b in re.findall(r"```sh\n(.*?)```", README, flags=re.DOTALL) if "ANTHROPIC_CUSTOM_HEADERS" in b]
    assert len(blocks) == 1, "the README has no (or more than one) Claude Code recipe"
    return blocks[0]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_readme_recipe_names_the_script_node_and_the_offline_settings() -> None:
    text = recipe()
    for needed in ("x-foldline-node: cc", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "--output-format json"):
        assert needed in text


@pytest.mark.skipif(
    bool(MISSING), reason=f"not on PATH: {', '.join(MISSING)} (npm install -g @anthropic-ai/claude-code)"
)
def test_claude_code_lists_reads_and_edits_files_against_the_simulator(tmp_path: Path) -> None:
    scratch = tmp_path / "cc-demo"
    script = recipe().replace("/tmp/cc-demo", str(scratch)).replace("8765", str(free_port()))
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "HOME": str(home),
    }
    finished = subprocess.run(
        # The trap ends the recipe's background simulator even when a step fails.
        ["bash", "-euo", "pipefail", "-c", "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + script],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
        cwd=tmp_path,
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    answer, printed = finished.stdout.rsplit("\n", 2)[0], finished.stdout.splitlines()[-1]
    result = json.loads(answer.splitlines()[-1])
    assert result["is_error"] is False and result["num_turns"] == 4
    assert result["result"] == "Done: notes.txt now says goodbye."
    assert printed == "goodbye world"
    assert (scratch / "notes.txt").read_text() == "goodbye world\n"
