"""A tool call that times out stops its work, and the process exits when the run ends (issue 28, item 8).

Before: a grep past its timeout kept its worker thread searching (a core busy
for minutes after ``RunFinished``, one more per repeated call), and a sync
tool that never returns kept the process from exiting.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import attrs
import pytest

from actors.tools import ToolContext, workspace_tools
from actors.tools.executor import RoundTools, run_calls
from actors.tools.stopping import ToolStopped, check_stop, stop_requested
from runtime.values.messages import ToolCall, ToolResult

ROOT = Path(__file__).resolve().parents[1]
CONTEXT = ToolContext(node_id=None, branch_id="b")


async def _one_call(tool: object, arguments: dict[str, object]) -> ToolResult:
    name = tool.name  # type: ignore[attr-defined]
    setup = RoundTools(offered=frozenset({name}), tools={name: tool}, context=CONTEXT)  # type: ignore[dict-item]
    results: list[ToolResult] = []
    await run_calls([ToolCall.create("c1", name, arguments)], setup, results.append)
    return results[0]


@pytest.mark.anyio
async def test_a_grep_past_its_timeout_stops_searching(tmp_path: Path) -> None:
    # 200 lines that each take the pattern ~0.1 s (under grep's 0.5 s per-line bound): ~20 s of work.
    (tmp_path / "slow.txt").write_text(("a" * 22 + "!\n") * 200)
    grep = next(t for t in workspace_tools(tmp_path) if t.name == "grep")
    result = await _one_call(attrs.evolve(grep, timeout_s=0.3), {"pattern": "(a|aa)+$"})
    assert result.is_error and result.output == "grep: timed out after 0.3 s"
    await anyio.sleep(1.0)  # the stop is seen at the next line: well within a second
    cpu = time.process_time()
    await anyio.sleep(1.0)
    busy = time.process_time() - cpu
    assert busy < 0.1, f"the process used {busy:.2f} s of CPU in the second after the call ended"


def test_check_stop_outside_a_call_does_nothing() -> None:
    assert stop_requested() is False
    check_stop("anything")


@pytest.mark.anyio
async def test_a_sync_tool_sees_its_stop_flag_once_its_call_ends() -> None:
    from actors.tools import tool

    seen: list[str] = []

    @tool(timeout_s=0.2)
    def patient() -> str:
        """Wait for the stop flag."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                check_stop("patient")
            except ToolStopped as exc:
                seen.append(str(exc))
                raise
            time.sleep(0.01)
        return "never stopped"

    result = await _one_call(patient, {})
    assert result.output == "patient: timed out after 0.2 s"
    with anyio.fail_after(5):
        while not seen:
            await anyio.sleep(0.02)
    assert seen == ["patient: stopped, the call ended"]


SPINNER = """
import sys, time
import anyio
sys.path.insert(0, {root!r})
from actors.tools import ToolContext, tool
from actors.tools.executor import RoundTools, run_calls
from runtime.values.messages import ToolCall

@tool(timeout_s=0.2)
def spin() -> str:
    '''Never returns and never checks its stop flag.'''
    while True:
        time.sleep(0.001)

async def main() -> None:
    setup = RoundTools(offered=frozenset({{"spin"}}), tools={{"spin": spin}}, context=ToolContext(None, "b"))
    out = []
    await run_calls([ToolCall.create("c1", "spin", {{}})], setup, out.append)
    print(out[0].output, flush=True)

anyio.run(main, backend={backend!r})
"""


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_process_exits_when_the_run_ends_even_with_a_tool_that_never_returns(backend: str) -> None:
    script = textwrap.dedent(SPINNER.format(root=str(ROOT), backend=backend))
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=False)
    assert (done.returncode, done.stdout) == (0, "spin: timed out after 0.2 s\n"), done.stderr[-2000:]
    assert time.monotonic() - started < 20
