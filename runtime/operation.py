"""What an operation is, and what it returns.

An :class:`Operation` is one agent operation on a branch: ``bounded`` (one
request, or a fixed planned sequence of instructions; over its ceiling it is
refused, never rewritten) or ``iterative`` (a tool loop that runs until the
model answers without tool calls, at most ``max_rounds`` requests).
"""

from __future__ import annotations

from typing import Literal

import attrs

from runtime.ceiling import CeilingPolicy
from runtime.errors import FoldlineError
from runtime.usage import Usage


class RoundLimitExceeded(FoldlineError):
    """An iterative operation used all its rounds without a final answer."""


class OperationError(FoldlineError):
    """An operation cannot go on (e.g. a bounded request answered with tool calls)."""


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
    max_input_tokens: CeilingPolicy = None

    def __attrs_post_init__(self) -> None:
        if self.kind not in ("bounded", "iterative"):
            raise ValueError(f"operation kind must be 'bounded' or 'iterative', got {self.kind!r}")
        if not self.instructions:
            raise ValueError("an operation needs at least one instruction")
        if self.kind == "iterative" and len(self.instructions) != 1:
            raise ValueError("an iterative operation takes exactly one instruction")
        if self.max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1, got {self.max_rounds}")


@attrs.frozen
class OperationResult:
    answer: str
    rounds: int
    requests: int
    usage: Usage
