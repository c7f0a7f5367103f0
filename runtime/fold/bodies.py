"""What ``read_result`` reads and what a clip may cut: recovery text and bodies.

Every message has a **recovery text**, the exact characters ``read_result``
pages through:

- a tool result with a text output: the output itself;
- a tool result with a mapping output: for each key in stored order, the key
  as JSON, ``": "``, the value's text (a string as is, any other value as its
  canonical JSON), and a newline. Offsets into this text are global, mapping
  labels and separators included;
- a tool result with any other JSON output: its canonical JSON text;
- an instruction: the text it renders; a note or the system text: its text;
- an assistant response: its blocks in order, one per line, a tool call as
  ``[call NAME ARGUMENTS]``.

A tool result's **bodies** are the parts a clip or the result bound may cut:
a text output is one body; each value of a mapping output is a body of its
own (a non-string value is cut as a labelled preview of its JSON text), and
the ``success`` and ``error`` fields are never bodies; any other JSON output
is one preview body. Each body knows where its text starts in the recovery
text, so a marker can name the omitted interval exactly.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from runtime.values.canonical import canonical_json
from runtime.values.messages import (
    AssistantResponse,
    Instruction,
    Message,
    Note,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResult,
)

PROTECTED_FIELDS = frozenset({"success", "error"})
"""Mapping fields a clip never cuts."""

JSON_PREVIEW_LABEL = "[JSON preview] "
"""The label a cut non-string value carries (it becomes a string)."""


@attrs.frozen
class Body:
    """One cuttable part of a tool result's output.

    ``key`` is the mapping key (None for a whole output), ``start`` the offset
    of ``text`` in the result's recovery text, ``preview`` whether the body is
    the JSON text of a non-string value (cut, it becomes a labelled string).
    """

    key: str | None
    start: int
    text: str
    preview: bool


@attrs.frozen(eq=False)
class ResultShape:
    """A tool result's recovery text and bodies (see the module docstring)."""

    kind: Literal["text", "mapping", "json"]
    recovery: str
    bodies: tuple[Body, ...]
    mapping: Mapping[str, Any] | None = None


@functools.lru_cache(maxsize=4096)
def result_shape(result: ToolResult) -> ResultShape:
    """The shape of a tool result's stored output (memoized by the message value)."""
    if result.output_format == "text":
        return ResultShape("text", result.output, (Body(None, 0, result.output, False),))
    value = json.loads(result.output)
    if isinstance(value, dict):
        parts: list[str] = []
        bodies: list[Body] = []
        offset = 0
        for key, item in value.items():
            label = canonical_json(key) + ": "
            text = item if isinstance(item, str) else canonical_json(item)
            parts.append(label)
            offset += len(label)
            if key not in PROTECTED_FIELDS:
                bodies.append(Body(key, offset, text, not isinstance(item, str)))
            parts.append(text)
            parts.append("\n")
            offset += len(text) + 1
        return ResultShape("mapping", "".join(parts), tuple(bodies), value)
    return ResultShape("json", result.output, (Body(None, 0, result.output, True),))


def recovery_text(message: Message) -> str:
    """The exact characters ``read_result`` returns for ``message`` (see the module docstring)."""
    if isinstance(message, ToolResult):
        return result_shape(message).recovery
    if isinstance(message, Instruction):
        return message.rendered_text()
    if isinstance(message, (Note, SystemMessage)):
        return message.text
    if isinstance(message, AssistantResponse):
        lines = []
        for part in message.parts:
            if isinstance(part, TextPart):
                lines.append(part.text)
            elif isinstance(part, ToolCall):
                lines.append(f"[call {part.name} {part.arguments_json}]")
        return "\n".join(lines)
    raise TypeError(f"recovery_text: {type(message).__name__} is not a message kind")
