"""Measurement: the cached counter, the junction correction, and Measurement."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.measuring.measure import (
    JUNCTION_WINDOW,
    TOP_PARTS,
    Measurement,
    TokenCounter,
    check_scale,
    measure,
    scaled_estimate,
)
from runtime.measuring.tokenizer import count_tokens


def test_count_matches_the_tokenizer_and_caches_by_content() -> None:
    counter = TokenCounter()
    text = "The quick brown fox jumps over the lazy dog."
    assert counter.count(text) == count_tokens(text)
    # an equal string built separately (a different object) is a hit too
    assert counter.count("".join(["The quick brown fox ", "jumps over the lazy dog."])) == count_tokens(text)
    stats = counter.stats()
    assert (stats.hits, stats.misses, stats.entries, stats.cached_chars) == (1, 1, 1, len(text))


def test_empty_text_counts_zero_and_is_cached() -> None:
    counter = TokenCounter()
    assert counter.count("") == 0
    assert counter.count("") == 0
    assert counter.stats().hits == 1


def test_cache_is_bounded_by_characters_and_evicts_least_recently_used() -> None:
    counter = TokenCounter(max_chars=30)
    a, b, c = "a" * 10 + " one", "b" * 10 + " two", "c" * 10 + " six"  # 14 characters each
    counter.count(a)
    counter.count(b)
    counter.count(a)  # a is now the most recently used
    counter.count(c)  # 42 characters > 30: b goes first
    stats = counter.stats()
    assert stats.entries == 2 and stats.cached_chars == 28
    hits_before = counter.stats().hits
    counter.count(a)
    counter.count(c)
    assert counter.stats().hits == hits_before + 2
    counter.count(b)
    assert counter.stats().misses == 4  # a, b, c, then b again


def test_text_longer_than_the_cache_is_counted_not_cached() -> None:
    counter = TokenCounter(max_chars=8)
    text = "longer than eight characters"
    assert counter.count(text) == count_tokens(text)
    assert counter.count(text) == count_tokens(text)
    stats = counter.stats()
    assert (stats.entries, stats.cached_chars, stats.misses, stats.hits) == (0, 0, 2, 0)


def test_junction_cache_is_bounded() -> None:
    counter = TokenCounter(max_junctions=2)
    counter.count_pieces(["{", "[", "(", "<", "}"])  # four junctions
    assert counter.stats().junction_entries == 2
    assert counter.stats().junction_misses == 4


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "64"])
def test_counter_bounds_must_be_positive_integers(bad: object) -> None:
    with pytest.raises(ValueError, match=r"max_chars: .* is not a positive integer"):
        TokenCounter(max_chars=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"max_junctions: .* is not a positive integer"):
        TokenCounter(max_junctions=bad)  # type: ignore[arg-type]


def test_count_refuses_non_strings() -> None:
    counter = TokenCounter()
    with pytest.raises(TypeError, match="expected a str, got bytes"):
        counter.count(b"abc")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="piece 1: expected a str, got int"):
        counter.count_pieces(["a", 3])  # type: ignore[list-item]


def test_plain_sum_overcounts_json_glue_and_the_junction_correction_fixes_it() -> None:
    # Why the correction exists: `}` `,` `{"` are one punctuation pre-token when joined.
    pieces = ['{"content":[', '{"text":"ok","type":"text"}', ",", '{"text":"ok","type":"text"}', "]}"]
    whole = count_tokens("".join(pieces))
    assert sum(count_tokens(piece) for piece in pieces) > whole
    counter = TokenCounter()
    assert counter.count_pieces(pieces) == whole
    each = counter.count_each(pieces)
    assert sum(each) == whole and len(each) == len(pieces)


def test_a_request_costs_what_is_new() -> None:
    counter = TokenCounter()
    history = [f'{{"text":"message number {i} with some words","type":"text"}}' for i in range(50)]
    first = ['{"messages":['] + history + ["]}"]
    counter.count_pieces(first)
    before = counter.stats()
    second = ['{"messages":['] + history + ['{"text":"one new message","type":"text"}', "]}"]
    assert counter.count_pieces(second) == count_tokens("".join(second))
    after = counter.stats()
    assert after.misses - before.misses == 1  # only the new piece is counted
    assert after.hits - before.hits == len(second) - 1
    # junctions: the new piece after the history, and the closing glue after it
    assert after.junction_misses - before.junction_misses == 2


def test_count_pieces_accepts_any_iterable() -> None:
    counter = TokenCounter()
    assert counter.count_pieces(iter(["a", "b"])) == count_tokens("ab")
    assert counter.count_pieces([]) == 0


# --- the incremental count against counting the whole payload ---------------

_PROSE = (
    "Folding keeps the conversation under its ceiling without losing what it worked on. "
    "The model reads an original back in ranges when it needs a fact it no longer sees. "
)
_CODE = (
    "def walk(tree: dict[str, list[int]]) -> int:\n"
    "    total = 0\n"
    "    for key, values in sorted(tree.items()):\n"
    "        if key.startswith('_'):\n"
    "            continue  # private\n"
    "        total += sum(v * v for v in values)\n"
    "    return total\n\n"
)
_CJK = "上下文窗口的折叠不会丢失任何内容。東京は日本の首都です。한국어 문장도 있습니다. "
_CYRILLIC = "Контекст сворачивается без потерь, а оригинал читается по частям. "
_ARABIC = "يتم طي السياق دون فقدان أي شيء، ويمكن قراءة الأصل على أجزاء. "
_EMOJI = "done ✅ 🚀🔥 ok 👍🏽 family: 👨‍👩‍👧‍👦 flags 🇯🇵🇫🇷 — fine 🙂 "


def _json_text(i: int) -> str:
    import json

    return json.dumps(
        {"id": i, "path": f"src/module_{i}.py", "lines": [i, i + 1, i * 7], "ok": i % 2 == 0, "note": None},
        indent=2,
    )


def _long_output(size: int) -> str:
    lines = []
    i = 0
    while sum(len(line) + 1 for line in lines) < size:
        lines.append(
            f"drwxr-xr-x  2 user staff  {4096 + i:>6} Oct {1 + i % 28:>2} 12:{i % 60:02d} dir_{i:05d}/file_{i}.txt"
        )
        i += 1
    return "\n".join(lines)[:size]


def _conversation(text_of, rounds: int) -> list[dict]:
    messages: list[dict] = [{"role": "user", "content": [{"type": "text", "text": "Start the task. " + text_of(0)}]}]
    for i in range(1, rounds + 1):
        call_id = f"toolu_{i:04d}"
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": text_of(i)},
                    {"type": "tool_use", "id": call_id, "name": "read_file", "input": {"path": f"src/f{i}.py"}},
                ],
            }
        )
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": text_of(i + 1)}]}
        )
    return messages


def _payload(messages: list[dict]) -> dict:
    return {
        "max_tokens": 1024,
        "messages": messages,
        "model": "claude-haiku-5-5",
        "system": [{"type": "text", "text": "You are a careful engineer. Answer briefly."}],
        "tools": [
            {
                "name": "read_file",
                "description": "Read a file and return its text.",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
            },
            {
                "name": "context",
                "description": "Inspect and reduce the context: status, fold, restore, read_result.",
                "input_schema": {"type": "object", "properties": {"action": {"type": "string"}}},
            },
        ],
    }


def labelled_pieces(payload: dict) -> list[tuple[str, str]]:
    """The payload as the compiler hands it over: block JSON pieces and envelope glue.

    Keys are sorted as canonical JSON sorts them; each message content block,
    tool and system block is its own piece; everything between is glue.
    """
    from runtime.values.canonical import canonical_json

    pieces: list[tuple[str, str]] = []
    glue = "{"
    for n, key in enumerate(sorted(payload)):
        glue += ("," if n else "") + canonical_json(key) + ":"
        value = payload[key]
        if key in ("messages", "tools", "system"):
            glue += "["
            for i, item in enumerate(value):
                if key == "messages":
                    glue += ("," if i else "") + '{"content":['
                    for b, block in enumerate(item["content"]):
                        glue += "," if b else ""
                        pieces.append(("envelope", glue))
                        pieces.append((f"message-{i}", canonical_json(block)))
                        glue = ""
                    glue += '],"role":' + canonical_json(item["role"]) + "}"
                else:
                    glue += "," if i else ""
                    pieces.append(("envelope", glue))
                    pieces.append((key, canonical_json(item)))
                    glue = ""
            glue += "]"
        else:
            glue += canonical_json(value)
    pieces.append(("envelope", glue + "}"))
    assert "".join(piece for _, piece in pieces) == canonical_json(payload)
    return [(label, piece) for label, piece in pieces if piece]


CONTENT = {
    "prose": lambda i: _PROSE * (1 + i % 5),
    "code": lambda i: _CODE * (1 + i % 4),
    "json": _json_text,
    "cjk": lambda i: _CJK * (1 + i % 3),
    "cyrillic": lambda i: _CYRILLIC * (1 + i % 3),
    "arabic": lambda i: _ARABIC * (1 + i % 3),
    "emoji": lambda i: _EMOJI * (1 + i % 3),
    "mixed": lambda i: [_PROSE, _CODE, _json_text(i), _CJK, _CYRILLIC, _ARABIC, _EMOJI][i % 7],
}


def _assert_within_one_percent(payload: dict) -> tuple[int, int]:
    pieces = labelled_pieces(payload)
    whole = count_tokens("".join(piece for _, piece in pieces))
    incremental = measure(pieces, TokenCounter(), 1.0).counted
    assert abs(incremental - whole) <= whole / 100, (incremental, whole)
    return incremental, whole


@pytest.mark.parametrize("kind", sorted(CONTENT))
def test_incremental_count_is_within_one_percent_on_varied_content(kind: str) -> None:
    incremental, whole = _assert_within_one_percent(_payload(_conversation(CONTENT[kind], 40)))
    assert whole > 2000  # the content is not trivially small
    assert incremental == whole  # in practice it is exact


def test_incremental_count_on_a_long_tool_output() -> None:
    output = _long_output(100_000)
    assert len(output) == 100_000
    messages = _conversation(lambda i: output if i == 2 else "listing the tree", 1)
    incremental, whole = _assert_within_one_percent(_payload(messages))
    assert whole > 20_000 and incremental == whole


def test_incremental_count_on_many_small_messages() -> None:
    messages = _conversation(lambda i: f"ok {i}", 600)
    incremental, whole = _assert_within_one_percent(_payload(messages))
    assert len(labelled_pieces(_payload(messages))) > 3000 and incremental == whole


def test_incremental_count_with_tiny_glue_pieces_between_every_block() -> None:
    # pieces cut at every JSON punctuation mark, the most a compiler could cut
    pieces = []
    for label, piece in labelled_pieces(_payload(_conversation(lambda i: "y", 100))):
        pieces.extend((label, ch) for ch in piece) if label == "envelope" else pieces.append((label, piece))
    whole = count_tokens("".join(piece for _, piece in pieces))
    assert measure(pieces, TokenCounter(), 1.0).counted == whole


_ALPHABET = st.sampled_from(
    list("abcXYZ019 \n\t.,:;\"'{}[]()-_/\\#") + ["é", "ß", "中", "文", "ж", "ع", "🙂", "👍🏽", "'s", "  ", "\r\n"]
)


_BLOCK_TEXT = st.one_of(
    st.lists(_ALPHABET, max_size=40).map("".join),
    st.tuples(st.sampled_from(["a", "7", " ", "\n", "-", "中"]), st.integers(1, 200)).map(lambda t: t[0] * t[1]),
    st.text(max_size=60),
)


@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(_BLOCK_TEXT, min_size=1, max_size=12),
    roles=st.lists(st.booleans(), min_size=12, max_size=12),
)
def test_incremental_count_equals_the_whole_count_for_random_blocks(texts: list[str], roles: list[bool]) -> None:
    messages = [
        {"role": "user" if roles[i] else "assistant", "content": [{"type": "text", "text": text}]}
        for i, text in enumerate(texts)
    ]
    pieces = labelled_pieces({"max_tokens": 64, "messages": messages, "model": "m"})
    whole = count_tokens("".join(piece for _, piece in pieces))
    assert measure(pieces, TokenCounter(), 1.0).counted == whole


@settings(max_examples=150, deadline=None)
@given(pieces=st.lists(st.lists(_ALPHABET, max_size=8).map("".join), max_size=4))
def test_corrections_telescope_exactly_when_the_windows_hold_everything(pieces: list[str]) -> None:
    # Cut anywhere, even inside a word: with the whole text inside one window
    # each correction sees the full text before the cut and the full piece, so
    # the sum is exactly the joined count.
    assert sum(len(piece) for piece in pieces) <= JUNCTION_WINDOW
    assert TokenCounter().count_pieces(pieces) == count_tokens("".join(pieces))


# --- Measurement ---------------------------------------------------------------


def test_measure_reports_counted_scaled_estimate_and_largest_parts() -> None:
    pieces = [
        ("envelope", '{"messages":['),
        ("m1", '{"text":"' + "alpha " * 50 + '","type":"text"}'),
        ("envelope", ","),
        ("m2", '{"text":"' + "beta " * 10 + '","type":"text"}'),
        ("envelope", ","),
        ("m1", '{"text":"' + "gamma " * 30 + '","type":"text"}'),
        ("envelope", "]}"),
    ]
    counter = TokenCounter()
    result = measure(pieces, counter, 1.37)
    whole = count_tokens("".join(piece for _, piece in pieces))
    assert result.counted == whole
    assert result.scale == 1.37
    assert result.estimate == math.ceil(round(whole * 1.37, 6))
    labels = [label for label, _ in result.parts]
    assert labels[:2] == ["m1", "m2"]  # m1's two pieces add up to one part
    assert sum(tokens for _, tokens in result.parts) == result.counted  # three labels: all shown
    assert dict(result.parts)["m1"] > 80


def test_measure_keeps_the_top_five_parts_largest_first_ties_in_order() -> None:
    pieces = [(f"p{i}", "word " * n) for i, n in enumerate([3, 9, 1, 9, 5, 7, 2])]
    result = measure(pieces, TokenCounter(), 1.0)
    assert len(result.parts) == TOP_PARTS
    sizes = [tokens for _, tokens in result.parts]
    assert sizes == sorted(sizes, reverse=True)
    assert [label for label, _ in result.parts][:2] == ["p1", "p3"]  # equal sizes keep payload order


def test_measure_of_an_empty_request() -> None:
    assert measure([], TokenCounter(), 1.0) == Measurement(counted=0, scale=1.0, estimate=0, parts=())


@pytest.mark.parametrize("bad", [0.99, 0, -1.0, float("nan"), float("inf"), True, "1.2", None])
def test_measure_refuses_a_scale_that_is_not_a_finite_number_of_at_least_one(bad: object) -> None:
    with pytest.raises(ValueError, match="scale: "):
        measure([("a", "b")], TokenCounter(), bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [["just a string"], [("label",)], [(1, "piece")], [("label", "piece", "x")]])
def test_measure_refuses_items_that_are_not_label_piece_pairs(bad: list) -> None:
    with pytest.raises(TypeError, match="labelled piece 0: expected a"):
        measure(bad, TokenCounter(), 1.0)


def test_measure_refuses_a_piece_that_is_not_text() -> None:
    with pytest.raises(TypeError, match="piece 0: expected a str, got bytes"):
        measure([("a", b"x")], TokenCounter(), 1.0)  # type: ignore[list-item]


def test_scaled_estimate_ignores_float_noise_but_rounds_real_fractions_up() -> None:
    assert 100_000 * 1.1 > 110_000  # binary float noise
    assert scaled_estimate(100_000, 1.1) == 110_000
    assert scaled_estimate(93_525, 1.0) == 93_525
    assert scaled_estimate(3, 1.5) == 5
    assert scaled_estimate(100_000, 1.000001) == 100_001  # a real tenth of a token rounds up
    assert scaled_estimate(0, 2.5) == 0


@pytest.mark.parametrize("bad", [-1, 1.0, True, "10"])
def test_scaled_estimate_refuses_a_bad_count(bad: object) -> None:
    with pytest.raises(ValueError, match="counted: .* is not a non-negative integer"):
        scaled_estimate(bad, 1.0)  # type: ignore[arg-type]


@given(counted=st.integers(min_value=0, max_value=10_000_000), scale=st.floats(min_value=1.0, max_value=8.0))
def test_estimate_is_never_below_the_scaled_count_by_a_token(counted: int, scale: float) -> None:
    estimate = scaled_estimate(counted, scale)
    assert estimate >= counted
    assert counted * scale - 1e-5 <= estimate < counted * scale + 1


def test_check_scale_returns_a_float() -> None:
    assert check_scale(2) == 2.0 and isinstance(check_scale(2), float)


# --- boundaries the mutation run found unchecked ---------------------------------------


def test_a_text_exactly_as_long_as_the_cache_is_cached_and_evicts_the_rest() -> None:
    counter = TokenCounter(max_chars=5)
    counter.count("abcde")
    assert (counter.stats().entries, counter.stats().cached_chars) == (1, 5)
    counter.count("abcde")
    assert counter.stats().hits == 1
    counter.count("vwxyz")  # 10 characters > 5: the older one goes
    assert (counter.stats().entries, counter.stats().cached_chars) == (1, 5)
    counter.count("vwxyz")
    assert counter.stats().hits == 2


def test_junction_hits_are_counted_one_a_junction() -> None:
    counter = TokenCounter()
    pieces = ['{"a":', '"b"', "}"]
    counter.count_each(pieces)
    assert (counter.stats().junction_hits, counter.stats().junction_misses) == (0, 2)
    counter.count_each(pieces)
    counter.count_each(pieces)
    assert (counter.stats().junction_hits, counter.stats().junction_misses) == (4, 2)


def test_the_junction_cache_evicts_the_least_recently_used() -> None:
    counter = TokenCounter(max_junctions=2)
    counter.count_pieces(["{", "["])  # junction ({, [)
    counter.count_pieces(["(", "<"])  # junction ((, <)
    counter.count_pieces(["{", "["])  # a hit: ({, [) is now the most recent
    counter.count_pieces(["}", "]"])  # a third: ((, <) goes
    assert counter.stats().junction_hits == 1
    counter.count_pieces(["{", "["])
    assert counter.stats().junction_hits == 2
    counter.count_pieces(["(", "<"])
    assert counter.stats().junction_misses == 4


@pytest.mark.parametrize("long_piece", [70, 100, 300])
def test_a_long_piece_leaves_its_own_last_characters_as_the_next_junctions_tail(long_piece: int) -> None:
    # A letter run ends the long piece and continues into the next: the boundary's correction
    # depends on the last characters before it, which must be the piece's own last ones.
    first = "x" * (long_piece - 40) + " " + "abcdefghij" * 3 + "klmnopqrs"
    pieces = [first, "tuvwxyz" * 3 + ' "end"']
    counter = TokenCounter()
    assert sum(counter.count_each(pieces)) == count_tokens("".join(pieces))


def test_a_cache_of_one_character_or_one_junction_is_allowed() -> None:
    counter = TokenCounter(max_chars=1, max_junctions=1)
    assert counter.count_pieces(["a", "b"]) == count_tokens("ab")
