"""Folding only as much as the target needs (pure).

A stage that folds units takes the oldest first, and only as many as bring the
estimate to the target: :func:`needed_prefix` finds the fewest by a binary
search over the prefix length (taking more of the oldest never raises the
estimate by more than a note's few tokens, so the boundary is found in
log2(n) measurements). A fold aims to land between :data:`TARGET_LOW` of its
target and the target.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

TARGET_LOW = 0.9
"""A fold aims to land between this share of its target and the target."""


def needed_prefix(take: Sequence[int], estimate_of: Callable[[Sequence[int]], int], goal: float) -> tuple[int, int]:
    """The fewest of ``take`` (oldest first) whose candidate's estimate is at or under ``goal``, and that estimate.

    ``estimate_of(prefix)`` measures the view with ``prefix`` folded. When even
    all of ``take`` stay over ``goal``: all of them, and their estimate.
    """
    if not take:
        raise ValueError("needed_prefix: nothing to take")
    best = estimate_of(take)
    if best > goal:
        return len(take), best
    low, high = 1, len(take)
    while low < high:
        mid = (low + high) // 2
        value = estimate_of(take[:mid])
        if value <= goal:
            high, best = mid, value
        else:
            low = mid + 1
    return high, best  # ``best`` is always the estimate of ``take[:high]``
