"""Measuring a request: the o200k_base count of its payload, times the branch's scale.

The compiler hands over a request as an ordered sequence of canonical JSON
*pieces* whose concatenation is exactly the payload sent, each labelled with
what it belongs to (a message id, ``"tools"``, ``"system"``, ``"envelope"``).
:class:`TokenCounter` counts each piece once and remembers it by content, so a
request costs O(what is new).

Why pieces are not simply summed: the tokenizer splits text into pre-tokens
before merging, and a run of JSON punctuation such as ``}],"`` or ``[{"`` is one
pre-token, often one token. Cutting the payload between two pieces splits such
runs, so a plain per-piece sum over-counts by about one token per boundary:
measured at +2% on prose and +9% on many small messages. The counter therefore
adds, for each piece, a *junction correction*: with ``T`` the last
:data:`JUNCTION_WINDOW` characters of the payload before the piece and ``H``
the first :data:`JUNCTION_WINDOW` characters of the piece,
``count(T + H) - count(T) - count(H)``. Summed over the pieces this telescopes
to the count of the whole payload whenever a boundary's effect on the
pre-tokens stays within the window (it only fails to be exact on a single
pre-token longer than the window running across a boundary, such as 64 digits
or letters in a row). Corrections are cached by ``(T, H)`` like piece counts.

A correction is computed from the *local junction* of ``(T, H)``: ``T`` from
its last hard split on and ``H`` up to its first (:func:`local_junction`). A
hard split is a place where the o200k_base pre-tokenizer always cuts whatever
comes before or after: an ASCII letter followed by an ASCII character that is
neither a letter nor an apostrophe (no pre-token holds a letter and such a
character: letters join only letters, marks and a contraction), or an ASCII
digit followed by an ASCII non-digit (digit runs hold only digits). Counts add
up across a hard split, so ``count(T + H) - count(T) - count(H)`` equals the
same expression over the local junction, exactly; local junctions repeat
(``"}`` before ``,{"content`` in every message), so a request never seen
counts each kind of boundary once rather than three windows per boundary.
Only ASCII decides a split, so the rule does not depend on the Unicode version
of either regular-expression engine. A segmented request (and a spliced count)
is walked instead (:meth:`TokenCounter.walk`): the tail's local end is carried
from piece to piece (:func:`next_local_end`), each correction read by its local
junction with no ``(T, H)`` key and no search of the tail.
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence

import attrs

from runtime.measuring.measure_prefix import Chains
from runtime.measuring.tokenizer import count_tokens
from runtime.values.pieces import SegmentedPieces

JUNCTION_WINDOW = 64
"""Characters each side of a piece boundary that the junction correction reads."""

DEFAULT_CACHE_CHARS = 64 * 1024 * 1024
"""Default bound of the piece cache, in characters of cached pieces."""

DEFAULT_JUNCTION_ENTRIES = 262_144
"""Default bound of the junction-correction cache, in entries."""

LINE_COUNT_MIN_CHARS = 1024
"""A text never counted that is shorter than this is counted whole by :meth:`TokenCounter.count_lines`."""

TOP_PARTS = 5
"""How many of the largest parts a :class:`Measurement` keeps."""

# A hard split (see the module docstring) ends where the letter or digit before it ends.
_SPLIT = r"[A-Za-z](?=[\x00-\x26\x28-\x40\x5b-\x60\x7b-\x7f])|[0-9](?=[\x00-\x2f\x3a-\x7f])"
_FIRST_SPLIT = re.compile(_SPLIT)
_LAST_SPLIT = re.compile(r"(?s).*(?:" + _SPLIT + ")")
_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_DIGITS = frozenset("0123456789")
_ALNUM = _LETTERS | _DIGITS
# The characters a letter, or a digit, before them ends a hard split at (the lookaheads of _SPLIT; all ASCII).
_AFTER_LETTER = frozenset(c for c in map(chr, range(0x80)) if _FIRST_SPLIT.match("a" + c))
_AFTER_DIGIT = frozenset(c for c in map(chr, range(0x80)) if _FIRST_SPLIT.match("0" + c))

EDGE_MEMO_CHARS = 2 * JUNCTION_WINDOW
"""Pieces up to this long (the JSON glue between blocks) have their edges (:func:`piece_edges`) remembered."""

MAX_EDGES = 4096
"""How many short pieces' edges a :class:`TokenCounter` remembers."""

