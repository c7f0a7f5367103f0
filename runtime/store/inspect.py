"""``foldline inspect``: what a conversation holds, and where the rest went (pure).

:func:`describe_branch` walks a (restored) branch's view as the model sees
it and, for every fold note and clipped copy in it, says what it stands for:
the originals a note replaced (full-record index, kind, size) and the exact
``read_result`` call that returns each, and for a copy the original's size,
the characters it keeps and the call that returns the omitted part. Every
record message outside the view is accounted for: replaced by a note (directly,
or through the earlier notes and copies a note replaces, as a reset note
replaces earlier notes), the original of a copy, a superseded system text, a fold summary's own prompt
and reply, a note not in force whose originals are reachable anyway, or (a bug if it happens) not
reachable from the view. :func:`format_branch` prints it; :func:`format_branches`
lists a store's branches.

Sizes are characters of what the message carries and o200k tokens of its
rendered blocks (the counter is an argument); an image counts its documented
estimate, each image block on its own, as a request measures it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from actors.branch import Branch
from runtime.flows.inputs import carried_results
from runtime.fold.bodies import recovery_text
from runtime.fold.formats import parse_clip_marker, read_call
from runtime.fold.projection import READ_LIMIT
from runtime.request.compiler import ResultProjection, render_blocks
from runtime.request.rendering import Block
from runtime.values.messages import (
    AssistantResponse,
    Instruction,
    Message,
    Note,
    SystemMessage,
    ToolResult,
)

PREVIEW_CHARS = 72


@attrs.frozen
class Original:
    """A record message a view entry stands for, and how to read it back."""

    index: int
    kind: str
    label: str
    chars: int
    read_call: str


@attrs.frozen
class ViewEntry:
    position: int
    index: int
    kind: str
    label: str
    chars: int
    tokens: int
    preview: str
    stands_for: tuple[Original, ...] = ()
    detail: str | None = None


@attrs.frozen
class BranchPicture:
    branch_id: str
    node_id: str | None
    parent_id: str | None
    fork_length: int
    record_length: int
    entries: tuple[ViewEntry, ...]
    outside: Mapping[str, tuple[int, ...]]
    """Record indices outside the view, by why: ``replaced``, ``clipped``, ``system``, ``side``, ``retired``, ``inherited``,
    ``unreachable``."""

    @property
    def view_chars(self) -> int:
        return sum(e.chars for e in self.entries)

    @property
    def view_tokens(self) -> int:
        return sum(e.tokens for e in self.entries)


def message_chars(message: Message) -> int:
    """Characters a message carries (its text, or a result's output, or a response's text and calls)."""
    if isinstance(message, ToolResult):
        return len(message.output)
    if isinstance(message, Instruction):
        return len(message.rendered_text())
    if isinstance(message, (Note, SystemMessage)):
        return len(message.text)
    if isinstance(message, AssistantResponse):
        return len(message.text) + sum(len(c.arguments_json) for c in message.tool_calls)
    raise TypeError(f"{type(message).__name__} is not a message kind")


def label_of(message: Message) -> str:
    if isinstance(message, ToolResult):
        return f"{message.name} result" + (" (error)" if message.is_error else "")
    if isinstance(message, AssistantResponse):
        calls = message.tool_calls
        return "assistant" + (
            f" ({len(calls)} call{'s' if len(calls) != 1 else ''}: {', '.join(c.name for c in calls)})" if calls else ""
        )
    if isinstance(message, Note):
        return f"fold note ({message.stage})"
    return message.kind


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"


def _whole_read(index: int, message: Message) -> str:
    total = len(recovery_text(message))
    return read_call(index, 0, max(1, min(READ_LIMIT, total)))


def _block_tokens(block: Block, count_tokens: Callable[[str], int]) -> int:
    """A block's tokens; an image block counts its documented estimate, never its base64 text."""
    if block.count_json is None:
        return count_tokens(block.json)
    return count_tokens(block.count_json) + block.image_tokens


