"""Exact recovery: ``read_result`` (a ranged peek) and ``restore`` (expand), pure.

``read_result`` pages through an original's recovery text
(:func:`runtime.fold.bodies.recovery_text`) without running any tool or
changing the view. A clipped copy's index reads its original. The original's
SHA-256 is checked against its content before any character is returned: a
mismatch raises :class:`RecoveryCorrupted` naming the message, never wrong text.

``restore`` plans a new view that puts originals back at their chronological
place (:mod:`runtime.fold.units`): a clipped copy is replaced in place by its
original; a folded message comes back with the rest of its unit (a call never
returns without its result); a note whose every replaced message is back in
the view leaves it. The caller (the engine) decides admission against the
ceiling and applies the plan.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from runtime.errors import FoldlineError
from runtime.fold.bodies import recovery_text
from runtime.fold.formats import parse_note_header, read_result_header, read_result_text
from runtime.fold.notes import fold_id_of, span_digest
from runtime.fold.projection import READ_LIMIT
from runtime.fold.units import RecordAccess, Unit, chronology_key, units_of
from runtime.values.canonical import canonical_json, sha256_hex
from runtime.values.messages import AssistantResponse, Message, Note, SystemMessage, ToolResult


class RecoveryError(FoldlineError):
    """A recovery request the branch cannot honour as asked (bad index, offset or limit)."""


class RecoveryCorrupted(FoldlineError):
    """A stored original no longer matches its SHA-256: the store is corrupted."""


def verify(message: Message, index: int) -> None:
    """Raise :class:`RecoveryCorrupted` unless ``message``'s content still hashes to its digest."""
    actual = sha256_hex(canonical_json(message.content()))
    if actual != message.sha256:
        raise RecoveryCorrupted(
            f"record message #{index} (id {message.id}, {message.kind}) fails its SHA-256 check: "
            f"stored {message.sha256}, content hashes to {actual}; refusing to return text that is not the original"
        )


def _checked_index(value: int, record: RecordAccess, what: str) -> int:
    length = record.record_length()
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < length:
        raise RecoveryError(f"{what} {value!r} is not a full-record index; expected an integer 0..{length - 1}")
    return value


def original_at(record: RecordAccess, index: int) -> tuple[Message, int]:
    """The original a full-record index stands for (a copy's original), with its index."""
    message = record.message_at(_checked_index(index, record, "index"))
    if isinstance(message, ToolResult) and message.clipped_from is not None:
        original_index = record.index_of(message.clipped_from)
        if original_index is None:
            raise RecoveryCorrupted(
                f"clipped copy #{index} (id {message.id}) names original {message.clipped_from}, "
                "which is missing from the record"
            )
        return record.message_at(original_index), original_index
    return message, index


@attrs.frozen
class ReadOutcome:
    """A read_result answer (``text``, in :func:`runtime.fold.formats.read_result_text` form) and what it read."""

    text: str
    original_id: str
    index: int
    offset: int
    limit: int
    total: int
    next_offset: int | None


def read_result(
    record: RecordAccess, index: int, *, offset: int = 0, limit: int = READ_LIMIT, bound: int | None = None
) -> ReadOutcome:
    """Characters ``offset .. offset+limit`` of the original at ``index`` (see the module docstring).

    ``limit`` is capped at 16,000; under a result bound the whole answer,
    header included, fits in ``bound`` characters (so it reaches the next
    request uncut), and the header reports the limit applied.
    """
    message, index = original_at(record, index)
    verify(message, index)
    text = recovery_text(message)
    total = len(text)
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= total:
        raise RecoveryError(f"offset {offset!r} is outside the original #{index}; expected an integer 0..{total}")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise RecoveryError(f"limit {limit!r} is not a positive integer (at most {READ_LIMIT})")
    applied = min(limit, READ_LIMIT)
    if bound is not None:
        for _ in range(4):  # the header's width depends on the numbers in it
            room = bound - len(read_result_header(index, offset, applied, total, total)) - 1
            if room >= applied:
                break
            applied = max(1, room)
    chunk = text[offset : offset + applied]
    end = offset + len(chunk)
    next_offset = end if end < total else None
    return ReadOutcome(
        read_result_text(index, offset, applied, total, next_offset, chunk),
        message.id,
        index,
        offset,
        applied,
        total,
        next_offset,
    )


