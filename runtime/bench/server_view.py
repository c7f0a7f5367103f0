"""What Anthropic's server-side context management took out of the model's view (pure).

Under an ``api-*`` strategy the client (foldline with nothing of its own on)
keeps and resends its whole history; the server edits each request before
the model reads it, and the bench's reader is given the request as edited.
:class:`ServerView` wraps each node's reader and records, per tool call, the
results the model was shown in place of the original: the simulator's
placeholder for a cleared result (``clear_tool_uses_20250919``), or a call
the node's model saw earlier and no longer sees at all (a compaction dropped
it). Nothing reads those bytes back: the API has no ``read_result``, so the
only way to a cleared fact is to run its tool again (the reader's ``rerun``).

The simulator hands a policy the request as sent when it carries a
compaction block (a script finds its place by the replies it holds); a model
reads it from its latest compaction block on, so the tap gives the reader
that. On the request where a compaction fires the policy is still handed the
request as sent (the block is not in it yet), so the reader answers that one
request from the whole history: a gap that favours ``api-compaction``.

The bytes lost are the sizes of those results as the tool returned them
(``ToolCallFinished.output_bytes``), each call once however often it was
cleared.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from runtime.bench.reader import ReaderPolicy
from runtime.scripted.policies import Reply
from runtime.sim.compaction import dropped_before_compaction
from runtime.sim.context_edits import CLEARED_RESULT


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content if isinstance(part, Mapping))


@attrs.define(eq=False)
class ServerView:
    """Tool calls whose results the server took out of the model's view (an identity object)."""

    cleared: set[str] = attrs.field(factory=set)
    """Call ids shown as the placeholder, or dropped after the node's model had seen them."""
    _seen: dict[str, set[str]] = attrs.field(factory=dict)

    def see(self, node: str, payload: Mapping[str, Any]) -> None:
        """Take one request as ``node``'s model reads it."""
        shown: set[str] = set()
        for message in payload.get("messages") or ():
            content = message.get("content")
            if isinstance(content, str):
                continue
            for block in content or ():
                if block.get("type") != "tool_result":
                    continue
                call_id = str(block.get("tool_use_id", ""))
                if _result_text(block) == CLEARED_RESULT:
                    self.cleared.add(call_id)
                else:
                    shown.add(call_id)
        seen = self._seen.setdefault(node, set())
        self.cleared.update(seen - shown)
        seen.update(shown)

    def bytes_lost(self, output_bytes: Mapping[str, int]) -> int:
        """The bytes of every cleared result, by the tool's own size (``output_bytes`` by call id)."""
        return sum(output_bytes.get(call_id, 0) for call_id in self.cleared)

    def tap(self, reader: ReaderPolicy) -> ViewTap:
        return ViewTap(reader, self)


@attrs.define(eq=False)
class ViewTap:
    """A reader whose every request is shown to a :class:`ServerView` first."""

    reader: ReaderPolicy
    view: ServerView

    def respond(self, payload: Mapping[str, Any]) -> Reply:
        read = dropped_before_compaction(payload) or payload
        self.view.see(self.reader.node_id, read)
        return self.reader.respond(read)
