"""Counting a view that differs from one already counted in one window (pure).

A fold measures many candidate views that each equal the view it started from
except around one place: the oldest rounds replaced by a note, a result by its
clipped copy. Compiling and counting each candidate whole costs the whole
history every time. :class:`SpliceBase` keeps what compiling and counting the
starting view gave (its rendered messages, where each starts in the view, the
running count and the payload's last characters before each message), and
:meth:`SpliceBase.counted` counts a candidate from it: it lays out only the
window that differs, counts that window's pieces, and continues over the
starting view's own messages after it until the running state agrees again,
from where the rest of the count is the starting view's. The result is the
number counting the candidate's whole payload piece by piece gives, exactly:

- *Layout.* Laying out is a left-to-right pass that starts a new message when
  the role changes. The window starts at a message ``x`` that starts a
  rendered message in the starting view and lies in the part both views share,
  so it starts one in the candidate too; it ends before a message ``e`` of the
  shared tail that starts a rendered message in the starting view and whose
  role differs from the window's last message, so it starts one in the
  candidate too. Between them the window is laid out from nothing, which gives
  what the whole layout gives there as long as no call or result crosses the
  window's edges and no reply carries thinking (its keep decision reads the
  whole conversation before it); either makes the candidate counted whole.
- *Count.* The count of a payload is a left-to-right sum whose state is the
  running total and the last :data:`runtime.measuring.measure.JUNCTION_WINDOW`
  characters; once that tail agrees with the starting view's at a message
  boundary, everything after is the same.

Anything this cannot show (images, a label met twice, a window over half the
view, an error while laying out the window) returns None, and the caller
counts the candidate whole (which also raises what it must).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence

import attrs

from runtime.measuring.measure import TokenCounter
from runtime.request.compiler import Request
from runtime.request.layout import layout_alone
from runtime.request.rendering import CompileError, RenderedMessage, ResultProjection
from runtime.values.messages import AssistantResponse, Message, Note, ToolCall, ToolResult
from runtime.values.prefix import common_prefix

MAX_WINDOW_SHARE = 0.5
"""A window laying out more than this share of the view's messages is not spliced (counting whole costs the same)."""


