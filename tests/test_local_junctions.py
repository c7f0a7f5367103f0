"""Local junctions: counts add up across a hard split, so a junction's correction is computed from its local part.

The properties use real o200k_base counts. The generators build strings whose
ends are the characters the rule is about (ASCII letters, digits, apostrophes,
punctuation, whitespace) next to non-ASCII letters, combining marks, digits of
other scripts and emoji, so they reach both the splits the rule takes and the
near misses it must refuse.
"""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from runtime.measuring.measure import JUNCTION_WINDOW, TokenCounter, local_junction
from runtime.measuring.tokenizer import count_tokens

_CHARS = st.sampled_from(
    list("abcXYZ019'\" ,.:;{}[]()-_/\\\n\t\r")
    + ["é", "ß", "Ω", "漢", "\u0301", "\u0663", "٣", "🙂", "\u00a0", "\u2028", "’"]
)
_TEXT = st.lists(
    st.one_of(_CHARS, st.sampled_from(['"}', ',{"', "'s", "'LL", "  ", "123", "abc", "content", "\\n"])),
    max_size=40,
).map("".join)

_LETTERS = st.sampled_from(list("aZq"))
_DIGITS = st.sampled_from(list("059"))
_NOT_LETTER = st.sampled_from(list(' \n"{},.:0917-/\\\t'))
_NOT_DIGIT = st.sampled_from(list(" \n\"{}a,Zq.:'-/"))


def _junction(tail: str, head: str) -> int:
    return count_tokens(tail + head) - count_tokens(tail) - count_tokens(head)


@settings(max_examples=400, deadline=None)
@given(before=_TEXT, last=_LETTERS, first=_NOT_LETTER, after=_TEXT)
def test_counts_add_up_after_a_letter_before_a_non_letter(before: str, last: str, first: str, after: str) -> None:
    left, right = before + last, first + after
    assert count_tokens(left + right) == count_tokens(left) + count_tokens(right)


@settings(max_examples=300, deadline=None)
@given(before=_TEXT, last=_DIGITS, first=_NOT_DIGIT, after=_TEXT)
def test_counts_add_up_after_a_digit_before_a_non_digit(before: str, last: str, first: str, after: str) -> None:
    left, right = before + last, first + after
    assert count_tokens(left + right) == count_tokens(left) + count_tokens(right)


def test_the_near_misses_are_not_splits() -> None:
    # A contraction and a digit run join across the cut: counts do not add up there, and the rule takes neither.
    for left, right in [("don", "'t"), ("12", "3")]:
        assert count_tokens(left + right) != count_tokens(left) + count_tokens(right)
    # Letters, marks and digits of other scripts are never taken (the rule reads ASCII only).
    for left, right in [("don", "'t"), ("12", "3"), ("caf", "\u0301s"), ("a", "b"), ("x", "é"), ("1", "\u0663")]:
        assert local_junction(left, right) == (left, right)


@settings(max_examples=500, deadline=None)
@given(tail=_TEXT, head=_TEXT)
@example(tail='lorem ipsum dolor"}', head=',{"content":"src')
@example(tail="x 123", head="4 y")
@example(tail="it", head="'s here")
def test_the_local_junction_gives_the_same_correction(tail: str, head: str) -> None:
    near, far = local_junction(tail, head)
    assert tail.endswith(near) and head.startswith(far)
    assert _junction(near, far) == _junction(tail, head)


@settings(max_examples=200, deadline=None)
@given(pieces=st.lists(_TEXT, min_size=1, max_size=12), window_pad=st.integers(0, JUNCTION_WINDOW))
def test_a_counter_sharing_local_junctions_counts_like_a_fresh_one(pieces: list[str], window_pad: int) -> None:
    # A counter that already knows local junctions from other requests gives the same contributions.
    pieces = ["x" * window_pad + pieces[0], *pieces[1:]]
    warm = TokenCounter()
    warm.count_each(list(reversed(pieces)))
    warm.count_each([p + '"}' for p in pieces])
    fresh = TokenCounter(max_junctions=1)
    expected = [count_tokens(pieces[0])] + [
        count_tokens(piece)
        + (
            _junction(("".join(pieces[:i]))[-JUNCTION_WINDOW:], piece[:JUNCTION_WINDOW])
            if "".join(pieces[:i]) and piece
            else 0
        )
        for i, piece in enumerate(pieces)
        if i
    ]
    assert warm.count_each(pieces) == expected
    assert fresh.count_each(pieces) == expected


def test_a_request_of_many_messages_computes_each_kind_of_boundary_once() -> None:
    counter = TokenCounter()
    pieces = []
    for i in range(40):
        pieces += [',{"content":[', f'{{"text":"message {i} about things","type":"text"}}', '],"role":"user"}']
    assert counter.count_pieces(pieces) == count_tokens("".join(pieces))
    stats = counter.stats()
    assert stats.junction_misses == len(pieces) - 1  # every (T, H) is new ...
    assert len(counter._locals) <= 6  # ... but they are a handful of local junctions
