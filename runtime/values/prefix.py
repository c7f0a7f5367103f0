"""The longest common prefix of two sequences, compared a slice at a time.

Incremental work (compiling, measuring, certifying only what a request adds)
starts from the point where a new sequence stops agreeing with one already
done. Comparing slices lets the interpreter compare element by element in C:
identical objects compare by identity, so the usual case (the same objects as
last time, plus a few new ones) costs a copy and a pointer walk, not a Python
loop over the history.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def common_prefix(first: Sequence[Any], second: Sequence[Any], limit: int | None = None) -> int:
    """How many leading elements ``first`` and ``second`` share (equal by ``==``), at most ``limit``."""
    a = tuple(first)
    b = tuple(second)
    n = min(len(a), len(b))
    if limit is not None:
        n = min(n, max(limit, 0))
    if n == 0:
        return 0
    if a[:n] == b[:n]:
        return n
    # a[:low] == b[:low] holds and a[:high] != b[:high]; equal prefixes are nested, so bisect.
    low, high = 0, n
    while high - low > 1:
        middle = (low + high) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle
    return low
