"""Running the tool calls of one response.

The calls of one response run concurrently, at most ``max_concurrent`` at
once, each under its tool's timeout. Their results are appended in the order
of the calls, so a round's record is the same however the calls interleave.
An *ordered* call (the context tool, ``spawn``) acts on the branch or the flow:
it runs at its place, after the results of the calls before it were appended.

What a failure becomes depends on ``tool_errors``:

- ``"model"`` (the default): an exception or a timeout becomes the call's
  ``tool_result`` with ``is_error`` true and the error's message (its type and
  text, bounded; never a traceback), and the loop goes on.

Every text that leaves a tool, its output (text, the strings of a JSON value,
an image result's text) and its error alike, is scrubbed before it is
recorded: of the provider's API key and its masked and partial pieces (the
context's ``scrub``, :func:`runtime.contract.provider.scrubber_of`), and of the
whole value of each environment variable with a secret-looking name
(:func:`runtime.values.scrub.redact_named`).
- ``"fail"``: the node fails as it did before: the failing call and every call
  not finished get a ``not run: ...`` error result, then the error propagates.

Cancellation-safe: however the round ends (a failure, a timeout, the turn
cancelled), every call of the response has a result before control leaves, the
last appends done synchronously (no checkpoint a cancellation could land on),
so the view never holds an orphaned call.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

import anyio
import attrs

from actors.images import ImageOutput
from actors.tools.registry import DEFAULT_MAX_CONCURRENT, Tool, ToolArgumentError, ToolContext, ToolFailed
from runtime.errors import FoldlineError
from runtime.values.messages import ToolCall, ToolResult
from runtime.values.scrub import redact_named
from signals.events import ToolCallFinished

ToolErrors = Literal["model", "fail"]
TOOL_ERRORS = ("model", "fail")
MAX_ERROR_CHARS = 2_000


class ToolTimeout(ToolFailed):
    """A tool call ran past its timeout."""


def scrub_text(text: str, scrub: Callable[[str], str] | None, environ: Mapping[str, str] | None = None) -> str:
    """``text`` without the provider's key (and its pieces) nor the whole values of secret-named variables."""
    if scrub is not None:
        text = scrub(text)
    return redact_named(text, os.environ if environ is None else environ)


