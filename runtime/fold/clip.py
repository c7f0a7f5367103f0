"""The clip stage: deficit-driven cuts of the largest result bodies, pure.

Bodies are taken largest first by the source characters they currently keep
(ties to the oldest original). Each is cut just enough to cover the remaining
deficit (estimate minus target), using its own measured tokens per
character, never below the floor (1,024 source characters, or k_N under a
smaller bound), always from the original. After each cut the candidate view
is compiled and measured; a cut is kept only when it strictly lowers the
estimate, and the next body is taken only while the estimate is still over
the target. A mapping output is cut to one common level across its bodies
(largest first within it), so it keeps every key.

Undelivered results and the kept tail may be clipped (never folded); the
protected first round, a just-recovered original and (with caching on) what
precedes the newest note are not.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import attrs

from runtime.fold.bodies import result_shape
from runtime.fold.measurer import Measurer
from runtime.fold.projection import CLIP_FLOOR, bound_retained, clipped_copy, project
from runtime.fold.units import RecordAccess
from runtime.values.messages import Message, ToolResult

MARKER_SLACK = 256
"""Extra characters a proposed cut removes, for the marker the cut adds."""

MAX_CUTS_PER_BODY = 4
"""A body is cut at most this many times in one clip stage (a proposal may undershoot)."""


@attrs.frozen
class ClipOutcome:
    """The clip stage's result: the view, the estimate, the copies kept and the originals they replaced."""

    view: tuple[Message, ...]
    estimate: int
    copies: tuple[ToolResult, ...]
    replaced: tuple[str, ...]
    cuts: tuple[tuple[int, int, int], ...]
    """(original index, body chars, kept) per kept cut, as the fold record lists them."""


def _original(result: ToolResult, record: RecordAccess) -> tuple[ToolResult, int]:
    if result.clipped_from is None:
        index = record.index_of(result.id)
        assert index is not None
        return result, index
    index = record.index_of(result.clipped_from)
    assert index is not None, f"original {result.clipped_from} missing"
    original = record.message_at(index)
    assert isinstance(original, ToolResult)
    return original, index


def _kept_per_body(original: ToolResult, index: int, allowance: int | None, bound: int | None) -> list[int]:
    return list(project(original, index=index, allowance=allowance, bound=bound).kept)


def _floor(original: ToolResult, index: int, bound: int | None) -> int:
    shape = result_shape(original)
    if not shape.bodies:
        return 0
    largest = max(shape.bodies, key=lambda b: len(b.text))
    if bound is None:
        return min(CLIP_FLOOR, len(largest.text))
    return min(CLIP_FLOOR, bound_retained(largest, bound, index=index, total=len(shape.recovery)))


def _level(kept: Sequence[int], remove: int, floor: int) -> int:
    """The common level bodies are cut to so that together they lose at least ``remove`` characters."""
    low, high = floor, max(kept)
    if sum(max(0, k - floor) for k in kept) <= remove:
        return floor
    while low < high:
        mid = (low + high + 1) // 2
        if sum(max(0, k - mid) for k in kept) >= remove:
            low = mid
        else:
            high = mid - 1
    return low


def clip_stage(
    view: Sequence[Message],
    *,
    estimate: int,
    target: float,
    eligible: Callable[[ToolResult], bool],
    record: RecordAccess,
    measurer: Measurer,
    bound: int | None,
) -> ClipOutcome:
    """Run the clip stage over ``view`` (see the module docstring)."""
    current = list(view)
    copies: dict[str, ToolResult] = {}  # original id -> the copy kept so far in this stage
    replaced: list[str] = []
    cuts: dict[int, tuple[int, int, int]] = {}
    cut_count: dict[str, int] = {}
    done: set[str] = set()
    while estimate > target:
        best: tuple[int, int, int, ToolResult, ToolResult, int] | None = None
        for position, message in enumerate(current):
            if not isinstance(message, ToolResult) or not eligible(message):
                continue
            original, index = _original(message, record)
            if original.id in done:
                continue
            kept = _kept_per_body(original, index, _allowance(message), bound)
            if not kept:
                continue
            largest = max(kept)
            if largest <= _floor(original, index, bound):
                continue
            rank = (largest, -index)
            if best is None or rank > (best[0], best[1]):
                best = (largest, -index, position, message, original, index)
        if best is None:
            break
        largest, _, position, message, original, index = best
        floor = _floor(original, index, bound)
        tokens, chars = measurer.block_tokens(message)
        per_char = tokens / max(1, chars)
        need_tokens = (estimate - target) / measurer.scale
        remove = math.ceil(need_tokens / max(per_char, 1e-6)) + MARKER_SLACK
        kept = _kept_per_body(original, index, _allowance(message), bound)
        level = _level(kept, remove, floor)
        cut_count[original.id] = cut_count.get(original.id, 0) + 1
        if cut_count[original.id] >= MAX_CUTS_PER_BODY:
            done.add(original.id)
        if level >= largest:
            done.add(original.id)
            continue
        copy = clipped_copy(original, index=index, allowance=level, bound=bound)
        candidate = current[:position] + [copy] + current[position + 1 :]
        after = measurer.estimate(candidate)
        if after >= estimate:
            done.add(original.id)
            continue
        current, estimate = candidate, after
        if original.id not in copies:
            replaced.append(message.id)
        copies[original.id] = copy
        body_chars = max(len(b.text) for b in result_shape(original).bodies)
        cuts[index] = (index, body_chars, level)
    return ClipOutcome(tuple(current), estimate, tuple(copies.values()), tuple(replaced), tuple(cuts.values()))


def _allowance(result: ToolResult) -> int | None:
    if result.clip is None:
        return None
    return result.clip.head + result.clip.tail
