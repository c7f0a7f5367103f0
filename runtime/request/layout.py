"""Laying a view out as messages: every call followed by its result (pure).

:func:`layout_view` is the message loop of :func:`runtime.request.compiler.compile_request`.
It keeps a small memo of the layouts it finished last (the loop's state after a
whole view, before the last message is closed), and a view that extends one of
them (the same messages, in the same order, plus new ones) continues from
there: compiling after one appended turn renders the turn, not the history, and
the earlier rendered messages are the same objects as last time. With a result
projection the memo is used only when the projection still renders every
earlier result the same (its memo keys are compared).

A reply's thinking blocks go back only while the conversation before it is
the one it answered (:mod:`runtime.values.thinking`): the keep decision reads only
the messages before the reply. So a remembered layout's keep decisions, and
the thinking-context digest it carries on, are still right for any view that
extends it: reuse requires the prefix to be the same messages (so the same
rendered bytes), and nothing later can change a decision already made.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence

import attrs

from runtime.request.rendering import (
    Block,
    CompileError,
    RenderedMessage,
    ResultProjection,
    render_blocks,
)
from runtime.values.messages import AssistantResponse, Message, SystemMessage, ToolResult
from runtime.values.prefix import common_prefix
from runtime.values.thinking import CONTEXT_SEED, extend_context

MAX_LAYOUTS = 16
"""How many finished layouts the memo keeps (most recently used first)."""


@attrs.define
class _ThinkingContext:
    """The thinking-context digest of the messages laid out so far (extended only when a reply asks)."""

    digest: str = CONTEXT_SEED
    done: int = 0

    def matches(self, out: Sequence[RenderedMessage], context: str | None) -> bool:
        for msg in out[self.done :]:
            self.digest = extend_context(self.digest, msg.role, tuple(b.json for b in msg.blocks))
        self.done = len(out)
        return self.digest == context


@attrs.frozen(eq=False)
class _Layout:
    """The loop state after a whole view, before its last message is closed."""

    view: tuple[Message, ...]
    variants: tuple[Hashable, ...] | None
    results: dict[str, ToolResult]
    out: tuple[RenderedMessage, ...]
    blocks: tuple[Block, ...]
    sources: tuple[str, ...]
    role: str | None
    context: tuple[str, int] = (CONTEXT_SEED, 0)
    """The thinking-context chain's state (digest, messages it covers); it depends only on ``out``."""


class _Builder:
    """The message loop's working state (one compilation)."""

    def __init__(self, start: _Layout | None) -> None:
        self.out: list[RenderedMessage] = list(start.out) if start else []
        self.blocks: list[Block] = list(start.blocks) if start else []
        self.sources: list[str] = list(start.sources) if start else []
        self.role: str | None = start.role if start else None
        self.chain = _ThinkingContext(*start.context) if start else _ThinkingContext()

    def flush(self) -> None:
        if self.blocks and self.role is not None:
            self.out.append(RenderedMessage(self.role, tuple(self.blocks), tuple(self.sources)))  # type: ignore[arg-type]
        self.blocks, self.sources, self.role = [], [], None

    def add(self, to_role: str, new_blocks: Sequence[Block], source: str) -> None:
        if not new_blocks:
            return
        if self.role != to_role:
            self.flush()
            self.role = to_role
        self.blocks.extend(new_blocks)
        self.sources.append(source)

    def run(
        self,
        messages: Sequence[Message],
        results: dict[str, ToolResult],
        placed: set[str],
        projection: ResultProjection | None,
    ) -> None:
        for message in messages:
            if isinstance(message, SystemMessage):
                raise CompileError("a system message belongs in the stable segment, not in the view")
            if isinstance(message, ToolResult):
                if message.call_id not in placed:
                    raise CompileError(
                        f"orphaned tool result {message.call_id!r} ({message.name}): "
                        "its call is not in the view before it"
                    )
                continue
            if isinstance(message, AssistantResponse):
                keep = message.context is not None and self.role != "assistant"
                if keep:
                    self.flush()
                    keep = self.chain.matches(self.out, message.context)
                self.add("assistant", render_blocks(message, projection, keep_thinking=keep), message.id)
                calls = message.tool_calls
                if calls:
                    self.flush()
                    for call in calls:
                        result = results.get(call.call_id)
                        if result is None:
                            raise CompileError(
                                f"orphaned tool call {call.call_id!r} ({call.name}): no result in the view"
                            )
                        placed.add(call.call_id)
                        self.add("user", render_blocks(result, projection), result.id)
                continue
            self.add("user", render_blocks(message, projection), message.id)