# A product within this distance of an integer is taken as that integer, so
# binary float noise (100000 x 1.1 = 110000.00000000001) never adds a token.
_FLOAT_NOISE_DECIMALS = 6


@attrs.frozen
class CounterStats:
    """A snapshot of a :class:`TokenCounter`'s caches."""

    hits: int
    misses: int
    entries: int
    cached_chars: int
    junction_hits: int
    junction_misses: int
    junction_entries: int
    reused_segments: int = 0


def _positive_int(name: str) -> Callable[[object, attrs.Attribute, object], None]:
    def check(_instance: object, _attribute: attrs.Attribute, value: object) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"TokenCounter {name}: {value!r} is not a positive integer")

    return check


# No setattr hooks: the bounds are checked when the counter is made, and every count updates the statistics, where
# attrs' validating __setattr__ (a Python call per assignment) cost about a tenth of measuring a request never seen.
@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)
class TokenCounter:
    """The o200k_base token counter with a content-keyed LRU cache.

    ``count(text)`` is cached by the string itself (a str caches its hash, so a
    piece object seen again is an O(1) hit). The piece cache holds at most
    ``max_chars`` characters; a single text longer than that is counted and not
    cached. Junction corrections (see the module docstring) are cached
    separately, at most ``max_junctions`` of them. One counter serves every
    branch of a runtime; it holds no per-branch state.
    """

    max_chars: int = attrs.field(default=DEFAULT_CACHE_CHARS, validator=_positive_int("max_chars"))
    max_junctions: int = attrs.field(default=DEFAULT_JUNCTION_ENTRIES, validator=_positive_int("max_junctions"))
    _counts: OrderedDict[str, int] = attrs.field(factory=OrderedDict, init=False)
    _junctions: OrderedDict[tuple[str, str], int] = attrs.field(factory=OrderedDict, init=False)
    _cached_chars: int = attrs.field(default=0, init=False)
    _hits: int = attrs.field(default=0, init=False)
    _misses: int = attrs.field(default=0, init=False)
    _junction_hits: int = attrs.field(default=0, init=False)
    _junction_misses: int = attrs.field(default=0, init=False)
    # Corrections by local junction (a junction miss is computed from here when it can be).
    _locals: OrderedDict[tuple[str, str], int] = attrs.field(factory=OrderedDict, init=False)
    _chains: Chains = attrs.field(init=False)

    _edges: OrderedDict[str, Edges] = attrs.field(factory=OrderedDict, init=False)

    @_chains.default
    def _new_chains(self) -> Chains:
        return Chains(self.walk, local_end, self.count_ahead)

    def measure_segmented(self, pieces: SegmentedPieces) -> tuple[int, list[tuple[str, int]]] | None:
        """``(counted, largest parts)`` of a segmented request, counting only what earlier requests
        of its lineage did not (see :mod:`runtime.measuring.measure_prefix`); None when it cannot."""
        return self._chains.measure(pieces)

    def count(self, text: str) -> int:
        """Tokens of ``text`` alone (special-token text counts as plain text)."""
        if not isinstance(text, str):
            raise TypeError(f"TokenCounter.count: expected a str, got {type(text).__name__}")
        cached = self._counts.get(text)
        if cached is not None:
            self._hits += 1
            self._counts.move_to_end(text)
            return cached
        self._misses += 1
        tokens = count_tokens(text)
        self._remember(text, tokens)
        return tokens

    def _remember(self, text: str, tokens: int) -> None:
        if len(text) <= self.max_chars:
            self._counts[text] = tokens
            self._cached_chars += len(text)
            while self._cached_chars > self.max_chars:
                evicted, _ = self._counts.popitem(last=False)
                self._cached_chars -= len(evicted)

    def count_ahead(self, pieces: Iterable[str]) -> None:
        """Count each of ``pieces`` not known yet, back to back, before they are walked.

        The counts are the ones :meth:`count` gives (a miss now, a hit when walked); only the order
        changes: a run of tokenizer calls costs less than the same calls spread between a walk's other
        work (measured at about 0.6 ms of 20 on a 100k-token request never seen).
        """
        counts = self._counts
        for piece in pieces:
            if piece not in counts:
                self.count(piece)

    def count_lines(self, text: str) -> int:
        """``count(text)``, a text never counted being counted line by line where that is exact.

        A JSON piece is cut before each escaped line break (``\\n``) that follows an
        ASCII letter or digit: a hard split (see the module docstring), so the
        lines' counts add up to the whole text's exactly. Each line is cached: a
        text that repeats most of an earlier one's lines (a fold note over one more
        round) costs its new lines.
        """
        if text in self._counts or len(text) < LINE_COUNT_MIN_CHARS:
            return self.count(text)
        lines = _lines_of(text)
        if len(lines) < 2:
            return self.count(text)
        self._misses += 1
        tokens = sum(self.count(line) for line in lines)
        self._remember(text, tokens)
        return tokens

    def extend(self, tail: str, pieces: Iterable[tuple[str, str]], *, lines: bool = False) -> tuple[int, str]:
        """The tokens ``pieces`` add after a payload ending in ``tail``, and the payload's tail after them.

        Each piece adds its count plus its junction correction, as in
        :meth:`count_each`; with ``lines``, a piece never counted is counted by
        :meth:`count_lines`.
        """
        total, _, tail, _ = self.walk(tail, local_end(tail), pieces, lines=lines)
        return total, tail

    def walk(
        self, tail: str, near: str, pieces: Iterable[tuple[str, str]], *, lines: bool = False
    ) -> tuple[int, dict[str, int], str, str]:
        """``(total, by label, tail, near)``: what labelled ``pieces`` add after a payload ending in ``tail``
        whose local end is ``near`` (:func:`local_end`), summed and by label (in first-seen order), and the
        payload's tail and its local end after them.

        Each piece adds what :meth:`count_each` gives it; the junction correction is read by the local
        junction ``(near, the piece's local head)``, each next ``near`` worked out from the last and the
        piece's edges (:func:`next_local_end`) rather than searched for in the tail. A junction found among
        the known local junctions is a junction hit, one computed a junction miss. With ``lines``, a piece
        never counted is counted by :meth:`count_lines`.
        """
        counts, memo, known = self._counts, self._edges, self._locals
        total = hits = junction_hits = 0
        by_label: dict[str, int] = {}
        for label, piece in pieces:
            tokens = counts.get(piece)
            if tokens is None or lines:
                tokens = self.count_lines(piece) if lines else self.count(piece)
            else:
                hits += 1
                counts.move_to_end(piece)
            if piece:
                edges = memo.get(piece) or self._edges_of(piece)
                if tail:
                    key = (near, edges[0])
                    correction = known.get(key)
                    if correction is None:
                        self._junction_misses += 1
                        correction = self._local_correction(key)
                    else:
                        junction_hits += 1
                        known.move_to_end(key)
                    tokens += correction
                after = piece[-JUNCTION_WINDOW:] if len(piece) >= JUNCTION_WINDOW else (tail + piece)[-JUNCTION_WINDOW:]
                near = next_local_end(tail, near, piece, edges, after)
                tail = after
            total += tokens
            by_label[label] = by_label.get(label, 0) + tokens
        self._hits += hits
        self._junction_hits += junction_hits
        return total, by_label, tail, near

    def _edges_of(self, piece: str) -> Edges:
        """A non-empty piece's edges, remembered when it is short (the glue between blocks repeats; the
        oldest remembered goes first, so a run of short blocks seen once never empties the memo at once)."""
        edges = piece_edges(piece)
        if len(piece) <= EDGE_MEMO_CHARS:
            self._edges[piece] = edges
            if len(self._edges) > MAX_EDGES:
                self._edges.popitem(last=False)
        return edges

    def running(self, pieces: SegmentedPieces) -> tuple[int, list[int], list[str]] | None:
        """``(counted, totals, tails)`` of a segmented request without cache marks: the running count and the
        payload's last :data:`JUNCTION_WINDOW` characters before each message segment and after the last one
        (see :mod:`runtime.measuring.measure_prefix`); None when it cannot be measured segment by segment."""
        return self._chains.running(pieces)

    def count_each(self, pieces: Iterable[str]) -> list[int]:
        """Each piece's tokens in place: its own count plus its junction correction.

        The list sums to the count of the concatenated pieces (see the module
        docstring for the one rare case where it is not exact). A value can be
        smaller than the piece's own count, and is 0 or negative for a short
        glue piece that merges into its neighbours' punctuation.
        """
        contributions: list[int] = []
        tail = ""
        for index, piece in enumerate(pieces):
            if not isinstance(piece, str):
                raise TypeError(f"piece {index}: expected a str, got {type(piece).__name__}")
            tokens = self.count(piece)
            if tail and piece:
                tokens += self._junction(tail, piece[:JUNCTION_WINDOW])
            contributions.append(tokens)
            tail = piece[-JUNCTION_WINDOW:] if len(piece) >= JUNCTION_WINDOW else (tail + piece)[-JUNCTION_WINDOW:]
        return contributions

    def count_pieces(self, pieces: Iterable[str]) -> int:
        """Tokens of the concatenated pieces, from cached per-piece counts."""
        return sum(self.count_each(pieces))

    def stats(self) -> CounterStats:
        return CounterStats(
            hits=self._hits,
            misses=self._misses,
            entries=len(self._counts),
            cached_chars=self._cached_chars,
            junction_hits=self._junction_hits,
            junction_misses=self._junction_misses,
            junction_entries=len(self._junctions),
            reused_segments=self._chains.reused_segments,
        )

    def _known(self, text: str) -> int:
        """Tokens of ``text``, from the piece cache when it is there (no statistics, no reordering)."""
        cached = self._counts.get(text)
        return cached if cached is not None else count_tokens(text)

    def _junction(self, tail: str, head: str) -> int:
        key = (tail, head)
        cached = self._junctions.get(key)
        if cached is not None:
            self._junction_hits += 1
            self._junctions.move_to_end(key)
            return cached
        self._junction_misses += 1
        local = local_junction(tail, head)
        correction = self._locals.get(local)
        if correction is None:
            correction = self._local_correction(local)
        else:
            self._locals.move_to_end(local)
        self._junctions[key] = correction
        if len(self._junctions) > self.max_junctions:
            self._junctions.popitem(last=False)
        return correction

    def _local_correction(self, local: tuple[str, str]) -> int:
        """The correction of a local junction not known yet, computed and remembered."""
        near, far = local
        correction = count_tokens(near + far) - self._known(near) - self._known(far)
        self._locals[local] = correction
        if len(self._locals) > self.max_junctions:
            self._locals.popitem(last=False)
        return correction


