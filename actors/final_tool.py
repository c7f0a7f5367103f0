"""A typed result through a final-answer tool, for a model without structured outputs.

A model the model table marks ``structured_outputs = false``
(:meth:`runtime.models.limits.ModelTable.structured_outputs`) is not sent
``output_config.format``. Its typed operation is instead offered one more
tool, :data:`FINAL_TOOL_NAME`, whose ``input_schema`` is the output schema,
beside the branch's tools on every request of the turn (the same bytes each
time, after them, so the tools prefix stays cacheable); ``tool_choice`` is left
as it is (forcing a tool would change the messages tier between requests, and
extended thinking refuses a forced tool). The model answers by calling it; the
call's input is the reply :mod:`actors.typed` validates. The call gets a
result like any other (accepted, or the validation error), so the record
stays a well-formed conversation.
"""

from __future__ import annotations

from collections.abc import Sequence

from runtime.config.output_schema import FINAL_TOOL_NAME, OutputSchema, final_tool_offered
from runtime.errors import ConfigError
from runtime.request.compiler import ToolSpec
from runtime.values.messages import AssistantResponse, ToolCall

__all__ = ["ACCEPTED_TEXT", "FINAL_TOOL_NAME", "FINAL_TOOL_TEXT", "final_call", "final_tool"]

FINAL_TOOL_TEXT = (
    "Give your final answer by calling this tool once, as your last step: its input is the answer, "
    "a value of the output schema {name!r}."
)
ACCEPTED_TEXT = "final answer accepted"


def final_tool(output: OutputSchema | None, model: str, tools: Sequence[ToolSpec]) -> ToolSpec | None:
    """The final-answer tool a typed operation on ``model`` is offered (None: structured outputs are used).

    Refuses, naming what is wrong, an output schema that is not an object (a tool's input is one) and a
    branch tool already called :data:`FINAL_TOOL_NAME`.
    """
    if output is None or not final_tool_offered(output, model):
        return None
    kind = output.schema.get("type")
    if kind != "object":
        raise ConfigError(
            f"output schema {output.name!r}: type {kind!r}; {model} has no structured outputs "
            f"(model table: structured_outputs = false), so the answer comes as a tool's input, which is an object"
        )
    if any(t.name == FINAL_TOOL_NAME for t in tools):
        raise ConfigError(
            f"tools: a tool named {FINAL_TOOL_NAME!r} is offered, and a typed result on {model} "
            "(no structured outputs) needs that name for its final-answer tool"
        )
    return ToolSpec(FINAL_TOOL_NAME, FINAL_TOOL_TEXT.format(name=output.name), output.schema_json)


def final_call(reply: AssistantResponse) -> ToolCall | None:
    """The reply's (first) call of the final-answer tool, or None."""
    return next((c for c in reply.tool_calls if c.name == FINAL_TOOL_NAME), None)
