"""A client that survives its server: connect once (or wait a stated bound), then ride out restarts.

A Temporal server that restarts (or drops its connections) fails the client's
calls in flight with an ``RPCError`` (``transport error``, ``tcp connect
error`` while it is down); the client's connection reconnects by itself on
the next call. :func:`patiently` makes each call again with a growing delay
for as long as the outage lasts, up to ``reconnect_s`` seconds, saying so on
stderr, and :func:`connect_or_wait` turns "nothing listens there" into a
one-line error (:class:`ServerUnreachable`, the command exits 2) or waits
for the server up to a stated bound. Asyncio only, as the Temporal SDK.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from typing import Any, TextIO, TypeVar

import anyio
import attrs

from runtime.errors import FoldlineError

T = TypeVar("T")

FIRST_DELAY_S = 0.5
MAX_DELAY_S = 5.0


class ServerUnreachable(FoldlineError):
    """No Temporal server answers at the address (within the stated bound); the command exits 2."""


class ServerLost(FoldlineError):
    """The server went away mid-run and did not come back within ``--reconnect-for``; the flow may still run."""


def is_transport_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the server could not be reached (rather than that it refused the call)."""
    from temporalio.service import RPCError, RPCStatusCode

    if isinstance(exc, RPCError):
        return (
            exc.status == RPCStatusCode.UNAVAILABLE
            or "transport error" in exc.message
            or "connect error" in exc.message
        )
    text = str(exc)
    return isinstance(exc, RuntimeError) and (
        "Failed client connect" in text or "code: Unavailable" in text or "tcp connect error" in text
    )


def sole_error(raised: BaseException) -> BaseException:
    """The one error inside exception groups that each hold one (a task group's), else ``raised`` itself."""
    while isinstance(raised, BaseExceptionGroup) and len(raised.exceptions) == 1:
        raised = raised.exceptions[0]
    return raised


def first_line(exc: BaseException) -> str:
    """The error's message, on one line and bounded (a transport error's text nests its causes: the innermost)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    for pattern in (r'message: "([^"]+)"', r'ConnectError\("([^"]+)"'):
        if found := re.search(pattern, text):
            return found[1]
    return text if len(text) <= 200 else text[:197] + "..."


@attrs.define(eq=False)
class Patience:
    """How long to keep calling a lost server, and where to say so."""

    address: str
    reconnect_s: float
    err: TextIO
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep
    role: str = "temporal"
    """Who speaks on stderr (``temporal``: the run or attach command; ``foldline worker``)."""
    flag: str = "--reconnect-for"
    """The option that set the bound (named when it is passed)."""

    async def call(self, what: str, make: Callable[[], Awaitable[T]]) -> T:
        """``await make()``; while the server cannot be reached, make it again with backoff, up to the bound."""
        lost_at: float | None = None
        delay = FIRST_DELAY_S
        while True:
            try:
                result = await make()
            except Exception as exc:
                if not is_transport_error(exc):
                    raise
                now = self.clock()
                if lost_at is None:
                    lost_at = now
                    print(
                        f"{self.role}: lost the server at {self.address} while {what} ({first_line(exc)}); "
                        f"reconnecting for up to {self.reconnect_s:g} s",
                        file=self.err,
                        flush=True,
                    )
                if now - lost_at >= self.reconnect_s:
                    raise ServerLost(
                        f"--temporal {self.address}: no answer for {now - lost_at:.0f} s while {what} "
                        f"({self.flag} {self.reconnect_s:g}): {first_line(exc)}"
                    ) from None
                await self.sleep(delay)
                delay = min(delay * 2, MAX_DELAY_S)
                continue
            if lost_at is not None:
                print(f"{self.role}: reconnected to {self.address} after {self.clock() - lost_at:.1f} s", file=self.err)
            return result


async def connect_or_wait(
    connect: Callable[[], Awaitable[Any]], address: str, wait_s: float, err: TextIO, *, role: str
) -> Any:
    """Connect; with no server there, wait up to ``wait_s`` seconds (0: not at all) and raise ServerUnreachable."""
    deadline = time.monotonic() + wait_s
    said = False
    delay = FIRST_DELAY_S
    while True:
        try:
            return await connect()
        except Exception as exc:
            if not is_transport_error(exc):
                raise
            if time.monotonic() >= deadline:
                waited = f" within {wait_s:g} s" if wait_s > 0 else ""
                raise ServerUnreachable(
                    f"--temporal {address}: no Temporal server answers there{waited} ({first_line(exc)})"
                ) from None
            if not said:
                print(f"{role}: waiting up to {wait_s:g} s for a Temporal server at {address}", file=err, flush=True)
                said = True
            await anyio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, MAX_DELAY_S)