def _lines_of(text: str) -> list[str]:
    """``text`` cut before each escaped line break (``\\n``) that follows an ASCII letter or digit (a hard split)."""
    parts = text.split("\\n")
    lines: list[str] = []
    current = parts[0]
    for part in parts[1:]:
        if current and current[-1] in _ALNUM:
            lines.append(current)
            current = "\\n" + part
        else:
            current += "\\n" + part
    lines.append(current)
    return lines


def local_junction(tail: str, head: str) -> tuple[str, str]:
    """``tail`` from its last hard split on and ``head`` up to its first (see the module docstring)."""
    last = _LAST_SPLIT.match(tail)
    first = _FIRST_SPLIT.search(head)
    return (tail if last is None else tail[last.end() :], head if first is None else head[: first.end()])


def local_end(tail: str) -> str:
    """``tail`` from its last hard split on (the first part of :func:`local_junction`)."""
    last = _LAST_SPLIT.match(tail)
    return tail if last is None else tail[last.end() :]


Edges = tuple[str, str | None, bool, bool]
"""What the junctions around a piece read of it (:func:`piece_edges`)."""


def piece_edges(piece: str) -> Edges:
    """``(head, end, after_letter, after_digit)`` of a non-empty ``piece``.

    ``head`` is its local head (its first :data:`JUNCTION_WINDOW` characters up to their first hard split, the
    second part of :func:`local_junction`); ``end`` its last :data:`JUNCTION_WINDOW` characters from their last
    hard split on, or None when they hold none; ``after_letter`` and ``after_digit`` whether a letter, or a digit,
    right before the piece ends at a hard split.
    """
    first = _FIRST_SPLIT.search(piece, 0, JUNCTION_WINDOW)
    head = piece[:JUNCTION_WINDOW] if first is None else piece[: first.end()]
    last_window = piece[-JUNCTION_WINDOW:]
    last = _LAST_SPLIT.match(last_window)
    end = None if last is None else last_window[last.end() :]
    return head, end, piece[0] in _AFTER_LETTER, piece[0] in _AFTER_DIGIT