def describe_branch(
    branch: Branch,
    *,
    count_tokens: Callable[[str], int],
    node_id: str | None = None,
    projection: ResultProjection | None = None,
    side_prompts: frozenset[str] = frozenset(),
) -> BranchPicture:
    """The branch's view, entry by entry, and where every other record message went.

    ``projection`` is the result bound the branch's requests compile under
    (sizes are then what the model is sent, not what the record holds).
    ``side_prompts`` are the ids of the prompts the store's side requests (fold
    summaries) carried (:func:`side_prompt_ids`): each prompt and the reply
    recorded right after it are the fold's own exchange, not the conversation.
    """
    entries = []
    in_view = set(branch.view_ids())
    accounted: dict[int, str] = {}
    for position, message_id in enumerate(branch.view_ids()):
        index = branch.index_of(message_id)
        assert index is not None  # a view id is always in the record
        message = branch.message_at(index)
        tokens = sum(_block_tokens(block, count_tokens) for block in render_blocks(message, projection))
        chars = message_chars(message)
        stands_for: list[Original] = []
        detail = None
        if isinstance(message, Note):
            stands_for, detail = _note_stands_for(branch, message, accounted)
        elif isinstance(message, ToolResult) and projection is not None and message.clipped_from is None:
            shown = projection.output_of(message)
            if shown != message.output:
                stands_for, detail = _bounded_stands_for(message, index, shown)
                chars = len(shown)
        elif isinstance(message, ToolResult) and message.clipped_from is not None:
            stands_for, detail = _clip_stands_for(branch, message, accounted)
        elif isinstance(message, Instruction) and carried_results(message.text):
            stands_for, detail = _inputs_stand_for(branch, message, accounted)
        entries.append(
            ViewEntry(
                position=position,
                index=index,
                kind=message.kind,
                label=label_of(message),
                chars=chars,
                tokens=tokens,
                preview=_preview(recovery_text(message) if not isinstance(message, Note) else message.text),
                stands_for=tuple(stands_for),
                detail=detail,
            )
        )
    _follow_what_they_stand_for(branch, accounted)
    _mark_side_exchanges(branch, in_view, side_prompts, accounted)
    _mark_retired_notes(branch, in_view, accounted)
    outside = _outside_the_view(branch, in_view, accounted)
    return BranchPicture(
        branch_id=branch.id,
        node_id=node_id,
        parent_id=branch.parent_id,
        fork_length=branch.fork_length,
        record_length=branch.record_length(),
        entries=tuple(entries),
        outside={k: tuple(v) for k, v in outside.items()},
    )


def _note_stands_for(branch: Branch, message: Note, accounted: dict[int, str]) -> tuple[list[Original], str]:
    """What a note stands for (its replaced originals, marked as accounted for) and its detail line."""
    stands_for: list[Original] = []
    detail = None
    for replaced_id in message.replaced:
        original_index = branch.index_of(replaced_id)
        if original_index is None:
            detail = f"replaces {replaced_id}, which is not in this record"
            continue
        original = branch.message_at(original_index)
        accounted.setdefault(original_index, "replaced")
        stands_for.append(
            Original(
                original_index,
                original.kind,
                label_of(original),
                message_chars(original),
                _whole_read(original_index, original),
            )
        )
    detail = detail or (
        f"replaces {len(message.replaced)} message(s) from #{message.first_index}, "
        f"{sum(o.chars for o in stands_for):,} chars"
    )
    return stands_for, detail


def _bounded_stands_for(message: ToolResult, index: int, shown: str) -> tuple[list[Original], str]:
    """A result the result bound shortens: the original it stands for and its detail line."""
    markers = parse_clip_marker(shown)
    original = Original(
        index,
        message.kind,
        label_of(message),
        len(message.output),
        read_call(markers[0].index, markers[0].offset, markers[0].limit) if markers else _whole_read(index, message),
    )
    return [original], f"bounded: {len(shown):,} of its {len(message.output):,} chars are sent"


