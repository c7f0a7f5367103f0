"""One projection from an original result to what a request carries.

Both the result bound (``tool_result_max_chars`` N) and the clip stage cut a
result the same way, always from the stored original, never from an earlier
copy or preview:

- a body keeps ``k`` of its source characters: a head of ``floor(3k/4)`` and a
  tail of the rest, with one complete clip marker between them naming the
  omitted interval of the original's recovery text and the exact
  ``read_result`` call that returns it (:func:`runtime.fold.formats.clip_marker`);
- ``k`` is the smaller of the copy's *allowance* (the clip's retained count;
  none for an original) and, under a bound, ``k_N``: the greatest count whose
  whole projected body, marker and any ``[JSON preview]`` label included, fits
  in N characters (found by measuring candidates, since the marker's width
  changes with its offsets);
- a body that needs no cut keeps its type and rendering.

For the same original, full-record index, allowance and bound the projected
bytes are identical on every request.

:class:`BoundProjection` is the compiler's view of this: it renders every
tool result of a request under the bound, reading a clipped copy's original
through a lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

import attrs

from runtime.errors import FoldlineError
from runtime.fold.bodies import JSON_PREVIEW_LABEL, Body, result_shape
from runtime.fold.formats import clip_marker
from runtime.values.canonical import canonical_json
from runtime.values.messages import ClipInfo, ToolResult

READ_LIMIT = 16_000
"""The most characters one read_result call returns."""

CLIP_FLOOR = 1024
"""A clip never keeps fewer source characters of a body than this (or than k_N, if smaller)."""


class ProjectionError(FoldlineError):
    """A result cannot be projected as asked (e.g. its marker cannot fit the bound)."""


@attrs.frozen
class ProjectedBody:
    """A body as a request carries it: its text and how many source characters it keeps."""

    text: str
    kept: int
    cut: bool


@attrs.frozen
class Projection:
    """A whole result's projected output and, per body, the source characters kept."""

    output: str
    kept: tuple[int, ...]
    cut: bool


def _split(k: int) -> tuple[int, int]:
    head = (3 * k) // 4
    return head, k - head


def _cut_text(body: Body, k: int, *, index: int, total: int, bound: int | None) -> str:
    source = body.text
    head, tail = _split(k)
    start = body.start + head
    end = body.start + len(source) - tail
    limit = min(end - start, READ_LIMIT, bound if bound is not None else READ_LIMIT)
    marker = clip_marker(index=index, start=start, end=end, total=total, limit=limit)
    label = JSON_PREVIEW_LABEL if body.preview else ""
    return label + source[:head] + marker + (source[len(source) - tail :] if tail else "")


def bound_retained(body: Body, bound: int, *, index: int, total: int) -> int:
    """k_N: the greatest retained count whose projected body fits in ``bound`` characters.

    The whole body when it fits. Raises :class:`ProjectionError` when not even
    one head and one tail character fit beside the marker.
    """
    length = len(body.text)
    if length <= bound:
        return length

    def size(k: int) -> int:
        return len(_cut_text(body, k, index=index, total=total, bound=bound))

    k = max(2, bound - size(2) + 2)
    for _ in range(8):  # the marker's width settles within a few steps
        nxt = max(2, k + bound - size(k))
        if nxt == k:
            break
        k = nxt
    k = min(k, length - 1)
    while k >= 2 and size(k) > bound:
        k -= 1
    if k < 2:
        raise ProjectionError(
            f"result #{index}: a body of {length} characters cannot be cut to fit tool_result_max_chars={bound} "
            "with its head, tail and recovery marker"
        )
    while k + 1 < length and size(k + 1) <= bound:
        k += 1
    return k


def project_body(body: Body, *, index: int, total: int, allowance: int | None, bound: int | None) -> ProjectedBody:
    """Project one body: keep ``min(allowance, k_N)`` of its source characters (see the module docstring)."""
    length = len(body.text)
    k = length if allowance is None else min(allowance, length)
    if bound is not None:
        k = min(k, bound_retained(body, bound, index=index, total=total))
    if k >= length:
        return ProjectedBody(body.text, length, False)
    if k < 2:
        raise ProjectionError(f"result #{index}: an allowance of {allowance} keeps no head and tail of its body")
    return ProjectedBody(_cut_text(body, k, index=index, total=total, bound=bound), k, True)