def next_local_end(tail: str, near: str, piece: str, edges: Edges, after: str) -> str:
    """The local end of ``after`` (the last :data:`JUNCTION_WINDOW` characters of ``tail + piece``), from
    ``near`` (the local end of ``tail``) and ``piece``'s edges, without searching ``after``.

    The last hard split of ``after`` is the piece's own last one when it has one within the window; else
    the one between ``tail`` and the piece, when there is one and its letter or digit is still within the
    window; else ``near``'s, when its letter or digit is still within the window; else there is none.
    """
    end = edges[1]
    if end is not None:
        return end
    size = len(piece)
    if size < JUNCTION_WINDOW and tail:
        last = tail[-1]
        if (edges[2] and last in _LETTERS) or (edges[3] and last in _DIGITS):
            return piece
    if len(near) + size < JUNCTION_WINDOW:
        return near + piece
    return after


def check_scale(scale: float) -> float:
    """Return ``scale`` as a float if it is a finite number >= 1.0, else raise ValueError.

    The scale starts at 1.0 and never falls (see :mod:`runtime.measuring.calibration`).
    """
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise ValueError(f"scale: {scale!r} is not a number; expected a finite number >= 1.0")
    if not math.isfinite(scale) or scale < 1.0:
        raise ValueError(f"scale: {scale!r} is not a finite number >= 1.0")
    return float(scale)