def _clip_stands_for(branch: Branch, message: ToolResult, accounted: dict[int, str]) -> tuple[list[Original], str]:
    """A clipped copy: its original (marked as accounted for), the calls that read what it omits, its detail."""
    assert message.clipped_from is not None
    original_index = branch.index_of(message.clipped_from)
    if original_index is None:
        return [], f"clipped copy of {message.clipped_from}, which is not in this record"
    original = branch.message_at(original_index)
    accounted.setdefault(original_index, "clipped")
    markers = parse_clip_marker(message.output)
    calls = [read_call(m.index, m.offset, m.limit) for m in markers] or [_whole_read(original_index, original)]
    stands_for = [Original(original_index, original.kind, label_of(original), message_chars(original), calls[0])]
    kept = (
        f"keeps {message.clip.head:,} + {message.clip.tail:,} of {message.clip.total:,} chars"
        if message.clip
        else "clipped"
    )
    omitted = "; ".join(f"omits {m.start:,}-{m.end:,} ({m.omitted:,} chars)" for m in markers)
    detail = f"clipped copy of #{original_index}: {kept}" + (f"; {omitted}" if omitted else "")
    if len(calls) > 1:
        detail += "; further calls: " + " | ".join(calls[1:])
    return stands_for, detail


def _inputs_stand_for(branch: Branch, message: Instruction, accounted: dict[int, str]) -> tuple[list[Original], str]:
    """A dependent's instruction: the dependencies' results it carries, and the originals of clipped ones."""
    carried = carried_results(message.text)
    lines = [f"carries the results of {', '.join(f'{c.node_id} ({c.status})' for c in carried)}:"]
    lines += [f"          {c.node_id}: {_preview(c.text)}" for c in carried]
    stands_for: list[Original] = []
    for marker in parse_clip_marker(message.text):
        if not 0 <= marker.index < branch.record_length():
            continue
        original = branch.message_at(marker.index)
        accounted.setdefault(marker.index, "clipped")
        call = read_call(marker.index, marker.offset, marker.limit)
        stands_for.append(Original(marker.index, original.kind, "result block", message_chars(original), call))
    return stands_for, "\n".join(lines)


def side_prompt_ids(rows: Iterable[Any]) -> frozenset[str]:
    """The prompt ids the side requests among stored request rows carried (rows with ``intent`` and ``view_ids``)."""
    return frozenset(message_id for row in rows if row.intent == "side" for message_id in row.view_ids)


def _mark_side_exchanges(branch: Branch, in_view: set[str], prompts: frozenset[str], accounted: dict[int, str]) -> None:
    """A fold summary's prompt and its reply: the store keeps the reply right after the prompt, in the same batch."""
    for message_id in prompts:
        index = branch.index_of(message_id)
        if index is None or message_id in in_view:
            continue
        accounted.setdefault(index, "side")
        after = index + 1
        if after < branch.record_length():
            reply = branch.message_at(after)
            if isinstance(reply, AssistantResponse) and reply.id not in in_view:
                accounted.setdefault(after, "side")


def _follow_what_they_stand_for(branch: Branch, accounted: dict[int, str]) -> None:
    """Mark what the accounted messages stand for in turn: a note a later note replaced still names its
    originals (a reset note replaces earlier notes), and a copy a note replaced still names its original."""
    pending = list(accounted)
    while pending:
        message = branch.message_at(pending.pop())
        if isinstance(message, Note):
            targets, why = message.replaced, "replaced"
        elif isinstance(message, ToolResult) and message.clipped_from is not None:
            targets, why = (message.clipped_from,), "clipped"
        else:
            continue
        for target_id in targets:
            target = branch.index_of(target_id)
            if target is not None and target not in accounted:
                accounted[target] = why
                pending.append(target)


