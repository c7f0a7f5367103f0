"""Fold notes: the text that stands in the view for the units a fold replaced.

A note is built from structure only. Its header names a fold id and a span
digest that depend on the replaced messages' SHA-256 digests (never on a
summary's text), so the same fold of the same messages always has the same
id, and a restore can check that the record still holds exactly what was
folded. Its body lists every folded call (see :mod:`runtime.fold.formats`),
the calls of any earlier note it absorbs, and a line for each folded message
that is not a call; an ``all`` or ``reset`` note puts its summary first. Under
each call it keeps its result's salient line verbatim (:func:`salient_line_of`),
so a later question about them needs no ``read_result`` round.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

from runtime.fold.formats import call_line, listing_lines, message_line, note_header, salient_line
from runtime.fold.units import RecordAccess, Unit
from runtime.measuring.tokenizer import count_tokens
from runtime.values.canonical import canonical_json, sha256_hex
from runtime.values.messages import (
    AssistantResponse,
    ImagePart,
    Instruction,
    Message,
    Note,
    RedactedThinkingPart,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolResult,
)

SUMMARY_MAX_CHARS = 4000
"""A note keeps at most this many characters of a summary."""

CALLS_HEADING = (
    'Folded calls (read any original with context {"action":"read_result","index":N}; '
    'restore with context {"action":"restore","index":N}):'
)
"""A note built while another note in the view shows this heading lists its calls under its header
with no heading at all (each fold-after-read round is a note of its own; the instructions once are
enough). Older notes may carry ``Folded calls (as above):`` there: a line no parser reads."""


def structural_digest(message: Message) -> str:
    """A message's digest with message ids left out (they are random per run).

    A note is addressed by its text, stage and first index (its text names
    every original by record index); a clipped copy by its content with
    ``clipped_from`` left out (its clip info names the original's index). Any
    other message's content holds no id, so its own SHA-256 serves. Fold ids
    and span digests built from these depend on the conversation's structure
    and content alone, so the same run gives the same request bytes every time.
    """
    if isinstance(message, Note):
        return sha256_hex(
            canonical_json(
                {"kind": "note", "text": message.text, "stage": message.stage, "first_index": message.first_index}
            )
        )
    if isinstance(message, ToolResult) and message.clipped_from is not None:
        content = message.content()
        content["clipped_from"] = "original"
        return sha256_hex(canonical_json(content))
    return message.sha256


def span_digest(messages: Sequence[Message]) -> str:
    """SHA-256 addressing a folded span: over the replaced messages' structural digests, in order."""
    return sha256_hex("\n".join(structural_digest(m) for m in messages))


def fold_id(stage: str, messages: Sequence[Message]) -> str:
    """A fold's id: deterministic from its stage and the digests of what it replaced."""
    return fold_id_of(stage, span_digest(messages))


def fold_id_of(stage: str, digest: str) -> str:
    """The fold id of a note by ``stage`` over a span with SHA-256 ``digest``: ``f-`` and the first 12
    hex digits (48 bits) of SHA-256 over both. A note's header shows it, and recomputing it from the
    record checks the span (:func:`runtime.fold.recovery.verify_note`)."""
    return "f-" + sha256_hex(stage + "\n" + digest)[:12]


def _original(result: ToolResult, record: RecordAccess) -> tuple[ToolResult, int]:
    if result.clipped_from is None:
        index = record.index_of(result.id)
        assert index is not None, f"result {result.id} is not in the record"
        return result, index
    index = record.index_of(result.clipped_from)
    if index is None:
        raise KeyError(f"clipped copy {result.id} names original {result.clipped_from}, which is not in the record")
    original = record.message_at(index)
    assert isinstance(original, ToolResult)
    return original, index


def _shape(line: str) -> str:
    """A line's shape: its first word with every digit read as 0 (timestamps, counters, line numbers alike)."""
    return _DIGIT.sub("0", line.split(maxsplit=1)[0])


_DIGIT = re.compile(r"[0-9]")


def salient_line_of(output: str) -> tuple[int, str] | None:
    """The line of a result a note keeps verbatim, with its 1-based number (None: none stands out).

    The first non-blank line whose shape (its first word, digits read as 0) begins no other
    non-blank line. Tool outputs are mostly lines of one shape (a file's numbered lines, a log's
    timestamps, a listing's paths); the line that breaks it is the one a reader remembers (an error
    amid log lines, a status above a listing, a planted fact amid a file). A one-line result is its
    own salient line. When every line shares its shape with another, none stands out and none is
    kept: the head of a uniform output is its first entry, which says no more than the call line.
    Deterministic. Chosen by looking at the bench's reading workloads (a document whose lines share
    a path prefix, a fact line planted among some) and staged ones (a stage whose head line hands on
    the next key); docs/bench.md gives the figures with the head line kept as a fallback.
    """
    lines = [(number, line) for number, line in enumerate(output.splitlines(), 1) if line.strip()]
    shapes = Counter(_shape(line) for _, line in lines)
    return next(((n, line) for n, line in lines if shapes[_shape(line)] == 1), None)


def _salient(index: int, result: ToolResult) -> list[str]:
    found = salient_line_of(result.output)
    return [] if found is None else [salient_line(index, found[0], found[1])]


def unit_lines(unit: Unit, record: RecordAccess, *, salient: bool = True) -> list[str]:
    """The listing lines for one folded unit (a copy is listed as its original); ``salient``: with each
    result's salient line (the compaction baseline lists calls alone, as the peers' summaries do)."""
    first = unit.members[0]
    if isinstance(first, Note):
        return list(listing_lines(first.text))
    if isinstance(first, AssistantResponse):
        lines = []
        text = "\n".join(p.text for p in first.parts if isinstance(p, TextPart) and p.text.strip())
        index = record.index_of(first.id)
        at = index if index is not None else unit.key
        if text:
            lines.append(message_line(at, "assistant", text))
        if first.thinking_parts:
            lines.append(thinking_line(at, first))
        results = {r.call_id: r for r in unit.results}
        for call in first.tool_calls:
            result = results.get(call.call_id)
            if result is None:
                continue
            original, original_index = _original(result, record)
            lines.append(call_line(original_index, call.name, call.arguments, len(original.output), original.is_error))
            lines.extend(_salient(original_index, original) if salient else ())
            lines.extend(image_lines(original_index, original.images))
        return lines
    if isinstance(first, Instruction):
        return [message_line(unit.key, "user", first.rendered_text()), *image_lines(unit.key, first.images)]
    if isinstance(first, ToolResult):
        original, original_index = _original(first, record)
        return [
            call_line(original_index, first.name, {}, len(original.output), original.is_error),
            *(_salient(original_index, original) if salient else ()),
            *image_lines(original_index, original.images),
        ]
    return []


def thinking_line(index: int, reply: AssistantResponse) -> str:
    """The line saying how much thinking a folded reply held (its blocks fold with it)."""
    parts = reply.thinking_parts
    tokens = sum(count_tokens(p.thinking) for p in parts if isinstance(p, ThinkingPart))
    redacted = sum(1 for p in parts if isinstance(p, RedactedThinkingPart))
    extra = f", {redacted} redacted" if redacted else ""
    return (
        f"  (#{index} held {len(parts)} thinking block(s){extra}, about {tokens} thinking tokens; "
        f'restore with context {{"action":"restore","index":{index}}})'
    )


def image_lines(index: int, images: Sequence[ImagePart]) -> list[str]:
    """One line per folded image: its digest, format, size and the call that restores it."""
    return [
        f'  (#{index} {image.describe()}; restore with context {{"action":"restore","index":{index}}})'
        for image in images
    ]


def build_note(
    stage: str,
    units: Sequence[Unit],
    record: RecordAccess,
    *,
    summary: str | None = None,
    summary_note: str | None = None,
    salient: bool = True,
    lines_of: Callable[[Unit], Sequence[str]] | None = None,
    heading: str | None = CALLS_HEADING,
) -> Note:
    """A note standing for ``units`` (in view order), written by ``stage``.

    ``summary`` (clipped to :data:`SUMMARY_MAX_CHARS`) goes first when given;
    ``summary_note`` is one line saying why there is none (e.g. the summary
    request failed). ``salient`` keeps each result's salient line under its call
    (off for the compaction baseline). ``lines_of`` gives a unit's :func:`unit_lines` (a memo of
    them, for a caller building many notes over the same units). ``heading``
    opens the call listing; None lists the calls right under the header (when the view keeps a
    note with :data:`CALLS_HEADING`, and no summary precedes the listing).
    """
    if not units:
        raise ValueError("build_note: a note must replace at least one unit")
    if heading is None and (summary is not None or summary_note):
        raise ValueError("build_note: a note with a summary (or a line saying why none) needs a heading")
    replaced = [m for unit in units for m in unit.members]
    first_index = min(unit.key for unit in units)
    digest = span_digest(replaced)
    parts = [note_header(fold_id_of(stage, digest), stage, len(replaced), first_index)]
    if summary is not None and summary.strip():
        text = summary.strip()
        if len(text) > SUMMARY_MAX_CHARS:
            text = text[: SUMMARY_MAX_CHARS - 3] + "..."
        parts.append("Summary:\n" + text)
    elif summary_note:
        parts.append(summary_note)
    listed = lines_of if lines_of is not None else (lambda unit: unit_lines(unit, record, salient=salient))
    lines = [line for unit in units for line in listed(unit)]
    if lines:
        parts.append("\n".join(lines if heading is None else [heading, *lines]))
    return Note(text="\n".join(parts), replaced=tuple(m.id for m in replaced), first_index=first_index, stage=stage)


def transcript(units: Sequence[Unit], record: RecordAccess, render_result: Callable[[ToolResult, int], str]) -> str:
    """The folded span as plain text for a summary request (``render_result`` projects each result)."""
    lines: list[str] = []
    for unit in units:
        for message in unit.members:
            if isinstance(message, Note):
                lines.append(f"[earlier fold note]\n{message.text}")
            elif isinstance(message, Instruction):
                lines.append(f"[user #{unit.key}]\n{message.rendered_text()}")
            elif isinstance(message, AssistantResponse):
                index = record.index_of(message.id)
                for part in message.parts:
                    if isinstance(part, TextPart):
                        if part.text.strip():
                            lines.append(f"[assistant #{index}]\n{part.text}")
                    elif isinstance(part, ToolCall):
                        lines.append(f"[assistant #{index} calls {part.name} {part.arguments_json}]")
            elif isinstance(message, ToolResult):
                original, original_index = _original(message, record)
                lines.append(f"[result #{original_index} of {message.name}]\n{render_result(original, original_index)}")
    return "\n\n".join(lines)
