"""tail_skip: no end-of-turn mark on a request a fold is expected to follow.

The host fold estimates each request before it is sent and folds when the
estimate reaches the fold line ``L = context_fold_at x ceiling``. Let ``e`` be
the fold's estimate of this request as it will be sent (after a fold that
landed, its estimate after the fold). The next request folds when the round
grows by at least the gap ``L - e``, and a fold rewrites the view, so the entry
this request would write at the end of its turn goes unread. The request is
*selected* (it places no turn mark) when::

    0 < L - e <= margin x ceiling

A request at or past the line (``e >= L``) keeps its mark: its fold landed
nothing, or not enough, and nothing says the next request's fold lands where
this one's did not. A margin of 0 selects nothing. The default margin, 0.045,
is the measured 0.217 quantile of a round's growth as a share of the ceiling
(seed 001, Amendment 4).

Under fold-after-read (:mod:`runtime.fold.after_read`) the next request folds this
request's newest round whatever its size: :meth:`TailSkip.fold_next` selects it, so
the last mark stands before the round (the newest note's anchor) and the round is
sent fresh at 1.0 rather than written at the write price to go unread. Its record
says ``reason = "fold_next"``.

The comparison is exact in decimal: each number is taken at its shortest
decimal form, so an estimate exactly at ``L - margin x ceiling`` is selected
whatever the binary rounding of the product.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

import attrs

from runtime.cache.errors import CacheInputError

if TYPE_CHECKING:
    from fractions import Fraction

DEFAULT_TAIL_MARGIN = 0.045


@attrs.frozen
class TailSkipRecord:
    """What a selected request records under prompt_cache: e, L and m (in the fold's scaled tokens)."""

    estimate: float
    fold_line: float
    margin: float
    reason: Literal["line", "fold_next"] = "line"
    """Why the mark is skipped: the fold line is near (``line``), or the next request folds the round."""

    def to_dict(self) -> dict[str, float | str]:
        record: dict[str, float | str] = {"estimate": self.estimate, "fold_line": self.fold_line, "margin": self.margin}
        if self.reason != "line":
            record["reason"] = self.reason
        return record


@attrs.frozen
class TailSkip:
    """The tail_skip decision for one request. Build it with :meth:`decide`."""

    selected: bool
    estimate: float
    fold_line: float
    margin: float
    ceiling: int
    reason: Literal["line", "fold_next"] = "line"

    @classmethod
    def fold_next(cls, *, estimate: float, ceiling: int) -> TailSkip:
        """Selected: the next request folds this request's newest round (fold after read).

        Raises :class:`CacheInputError` as :meth:`decide` does for a bad ``ceiling`` or ``estimate``.
        """
        base = cls.decide(estimate=estimate, ceiling=ceiling, context_fold_at=1.0, margin=0.0)
        return attrs.evolve(base, selected=True, reason="fold_next")

    @classmethod
    def decide(
        cls,
        *,
        estimate: float,
        ceiling: int,
        context_fold_at: float,
        margin: float = DEFAULT_TAIL_MARGIN,
    ) -> TailSkip:
        """Decide whether the request whose fold estimate is ``estimate`` skips its turn mark.

        Raises :class:`CacheInputError` when ``ceiling`` is not a positive
        integer, ``context_fold_at`` is not in (0, 1], ``margin`` is not in
        ``0 <= margin < context_fold_at``, or ``estimate`` is negative; none
        may be a boolean or non-finite.
        """
        if isinstance(ceiling, bool) or not isinstance(ceiling, int) or ceiling <= 0:
            raise CacheInputError(f"tail_skip ceiling: {ceiling!r} is not a positive integer")
        at = _exact("context_fold_at", context_fold_at)
        if not 0 < at <= 1:
            raise CacheInputError(f"tail_skip context_fold_at: {context_fold_at!r} is not in (0, 1]")
        m = _exact("margin", margin)
        if not 0 <= m < at:
            raise CacheInputError(
                f"tail_skip margin: {margin!r} is outside 0 <= margin < context_fold_at ({context_fold_at!r})"
            )
        e = _exact("estimate", estimate)
        if e < 0:
            raise CacheInputError(f"tail_skip estimate: {estimate!r} is negative; expected a token estimate >= 0")
        line = at * ceiling
        gap = line - e
        selected = 0 < gap <= m * ceiling
        return cls(
            selected=selected,
            estimate=float(estimate),
            fold_line=float(line),
            margin=float(margin),
            ceiling=ceiling,
        )

    @property
    def record(self) -> TailSkipRecord | None:
        """The record a selected request carries; None when not selected."""
        if not self.selected:
            return None
        return TailSkipRecord(estimate=self.estimate, fold_line=self.fold_line, margin=self.margin, reason=self.reason)


def _exact(name: str, value: Any) -> Fraction:
    from fractions import Fraction  # exact arithmetic, loaded with the first tail-skip decision

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CacheInputError(f"tail_skip {name}: {value!r} is not a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise CacheInputError(f"tail_skip {name}: {value!r} is not finite")
    return Fraction(repr(value)) if isinstance(value, float) else Fraction(value)
