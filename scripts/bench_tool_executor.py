"""How the executor runs the calls of one response: 8 calls each awaiting 50 ms of I/O, under
``max_concurrent`` 1 and 8 (best of 5). Usage: ``python scripts/bench_tool_executor.py``."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.tools import Tool, ToolContext, ToolSpec
from actors.tools.executor import RoundTools, run_calls
from runtime.values.messages import ToolCall, ToolResult

CALLS, WAIT_S, REPEATS = 8, 0.05, 5


async def io(arguments: Mapping[str, Any], context: ToolContext) -> str:
    await anyio.sleep(WAIT_S)
    return "ok"


async def once(setup: RoundTools, calls: Sequence[ToolCall]) -> float:
    out: list[ToolResult] = []
    start = time.perf_counter()
    await run_calls(calls, setup, out.append)
    assert len(out) == len(calls)
    return time.perf_counter() - start


async def main() -> None:
    tool = Tool(ToolSpec.create("io", "Waits on I/O.", {"type": "object"}), io)
    calls = [ToolCall.create(f"c{i}", "io", {}) for i in range(CALLS)]
    for limit in (1, CALLS):
        setup = RoundTools(
            offered=frozenset({"io"}), tools={"io": tool}, context=ToolContext(None, "b"), max_concurrent=limit
        )
        best = min([await once(setup, calls) for _ in range(REPEATS)])
        print(f"max_concurrent={limit}: {best * 1000:.0f} ms for {CALLS} calls of {WAIT_S * 1000:.0f} ms each")


if __name__ == "__main__":
    anyio.run(main)
