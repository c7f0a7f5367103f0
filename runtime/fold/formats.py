"""The text formats the fold shows the model, and parsers for them.

Everything a fold writes into the conversation is plain text in one of the
formats below, so a scripted policy (the benchmark's reader) can act on it
with the parsers here instead of guessing:

- **A note's call listing** (:func:`call_line`, :func:`parse_note_calls`): one
  line per folded call, naming the full-record index of the call's original
  result as ``#N`` and its arguments as canonical JSON::

      - #12 read_file {"path":"docs/a.md","size":6000} -> 6000 chars

  An error result reads ``-> error, 80 chars``. A folded message that is not a
  tool call is listed as ``- #N user: "..."`` or ``- #N assistant: "..."``
  (its text clipped to 160 characters, as JSON).
- **A note's header** (:func:`note_header`): ``[fold f-<12 hex> · <stage> ·
  <count> messages from #<first>]``. The fold id is the first 12 hex digits of
  SHA-256 over the stage and the span digest (the SHA-256 over the replaced
  messages' digests, in order), so recomputing it checks that the record still
  holds exactly the messages the note replaced. Older notes also carry
  ``· span sha256 <hex>`` before the ``]`` (all 64 digits, later the first
  :data:`SPAN_HEX`); they parse and are checked against those digits as before.
- **A clip marker** (:func:`clip_marker`, :func:`parse_clip_marker`): the line
  between a clipped copy's head and tail; it names the omitted interval of
  the original's recovery text and the exact context call that returns it::

      [... clipped: 95045 of 100045 characters omitted (offsets 3750-98795);
      read them with context {"action":"read_result","index":7,"offset":3750,"limit":16000}
      and continue from next_offset until offset 98795 ...]

  (one line in the text; wrapped here).
- **A read_result answer** (:func:`read_result_text`, :func:`parse_read_result`):
  one header line ``read_result index=N offset=O limit=L total=T
  next_offset=X`` (``X`` is ``null`` at the end), a newline, then exactly the
  returned characters of the original.

All of it is deterministic: the same structure gives the same bytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import attrs

from runtime.values.canonical import canonical_json

PATH_ARG_LIMIT = 1000
"""A path-like argument is shown whole up to this many characters."""

ARG_LIMIT = 160
"""Any other argument value is shown clipped to this many characters."""

TEXT_PREVIEW_LIMIT = 160
"""Characters of a non-call message's text shown in a listing line."""

PATH_LIKE_KEYS = frozenset({"path", "file", "filename", "file_path", "filepath", "dir", "directory", "url", "uri"})

_ELLIPSIS = "..."


def is_path_like(key: str) -> bool:
    """Whether an argument name names a path (shown whole up to :data:`PATH_ARG_LIMIT`)."""
    lowered = key.lower()
    return lowered in PATH_LIKE_KEYS or lowered.endswith("path")  # "_path" included


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - len(_ELLIPSIS)] + _ELLIPSIS


def listed_arguments(arguments: Mapping[str, Any]) -> str:
    """The arguments as canonical JSON, each value bounded.

    A path-like string argument is kept whole up to 1,000 characters; any other
    value whose JSON text is longer than 160 characters becomes a string of that
    text clipped to 160 (ending in ``...``). The result is always valid JSON.
    """
    shown: dict[str, Any] = {}
    for key, value in arguments.items():
        if isinstance(value, str) and is_path_like(key):
            shown[key] = _clip(value, PATH_ARG_LIMIT)
            continue
        text = value if isinstance(value, str) else canonical_json(value)
        if len(text) > ARG_LIMIT:
            shown[key] = _clip(text, ARG_LIMIT)
        else:
            shown[key] = value
    return canonical_json(shown)


def call_line(index: int, name: str, arguments: Mapping[str, Any], output_chars: int, is_error: bool) -> str:
    """One listing line for a folded call whose original result is at full-record ``index``."""
    size = f"error, {output_chars} chars" if is_error else f"{output_chars} chars"
    return f"- #{index} {name} {listed_arguments(arguments)} -> {size}"


