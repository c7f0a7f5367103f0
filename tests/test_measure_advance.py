"""Walking pieces with a tracked local end (:meth:`TokenCounter.walk`, :func:`next_local_end`), and counting ahead.

A segmented request (:mod:`runtime.measuring.measure_prefix`) and a spliced count
(:mod:`runtime.measuring.measure_splice`) read each junction's correction by its local
junction, the tail's local end worked out from the previous one and the
piece's edges instead of searched for. The properties walk random pieces built
to reach every way the local end can move (the piece's own last split, a split
between the tail and a short piece, an earlier split still within the window,
none within it, and the payload's start shorter than the window) and hold the
tracked end equal to the searched one, and each contribution equal to what
:meth:`TokenCounter.count_each` gives. A segmented request's new pieces are
counted back to back before the walk (:meth:`TokenCounter.count_ahead`): the
same figures, the same pieces counted once each.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from runtime.measuring import measure as measure_module
from runtime.measuring.measure import (
    EDGE_MEMO_CHARS,
    JUNCTION_WINDOW,
    MAX_EDGES,
    Edges,
    TokenCounter,
    local_end,
    local_junction,
    measure,
    next_local_end,
    piece_edges,
)
from runtime.measuring.tokenizer import count_tokens
from runtime.request.compiler import RequestSettings, compile_request
from runtime.values.messages import AssistantResponse, Instruction, TextPart, ToolCall, ToolResult

_CHARS = st.sampled_from(list("abcXYZ019'\" ,.:;{}[]()-_/\\\n\t") + ["é", "ß", "漢", "\u0301", "\u0663", "🙂"])
_SHORT = st.lists(
    st.one_of(_CHARS, st.sampled_from(['"}', ',{"', "'s", "  ", "123", "abc", "content", "\\n"])), max_size=30
).map("".join)
# Runs with no hard split in them (a letter never meets a non-letter, a digit never a non-digit), long enough
# that a split before them falls out of the window, and texts longer than the window with splits in them.
_RUN = st.tuples(st.sampled_from([" ", "{", "é", "ab", "\\n", "}]"]), st.integers(10, 90)).map(lambda t: t[0] * t[1])
_LONG = st.lists(_SHORT, min_size=3, max_size=8).map("".join)
_PIECE = st.one_of(_SHORT, _SHORT, _RUN, _LONG)


def _walk(counter: TokenCounter, pieces: list[str]) -> list[int]:
    """Each piece's contribution, walked one at a time; the tail and its local end checked after each."""
    tail, near, out = "", "", []
    for i, piece in enumerate(pieces):
        tokens, by_label, tail, near = counter.walk(tail, near, [(f"p{i}", piece)])
        assert by_label == {f"p{i}": tokens}
        before = "".join(pieces[: i + 1])
        assert tail == before[-JUNCTION_WINDOW:]
        assert near == local_end(tail) == local_junction(tail, "")[0]
        out.append(tokens)
    return out


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(_PIECE, min_size=1, max_size=10))
@example(pieces=["ab", '"}'])  # a split between the tail and a short piece
@example(pieces=["x" * 70, '"}'])  # ... whose letter has left the window
@example(pieces=["a:", " " * 62, "b"])  # an earlier split just within the window, then just out of it
@example(pieces=["a:", " " * 61, "b"])
@example(pieces=["12", "3", "x"])  # digits join digits: no split between them
@example(pieces=["x ", "ab" * 35 + ":"])  # a head's first split past the window: the head is the window
def test_the_tracked_local_end_is_the_searched_one_and_the_contributions_are_count_each(pieces: list[str]) -> None:
    expected = TokenCounter().count_each(pieces)
    assert _walk(TokenCounter(), pieces) == expected
    warm = TokenCounter()
    warm.count_each(pieces)  # the (tail, head) cache full, the local junctions known
    assert _walk(warm, list(pieces)) == expected
    # All at once, two labels taking turns: the sums by label, in first-seen order.
    total, by_label, tail, near = TokenCounter().walk("", "", [("ab"[i % 2], p) for i, p in enumerate(pieces)])
    assert total == sum(expected) and tail == "".join(pieces)[-JUNCTION_WINDOW:] and near == local_end(tail)
    assert by_label == {label: sum(expected[i::2]) for i, label in enumerate("ab"[: len(pieces)])}
    assert list(by_label) == list("ab"[: len(pieces)])


@settings(max_examples=200, deadline=None)
@given(tail=st.one_of(_SHORT, _LONG, _RUN), piece=_PIECE.filter(bool))
def test_next_local_end_is_the_local_end_of_the_next_tail(tail: str, piece: str) -> None:
    tail = tail[-JUNCTION_WINDOW:]
    after = (tail + piece)[-JUNCTION_WINDOW:]
    assert next_local_end(tail, local_end(tail), piece, piece_edges(piece), after) == local_end(after)


