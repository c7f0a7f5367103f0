"""Facts the benchmark plants in tool outputs, and how a reader finds them (pure).

A fact has an id (letters, digits, ``_``, ``-``; e.g. ``F12`` or ``S7``) and a
value that is a pure function of the id: 16 hex digits of a SHA-256. It is
planted as one line of a tool output::

    fact F12: 3f9a0c4d5e6b7a81

so a reader can tell whether a fact is *visible* in a request by looking for
that line, and the harness can judge an answer by recomputing the value.
"""

from __future__ import annotations

import re

from runtime.values.canonical import sha256_hex

FACT_ID_PATTERN = r"[A-Za-z0-9_-]{1,40}"
_FACT_ID = re.compile(FACT_ID_PATTERN)
_FACT_LINE = re.compile(r"fact (" + FACT_ID_PATTERN + r"): ([0-9a-f]{16})\b")
VALUE_CHARS = 16


def check_fact_id(fact_id: object) -> str:
    """``fact_id`` itself if it is a valid fact id, else ValueError naming it."""
    if not isinstance(fact_id, str) or not _FACT_ID.fullmatch(fact_id):
        raise ValueError(f"fact id {fact_id!r} is not 1 to 40 letters, digits, '_' or '-'")
    return fact_id


def fact_value(fact_id: str) -> str:
    """The value of fact ``fact_id``: 16 hex digits, the same on every run."""
    return sha256_hex("foldline-bench-fact:" + check_fact_id(fact_id))[:VALUE_CHARS]


def fact_line(fact_id: str) -> str:
    """The line that plants ``fact_id`` in a tool output (with its newline)."""
    return f"fact {fact_id}: {fact_value(fact_id)}\n"


def find_fact(text: str, fact_id: str) -> str | None:
    """The value ``text`` states for ``fact_id`` (the first statement), or None."""
    check_fact_id(fact_id)
    pattern = re.compile(r"fact " + re.escape(fact_id) + r": ([0-9a-f]{16})\b")
    match = pattern.search(text)
    return match.group(1) if match else None


def facts_in(text: str) -> dict[str, str]:
    """Every fact ``text`` states, id -> value (the first statement of each id)."""
    found: dict[str, str] = {}
    for match in _FACT_LINE.finditer(text):
        found.setdefault(match.group(1), match.group(2))
    return found
