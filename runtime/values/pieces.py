"""A request's labelled pieces, held as a head, one segment per message and a foot.

The compiler renders a request as canonical JSON *pieces* (``(label, text)``
pairs whose texts concatenate to the payload). :class:`SegmentedPieces` is that
sequence with its structure kept: the envelope before the first message, one
segment per rendered message, and everything after the messages. It behaves as
the flat tuple of pieces (indexing, iteration, length, equality), built on
first use; a measurer that knows the structure reads the segments instead, and
can take the segments of an unchanged leading run of messages from an earlier
request (see :func:`runtime.measuring.measure.measure`).

``keys`` has one entry per message segment: two segments at the same index
with equal keys, both within ``reusable``, render the same pieces. Segments at
or after ``reusable`` (a message carrying a cache mark, and every later one
that a mark could make differ) are never taken from an earlier request.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, overload

Piece = tuple[str, str]


class SegmentedPieces(Sequence[Piece]):
    """Labelled pieces as head + message segments + foot (a sequence of the flat pieces)."""

    __slots__ = ("_flat", "_segment", "foot", "head", "keys", "reusable")

    def __init__(
        self,
        head: tuple[Piece, ...],
        keys: Sequence[Hashable],
        reusable: int,
        segment: Callable[[int], tuple[Piece, ...]],
        foot: tuple[Piece, ...],
    ) -> None:
        self.head = head
        self.keys = tuple(keys)
        self.reusable = max(0, min(reusable, len(self.keys)))
        self.foot = foot
        self._segment = segment
        self._flat: tuple[Piece, ...] | None = None

    def segment(self, index: int) -> tuple[Piece, ...]:
        """The pieces of message segment ``index``."""
        return self._segment(index)

    def flat(self) -> tuple[Piece, ...]:
        """Every piece in payload order, as one tuple (built once)."""
        if self._flat is None:
            out: list[Piece] = list(self.head)
            for index in range(len(self.keys)):
                out.extend(self._segment(index))
            out.extend(self.foot)
            self._flat = tuple(out)
        return self._flat

    def __len__(self) -> int:
        return len(self.flat())

    @overload
    def __getitem__(self, index: int) -> Piece: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Piece, ...]: ...

    def __getitem__(self, index: Any) -> Any:
        return self.flat()[index]

    def __iter__(self) -> Iterator[Piece]:
        return iter(self.flat())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SegmentedPieces):
            return self.flat() == other.flat()
        if isinstance(other, tuple):
            return self.flat() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SegmentedPieces({self.flat()!r})"
