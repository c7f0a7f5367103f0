"""Measuring a segmented request from where an earlier request stopped agreeing with it.

A request's pieces arrive as :class:`runtime.values.pieces.SegmentedPieces`: a head,
one segment per message and a foot. A :class:`Chains` remembers, for a few
recent requests, the running state after the head and after each message
segment: the count so far, the envelope's share, the last
:data:`runtime.measuring.measure.JUNCTION_WINDOW` characters (the tail the next
junction correction reads) and the five largest labelled parts so far. A new
request whose leading segments equal one of those (the same rendered
messages, no cache mark among them) starts from the state there and counts
only the rest: one appended turn costs the turn, whatever the history.

The result is the same as counting every piece in order (each piece's count
plus its junction correction, summed by label), because the state after a
segment depends only on the pieces up to it. A label met in two segments
(the same message rendered twice) is not handled here: the caller counts the
whole request instead.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable

from runtime.values.pieces import SegmentedPieces
from runtime.values.prefix import common_prefix

MAX_CHAINS = 16
"""How many request lineages a :class:`Chains` keeps (most recently used first)."""

ENVELOPE = "envelope"
_TOP = 5

Walk = Callable[[str, str, Iterable[tuple[str, str]]], tuple[int, dict[str, int], str, str]]
"""What labelled pieces add after a tail with its local end, in all and by label, and the tail and local end
after them (:meth:`runtime.measuring.measure.TokenCounter.walk`)."""

# A part's sort key: (-tokens, segment index, order in the segment, label); the segment of the
# head is -1, the foot's is the number of messages. Sorting gives largest first, first seen first.
_Part = tuple[int, int, int, str]


class _Chain:
    """The running state after the head and after each leading message segment of one lineage."""

    __slots__ = ("envelope", "first", "head", "keys", "tails", "tops", "totals")

    def __init__(self, head: str, total: int, envelope: int, tail: str) -> None:
        self.head = head
        self.keys: list[Hashable] = []
        self.totals = [total]
        self.envelope = [envelope]
        self.tails = [tail]
        self.tops: list[tuple[_Part, ...]] = [()]
        self.first: dict[str, int] = {}

    def cut(self, length: int) -> _Chain:
        """A new chain holding the state through the first ``length`` segments."""
        chain = _Chain(self.head, self.totals[length], self.envelope[length], self.tails[length])
        chain.keys = self.keys[:length]
        chain.totals = self.totals[: length + 1]
        chain.envelope = self.envelope[: length + 1]
        chain.tails = self.tails[: length + 1]
        chain.tops = self.tops[: length + 1]
        chain.first = {label: index for label, index in self.first.items() if index < length}
        return chain


class Chains:
    """A few recent lineages of measured requests (see the module docstring)."""

    def __init__(self, walk: Walk, local_end: Callable[[str], str], ahead: Callable[[Iterable[str]], None]) -> None:
        self._walk = walk
        self._ahead = ahead
        self._local_end = local_end
        self._chains: list[_Chain] = []
        self.reused_segments = 0

    def clear(self) -> None:
        self._chains.clear()

    def _find(self, head: str, pieces: SegmentedPieces) -> tuple[_Chain | None, int]:
        best: _Chain | None = None
        best_length = -1
        keys = pieces.keys
        for chain in self._chains:
            if chain.head != head:
                continue
            if chain.keys and keys and chain.keys[0] is not keys[0] and chain.keys[0] != keys[0]:
                length = 0
            else:
                length = common_prefix(keys, chain.keys, pieces.reusable)
            if length > best_length:
                best, best_length = chain, length
        return best, max(best_length, 0)

    def _start(self, head: str, pieces: SegmentedPieces) -> tuple[_Chain, int] | None:
        chain, length = self._find(head, pieces)
        if chain is not None:
            self.reused_segments += length
            if length < len(chain.keys):
                chain = chain.cut(length)
            return chain, length
        if any(label != ENVELOPE for label, _ in pieces.head):
            return None
        total, _, tail, _ = self._walk("", "", pieces.head)
        return _Chain(head, total, total, tail), 0

    def measure(self, pieces: SegmentedPieces) -> tuple[int, list[tuple[str, int]]] | None:
        """``(counted, largest parts)`` for ``pieces``, or None when a label repeats across segments."""
        if not pieces.head:
            return None
        head = "".join(piece for _, piece in pieces.head)
        started = self._start(head, pieces)
        if started is None:
            return None
        chain, done = started
        total, envelope, tail = chain.totals[done], chain.envelope[done], chain.tails[done]
        near = self._local_end(tail)
        top = chain.tops[done]
        seen: dict[str, int] = {}
        count = len(pieces.keys)
        segments = [pieces.segment(index) for index in range(done, count)]
        segments.append(pieces.foot)
        self._ahead(piece for segment in segments for _, piece in segment)
        walk, first, reusable = self._walk, chain.first, pieces.reusable
        for index, segment in enumerate(segments, done):
            tokens, parts, tail, near = walk(tail, near, segment)
            total += tokens
            envelope += parts.pop(ENVELOPE, 0)
            if parts:
                for label in parts:
                    if label in seen or first.get(label, count + 1) < index:
                        return None
                    seen[label] = index
                ranked = [(-tokens, index, order, label) for order, (label, tokens) in enumerate(parts.items())]
                if len(top) < _TOP or min(ranked) < top[-1]:  # else none of them is among the largest
                    top = tuple(sorted((*top, *ranked))[:_TOP])
            if index < reusable and index == len(chain.keys):
                chain.keys.append(pieces.keys[index])
                chain.totals.append(total)
                chain.envelope.append(envelope)
                chain.tails.append(tail)
                chain.tops.append(top)
                first.update(dict.fromkeys(parts, index))
        self._keep(chain)
        largest = sorted((*top, (-envelope, -1, 0, ENVELOPE)))[:_TOP]
        return total, [(label, -negative) for negative, _, _, label in largest]

    def running(self, pieces: SegmentedPieces) -> tuple[int, list[int], list[str]] | None:
        """``(counted, totals, tails)`` for ``pieces`` when every message segment is reusable (no cache mark):
        the count, and the running count and tail before each message segment and after the last one."""
        if pieces.reusable < len(pieces.keys):
            return None
        done = self.measure(pieces)
        if done is None:
            return None
        chain = self._chains[0]
        count = len(pieces.keys)
        if len(chain.keys) != count:
            return None
        return done[0], chain.totals[: count + 1], chain.tails[: count + 1]

    def _keep(self, chain: _Chain) -> None:
        if chain in self._chains:
            self._chains.remove(chain)
        self._chains.insert(0, chain)
        del self._chains[MAX_CHAINS:]