# -- restore ------------------------------------------------------------------------


@attrs.frozen
class RestorePlan:
    """A view with originals back in place.

    ``restored``: ids of originals that entered the view; ``replaced_copies``:
    copies they replaced; ``dropped_notes``: notes that left the view because
    everything they stood for is back; ``already``: asked-for originals that
    were in the view already.
    """

    view_ids: tuple[str, ...]
    restored: tuple[str, ...]
    replaced_copies: tuple[str, ...]
    dropped_notes: tuple[str, ...]
    already: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return bool(self.restored or self.dropped_notes)


def _unit_of_original(message: Message, index: int, record: RecordAccess) -> tuple[Message, ...]:
    """The original unit ``message`` belongs to: a round for a call or result, else itself."""
    if isinstance(message, ToolResult):
        for response_index in range(index - 1, -1, -1):
            candidate = record.message_at(response_index)
            if isinstance(candidate, AssistantResponse) and any(
                c.call_id == message.call_id for c in candidate.tool_calls
            ):
                return _round_at(candidate, response_index, record)
        raise RecoveryCorrupted(f"result #{index} answers call {message.call_id!r}, whose call is not in the record")
    if isinstance(message, AssistantResponse) and message.tool_calls:
        return _round_at(message, index, record)
    return (message,)


def _round_at(response: AssistantResponse, index: int, record: RecordAccess) -> tuple[Message, ...]:
    wanted = {c.call_id for c in response.tool_calls}
    found: dict[str, ToolResult] = {}
    i = index + 1
    length = record.record_length()
    while i < length and len(found) < len(wanted):
        candidate = record.message_at(i)
        if (
            isinstance(candidate, ToolResult)
            and candidate.clipped_from is None
            and candidate.call_id in wanted
            and candidate.call_id not in found
        ):
            found[candidate.call_id] = candidate
        i += 1
    missing = wanted - set(found)
    if missing:
        raise RecoveryCorrupted(f"the round at #{index} has no original result for calls {sorted(missing)}")
    return (response, *(found[c.call_id] for c in response.tool_calls))


def _closure(note: Note, record: RecordAccess, seen: set[str] | None = None) -> set[str]:
    """Ids of the originals a note stands for, through nested notes and copies."""
    seen = seen if seen is not None else set()
    out: set[str] = set()
    for mid in note.replaced:
        if mid in seen:
            continue
        seen.add(mid)
        index = record.index_of(mid)
        if index is None:
            raise RecoveryCorrupted(f"note {note.id} replaced message {mid}, which is missing from the record")
        message = record.message_at(index)
        if isinstance(message, Note):
            out |= _closure(message, record, seen)
        elif isinstance(message, ToolResult) and message.clipped_from is not None:
            out.add(message.clipped_from)
        else:
            out.add(mid)
    return out


def stood_for(view: Sequence[Message], record: RecordAccess) -> set[str]:
    """Ids of the originals the view's notes and copies stand for (what restore may bring back)."""
    out: set[str] = set()
    for message in view:
        if isinstance(message, Note):
            out |= _closure(message, record)
        elif isinstance(message, ToolResult) and message.clipped_from is not None:
            out.add(message.clipped_from)
    return out


def verify_note(note: Note, record: RecordAccess) -> None:
    """Check a note's span: every replaced message present and intact, the span digest equal.

    A header that shows span digits (older notes: 64 or :data:`~runtime.fold.formats.SPAN_HEX`) is
    checked against them; one that shows none, by its fold id (derived from the stage and the span
    digest, :func:`~runtime.fold.notes.fold_id_of`).
    """
    messages = []
    for mid in note.replaced:
        index = record.index_of(mid)
        if index is None:
            raise RecoveryCorrupted(f"note {note.id} replaced message {mid}, which is missing from the record")
        message = record.message_at(index)
        verify(message, index)
        messages.append(message)
    header = parse_note_header(note.text)
    if header is None:
        return
    digest = span_digest(messages)
    if header.span_sha256 is not None:
        if not digest.startswith(header.span_sha256):
            raise RecoveryCorrupted(
                f"note {note.id}: the span it replaced hashes to {digest}, "
                f"not the {header.span_sha256} its header records"
            )
    elif fold_id_of(header.stage, digest) != header.fold_id:
        raise RecoveryCorrupted(
            f"note {note.id}: the span it replaced hashes to {digest}, giving fold id "
            f"{fold_id_of(header.stage, digest)}, not the {header.fold_id} its header records"
        )