@attrs.frozen(eq=False)
class SpliceBase:
    """What compiling and counting one view gave, to count views that differ from it in one window."""

    view: tuple[Message, ...]
    request: Request
    counted: int
    totals: tuple[int, ...]
    """The running count before each rendered message (the last entry: after the last one)."""
    tails: tuple[str, ...]
    """The payload's last characters before each rendered message (the same entries as ``totals``)."""
    starts: tuple[int, ...]
    """Ascending view positions that start a rendered message with a message that is not a result."""
    starts_message: tuple[int, ...]
    """The rendered message each of ``starts`` starts."""
    reach: tuple[int, ...]
    """``reach[q]``: the furthest position of a result whose call lies before position ``q`` (-1: none)."""
    results_at: dict[str, tuple[int, ...]]
    position: dict[str, int]
    thinking_before: int
    """One past the last position of a reply that carries a thinking context (0: none)."""

    @classmethod
    def build(cls, view: Sequence[Message], request: Request, counter: TokenCounter) -> SpliceBase | None:
        """The base for ``view`` compiled as ``request`` (None when it cannot serve: images, a label met twice)."""
        whole = tuple(view)
        if request.marks or any(block.image_sizes for rendered in request.messages for block in rendered.blocks):
            return None
        running = counter.running(request.pieces())
        if running is None:
            return None
        counted, totals, tails = running
        position = {message.id: at for at, message in enumerate(whole)}
        if len(position) != len(whole):
            return None  # a message twice in the view
        results_at: dict[str, list[int]] = {}
        called_at: list[tuple[str, int]] = []
        thinking_before = 0
        for at, message in enumerate(whole):
            if isinstance(message, ToolResult):
                results_at.setdefault(message.call_id, []).append(at)
            elif isinstance(message, AssistantResponse):
                if message.context is not None:
                    thinking_before = at + 1
                for part in message.parts:
                    if isinstance(part, ToolCall):
                        called_at.append((part.call_id, at))
        # reach[q]: the furthest result of a call made before position q.
        furthest_from = [-1] * (len(whole) + 1)
        for call, at in called_at:
            furthest_from[at + 1] = max(furthest_from[at + 1], *results_at.get(call, (-1,)))
        reach = list(itertools.accumulate(furthest_from, max))
        starts: list[int] = []
        starts_message: list[int] = []
        for index, rendered in enumerate(request.messages):
            first = position.get(rendered.source_ids[0]) if rendered.source_ids else None
            if first is None:
                return None
            if not isinstance(whole[first], ToolResult):
                if starts and first <= starts[-1]:
                    return None
                starts.append(first)
                starts_message.append(index)
        return cls(
            whole,
            request,
            counted,
            tuple(totals),
            tuple(tails),
            tuple(starts),
            tuple(starts_message),
            tuple(reach),
            {call: tuple(at) for call, at in results_at.items()},
            position,
            thinking_before,
        )

    def counted_for(
        self, candidate: Sequence[Message], counter: TokenCounter, projection: ResultProjection | None
    ) -> int | None:
        """The count of ``candidate`` compiled as the base was, or None when it cannot be spliced (see the module)."""
        view = self.view
        new = tuple(candidate)
        same = common_prefix(view, new)
        if same == len(view) and same == len(new):
            return self.counted
        limit = min(len(view), len(new)) - same
        shared_tail = common_prefix(view[::-1], new[::-1], limit)
        window = self._window(same, len(view) - shared_tail)
        if window is None:
            return None
        x, a, e, c = window
        new_end = e - len(view) + len(new)  # the shared tail starts at or before e
        if not self._allowed(new[same : len(new) - shared_tail], x, e):
            return None
        try:
            laid = layout_alone(new[x:new_end], projection)
        except CompileError:
            return None
        rendered = self.request.messages
        if not laid or c < 1 or len(laid) > MAX_WINDOW_SHARE * max(len(rendered), 1):
            return None
        if (e < len(view) and _role(view[e]) == laid[-1].role) or any(
            block.image_sizes for m in laid for block in m.blocks
        ):
            return None
        return self._count(laid, a, c, counter)

    def _window(self, first_changed: int, end_changed: int) -> tuple[int, int, int, int] | None:
        """``(x, a, e, c)``: the window is positions ``x`` to ``e`` of the base, rendered messages ``a`` to ``c``."""
        starts, reach = self.starts, self.reach
        # x: the last start at or before the last shared message (position 0 when nothing is shared).
        k = bisect.bisect_right(starts, max(first_changed - 1, 0)) - 1
        while k >= 0 and reach[starts[k]] >= starts[k]:
            k -= 1
        if k < 0 or (first_changed == 0 and starts[k] != 0):
            return None
        x = starts[k]
        if x >= self.thinking_before:
            # e: the first start after the change that no call before it reaches past.
            j = bisect.bisect_left(starts, max(end_changed, x + 1))
            while j < len(starts) and reach[starts[j]] >= starts[j]:
                j += 1
            if j < len(starts):
                return x, self.starts_message[k], starts[j], self.starts_message[j]
            return x, self.starts_message[k], len(self.view), len(self.request.messages)  # to the end
        return None

    def _allowed(self, added: Sequence[Message], x: int, e: int) -> bool:
        """Whether the candidate's messages in the window that the base lacks can be laid out in it alone."""
        for message in added:
            at = self.position.get(message.id)
            if at is not None and self.view[at] is message:
                if x <= at < e:
                    continue  # a message of the base between two changes
                return False
            if isinstance(message, ToolResult):
                # A copy standing for a result: no other result for its call may lie outside the window.
                if any(at < x or at >= e for at in self.results_at.get(message.call_id, ())):
                    return False
            elif not isinstance(message, Note):
                return False  # a new reply or instruction: counted whole
        return True

    def _count(self, laid: tuple[RenderedMessage, ...], a: int, c: int, counter: TokenCounter) -> int:
        pad = self.request.messages[a - 1 : a] if a else ()
        window = attrs.evolve(self.request, messages=(*pad, *laid)).pieces()
        total, tail = self.totals[a], self.tails[a]
        for index in range(len(pad), len(pad) + len(laid)):
            tokens, tail = counter.extend(tail, window.segment(index), lines=True)
            total += tokens
        base = self.request.pieces()
        for index in range(c, len(self.request.messages)):
            tokens, tail = counter.extend(tail, base.segment(index))
            total += tokens
            if tail == self.tails[index + 1]:
                return total + self.counted - self.totals[index + 1]
        tokens, _ = counter.extend(tail, base.foot)
        return total + tokens


def _role(message: Message) -> str:
    return "assistant" if isinstance(message, AssistantResponse) else "user"
