"""User tools for ``foldline run SCENARIO --tools tests_support.user_tools:registry`` (tests only)."""

from __future__ import annotations

import os

import anyio

from actors.tools import ToolRegistry, tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first
        b: the second
    """
    return a + b


@tool
def explode(message: str) -> str:
    """Raise an error carrying the message (a tool that fails)."""
    raise RuntimeError(message)


@tool(timeout_s=0.2)
async def stall(seconds: float) -> str:
    """Sleep for a number of seconds (a tool that times out past 0.2 s)."""
    await anyio.sleep(seconds)
    return f"slept {seconds} s"


@tool
def leak() -> str:
    """Fail with a message that holds the test token from the environment (it must be redacted)."""
    raise PermissionError(f"refused with token {os.environ.get('FOLDLINE_TEST_TOKEN', 'unset')}")


registry = ToolRegistry().with_tools([add, explode, stall, leak])
not_a_registry = 42