_lock = threading.Lock()
_layouts: list[_Layout] = []


def _variants(results: dict[str, ToolResult], projection: ResultProjection | None) -> tuple[Hashable, ...] | None:
    return None if projection is None else tuple(projection.memo_key(r) for r in results.values())


def _usable(layout: _Layout, view: tuple[Message, ...], projection: ResultProjection | None) -> bool:
    n = len(layout.view)
    if n > len(view) or (n and view[n - 1] is not layout.view[n - 1] and view[n - 1] != layout.view[n - 1]):
        return False
    if common_prefix(view, layout.view, n) != n:
        return False
    if (projection is None) != (layout.variants is None):
        return False
    return projection is None or _variants(layout.results, projection) == layout.variants


def _start(view: tuple[Message, ...], projection: ResultProjection | None) -> _Layout | None:
    with _lock:
        candidates = list(_layouts)
    best: _Layout | None = None
    for layout in candidates:
        if (best is None or len(layout.view) > len(best.view)) and _usable(layout, view, projection):
            best = layout
    return best


def _remember(layout: _Layout, used: _Layout | None) -> None:
    with _lock:
        if used is not None and used in _layouts:
            _layouts.remove(used)
            _layouts.insert(0, used)
        _layouts.insert(0, layout)
        del _layouts[MAX_LAYOUTS:]


def layout_view(view: Sequence[Message], projection: ResultProjection | None = None) -> tuple[RenderedMessage, ...]:
    """The rendered messages of ``view`` (see :func:`runtime.request.compiler.compile_request` for the rules)."""
    whole = tuple(view)
    start = _start(whole, projection)
    done = len(start.view) if start is not None else 0
    results: dict[str, ToolResult] = dict(start.results) if start is not None else {}
    for message in whole[done:]:
        if isinstance(message, ToolResult):
            if message.call_id in results:
                raise CompileError(f"two results for tool call {message.call_id!r} in the view")
            results[message.call_id] = message
    builder = _Builder(start)
    # Every result of a finished view was placed after its call, so the placed calls are its results.
    placed = set(start.results) if start is not None else set()
    builder.run(whole[done:], results, placed, projection)
    _remember(
        _Layout(
            whole,
            _variants(results, projection),
            results,
            tuple(builder.out),
            tuple(builder.blocks),
            tuple(builder.sources),
            builder.role,
            (builder.chain.digest, builder.chain.done),
        ),
        start,
    )
    builder.flush()
    return tuple(builder.out)


def forget_layouts() -> None:
    """Drop every remembered layout (for benchmarks measuring a compile from nothing)."""
    with _lock:
        _layouts.clear()


def layout_alone(view: Sequence[Message], projection: ResultProjection | None = None) -> tuple[RenderedMessage, ...]:
    """The rendered messages of ``view`` laid out from nothing, without reading or filling the memo.

    For a short window of a longer view (:mod:`runtime.measuring.measure_splice`): the memo keeps whole views.
    """
    results: dict[str, ToolResult] = {}
    for message in view:
        if isinstance(message, ToolResult):
            if message.call_id in results:
                raise CompileError(f"two results for tool call {message.call_id!r} in the view")
            results[message.call_id] = message
    builder = _Builder(None)
    builder.run(view, results, set(), projection)
    builder.flush()
    return tuple(builder.out)