def scrub_output(value: Any, scrub: Callable[[str], str] | None) -> Any:
    """A tool's output (text or a JSON value: every string in it, keys too) scrubbed by :func:`scrub_text`."""
    environ = dict(os.environ)
    if isinstance(value, ImageOutput):
        return attrs.evolve(value, text=scrub_text(value.text, scrub, environ))

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return scrub_text(item, scrub, environ)
        if isinstance(item, Mapping):
            return {walk(k): walk(v) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [walk(v) for v in item]
        return item

    return walk(value)


def error_text(
    exc: BaseException,
    environ: Mapping[str, str] | None = None,
    *,
    with_type: bool = False,
    scrub: Callable[[str], str] | None = None,
) -> str:
    """What the model is told about a failed call: the error's type and message, bounded, secrets removed.

    A :class:`ToolFailed` (a tool's own refusal, a bad argument, a timeout) is
    its message alone unless ``with_type``; any other error is ``Type: message``.
    Secrets are removed before the text is cut, so no cut leaves a piece behind.
    """
    message = str(exc)
    if isinstance(exc, ToolFailed) and not with_type:
        text = message
    else:
        text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    text = scrub_text(text, scrub, environ)
    if len(text) > MAX_ERROR_CHARS:
        text = text[:MAX_ERROR_CHARS] + f" [cut: {len(text)} characters]"
    return text


OrderedRunner = Callable[[ToolCall], ToolResult]
"""Runs a call of the context tool against the branch (synchronously) and returns its result."""


@attrs.frozen
class RoundTools:
    """What a round's calls may use: the offered tool names, the tools, how failures go."""

    offered: frozenset[str]
    tools: Mapping[str, Tool]
    context: ToolContext
    tool_errors: ToolErrors = "model"
    max_concurrent: int = DEFAULT_MAX_CONCURRENT
    branch_tools: Mapping[str, OrderedRunner] = attrs.field(factory=dict)
    """Tools run by the branch itself (the context tool), by name."""
    publish: Callable[[ToolCallFinished], Awaitable[None]] | None = None
    """Where each result is announced (after the whole round is appended, so no
    event handler runs between two results of one round)."""


@attrs.define(eq=False)
class _Slot:
    call: ToolCall
    tool: Tool | None
    result: ToolResult | None = None
    error: BaseException | None = None
    claimed: bool = False
    done: anyio.Event = attrs.field(factory=anyio.Event)


async def _invoke(slot: _Slot, context: ToolContext) -> None:
    """Run one call into its slot; an exception or a timeout is kept as the slot's error."""
    tool, call = slot.tool, slot.call
    assert tool is not None
    slot.claimed = True
    deadline = anyio.move_on_after(tool.timeout_s) if tool.timeout_s is not None else anyio.CancelScope()
    try:
        with deadline:
            output = scrub_output(await tool.func(call.arguments, context), context.scrub)
            if isinstance(output, ImageOutput):
                slot.result = ToolResult.for_call(call, output.text, images=output.images)
            else:
                slot.result = ToolResult.for_call(call, output)
        if deadline.cancelled_caught:  # our deadline, not a TimeoutError the tool raised itself
            slot.error = ToolTimeout(f"{call.name}: timed out after {tool.timeout_s:g} s")
    except Exception as exc:
        slot.error = exc
    finally:
        slot.done.set()


def _runnable(slot: _Slot) -> bool:
    return slot.result is None and not slot.claimed and slot.tool is not None and not slot.tool.ordered


async def _worker(slots: Sequence[_Slot], context: ToolContext) -> None:
    """Claim and run the calls nobody has started yet, in order."""
    for slot in slots:
        if _runnable(slot):
            await _invoke(slot, context)


def _slots(calls: Sequence[ToolCall], setup: RoundTools) -> list[_Slot]:
    slots = []
    for call in calls:
        tool = (
            setup.tools.get(call.name) if call.name in setup.offered and call.name not in setup.branch_tools else None
        )
        slot = _Slot(call, tool)
        if call.name not in setup.offered or (tool is None and call.name not in setup.branch_tools):
            available = ", ".join(sorted(setup.offered))
            slot.result = ToolResult.for_call(
                call, f"unknown tool {call.name!r}; available: {available}", is_error=True
            )
        slots.append(slot)
    return slots


async def run_calls(calls: Sequence[ToolCall], setup: RoundTools, append: Callable[[ToolResult], object]) -> None:
    """Run one response's calls and append one result per call, in call order (see the module doc).

    The calling task takes the calls in order and runs each one nobody has
    started; up to ``max_concurrent - 1`` helper tasks start the following
    ones while it waits. The machinery adds no checkpoint of its own before a
    call runs, so calls that never yield run (and are appended) exactly as
    they would one after another.
    """
    slots = _slots(calls, setup)
    results: list[ToolResult] = []

    def keep(result: ToolResult) -> None:
        append(result)
        results.append(result)

    try:
        await _run_slots(slots, setup, keep)
    except Exception:
        await _announce(results, setup)  # the node fails (tool_errors = "fail"): its results are still told
        raise
    await _announce(results, setup)


async def _announce(results: Sequence[ToolResult], setup: RoundTools) -> None:
    if setup.publish is None:
        return
    for r in results:
        size = len(r.output.encode("utf-8"))
        await setup.publish(ToolCallFinished(call_id=r.call_id, name=r.name, is_error=r.is_error, output_bytes=size))


async def _run_slots(slots: Sequence[_Slot], setup: RoundTools, append: Callable[[ToolResult], object]) -> None:
    appended = 0
    failure: tuple[int, BaseException] | None = None
    helpers = min(setup.max_concurrent - 1, sum(1 for s in slots if _runnable(s)) - 1)
    try:
        async with anyio.create_task_group() as group:
            for _ in range(max(helpers, 0)):
                group.start_soon(_worker, slots, setup.context)
            for index, slot in enumerate(slots):
                await _settle(slot, setup)
                if slot.error is not None:
                    # Arguments are the model's to correct: they go back to it whatever tool_errors says.
                    if setup.tool_errors == "fail" and not isinstance(slot.error, ToolArgumentError):
                        failure = (index, slot.error)
                        group.cancel_scope.cancel()
                        break
                    told = error_text(slot.error, scrub=setup.context.scrub)
                    slot.result = ToolResult.for_call(slot.call, told, is_error=True)
                assert slot.result is not None
                append(slot.result)
                appended += 1
    except BaseException:
        # Synchronous, so no cancellation can interrupt it: every call left gets its result.
        _fill(slots[appended:], append, "not run: cancelled")
        raise
    if failure is not None:
        index, exc = failure
        told = error_text(exc, with_type=True, scrub=setup.context.scrub)
        _fill(slots[index:], append, f"not run: {told}", failed=0)
        clean = scrub_text(str(exc), setup.context.scrub) == str(exc)  # a secret in it: the error stays here
        if isinstance(exc, FoldlineError) and clean:
            raise exc
        raise ToolFailed(f"tool {slots[index].call.name!r} raised {told}") from (exc if clean else None)


async def _settle(slot: _Slot, setup: RoundTools) -> None:
    """Run (or wait for) one call until its slot holds a result or an error."""
    if slot.result is not None:
        return
    runner = setup.branch_tools.get(slot.call.name)
    if runner is not None:
        slot.result = runner(slot.call)
    elif not slot.claimed:
        await _invoke(slot, setup.context)
    else:
        await slot.done.wait()


def _fill(slots: Sequence[_Slot], append: Callable[[ToolResult], object], why: str, failed: int = -1) -> None:
    """Append a result for every slot left: its own when it finished (and is not the failed one), else ``why``."""
    for i, slot in enumerate(slots):
        if slot.result is not None and i != failed and slot.error is None:
            append(slot.result)
        else:
            append(ToolResult.for_call(slot.call, why, is_error=True))