def scaled_estimate(counted: int, scale: float) -> int:
    """``ceil(counted x scale)``, ignoring float noise below one millionth of a token."""
    if isinstance(counted, bool) or not isinstance(counted, int) or counted < 0:
        raise ValueError(f"counted: {counted!r} is not a non-negative integer")
    return math.ceil(round(counted * check_scale(scale), _FLOAT_NOISE_DECIMALS))


@attrs.frozen
class Measurement:
    """The size of one request as it will be sent.

    ``counted`` is the o200k_base count of the payload, ``scale`` the branch's
    calibration, ``estimate`` = ceil(counted x scale) (the number every ceiling
    comparison uses), and ``parts`` the largest parts as (label, counted tokens),
    at most :data:`TOP_PARTS`, largest first (ties: first seen first).
    """

    counted: int
    scale: float
    estimate: int
    parts: tuple[tuple[str, int], ...]


def measure(labelled_pieces: Sequence[tuple[str, str]], counter: TokenCounter, scale: float) -> Measurement:
    """Measure a request given as ``(label, piece)`` pairs in payload order.

    Pieces with the same label add up to one part. Each piece's junction
    correction is booked to that piece's label, so all parts together sum to
    ``counted``. A :class:`runtime.values.pieces.SegmentedPieces` (what
    :meth:`runtime.request.compiler.Request.pieces` gives) is measured from the state
    an earlier request of its lineage left after the messages the two share:
    the same figures, for the cost of what is new.
    """
    scale = check_scale(scale)
    if isinstance(labelled_pieces, SegmentedPieces):
        done = counter.measure_segmented(labelled_pieces)
        if done is not None:
            counted, largest = done
            return Measurement(
                counted=counted, scale=scale, estimate=scaled_estimate(counted, scale), parts=tuple(largest)
            )
    labels: list[str] = []
    pieces: list[str] = []
    for index, item in enumerate(labelled_pieces):
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
            raise TypeError(f"labelled piece {index}: expected a (label: str, piece: str) pair, got {item!r:.80}")
        labels.append(item[0])
        pieces.append(item[1])
    by_label: dict[str, int] = {}
    for label, tokens in zip(labels, counter.count_each(pieces), strict=True):
        by_label[label] = by_label.get(label, 0) + tokens
    counted = sum(by_label.values())
    order = {label: i for i, label in enumerate(by_label)}
    largest = sorted(by_label.items(), key=lambda item: (-item[1], order[item[0]]))[:TOP_PARTS]
    return Measurement(
        counted=counted,
        scale=scale,
        estimate=scaled_estimate(counted, scale),
        parts=tuple(largest),
    )
