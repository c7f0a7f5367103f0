"""A manual clock for the simulator: virtual time that moves only when told.

The simulated server reads time through a ``clock()`` callable and waits
through a ``sleep(seconds)`` coroutine function, both injected. Tests and
scenarios that want virtual time pass a :class:`ManualClock` as the clock and
its :meth:`ManualClock.sleep` as the sleep, so cache TTLs, latency and slow
replies cost no wall time. ``foldline run`` passes a real clock instead.
"""

from __future__ import annotations

import math

import anyio
import attrs


@attrs.define(eq=False)
class ManualClock:
    """Seconds of virtual time; call it to read, :meth:`advance` to move it forward."""

    now: float = 0.0

    def __attrs_post_init__(self) -> None:
        self._check("now", self.now)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        """Move time forward by ``seconds`` (>= 0) and return the new time."""
        self._check("seconds", seconds)
        self.now += float(seconds)
        return self.now

    async def sleep(self, seconds: float) -> None:
        """A virtual sleep: advances the clock by ``seconds`` and yields to the event loop once."""
        self.advance(seconds)
        await anyio.lowlevel.checkpoint()

    @staticmethod
    def _check(name: str, value: float) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ValueError(f"ManualClock: {name} {value!r} is not a finite number >= 0")


async def frozen_sleep(seconds: float) -> None:
    """A sleep for a clock that moves only when told: waits no wall time and moves no virtual time.

    ``foldline sim --clock virtual`` waits on it, so latency and slow faults
    cost nothing while a request's writes still become readable only at
    start + latency (two identical requests at one instant both pay the write).
    """
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"frozen_sleep: {seconds!r} is not a finite number >= 0")
    await anyio.lowlevel.checkpoint()
