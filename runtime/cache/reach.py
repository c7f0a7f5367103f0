"""Which cache entries a mark reaches.

The provider reads at a mark by hashing the prefix through the marked block
and, when that entry is absent, walking back one position at a time, at most
:data:`LOOKBACK` positions counting the mark's own. So a mark at block X
reaches an entry at block E when E is at or before X and fewer than
``lookback`` positions back: ``X.position - E.position < lookback``.
Positions come from :mod:`runtime.cache.certificates` (where a run of
tool_use, or of tool_result, blocks in one message is one position).

Thinking blocks and blank text blocks take no mark (``BlockRef.markable``,
from :func:`runtime.cache.blocks.is_markable`); they still count as positions,
the conservative reading of the lookback.
"""

from __future__ import annotations

from runtime.cache.blocks import api_order
from runtime.cache.certificates import BlockRef

LOOKBACK = 20


def reaches(mark: BlockRef, entry: BlockRef, *, lookback: int = LOOKBACK) -> bool:
    """Whether a mark on block ``mark`` reaches the entry written at block ``entry``."""
    if api_order(entry.location) > api_order(mark.location):
        return False
    return mark.position - entry.position < lookback
