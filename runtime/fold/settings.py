"""The fold's settings for one branch and ceiling: a frozen value built from a profile.

A fold is installed for an iterative operation whose profile has
``context_management = true`` and whose ceiling resolved to a number
(:func:`fold_settings` returns None otherwise: no fold, and past the ceiling a
refusal). The numbers come from the profile keys ``context_fold_at``,
``context_fold_target``, ``context_fold_tail_margin``,
``tool_result_max_chars``, ``fold_scheduling`` and ``context_strategy``, which
:mod:`runtime.config` validates.
"""

from __future__ import annotations

from typing import Literal

import attrs

_NOISE = 6  # decimals: 0.8 x 20000 is 16000.000000000002 in binary floating point

TOOL_IO_TAILS = (6, 2)
"""The kept tails of the tool_io stage, in order (messages of the view)."""

ALL_TAILS = (6, 2)
"""The kept tails of the all stage, in order."""

FLOOR_TAIL = 2
"""The tail the floor view, the marks and reset keep."""

RESET_SHARE = 0.15
"""With caching on, notes above this share of the ceiling trigger reset first."""

MIN_COMMIT_SHARE = 0.01
"""Under the ceiling, an epoch commit freeing less than this share of the ceiling is deferred."""


@attrs.frozen
class FoldSettings:
    """Everything the pure fold needs to know about the policy in force."""

    ceiling: int
    fold_at: float = 0.8
    target: float = 0.6
    tail_margin: float = 0.045
    result_bound: int | None = None
    caching: bool = False
    """Both cache gates are on (the provider caches by prefix and the profile asks for it)."""
    scheduling: Literal["epoch", "immediate"] = "epoch"
    strategy: Literal["fold", "compaction"] = "fold"

    def __attrs_post_init__(self) -> None:
        if isinstance(self.ceiling, bool) or not isinstance(self.ceiling, int) or self.ceiling <= 0:
            raise ValueError(f"FoldSettings.ceiling: {self.ceiling!r} is not a positive integer")
        if not 0 < self.target < self.fold_at <= 1:
            raise ValueError(
                f"FoldSettings: target {self.target!r} and fold_at {self.fold_at!r} break 0 < target < fold_at <= 1"
            )

    @property
    def fold_line(self) -> float:
        return round(self.fold_at * self.ceiling, _NOISE)

    @property
    def target_tokens(self) -> float:
        return round(self.target * self.ceiling, _NOISE)

    def due(self, estimate: int) -> bool:
        """Whether a request of ``estimate`` tokens reaches the fold line (at or past it)."""
        return estimate >= self.fold_line

    def reached(self, estimate: int) -> bool:
        """Whether ``estimate`` is at or under the target."""
        return estimate <= self.target_tokens

    @property
    def offers_context_tool(self) -> bool:
        """The model gets the context tool under the fold strategy (never under compaction)."""
        return self.strategy == "fold"


def fold_settings(
    *,
    context_management: bool,
    ceiling: int | None,
    fold_at: float,
    target: float,
    tail_margin: float,
    result_bound: int | None,
    caching: bool,
    scheduling: Literal["epoch", "immediate"],
    strategy: Literal["fold", "compaction"],
) -> FoldSettings | None:
    """The installed fold's settings, or None when no fold is installed (see the module docstring)."""
    if not context_management or ceiling is None:
        return None
    return FoldSettings(
        ceiling=ceiling,
        fold_at=fold_at,
        target=target,
        tail_margin=tail_margin,
        result_bound=result_bound,
        caching=caching,
        scheduling=scheduling,
        strategy=strategy,
    )
