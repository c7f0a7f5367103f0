"""The simulator's admin routes, under ``/_foldline/`` (a path no Anthropic client uses).

- ``GET /_foldline/clock`` -> ``{"clock": "virtual" | "wall", "now": SECONDS}``.
- ``POST /_foldline/clock/advance`` with ``{"seconds": S}`` (a finite number
  >= 0) moves a virtual clock forward by S and answers as ``GET`` does. On a
  wall clock it is a 400 that says to start ``foldline sim --clock virtual``.

Cache lifetimes, ``readable_at`` and the request log all read this clock, so
advancing it by 301 seconds expires every 5-minute entry at once.
"""

from __future__ import annotations

import json
import math
from typing import Any

import attrs

from runtime.sim.clock import ManualClock
from runtime.sim.errors import SimAPIError, invalid_request
from runtime.sim.http import HttpRequest

ADMIN_PREFIX = "/_foldline/"
CLOCK_PATH = "/_foldline/clock"
ADVANCE_PATH = "/_foldline/clock/advance"
LAST_TIME = 253_402_300_800.0
"""The first second of the year 10000 (UTC): a virtual clock stays before it, so every timestamp it gives is a date."""


@attrs.define(eq=False)
class Admin:
    """Answers the admin routes; ``clock`` is the virtual clock to move, None on the wall clock."""

    clock: ManualClock | None = None

    def answer(self, request: HttpRequest, now: float) -> dict[str, Any]:
        """The JSON body of an admin request's 200; a :class:`SimAPIError` otherwise."""
        kind = "wall" if self.clock is None else "virtual"
        if request.path == CLOCK_PATH and request.method == "GET":
            return {"clock": kind, "now": now}
        if request.path == ADVANCE_PATH and request.method == "POST":
            if self.clock is None:
                raise invalid_request(
                    "this simulator runs on the wall clock; start it with `foldline sim --clock virtual` to advance time"
                )
            seconds = _seconds(request.body)
            if self.clock.now + seconds >= LAST_TIME:
                raise invalid_request(
                    f"seconds: {seconds!r} would move the clock from {self.clock.now!r} past the year 9999 "
                    f"(the last time a timestamp can name, {LAST_TIME:g} s)"
                )
            return {"clock": kind, "now": self.clock.advance(seconds)}
        raise SimAPIError(404, "not_found_error", f"Not found: {request.method} {request.path}")


def _seconds(body: bytes) -> float:
    try:
        value = json.loads(body or b"null")
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise invalid_request(f"request body: not valid JSON ({exc})") from exc
    seconds = value.get("seconds") if isinstance(value, dict) else None
    if isinstance(value, dict) and (extra := sorted(set(value) - {"seconds"})):
        raise invalid_request(f'{extra[0]}: Extra inputs are not permitted (the body is {{"seconds": S}})')
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
        raise invalid_request(
            f'seconds: expected a finite number >= 0, got {seconds!r} (a body like {{"seconds": 301}})'
        )
    return float(seconds)
