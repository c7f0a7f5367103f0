"""A typed operation's answer: validated against its output schema, with one corrected retry.

After the operation's loop ends with an answer, :func:`typed_result`
validates it (:meth:`runtime.config.output_schema.OutputSchema.validate`). A reply
that does not validate gets the validation errors back as one more
instruction, and the model answers once more; if that reply fails too, the
operation fails with :class:`~runtime.config.output_schema.OutputInvalid` naming the
schema errors. A corrected reply is a bounded request: tool calls in it are
answered as not run and fail the operation.

On a model without structured outputs (:mod:`actors.final_tool`) the reply
is the input of the answer's final-answer call, validated the same way; the
call is answered with the validation error (or as accepted), the correction
asks for the tool to be called again, and a corrected reply may call only it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs

from actors.final_tool import ACCEPTED_TEXT, FINAL_TOOL_NAME, final_call
from actors.send import TurnDriver
from runtime.config.operation import OperationResult
from runtime.config.output_schema import OutputInvalid, OutputSchema
from runtime.request.compiler import Intent
from runtime.values.messages import AssistantResponse, Instruction, ToolCall, ToolResult

CORRECTION_TEXT = (
    "Your reply is not a valid value of the required output schema: {error}. "
    "Reply again with only the corrected JSON value."
)
"""The instruction that sends a validation error back for one corrected reply."""

TOOL_CORRECTION_TEXT = (
    "Your final answer is not a valid value of the required output schema: {error}. "
    "Call the " + FINAL_TOOL_NAME + " tool again with the corrected value."
)
"""The same, when the answer is a final-answer tool's input (:mod:`actors.final_tool`)."""

Send = Callable[[TurnDriver, Intent], Awaitable[AssistantResponse]]


async def typed_result(driver: TurnDriver, result: OperationResult, send: Send) -> OperationResult:
    """``result`` with its typed value, after at most one corrected reply (see the module docstring)."""
    output = driver.operation.output
    if output is None:
        return result
    if driver.final is not None:
        return await _through_tool(driver, result, send, output)
    try:
        value, value_json = output.validate(result.answer)
    except OutputInvalid as first:
        await _ask_again(driver, CORRECTION_TEXT.format(error=first))
        reply = await send(driver, "final")
        if reply.tool_calls:
            for call in reply.tool_calls:
                driver.turn.append(ToolResult.for_call(call, "not run: a corrected reply runs no tools", is_error=True))
            raise OutputInvalid(
                f"the corrected reply called tools instead of answering; first reply: {first}"
            ) from None
        try:
            value, value_json = output.validate(reply.text)
        except OutputInvalid as second:
            raise OutputInvalid(f"{second} (after one corrected reply; the first: {first})") from None
        result = attrs.evolve(
            result,
            answer=reply.text,
            rounds=result.rounds + 1,
            requests=driver.progress.requests,
            usage=driver.progress.usage,
        )
    return attrs.evolve(result, value=value, value_json=value_json)


async def _ask_again(driver: TurnDriver, text: str) -> None:
    """Append the correction, unless a resumed turn already holds it (an instruction after the last reply)."""
    view = driver.branch.view()
    last = max((i for i, m in enumerate(view) if isinstance(m, AssistantResponse)), default=-1)
    if not any(isinstance(m, Instruction) for m in view[last + 1 :]):
        await driver.append_instruction(text, "final")


def _last_reply(driver: TurnDriver) -> AssistantResponse | None:
    return next((m for m in reversed(driver.branch.view()) if isinstance(m, AssistantResponse)), None)


def _checked_call(driver: TurnDriver, output: OutputSchema, reply: AssistantResponse | None) -> tuple[object, str]:
    """The typed value of ``reply``'s final-answer call; the call is answered (accepted or the error)."""
    call = None if reply is None else final_call(reply)
    if call is None:
        raise OutputInvalid(f"the reply did not call the final-answer tool {FINAL_TOOL_NAME!r}")
    try:
        checked = output.validate(call.arguments_json)
    except OutputInvalid as exc:
        _answer(driver, call, str(exc), is_error=True)
        raise
    _answer(driver, call, ACCEPTED_TEXT, is_error=False)
    return checked


def _answer(driver: TurnDriver, call: ToolCall, text: str, *, is_error: bool) -> None:
    if all(not (isinstance(m, ToolResult) and m.call_id == call.call_id) for m in driver.branch.view()):
        driver.turn.append(ToolResult.for_call(call, text, is_error=is_error))


async def _through_tool(
    driver: TurnDriver, result: OperationResult, send: Send, output: OutputSchema
) -> OperationResult:
    """:func:`typed_result` when the answer is a final-answer tool's input (see the module docstring)."""
    try:
        value, value_json = _checked_call(driver, output, _last_reply(driver))
    except OutputInvalid as first:
        await _ask_again(driver, TOOL_CORRECTION_TEXT.format(error=first))
        reply = await send(driver, "final")
        call = final_call(reply)
        for other in reply.tool_calls:
            if other is not call:
                driver.turn.append(
                    ToolResult.for_call(other, "not run: a corrected reply runs no tools", is_error=True)
                )
        try:
            value, value_json = _checked_call(driver, output, reply)
        except OutputInvalid as second:
            raise OutputInvalid(f"{second} (after one corrected reply; the first: {first})") from None
        result = attrs.evolve(
            result, rounds=result.rounds + 1, requests=driver.progress.requests, usage=driver.progress.usage
        )
    return attrs.evolve(result, answer=value_json, value=value, value_json=value_json)
