"""Bytes a view let go of with no way back (for the run's recoverability audit).

Under the fold strategy every folded or clipped original stays in the record,
named by a note or a copy and readable with ``read_result``; nothing is
lost. Under the ``compaction`` strategy the model has no context tool, so the
originals a compaction note replaced (and that are not back in the view) are
unrecoverable by the model: their canonical JSON bytes are what
:func:`unrecoverable_bytes` counts. A note or copy that names a message the
record does not hold also counts (as the note's own bytes), since nothing
can bring that message back.
"""

from __future__ import annotations

from typing import Protocol

from runtime.values.canonical import canonical_json
from runtime.values.messages import Message, Note, ToolResult


class BranchLike(Protocol):
    def record_messages(self) -> tuple[Message, ...]: ...

    def view_ids(self) -> tuple[str, ...]: ...


def unrecoverable_bytes(branch: BranchLike) -> int:
    """Bytes of originals the branch's view dropped with no recovery path (see the module docstring)."""
    messages = branch.record_messages()
    by_id = {m.id: m for m in messages}
    in_view = set(branch.view_ids())
    lost: dict[str, int] = {}
    for message in messages:
        if isinstance(message, Note):
            missing = [mid for mid in message.replaced if mid not in by_id]
            if missing:
                lost[message.id] = len(canonical_json(message.content()).encode("utf-8"))
            if message.stage == "compaction":
                for mid in message.replaced:
                    original = by_id.get(mid)
                    if original is not None and mid not in in_view and not isinstance(original, Note):
                        lost[mid] = len(canonical_json(original.content()).encode("utf-8"))
        elif isinstance(message, ToolResult) and message.clipped_from is not None:
            if message.clipped_from not in by_id:
                lost[message.id] = len(canonical_json(message.content()).encode("utf-8"))
    return sum(lost.values())