def salient_line(index: int, line_number: int, text: str) -> str:
    """A detail under a folded call: one line of its result, kept verbatim (clipped to 160 characters).

    Shaped as a detail line, so a note that absorbs this one keeps it (:func:`listing_lines`).
    """
    return f"  (#{index} line {line_number}: {canonical_json(_clip(text, TEXT_PREVIEW_LIMIT))})"


def message_line(index: int, role: str, text: str) -> str:
    """One listing line for a folded message that is not a tool call (its text clipped to 160)."""
    return f"- #{index} {role}: {canonical_json(_clip(text, TEXT_PREVIEW_LIMIT))}"


_CALL_LINE = re.compile(
    r"^- #(?P<index>\d+) (?P<name>\S+) (?P<args>\{.*\}) -> (?P<error>error, )?(?P<chars>\d+) chars$"
)
_DETAIL_LINE = re.compile(r"^  \(#\d+ .*\)$")
"""A detail under a listed message: the thinking it held, or one of its images."""
_MESSAGE_LINE = re.compile(r'^- #(?P<index>\d+) (?P<role>user|assistant): (?P<text>".*")$')


@attrs.frozen
class NoteCall:
    """One call listed in a note: the original result's full-record index, function, arguments, size."""

    index: int
    name: str
    arguments: Mapping[str, Any]
    output_chars: int
    is_error: bool
    line: str


def parse_note_calls(text: str) -> tuple[NoteCall, ...]:
    """Every call line in a note's text, in order (other lines are skipped)."""
    calls = []
    for line in text.splitlines():
        match = _CALL_LINE.match(line)
        if match is None:
            continue
        try:
            arguments = json.loads(match["args"])
        except ValueError:
            continue
        if not isinstance(arguments, dict):
            continue
        calls.append(
            NoteCall(
                index=int(match["index"]),
                name=match["name"],
                arguments=arguments,
                output_chars=int(match["chars"]),
                is_error=match["error"] is not None,
                line=line,
            )
        )
    return tuple(calls)


def listing_lines(text: str) -> tuple[str, ...]:
    """Every listing line (call or message) of a note's text, in order."""
    return tuple(
        line
        for line in text.splitlines()
        if _CALL_LINE.match(line) or _MESSAGE_LINE.match(line) or _DETAIL_LINE.match(line)
    )


# -- note header --------------------------------------------------------------------


SPAN_HEX = 16
"""Hex digits of the span digest that older note headers show (64 bits); the oldest show all 64. New
headers show none. Both older forms still parse and are checked against the digits they show."""


def note_header(fold_id: str, stage: str, count: int, first_index: int) -> str:
    """A note's first line. ``fold_id`` is derived from ``stage`` and the span digest
    (:func:`runtime.fold.notes.fold_id_of`): the one hash a note needs, it names the fold and checks
    the span (the span digits once shown beside it were 14 of a one-round note's 114 tokens)."""
    return f"[fold {fold_id} · {stage} · {count} messages from #{first_index}]"


_NOTE_HEADER = re.compile(
    r"^\[fold (?P<fold_id>f-[0-9a-f]{12}) · (?P<stage>[a-z_]+) · (?P<count>\d+) messages from #(?P<first>\d+)"
    r"(?: · span sha256 (?P<span>[0-9a-f]{64}|[0-9a-f]{16}))?\]$"
)


@attrs.frozen
class NoteHeader:
    """A parsed note header; ``span_sha256`` is the span digest's digits an older header shows (None: a
    header without one, checked by its fold id)."""

    fold_id: str
    stage: str
    count: int
    first_index: int
    span_sha256: str | None


def parse_note_header(text: str) -> NoteHeader | None:
    """The header of a fold note's text, or None when the text does not start with one."""
    first = text.split("\n", 1)[0]
    match = _NOTE_HEADER.match(first)
    if match is None:
        return None
    return NoteHeader(match["fold_id"], match["stage"], int(match["count"]), int(match["first"]), match["span"])


# -- clip marker ----------------------------------------------------------------------