def test_piece_edges_read_the_first_and_last_window_of_a_piece() -> None:
    piece = "abc:" + "x" * 100 + "y:" + "z" * 30
    head, end, after_letter, after_digit = piece_edges(piece)
    assert head == "abc" and end == ":" + "z" * 30
    assert (after_letter, after_digit) == (False, True)  # a letter ends a digit run, not a letter run
    assert piece_edges('"}')[2:] == (True, True)
    assert piece_edges("7")[2:] == (True, False)  # a letter, not a digit, ends at a hard split before a digit
    assert piece_edges("q" * 100)[:2] == ("q" * JUNCTION_WINDOW, None)  # no split within either window


def test_short_pieces_edges_are_computed_once_and_remembered_within_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    computed: list[str] = []

    def edges_of(piece: str) -> Edges:
        computed.append(piece)
        return piece_edges(piece)

    monkeypatch.setattr(measure_module, "piece_edges", edges_of)
    counter = TokenCounter()
    glue, longest, long_piece = '],"role":"user"}', "v" * EDGE_MEMO_CHARS, "w" * (EDGE_MEMO_CHARS + 1)
    walked = [("envelope", glue), ("m", longest), ("n", long_piece)]
    counter.walk("", "", walked)
    counter.walk("", "", walked)
    assert computed == [glue, longest, long_piece, long_piece]  # a long piece's edges are not kept
    assert counter._edges == {glue: piece_edges(glue), longest: piece_edges(longest)}
    counter.walk("", "", [("envelope", f"p{i}") for i in range(MAX_EDGES - 2)])
    assert list(counter._edges)[:2] == [glue, longest] and len(counter._edges) == MAX_EDGES
    counter.walk("", "", [("envelope", "one more")])  # the oldest goes
    assert glue not in counter._edges and len(counter._edges) == MAX_EDGES
    assert list(counter._edges)[0] == longest and list(counter._edges)[-1] == "one more"


def test_walk_counts_a_known_local_junction_as_a_hit_and_a_known_piece_as_a_hit() -> None:
    counter = TokenCounter()
    pieces = [("e", '{"a":'), ("m", '"b"'), ("e", "}")]
    counter.walk("", "", pieces)
    assert (counter.stats().hits, counter.stats().misses) == (0, 3)
    assert (counter.stats().junction_hits, counter.stats().junction_misses) == (0, 2)
    tail = 'zz":'
    tokens, _, _, _ = counter.walk(tail, local_end(tail), pieces[1:2])  # the local junction ('":', '"b') is known
    assert (counter.stats().hits, counter.stats().junction_hits) == (1, 1)
    assert tokens == count_tokens('zz":"b"') - count_tokens('zz":')
    counter.walk("", "", pieces)
    counter.walk("", "", pieces)  # every piece and junction known: the statistics add up
    assert (counter.stats().hits, counter.stats().junction_hits, counter.stats().misses) == (7, 5, 3)


def test_walk_with_lines_counts_a_long_piece_never_seen_by_its_lines() -> None:
    counter = TokenCounter()
    text = "\\n".join(f"line {i} of the text" for i in range(80))
    total, _, _, _ = counter.walk("", "", [("m", text)], lines=True)
    assert total == count_tokens(text) and counter.stats().misses > 2  # the text and each of its lines
    assert counter.walk("", "", [("m", text)], lines=True)[0] == total


def test_count_ahead_counts_each_piece_not_known_once_and_leaves_the_known_alone() -> None:
    counter = TokenCounter()
    counter.count("known")
    counter.count_ahead(["known", "new one", "new one", "another"])
    stats = counter.stats()
    assert (stats.misses, stats.hits, stats.entries) == (3, 0, 3)
    assert counter.count("new one") == count_tokens("new one")


def test_a_segmented_request_counted_ahead_measures_what_walking_alone_gives() -> None:
    call = ToolCall.create("toolu_1", "read_file", {"path": "a.txt"})
    view = [
        Instruction("Read a.txt."),
        AssistantResponse((TextPart("Reading."), call)),
        ToolResult.for_call(call, "alpha beta\n" * 300),
        Instruction("Now say it."),
    ]
    request = compile_request(system="S", tools=(), view=view, settings=RequestSettings(model="m"))
    ahead, alone = TokenCounter(), TokenCounter()
    alone._chains._ahead = lambda pieces: None  # type: ignore[method-assign]
    measured = measure(request.pieces(), ahead, 1.0)
    assert measured == measure(request.pieces(), alone, 1.0)
    assert measured.counted == count_tokens(request.payload_text())
    assert ahead.stats().misses == alone.stats().misses  # the same pieces counted, once each
