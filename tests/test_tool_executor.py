"""The executor of one response's tool calls: concurrency, timeouts, errors, order, cancellation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from actors.tools import Tool, ToolContext, ToolFailed, ToolSpec
from actors.tools.executor import RoundTools, ToolTimeout, error_text, run_calls
from runtime.values.messages import ToolCall, ToolResult

SCHEMA = {"type": "object"}


class Gauge:
    """Counts calls running at once (and the most ever seen)."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0

    async def hold(self, gate: anyio.Event) -> None:
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            await gate.wait()
        finally:
            self.now -= 1


def tool_of(name: str, func: Any, **kw: Any) -> Tool:
    return Tool(ToolSpec.create(name, f"The {name} tool.", SCHEMA), func, **kw)


def setup_of(*tools: Tool, **kw: Any) -> RoundTools:
    return RoundTools(
        offered=frozenset(t.name for t in tools) | kw.pop("extra", frozenset()),
        tools={t.name: t for t in tools},
        context=ToolContext(node_id="n", branch_id="b"),
        **kw,
    )


def calls_of(*names: str) -> list[ToolCall]:
    return [ToolCall.create(f"c{i}", name, {"i": i}) for i, name in enumerate(names)]


@pytest.mark.anyio
async def test_calls_run_concurrently_under_the_limit_and_results_come_in_call_order() -> None:
    gauge, gate = Gauge(), anyio.Event()
    finished: list[int] = []

    async def wait(arguments: Mapping[str, Any], context: ToolContext) -> str:
        await gauge.hold(gate)
        finished.append(arguments["i"])
        return f"done {arguments['i']}"

    out: list[ToolResult] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_calls, calls_of(*["wait"] * 7), setup_of(tool_of("wait", wait), max_concurrent=3), out.append)
        while gauge.now < 3:
            await anyio.lowlevel.checkpoint()
        assert gauge.now == 3  # three at once, no more
        gate.set()
    assert gauge.peak == 3
    assert [r.output for r in out] == [f"done {i}" for i in range(7)]
    assert [r.call_id for r in out] == [f"c{i}" for i in range(7)]


@pytest.mark.anyio
async def test_errors_and_timeouts_become_error_results_and_the_others_still_run() -> None:
    async def ok(arguments: Mapping[str, Any], context: ToolContext) -> dict:
        return {"i": arguments["i"]}

    async def boom(arguments: Mapping[str, Any], context: ToolContext) -> str:
        raise ValueError("bad input")

    async def refuse(arguments: Mapping[str, Any], context: ToolContext) -> str:
        raise ToolFailed("refuse: not today")

    async def hang(arguments: Mapping[str, Any], context: ToolContext) -> str:
        await anyio.sleep_forever()
        raise AssertionError

    setup = setup_of(
        tool_of("ok", ok), tool_of("boom", boom), tool_of("refuse", refuse), tool_of("hang", hang, timeout_s=0.05)
    )
    out: list[ToolResult] = []
    await run_calls(calls_of("ok", "boom", "hang", "refuse", "nope", "ok"), setup, out.append)
    assert [(r.is_error, r.output) for r in out] == [
        (False, '{"i":0}'),
        (True, "ValueError: bad input"),
        (True, "hang: timed out after 0.05 s"),
        (True, "refuse: not today"),
        (True, "unknown tool 'nope'; available: boom, hang, ok, refuse"),
        (False, '{"i":5}'),
    ]


@pytest.mark.anyio
async def test_under_fail_the_first_error_fails_the_round_and_every_call_still_has_a_result() -> None:
    gate = anyio.Event()

    async def boom(arguments: Mapping[str, Any], context: ToolContext) -> str:
        raise ValueError("bad input")

    async def slow(arguments: Mapping[str, Any], context: ToolContext) -> str:
        await gate.wait()
        return "late"

    async def fast(arguments: Mapping[str, Any], context: ToolContext) -> str:
        return "fast"

    setup = setup_of(tool_of("boom", boom), tool_of("slow", slow), tool_of("fast", fast), tool_errors="fail")
    out: list[ToolResult] = []
    with pytest.raises(ToolFailed, match="tool 'boom' raised ValueError: bad input"):
        await run_calls(calls_of("fast", "boom", "slow", "fast"), setup, out.append)
    assert [(r.call_id, r.is_error, r.output) for r in out] == [
        ("c0", False, "fast"),
        ("c1", True, "not run: ValueError: bad input"),
        ("c2", True, "not run: ValueError: bad input"),
        ("c3", False, "fast"),  # it ran beside the failing call; its own result is kept
    ]

    timeout_setup = setup_of(tool_of("slow", slow, timeout_s=0.01), tool_errors="fail")
    with pytest.raises(ToolTimeout, match="slow: timed out after 0.01 s"):
        await run_calls(calls_of("slow"), timeout_setup, [].append)


