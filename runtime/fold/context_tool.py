"""The model's context tool: its schema, argument checks and answers (pure).

The tool is named ``context`` and offered in the branch's tool set (the
stable segment) when ``context_management`` is on under the fold strategy.
The engine runs its calls itself (they need the branch); this module parses
the arguments and writes the answers. Its answers are appended like any tool
result and never rewritten, so each is bounded and final when shown.

Input (fixed; the benchmark's reader policy calls it)::

    {"action": "status" | "read_result" | "restore" | "fold",
     "index": int,   # full-record index (read_result, restore)
     "offset": int,  # read_result, default 0
     "limit": int,   # read_result, default and max 16000
     "start": int, "end": int}   # fold: a mark over start..end inclusive
                                 # (restore also takes start..end: every original in the range)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

import attrs

from runtime.errors import FoldlineError
from runtime.fold.formats import read_call
from runtime.fold.marks import FoldMark
from runtime.fold.projection import READ_LIMIT
from runtime.fold.recovery import RecoveryError, plan_restore, read_result
from runtime.fold.settings import FoldSettings
from runtime.fold.units import RecordAccess, original_index
from runtime.request.compiler import ToolSpec
from runtime.values.messages import AssistantResponse, Message, Note, ToolResult

CONTEXT_TOOL_NAME = "context"

ACTIONS = ("status", "read_result", "restore", "fold")

STATUS_MAX_CHARS = 1500
"""A status answer is at most this long."""

CONTEXT_TOOL = ToolSpec.create(
    CONTEXT_TOOL_NAME,
    "Manage your own context. status: the request's size against its ceiling, notes and pending marks. "
    "read_result: read characters of a folded or clipped original by its full-record index (#N in notes "
    "and clip markers), in ranges of at most 16000 (offset, limit); never reruns a tool. restore: bring "
    "an original back into the conversation at its place, if the ceiling allows. fold: mark a span "
    "start..end of full-record indices you are done with; marks move nothing now and land together at "
    "the next fold.",
    {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": list(ACTIONS)},
            "index": {"type": "integer", "minimum": 0, "description": "full-record index (read_result, restore)"},
            "offset": {"type": "integer", "minimum": 0, "description": "read_result: first character, default 0"},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": READ_LIMIT,
                "description": "read_result: characters to read, default and max 16000",
            },
            "start": {"type": "integer", "minimum": 0, "description": "fold (or restore): first index of the span"},
            "end": {"type": "integer", "minimum": 0, "description": "fold (or restore): last index, inclusive"},
        },
        "required": ["action"],
    },
)


class ContextToolError(FoldlineError):
    """A context call the tool cannot run as given; its message goes back to the model."""


@attrs.frozen
class ContextAction:
    """A checked context call."""

    action: Literal["status", "read_result", "restore", "fold"]
    index: int | None = None
    offset: int = 0
    limit: int = READ_LIMIT
    start: int | None = None
    end: int | None = None


def _int(arguments: Mapping[str, Any], key: str, *, default: int | None = None) -> int | None:
    value = arguments.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ContextToolError(f"context: {key} is {value!r}; expected a non-negative integer")
    return value


def parse_action(arguments: Mapping[str, Any]) -> ContextAction:
    """Check a context call's arguments; raises :class:`ContextToolError` naming the key, value and expectation."""
    if not isinstance(arguments, Mapping):
        raise ContextToolError(f"context: arguments {arguments!r} are not an object")
    unknown = sorted(set(arguments) - {"action", "index", "offset", "limit", "start", "end"})
    if unknown:
        raise ContextToolError(
            f"context: unknown argument {unknown[0]!r}; expected action, index, offset, limit, start, end"
        )
    action = arguments.get("action")
    if action not in ACTIONS:
        raise ContextToolError(f"context: action is {action!r}; expected one of {', '.join(ACTIONS)}")
    index = _int(arguments, "index")
    start = _int(arguments, "start")
    end = _int(arguments, "end")
    offset = _int(arguments, "offset", default=0)
    limit = arguments.get("limit", READ_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ContextToolError(f"context: limit is {limit!r}; expected a positive integer (at most {READ_LIMIT})")
    if action == "read_result" and index is None:
        raise ContextToolError('context: read_result needs "index", the full-record index of the original (#N)')
    if action == "restore" and index is None and start is None:
        raise ContextToolError('context: restore needs "index" (or "start" and "end" for a range)')
    if action == "fold":
        if start is None or end is None:
            raise ContextToolError('context: fold needs "start" and "end", full-record indices of the span')
        if end < start:
            raise ContextToolError(f"context: fold end {end} is before start {start}; expected start <= end")
    return ContextAction(action, index, offset or 0, min(limit, READ_LIMIT), start, end)


def mark_answer(mark: FoldMark, pending: int, settings: FoldSettings) -> str:
    when = (
        "it lands before the next request"
        if settings.scheduling == "immediate"
        else "they land together at the next fold commit, when the request reaches its fold line"
    )
    return f"fold mark recorded: #{mark.start}-#{mark.end}. {pending} mark(s) pending; nothing moves now: {when}."


def restore_answer(index: int, restored: int, estimate: int, ceiling: int) -> str:
    return (
        f"restored #{index}: {restored} message(s) back in the conversation at their place; "
        f"the request is now about {estimate} tokens of its {ceiling}-token ceiling."
    )


def restore_unchanged_answer(index: int) -> str:
    return (
        f"#{index} is already in the conversation as it was recorded; nothing to restore. "
        f"Read parts of it with {read_call(index, 0, READ_LIMIT)}."
    )


def restore_refused_answer(index: int, estimate: int, ceiling: int) -> str:
    return (
        f"restore of #{index} refused: the request would be about {estimate} tokens, over its {ceiling}-token "
        f"ceiling. Read it in ranges instead with {read_call(index, 0, READ_LIMIT)} and continue from next_offset."
    )


def status_answer(
    *,
    view: Sequence[Message],
    record: RecordAccess,
    estimate: int,
    settings: FoldSettings,
    marks: Sequence[FoldMark],
) -> str:
    """A bounded status page (at most :data:`STATUS_MAX_CHARS` characters)."""
    ceiling = settings.ceiling
    lines = [
        f"context status: about {estimate} tokens of a {ceiling}-token ceiling ({estimate * 100 // ceiling}%); "
        f"fold line {int(settings.fold_line)}, target {int(settings.target_tokens)}.",
        f"view: {len(view)} messages of {record.record_length()} recorded.",
    ]
    notes = [m for m in view if isinstance(m, Note)]
    if notes:
        shown = ", ".join(f"#{record.index_of(n.id)} ({n.stage}, {len(n.replaced)} msgs)" for n in notes[-8:])
        lines.append(f"notes in view: {len(notes)}: {shown}")
    if marks:
        lines.append("pending fold marks: " + ", ".join(f"#{m.start}-#{m.end}" for m in marks[-8:]))
    results = sorted((m for m in view if isinstance(m, ToolResult)), key=lambda r: len(r.output), reverse=True)[:5]
    if results:
        parts = []
        for r in results:
            label = "clipped copy of " if r.clipped_from is not None else ""
            parts.append(f"{label}#{original_index(r, record)} {r.name} {len(r.output)} chars")
        lines.append("largest results in view: " + "; ".join(parts))
    lines.append(
        "read_result(index, offset, limit<=16000) reads an original exactly; restore(index) brings one back "
        "if it fits; fold(start, end) marks a span you are done with."
    )
    text = "\n".join(lines)
    return text if len(text) <= STATUS_MAX_CHARS else text[: STATUS_MAX_CHARS - 3] + "..."


# -- running a call (pure: the engine applies the outcome) ----------------------------


@attrs.frozen
class ContextOutcome:
    """What one context call answers and changes; the engine applies it in one batch.

    ``view_ids``: the new view (a restore), None when the view stays;
    ``recovered``: ids no fold takes before the next completed main request
    (``protect_answer`` adds the answer's own id: a read_result page reaches
    the next request whole); ``marks``: the new pending marks, None when they
    stay; ``rewrite_cause``: why the next request rewrites its prefix.
    """

    text: str
    is_error: bool = False
    view_ids: tuple[str, ...] | None = None
    recovered: frozenset[str] = frozenset()
    protect_answer: bool = False
    marks: tuple[FoldMark, ...] | None = None
    rewrite_cause: str | None = None


class ViewEstimator(Protocol):
    def estimate(self, view: Sequence[Message]) -> int: ...


def settled_view(view: Sequence[Message]) -> tuple[Message, ...]:
    """The view without the round whose tools are running (it cannot compile until they finish)."""
    for i in range(len(view) - 1, -1, -1):
        message = view[i]
        if isinstance(message, AssistantResponse):
            return tuple(view[:i]) if message.tool_calls else tuple(view)
    return tuple(view)


def run_context_call(
    arguments: Mapping[str, Any],
    *,
    view: Sequence[Message],
    record: RecordAccess,
    settings: FoldSettings | None,
    marks: Sequence[FoldMark],
    completed: int,
    estimator: ViewEstimator,
) -> ContextOutcome:
    """Answer one context call (see the module docstring).

    Bad arguments, an index outside the record and a restore the ceiling
    cannot admit are answers (``is_error`` for the first two), not errors; a
    stored original that fails its SHA-256 raises
    :class:`runtime.fold.recovery.RecoveryCorrupted`.
    """
    try:
        action = parse_action(arguments)
        if settings is None:
            raise ContextToolError(
                "context: this operation has no fold installed (a bounded operation, or no ceiling), "
                "so there is nothing to read back, restore or mark"
            )
        if action.action == "status":
            estimate = estimator.estimate(settled_view(view))
            text = status_answer(view=view, record=record, estimate=estimate, settings=settings, marks=marks)
            return ContextOutcome(text)
        if action.action == "read_result":
            assert action.index is not None
            outcome = read_result(
                record, action.index, offset=action.offset, limit=action.limit, bound=settings.result_bound
            )
            return ContextOutcome(outcome.text, recovered=frozenset({outcome.original_id}), protect_answer=True)
        if action.action == "restore":
            start = action.index if action.index is not None else action.start
            assert start is not None
            return _restore(view, record, settings, estimator, start, action.end if action.index is None else None)
        assert action.start is not None and action.end is not None
        if action.end >= record.record_length():
            raise ContextToolError(
                f"context: fold end {action.end} is beyond the record (indices 0..{record.record_length() - 1})"
            )
        mark = FoldMark(action.start, action.end, completed)
        pending = tuple(marks) + (mark,)
        return ContextOutcome(mark_answer(mark, len(pending), settings), marks=pending)
    except (ContextToolError, RecoveryError) as exc:
        return ContextOutcome(str(exc), is_error=True)


def _restore(
    view: Sequence[Message],
    record: RecordAccess,
    settings: FoldSettings,
    estimator: ViewEstimator,
    start: int,
    end: int | None,
) -> ContextOutcome:
    plan = plan_restore(view, record, start=start, end=end)
    if not plan.changed:
        return ContextOutcome(restore_unchanged_answer(start))
    by_id = {m.id: m for m in view}
    candidate = []
    for mid in plan.view_ids:
        message = by_id.get(mid)
        if message is None:
            index = record.index_of(mid)
            assert index is not None
            message = record.message_at(index)
        candidate.append(message)
    estimate = estimator.estimate(settled_view(candidate))
    if estimate > settings.ceiling:
        return ContextOutcome(restore_refused_answer(start, estimate, settings.ceiling))
    cause = f"restore #{start}" if end is None or end == start else f"restore #{start}-#{end}"
    return ContextOutcome(
        restore_answer(start, len(plan.restored), estimate, settings.ceiling),
        view_ids=plan.view_ids,
        recovered=frozenset(plan.restored),
        rewrite_cause=cause,
    )