def project(original: ToolResult, *, index: int, allowance: int | None, bound: int | None) -> Projection:
    """The output a request carries for ``original`` (at full-record ``index``) under an allowance and a bound."""
    if original.clipped_from is not None:
        raise ProjectionError(f"result #{index} is a clipped copy; projections are cut from the original only")
    shape = result_shape(original)
    total = len(shape.recovery)
    projected = [
        project_body(body, index=index, total=total, allowance=allowance, bound=bound) for body in shape.bodies
    ]
    kept = tuple(p.kept for p in projected)
    if not any(p.cut for p in projected):
        return Projection(original.output, kept, False)
    if shape.kind == "text":
        return Projection(projected[0].text, kept, True)
    if shape.kind == "json":
        return Projection(canonical_json(projected[0].text), kept, True)
    assert shape.mapping is not None
    rebuilt = dict(shape.mapping)
    for body, p in zip(shape.bodies, projected, strict=True):
        if p.cut:
            rebuilt[body.key] = p.text  # type: ignore[index]
    return Projection(canonical_json(rebuilt), kept, True)


def clipped_copy(original: ToolResult, *, index: int, allowance: int, bound: int | None) -> ToolResult:
    """A new copy of ``original`` keeping ``allowance`` source characters per body (a new message).

    Its ``clipped_from`` names the original, its ``clip`` records the original's
    index, its recovery text's length and the head/tail split of the kept
    count (for a text output, exactly what the copy holds).
    """
    projection = project(original, index=index, allowance=allowance, bound=bound)
    kept = max(projection.kept) if projection.kept else allowance
    head, tail = _split(min(kept, allowance))
    return ToolResult(
        original.call_id,
        original.name,
        original.arguments_json,
        projection.output,
        original.is_error,
        original.output_format,
        clipped_from=original.id,
        clip=ClipInfo(original_index=index, total=len(result_shape(original).recovery), head=head, tail=tail),
    )


def allowance_of(result: ToolResult) -> int | None:
    """The retained-count allowance a result stands for: None for an original, head+tail for a copy."""
    if result.clip is None:
        return None
    return result.clip.head + result.clip.tail


OriginalLookup = Callable[[str], tuple[ToolResult, int]]
"""An original's id -> (the original, its full-record index); raises KeyError when absent."""


@attrs.frozen(eq=False)
class BoundProjection:
    """Renders every tool result of a request under the result bound (for the compiler).

    ``lookup`` finds an original by id and gives its full-record index;
    ``frozen`` maps result ids to the bound recorded when a protected first
    round was decided (those results keep that bound's bytes).
    """

    max_chars: int | None
    lookup: OriginalLookup
    index_of: Callable[[str], int | None]
    frozen: Mapping[str, int | None] = attrs.field(factory=dict)

    def _bound_for(self, result: ToolResult) -> int | None:
        key = result.clipped_from or result.id
        if key in self.frozen:
            return self.frozen[key]
        return self.max_chars

    def _original(self, result: ToolResult) -> tuple[ToolResult, int]:
        if result.clipped_from is None:
            index = self.index_of(result.id)
            if index is None:
                raise ProjectionError(f"result {result.id} ({result.name}) is not in the branch's record")
            return result, index
        try:
            return self.lookup(result.clipped_from)
        except KeyError:
            raise ProjectionError(
                f"clipped copy {result.id} names original {result.clipped_from}, which is not in the record"
            ) from None

    def memo_key(self, result: ToolResult) -> Hashable:
        bound = self._bound_for(result)
        if result.clipped_from is None:
            return ("bound", bound, self.index_of(result.id))
        return ("bound", bound, result.clip.original_index if result.clip else None)

    def output_of(self, result: ToolResult) -> str:
        bound = self._bound_for(result)
        if bound is None:
            return result.output
        original, index = self._original(result)
        return project(original, index=index, allowance=allowance_of(result), bound=bound).output


def record_projection(
    record: Any, bound: int | None, frozen: Mapping[str, int | None] | None = None
) -> BoundProjection | None:
    """The projection for a branch's record (anything with ``index_of`` and ``message_at``).

    None when no result is bounded (no bound and nothing frozen): requests
    then carry stored outputs. Replay builds the same projection from a
    request record's ``result_bound``.
    """
    if bound is None and not frozen:
        return None

    def lookup(original_id: str) -> tuple[ToolResult, int]:
        index = record.index_of(original_id)
        if index is None:
            raise KeyError(original_id)
        message = record.message_at(index)
        if not isinstance(message, ToolResult):
            raise KeyError(original_id)
        return message, index

    return BoundProjection(bound, lookup, record.index_of, dict(frozen or {}))


def request_projection(record: Any, bound: int | None, protected_round: Any) -> BoundProjection | None:
    """The projection a request of a branch is compiled with (the engine's and replay's one rule).

    The bound applies to every result except the members of an included
    protected first round, which keep the bound they were decided under (the
    decision is made once and kept).
    """
    frozen: dict[str, int | None] = {}
    decision = protected_round
    if decision is not None and getattr(decision, "included", False) and decision.result_bound != bound:
        frozen = dict.fromkeys(decision.member_ids, decision.result_bound)
    return record_projection(record, bound, frozen)
