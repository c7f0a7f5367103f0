"""The fold's settings for one branch and ceiling: a frozen value built from a profile.

A fold is installed for an iterative operation whose profile has
``context_management = true`` and whose ceiling resolved to a number
(:func:`fold_settings` returns None otherwise: no fold, and past the ceiling a
refusal). The numbers come from the profile keys ``context_fold_at``,
``context_fold_target``, ``context_fold_tail_margin``,
``tool_result_max_chars``, ``fold_scheduling``, ``context_strategy`` and
``fold_policy`` and ``fold_tail``, which :mod:`runtime.config` validates. Under the ``cost`` policy
the fold line and target are chosen before each request by
:mod:`runtime.fold.cost` (at ``prices``); ``fold_at`` and ``target`` hold until the
branch's growth per request is known, and always under ``fixed``. ``fold_tail`` says how the
newest rounds are carried: verbatim until the fold line, folded once read, or (``cost``, the
default) whichever :func:`runtime.fold.after_read.choose_tail` prices lower for the branch.
"""

from __future__ import annotations

from typing import Literal

import attrs

from runtime.decision.ceiling import DEFAULT_FOLD_AT, line_at
from runtime.fold.after_read import FoldTail
from runtime.fold.cost import CostPrices

DEFAULT_TARGET = 0.6
"""The share of the ceiling a fold aims to bring the request under (``context_fold_target``)."""

DEFAULT_TAIL_MARGIN = 0.045
"""How far under the fold line a request skips its turn mark (``context_fold_tail_margin``)."""

TOOL_IO_TAILS = (6, 2)
"""The kept tails of the tool_io stage, in order (messages of the view)."""

ALL_TAILS = (6, 2)
"""The kept tails of the all stage, in order."""

FLOOR_TAIL = 2
"""The tail the floor view, the marks and reset keep."""

RESET_SHARE = 0.15
"""With caching on, notes above this share of the ceiling trigger reset first."""

DEFAULT_POLICY: Literal["cost", "fixed"] = "cost"
"""The fold policy when the profile names none (``fold_policy``; docs/bench.md says why)."""

MIN_COMMIT_SHARE = 0.01
"""Under the ceiling, an epoch commit freeing less than this share of the ceiling is deferred."""


@attrs.frozen
class FoldSettings:
    """Everything the pure fold needs to know about the policy in force."""

    ceiling: int
    fold_at: float = DEFAULT_FOLD_AT
    target: float = DEFAULT_TARGET
    tail_margin: float = DEFAULT_TAIL_MARGIN
    result_bound: int | None = None
    caching: bool = False
    """Both cache gates are on (the provider caches by prefix and the profile asks for it)."""
    scheduling: Literal["epoch", "immediate"] = "epoch"
    strategy: Literal["fold", "compaction"] = "fold"
    policy: Literal["cost", "fixed"] = DEFAULT_POLICY
    prices: CostPrices = CostPrices()
    """The model's prices relative to fresh input (the cost policy's)."""
    tail: FoldTail = "cost"
    """How the newest rounds are carried (``fold_tail``: ``cost``, ``verbatim``, ``after-read``)."""

    @property
    def after_read_possible(self) -> bool:
        """Whether a round may be folded once read: asked for, or left to the cost model under the cost policy."""
        if self.strategy != "fold":
            return False
        return self.tail == "after-read" or (self.tail == "cost" and self.by_cost)

    @property
    def by_cost(self) -> bool:
        """Whether the cost model chooses the line and target (the cost policy, folding, not compaction)."""
        return self.policy == "cost" and self.strategy == "fold"

    def __attrs_post_init__(self) -> None:
        if isinstance(self.ceiling, bool) or not isinstance(self.ceiling, int) or self.ceiling <= 0:
            raise ValueError(f"FoldSettings.ceiling: {self.ceiling!r} is not a positive integer")
        if not 0 < self.target < self.fold_at <= 1:
            raise ValueError(
                f"FoldSettings: target {self.target!r} and fold_at {self.fold_at!r} break 0 < target < fold_at <= 1"
            )

    @property
    def fold_line(self) -> float:
        """The fold line in tokens (whether a request reaches it is :func:`runtime.decision.ceiling.decide`'s call)."""
        return line_at(self.fold_at, self.ceiling)

    @property
    def target_tokens(self) -> float:
        return line_at(self.target, self.ceiling)

    def reached(self, estimate: int) -> bool:
        """Whether ``estimate`` is at or under the target."""
        return estimate <= self.target_tokens


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
    policy: Literal["cost", "fixed"] = DEFAULT_POLICY,
    prices: CostPrices | None = None,
    tail: FoldTail = "cost",
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
        policy=policy,
        prices=CostPrices() if prices is None else prices,
        tail=tail,
    )
