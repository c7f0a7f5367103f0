"""Canonical JSON: the one byte form every digest in foldline is taken over.

Sorted keys, no incidental whitespace, UTF-8 kept as is (``ensure_ascii`` off),
and no NaN or infinity (they have no JSON form and would make two equal values
hash differently). The same value always gives the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

_ENCODER = json.JSONEncoder(
    sort_keys=True,
    separators=(",", ":"),
    ensure_ascii=False,
    allow_nan=False,
)


def canonical_json(value: Any) -> str:
    """Return the canonical JSON text of a JSON-compatible value."""
    return _ENCODER.encode(value)


def canonical_bytes(value: Any) -> bytes:
    """Return the canonical JSON of ``value`` encoded as UTF-8."""
    return canonical_json(value).encode("utf-8")


def sha256_hex(data: bytes | str) -> str:
    """SHA-256 of bytes, or of a string's UTF-8 encoding, as lowercase hex."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def digest(value: Any) -> str:
    """SHA-256 of the canonical JSON of ``value``."""
    return sha256_hex(canonical_bytes(value))
