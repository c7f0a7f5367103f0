"""A typed operation's answer: validated against its output schema, with one corrected retry.

After the operation's loop ends with an answer, :func:`typed_result`
validates it (:meth:`runtime.config.output_schema.OutputSchema.validate`). A reply
that does not validate gets the validation errors back as one more
instruction, and the model answers once more; if that reply fails too, the
operation fails with :class:`~runtime.config.output_schema.OutputInvalid` naming the
schema errors. A corrected reply is a bounded request: tool calls in it are
answered as not run and fail the operation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs

from actors.send import TurnDriver
from runtime.config.operation import OperationResult
from runtime.config.output_schema import OutputInvalid
from runtime.request.compiler import Intent
from runtime.values.messages import AssistantResponse, ToolResult

CORRECTION_TEXT = (
    "Your reply is not a valid value of the required output schema: {error}. "
    "Reply again with only the corrected JSON value."
)
"""The instruction that sends a validation error back for one corrected reply."""

Send = Callable[[TurnDriver, Intent], Awaitable[AssistantResponse]]


async def typed_result(driver: TurnDriver, result: OperationResult, send: Send) -> OperationResult:
    """``result`` with its typed value, after at most one corrected reply (see the module docstring)."""
    output = driver.operation.output
    if output is None:
        return result
    try:
        value, value_json = output.validate(result.answer)
    except OutputInvalid as first:
        await driver.append_instruction(CORRECTION_TEXT.format(error=first), "final")
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