def _mark_retired_notes(branch: Branch, in_view: set[str], accounted: dict[int, str]) -> None:
    """Notes outside the view that nothing names, whose every original is reachable anyway: a rolled-back pass's
    note (kept in the record, never in the view) or a note whose originals a restore put back."""
    reachable = in_view | {branch.message_at(index).id for index in accounted}
    for index in range(branch.record_length()):
        message = branch.message_at(index)
        if isinstance(message, Note) and message.id not in reachable and index not in accounted:
            if all(target in reachable for target in message.replaced):
                accounted[index] = "retired"


def _outside_the_view(branch: Branch, in_view: set[str], accounted: dict[int, str]) -> dict[str, list[int]]:
    """Every record index outside the view, by where it went."""
    outside: dict[str, list[int]] = {
        "replaced": [],
        "clipped": [],
        "system": [],
        "side": [],
        "retired": [],
        "inherited": [],
        "unreachable": [],
    }
    for index in range(branch.record_length()):
        message = branch.message_at(index)
        if message.id in in_view:
            continue
        if isinstance(message, SystemMessage):
            outside["system"].append(index)
        elif index in accounted:
            outside[accounted[index]].append(index)
        elif branch.parent_id is not None and index < branch.fork_length:
            outside["inherited"].append(index)
        else:
            outside["unreachable"].append(index)
    return outside


def format_branch(picture: BranchPicture) -> str:
    """The human-readable picture of one branch."""
    node = f" (node {picture.node_id})" if picture.node_id else ""
    parent = f", clone of {picture.parent_id} sharing its first {picture.fork_length}" if picture.parent_id else ""
    lines = [
        f"branch {picture.branch_id}{node}: record {picture.record_length} messages{parent}",
        f"view as the model sees it: {len(picture.entries)} messages, "
        f"{picture.view_chars:,} chars, {picture.view_tokens:,} tokens (o200k)",
    ]
    for entry in picture.entries:
        lines.append(
            f"  [{entry.position:>3}] #{entry.index:<4} {entry.label:<32} {entry.chars:>9,} chars "
            f"{entry.tokens:>8,} tok  {entry.preview}"
        )
        if entry.detail:
            lines.append(f"        {entry.detail}")
        for original in entry.stands_for:
            lines.append(
                f"        - #{original.index} {original.label}, {original.chars:,} chars: {original.read_call}"
            )
    out = picture.outside
    total = sum(len(v) for v in out.values())
    lines.append(f"outside the view: {total} of {picture.record_length} record messages")
    for why, meaning in (
        ("replaced", "replaced by a fold note above, directly or through the earlier notes it replaces"),
        ("clipped", "originals of clipped copies above (or of copies a note replaced)"),
        ("system", "system texts (the current one is the stable segment)"),
        ("side", "fold summaries' prompts and replies (the summary is in its note; never part of the conversation)"),
        ("retired", "notes not in force (a rolled-back pass's, or restored), whose originals are reachable anyway"),
        ("inherited", "shared with the parent but never in this branch's view (e.g. the parent's round in flight)"),
        ("unreachable", "NOT reachable from the view (no note or copy stands for them)"),
    ):
        if out.get(why):
            shown = ", ".join(f"#{i}" for i in out[why][:20]) + (" …" if len(out[why]) > 20 else "")
            lines.append(f"  {len(out[why])} {meaning}: {shown}")
    return "\n".join(lines)


def format_branches(rows: Sequence[tuple[str, str | None, str | None, int, int, int]]) -> str:
    """One line per branch: (id, node, parent, record length, view length, view chars)."""
    lines = [f"{'branch':<18} {'node':<20} {'parent':<18} {'record':>7} {'view':>5} {'view chars':>11}"]
    for branch_id, node, parent, record_length, view_length, chars in rows:
        lines.append(
            f"{branch_id:<18} {node or '-':<20} {parent or '-':<18} {record_length:>7} {view_length:>5} {chars:>11,}"
        )
    return "\n".join(lines)
