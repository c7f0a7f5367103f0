"""Where a streamed reply's pieces go while it streams: the progress hook of the current send.

A provider that streams calls :func:`current_progress` once per attempt and,
when a hook is set, hands it each piece as it arrives: ``hook("text", delta)``
for a text block's ``text_delta`` and ``hook("thinking", delta)`` for a
thinking block's ``thinking_delta``. The send pipeline sets the hook around
each attempt with :func:`reporting_progress` (it publishes each piece as a
low-priority :class:`signals.events.ReplyDelta`). The hook is a context
variable, so concurrent sends on one provider each reach their own; a hook
must not block and must not raise.

Progress only: nothing a hook receives is recorded, and a reply is assembled
from the stream whether or not anyone listens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

ReplyProgress = Callable[[str, str], None]
"""Receives (kind, piece): kind ``text`` or ``thinking``; the piece of text as it streamed in."""

_CURRENT: ContextVar[ReplyProgress | None] = ContextVar("foldline_reply_progress", default=None)


def current_progress() -> ReplyProgress | None:
    """The hook of the send running in this context (None: nobody listens)."""
    return _CURRENT.get()


@contextmanager
def reporting_progress(hook: ReplyProgress | None) -> Iterator[None]:
    """Within the block, a streaming send hands its pieces to ``hook`` (None: to nobody)."""
    token = _CURRENT.set(hook)
    try:
        yield
    finally:
        _CURRENT.reset(token)