def plan_restore(view: Sequence[Message], record: RecordAccess, *, start: int, end: int | None = None) -> RestorePlan:
    """Plan restoring the original at ``start`` (or every original in ``start..end``).

    A note's own index expands the note. Raises :class:`RecoveryError` for an
    index outside the record and :class:`RecoveryCorrupted` when an original
    fails its digest.
    """
    _checked_index(start, record, "index")
    if end is None:
        end = start
    _checked_index(end, record, "end")
    if end < start:
        raise RecoveryError(f"end {end} is before start {start}; expected start <= end")

    view_ids = [m.id for m in view]
    in_view = set(view_ids)
    targets = _restore_targets(record, start, end, in_view, stood_for(view, record))

    already = [oid for oid in targets if oid in in_view]
    copy_of: dict[str, str] = {
        m.clipped_from: m.id for m in view if isinstance(m, ToolResult) and m.clipped_from is not None
    }
    restored: list[str] = []
    replaced_copies: list[str] = []
    hidden_units: list[tuple[Message, ...]] = []
    placed: set[str] = set()
    for original_id, (original, index) in sorted(targets.items(), key=lambda item: item[1][1]):
        if original_id in in_view or original_id in placed:
            continue
        verify(original, index)
        if original_id in copy_of:
            copy_id = copy_of[original_id]
            view_ids[view_ids.index(copy_id)] = original_id
            replaced_copies.append(copy_id)
            restored.append(original_id)
            placed.add(original_id)
            continue
        unit = _unit_of_original(original, index, record)
        members = []
        for member in unit:
            member_index = record.index_of(member.id)
            assert member_index is not None
            verify(member, member_index)
            if member.id in in_view or member.id in placed:
                continue
            if member.id in copy_of:
                copy_id = copy_of[member.id]
                view_ids[view_ids.index(copy_id)] = member.id
                replaced_copies.append(copy_id)
            else:
                members.append(member)
            restored.append(member.id)
            placed.add(member.id)
        if members:
            hidden_units.append(tuple(members))

    current = [record.message_at(record.index_of(mid)) for mid in view_ids]  # type: ignore[arg-type]
    for unit in hidden_units:
        current = _insert(current, unit, record)
    visible = {m.id for m in current}
    dropped = [m.id for m in current if isinstance(m, Note) and _closure(m, record) <= visible and m.id not in targets]
    final = [m.id for m in current if m.id not in set(dropped)]
    return RestorePlan(tuple(final), tuple(restored), tuple(replaced_copies), tuple(dropped), tuple(already))


def _restore_targets(
    record: RecordAccess, start: int, end: int, in_view: set[str], standing: set[str]
) -> dict[str, tuple[Message, int]]:
    """The originals ``start..end`` names (a note's own index, alone, names its closure), by id."""
    targets: dict[str, tuple[Message, int]] = {}
    for i in range(start, end + 1):
        message = record.message_at(i)
        if isinstance(message, SystemMessage):
            continue
        if isinstance(message, Note):
            if end == start:
                if message.id not in in_view:
                    raise RecoveryError(f"note #{i} is not in the conversation; restore the originals it names instead")
                verify_note(message, record)
                for original_id in sorted(_closure(message, record)):
                    index = record.index_of(original_id)
                    assert index is not None
                    targets.setdefault(original_id, (record.message_at(index), index))
            continue
        original, index = original_at(record, i)
        if original.id not in in_view and original.id not in standing:
            if end == start:
                raise RecoveryError(
                    f"#{index} is not a folded or clipped message (no note or copy in the conversation stands for "
                    "it), so there is nothing to restore"
                )
            continue
        targets.setdefault(original.id, (original, index))
    return targets


def _insert(view: list[Message], members: tuple[Message, ...], record: RecordAccess) -> list[Message]:
    """Insert a unit before the first unit of ``view`` that belongs later in time (ties: before notes)."""
    key = chronology_key(members[0], record)
    units: Sequence[Unit] = units_of(view, record)
    position = len(view)
    for unit in units:
        if unit.key > key or (unit.key == key and unit.kind == "note"):
            position = unit.position
            break
    return view[:position] + list(members) + view[position:]
