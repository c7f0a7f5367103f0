"""Requests in flight on one provider: a bound every sender through it shares.

A flow may run a thousand nodes at once (``run.concurrency``, the scheduler's
bound on nodes), but a provider that speaks HTTP pays for every request it has
out: the SDK's connection pool scans its connections at every request's start
and end, and each open connection holds buffers on both sides. So an
HTTP provider holds one :class:`InFlight` and every message it sends (a
turn's attempt, a fold summary's side request, from any node of any flow or
from a Temporal activity) takes a slot of it for as long as the request is
out. Count-tokens calls take slots of a small bound of their own
(:data:`COUNTS_IN_FLIGHT`): a send waits for its count (with a timeout), so a
count must never queue behind long generations. The SDK's pool is sized to
both together, so a request never waits for a connection it could not have.

The bound is the provider's ``max_in_flight`` setting (``[provider]
max_in_flight``), :data:`DEFAULT_MAX_IN_FLIGHT` when unset; nodes at once
stay the flow's own setting, distinct from it.
"""

from __future__ import annotations

from types import TracebackType

import anyio
import attrs

from runtime.config.checks import check_int
from runtime.inputs.bounds import MAX_IN_FLIGHT

DEFAULT_MAX_IN_FLIGHT = 64
"""Requests out at once per provider when the scenario does not say (at 64 instead of 1,024 the
scale run's CPU per request over HTTP fell by a quarter: ``scripts/scale.py``)."""


COUNTS_IN_FLIGHT = 8
"""Count-tokens calls out at once per provider (their own slots and connections, beside the messages')."""


def in_flight_limit(setting: int | None) -> int:
    """The bound a provider's ``max_in_flight`` setting asks for (None: the default)."""
    return DEFAULT_MAX_IN_FLIGHT if setting is None else setting


@attrs.define(eq=False)
class InFlight:
    """At most ``limit`` requests out at once: ``async with in_flight:`` around each one.

    Not tied to a task (a semaphore, not a capacity limiter): a slot is taken
    and given back by whatever sends, and one task may hold several.
    """

    limit: int
    _slots: anyio.Semaphore = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        check_int(self.limit, "InFlight.limit", minimum=1, maximum=MAX_IN_FLIGHT, expected="a positive integer")
        self._slots = anyio.Semaphore(self.limit, max_value=self.limit)

    @property
    def out(self) -> int:
        """Requests out now."""
        return self.limit - self._slots.value

    async def __aenter__(self) -> None:
        await self._slots.acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._slots.release()
