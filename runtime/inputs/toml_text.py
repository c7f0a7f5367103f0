"""TOML text parsed with every way it can fail as one error saying why (no I/O).

The scenario loader, the model and pricing tables (a user pricing file
included) and the simulator's script and fault files parse through
:func:`parse_toml`, so each refuses a syntax error with its line and column,
and arrays or tables nested too deep for the parser (``tomllib`` recurses:
``a = [[[[...`` a few thousand deep exhausts the interpreter's stack) with a
sentence instead of a ``RecursionError`` traceback. The caller adds where the
text came from, in its own error type.
"""

from __future__ import annotations

import re
from typing import Any

_POSITION = re.compile(r"^(?P<problem>.*) \(at line (?P<line>\d+), column (?P<column>\d+)\)$", re.DOTALL)
_AT_END = re.compile(r"^(?P<problem>.*) \(at end of document\)$", re.DOTALL)

TOO_DEEP = "arrays or tables nested too deep for the TOML parser (hundreds of levels)"


class TomlRefused(ValueError):
    """TOML text that does not parse; the message says where in the text and why."""


def parse_toml(text: str) -> dict[str, Any]:
    """``text`` parsed, or :class:`TomlRefused` naming the line and column of a syntax error."""
    import tomllib  # on first use: an import that never reads a document never loads the parser

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TomlRefused(_syntax_detail(str(exc), text)) from None
    except RecursionError:
        raise TomlRefused(TOO_DEEP) from None


def _syntax_detail(message: str, text: str) -> str:
    positioned = _POSITION.match(message)
    if positioned:
        return f"line {positioned['line']}, column {positioned['column']}: TOML syntax error: {positioned['problem']}"
    at_end = _AT_END.match(message)
    if at_end:
        last_line = text.count("\n") + 1
        return f"line {last_line} (end of file): TOML syntax error: {at_end['problem']}"
    return f"TOML syntax error: {message}"
