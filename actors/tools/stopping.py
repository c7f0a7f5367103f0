"""Stopping a tool's work when its call ends: a timed-out or cancelled sync tool stops, it is not abandoned.

A sync tool runs in a worker thread (:mod:`actors.tools.functions`); a thread
cannot be killed, so a call that times out used to leave its thread running
(a grep over a large tree kept a core busy minutes after the run ended). Now
the call's thread carries a stop flag, set the moment the call ends for any
reason (its timeout, the turn cancelled, the run ending), and a tool's loops
ask :func:`check_stop` between units of work (a line, a file, a directory
entry): it raises :class:`ToolStopped` once the flag is set, so the thread
ends within one unit. The workspace tools check it everywhere they loop, and
a user's sync tool may too. The thread itself is a daemon thread, so a tool
that never checks cannot keep the process alive after the run.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel

from actors.tools.registry import ToolFailed

T = TypeVar("T")

_STOP: ContextVar[threading.Event | None] = ContextVar("foldline_tool_stop", default=None)


class ToolStopped(ToolFailed):
    """The call this work belongs to has ended (timed out or cancelled); its result would not be used."""


def stop_requested() -> bool:
    """True once the running tool call has ended (False outside a tool call)."""
    flag = _STOP.get()
    return flag is not None and flag.is_set()


def check_stop(what: str) -> None:
    """Raise :class:`ToolStopped` (naming ``what`` was stopped) once the running call has ended."""
    if stop_requested():
        raise ToolStopped(f"{what}: stopped, the call ended")


async def run_stoppable(func: Callable[[], T], name: str) -> T:
    """``func()`` in a daemon thread with a stop flag set when this call ends, however it ends.

    The awaiting task is woken from the thread through the event loop's token
    (``anyio.from_thread.run_sync``); when the loop has already finished (the
    run ended), the thread just ends. A cancellation (the tool's timeout) does
    not wait for the thread: it sets the flag and leaves.
    """
    flag = threading.Event()
    done = anyio.Event()
    token = anyio.lowlevel.current_token()
    context = contextvars.copy_context()
    outcome: list[tuple[bool, Any]] = []

    def body() -> None:
        try:
            outcome.append((True, context.run(_with_flag, flag, func)))
        except BaseException as exc:  # handed to the awaiting task, raised there
            outcome.append((False, exc))
        if flag.is_set():
            return  # the call ended: nobody waits
        with contextlib.suppress(anyio.RunFinishedError):  # the run ended meanwhile
            anyio.from_thread.run_sync(done.set, token=token)

    thread = threading.Thread(target=body, name=f"foldline tool {name}", daemon=True)
    thread.start()
    try:
        await done.wait()
    finally:
        flag.set()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def _with_flag(flag: threading.Event, func: Callable[[], T]) -> T:
    _STOP.set(flag)  # inside the thread's own copy of the context
    return func()