def read_call(index: int, offset: int, limit: int) -> str:
    """The exact context call that reads ``limit`` characters of the original at ``index`` from ``offset``.

    ``context {"action":"read_result","index":N,"offset":O,"limit":L}``: keys in
    that order (as the tool documents them), no whitespace.
    """
    arguments = {"action": "read_result", "index": index, "offset": offset, "limit": limit}
    return "context " + json.dumps(arguments, separators=(",", ":"))


def clip_marker(*, index: int, start: int, end: int, total: int, limit: int) -> str:
    """The marker between a clipped body's head and tail (a line of its own).

    ``[start, end)`` is the omitted interval in the original's recovery text
    (global offsets), ``total`` that text's length, ``limit`` the first call's
    limit (at most 16,000 and at most the bound).
    """
    omitted = end - start
    return (
        f"\n[... clipped: {omitted} of {total} characters omitted (offsets {start}-{end}); "
        f"read them with {read_call(index, start, limit)} and continue from next_offset until offset {end} ...]\n"
    )


_MARKER = re.compile(
    r"\[\.\.\. clipped: (?P<omitted>\d+) of (?P<total>\d+) characters omitted \(offsets (?P<start>\d+)-(?P<end>\d+)\); "
    r"read them with context (?P<call>\{[^\n]*?\}) and continue from next_offset until offset (?P<until>\d+) \.\.\.\]"
)


@attrs.frozen
class ClipMarker:
    """A parsed clip marker: the original's index and the omitted interval ``[start, end)``."""

    index: int
    offset: int
    limit: int
    start: int
    end: int
    omitted: int
    total: int


def parse_clip_marker(text: str) -> tuple[ClipMarker, ...]:
    """Every clip marker in ``text``, in order.

    ``text`` may be a copy's output as sent: plain text, or the JSON text of a
    mapping output (whose markers sit inside string values, escaped); both
    are read.
    """
    found = list(_markers_in(text))
    if not found and text[:1] in ("{", "[", '"'):
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        for string in _strings_in(value):
            found.extend(_markers_in(string))
    return tuple(found)


def _strings_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings_in(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings_in(item)]
    return []


def _markers_in(text: str) -> list[ClipMarker]:
    found = []
    for match in _MARKER.finditer(text):
        try:
            call = json.loads(match["call"])
        except ValueError:
            continue
        if not isinstance(call, dict) or call.get("action") != "read_result":
            continue
        found.append(
            ClipMarker(
                index=int(call["index"]),
                offset=int(call["offset"]),
                limit=int(call["limit"]),
                start=int(match["start"]),
                end=int(match["end"]),
                omitted=int(match["omitted"]),
                total=int(match["total"]),
            )
        )
    return found


# -- read_result --------------------------------------------------------------------


def read_result_header(index: int, offset: int, limit: int, total: int, next_offset: int | None) -> str:
    nxt = "null" if next_offset is None else str(next_offset)
    return f"read_result index={index} offset={offset} limit={limit} total={total} next_offset={nxt}"


def read_result_text(index: int, offset: int, limit: int, total: int, next_offset: int | None, chunk: str) -> str:
    """A read_result answer: the header line, a newline, then exactly ``chunk``."""
    return read_result_header(index, offset, limit, total, next_offset) + "\n" + chunk


_READ_HEADER = re.compile(
    r"^read_result index=(?P<index>\d+) offset=(?P<offset>\d+) limit=(?P<limit>\d+) total=(?P<total>\d+)"
    r" next_offset=(?P<next>\d+|null)$"
)


@attrs.frozen
class ReadResult:
    """A parsed read_result answer."""

    index: int
    offset: int
    limit: int
    total: int
    next_offset: int | None
    text: str


def parse_read_result(output: str) -> ReadResult:
    """Parse a read_result answer; raises ValueError naming the problem when it is not one."""
    header, sep, chunk = output.partition("\n")
    match = _READ_HEADER.match(header)
    if match is None or not sep:
        raise ValueError(f"not a read_result answer: the first line is {header[:120]!r}")
    nxt = None if match["next"] == "null" else int(match["next"])
    return ReadResult(int(match["index"]), int(match["offset"]), int(match["limit"]), int(match["total"]), nxt, chunk)
