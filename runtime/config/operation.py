"""What an operation is, and what it returns.

An :class:`Operation` is one agent operation on a branch: ``bounded`` (one
request, or a fixed planned sequence of instructions; over its ceiling it is
refused, never rewritten) or ``iterative`` (a tool loop that runs until the
model answers without tool calls, at most ``max_rounds`` requests). With
``output`` its answer must be a JSON value of that shape: it is validated,
and a reply that fails is sent its errors once for a corrected one.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from runtime.config.checks import (
    CeilingValue,
    check_ceiling,
    check_choice,
    check_int,
    check_text,
)
from runtime.config.output_schema import OutputSchema
from runtime.errors import ConfigError, FoldlineError
from runtime.inputs.bounds import MAX_ROUNDS
from runtime.values.usage import Usage


class RoundLimitExceeded(FoldlineError):
    """An iterative operation used all its rounds without a final answer."""


class OperationError(FoldlineError):
    """An operation cannot go on (e.g. a bounded request answered with tool calls)."""


def _output(value: Any) -> OutputSchema | None:
    return None if value is None else OutputSchema.of(value, "Operation.output")


@attrs.frozen
class Operation:
    """One agent operation on a branch.

    ``instructions`` has one entry for an iterative operation and for a single
    bounded request, several for a bounded planned sequence. ``max_input_tokens``
    is the per-call ceiling value (it may only lower the resolved ceiling).
    """

    kind: Literal["bounded", "iterative"]
    instructions: tuple[str, ...]
    max_rounds: int = 20
    max_input_tokens: CeilingValue = None
    output: OutputSchema | None = attrs.field(default=None, converter=_output, kw_only=True)
    """The shape the answer must have (a pydantic model class or a JSON schema; see :mod:`runtime.config.output_schema`)."""

    def __attrs_post_init__(self) -> None:
        # The same checks, bounds and words as a scenario file's node (runtime.config).
        check_choice(self.kind, "Operation.kind", ("bounded", "iterative"))
        if not isinstance(self.instructions, tuple) or not self.instructions:
            raise ConfigError(f"Operation.instructions: {self.instructions!r} is not a non-empty tuple of texts")
        for i, text in enumerate(self.instructions):
            check_text(text, f"Operation.instructions[{i}]", expected="non-empty instruction text")
        if self.kind == "iterative" and len(self.instructions) != 1:
            raise ConfigError("Operation.instructions: an iterative operation takes exactly one instruction")
        check_int(self.max_rounds, "Operation.max_rounds", minimum=1, maximum=MAX_ROUNDS, expected="a positive integer")
        check_ceiling(self.max_input_tokens, "Operation.max_input_tokens")


@attrs.frozen
class OperationResult:
    """What an operation returns: its final answer text, and for a typed operation the validated value.

    ``value`` is the typed value (a pydantic model instance, or the JSON value a
    schema validated); ``value_json`` its canonical JSON, what a dependent reads.
    """

    answer: str
    rounds: int
    requests: int
    usage: Usage
    value: Any = attrs.field(default=None, eq=False)
    value_json: str | None = None