@pytest.mark.anyio
async def test_a_cancelled_round_leaves_no_call_without_a_result() -> None:
    started = anyio.Event()

    async def hang(arguments: Mapping[str, Any], context: ToolContext) -> str:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError

    async def quick(arguments: Mapping[str, Any], context: ToolContext) -> str:
        return "quick"

    out: list[ToolResult] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            run_calls,
            calls_of("quick", "hang", "hang", "quick"),
            setup_of(tool_of("hang", hang), tool_of("quick", quick)),
            out.append,
        )
        await started.wait()
        tg.cancel_scope.cancel()
    assert [r.call_id for r in out] == ["c0", "c1", "c2", "c3"]
    assert [(r.is_error, r.output) for r in out] == [
        (False, "quick"),
        (True, "not run: cancelled"),
        (True, "not run: cancelled"),
        (False, "quick"),
    ]


@pytest.mark.anyio
async def test_ordered_and_branch_tools_run_at_their_place_after_the_results_before_them() -> None:
    appended: list[str] = []

    async def read(arguments: Mapping[str, Any], context: ToolContext) -> str:
        await anyio.sleep(0.01)
        return f"read {arguments['i']}"

    async def act(arguments: Mapping[str, Any], context: ToolContext) -> str:
        return f"act after {len(appended)} results"

    def context_tool(call: ToolCall) -> ToolResult:
        return ToolResult.for_call(call, f"context after {len(appended)} results")

    setup = setup_of(
        tool_of("read", read),
        tool_of("act", act, ordered=True, timeout_s=None),
        extra=frozenset({"context"}),
        branch_tools={"context": context_tool},
    )

    def append(result: ToolResult) -> None:
        appended.append(result.output)

    await run_calls(calls_of("read", "read", "act", "context", "read"), setup, append)
    assert appended == ["read 0", "read 1", "act after 2 results", "context after 3 results", "read 4"]


@pytest.mark.anyio
async def test_calls_that_never_yield_run_one_after_another_with_no_checkpoint_of_the_executors() -> None:
    order: list[str] = []

    async def note(arguments: Mapping[str, Any], context: ToolContext) -> str:
        order.append(f"run {arguments['i']}")
        return "x"

    def append(result: ToolResult) -> None:
        order.append(f"append {result.call_id}")

    await run_calls(calls_of("note", "note", "note"), setup_of(tool_of("note", note)), append)
    assert order == ["run 0", "append c0", "run 1", "append c1", "run 2", "append c2"]


def test_error_text_is_bounded_redacts_secrets_and_has_no_traceback() -> None:
    secret = "sk-live-0123456789abcdef"
    env = {"MY_API_KEY": secret, "HOME": "/home/someone", "SHORT_TOKEN": "abc"}
    text = error_text(RuntimeError(f"failed with {secret} at abc"), env)
    assert text == "RuntimeError: failed with [MY_API_KEY redacted] at abc"
    long = error_text(ValueError("x" * 5000), env)
    assert len(long) < 2100 and long.endswith("[cut: 5012 characters]")
    assert error_text(KeyError(), env) == "KeyError"
    assert "Traceback" not in error_text(RuntimeError("boom"), env)


@pytest.mark.anyio
async def test_a_timeout_error_the_tool_raises_itself_is_not_called_our_timeout() -> None:
    async def socket_like(arguments: Mapping[str, Any], context: ToolContext) -> str:
        raise TimeoutError("connect timed out")

    out: list[ToolResult] = []
    await run_calls(calls_of("net"), setup_of(tool_of("net", socket_like)), out.append)
    assert out[0].is_error and out[0].output == "TimeoutError: connect timed out"
