"""Text from a run (a model's words, a tool's error, a stored message) made safe to print on a terminal.

A model's refusal becomes a node's failure reason, a tool's error message may
quote a file, and ``foldline inspect`` prints whole stored messages: any of
them may hold escape sequences (clear the screen, retitle the window, forge a
link) or bidirectional overrides that reorder what is read. :func:`shown`
writes every such character as a visible ``\\xNN`` / ``\\uNNNN`` escape;
newlines and tabs are kept.
"""

from __future__ import annotations

import re

_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def shown(text: str) -> str:
    """``text`` with control characters (but newline and tab) and bidi controls written as escapes."""
    return _HIDDEN.sub(_escape, text)
