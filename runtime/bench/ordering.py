"""Sending concurrent nodes' requests in one order, every run (for the benchmark).

Nodes of a flow run concurrently, and over HTTP the order in which their
requests reach the simulated server follows the timing of the replies before
them. The server's prompt cache is shared, so that order decides who writes an
entry and who reads it: two runs of one workload could report different cache
figures. :class:`OrderedSends` wraps the provider a benchmark run uses and
makes the order a function of the flow alone: one request at a time, and the
next one chosen only once every task of the run is waiting on something (no
reply in flight, nothing left to compute): of the waiting requests, the one
whose node has sent the fewest so far, then the smallest node id. Concurrent
nodes so take turns, as they would if their replies took equal time.
"""

from __future__ import annotations

import anyio
import anyio.lowlevel
import attrs

from runtime.contract.provider import Provider, ProviderReply, image_rule_of
from runtime.request.compiler import Request
from runtime.values.image_rules import ImageRule

_SETTLE_CHECKPOINTS = 64


@attrs.define(eq=False)
class OrderedSends:
    """A provider that passes requests to ``inner`` one at a time, in node order at each quiet point."""

    inner: Provider
    _waiting: set[tuple[int, str]] = attrs.field(init=False, factory=set)
    _sent: dict[str, int] = attrs.field(init=False, factory=dict)
    _in_flight: bool = attrs.field(init=False, default=False)
    _changed: anyio.Event = attrs.field(init=False, factory=anyio.Event)

    name: str = attrs.field(init=False)
    caches_by_prefix: bool = attrs.field(init=False)
    max_retries: int = attrs.field(init=False)
    counts_tokens: bool = attrs.field(init=False)
    image_rule: ImageRule = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.name = self.inner.name
        self.caches_by_prefix = self.inner.caches_by_prefix
        self.max_retries = self.inner.max_retries
        self.counts_tokens = self.inner.counts_tokens
        self.image_rule = image_rule_of(self.inner)

    async def count_tokens(self, request: Request) -> int:
        """Counting changes nothing the order protects: passed straight on."""
        return await self.inner.count_tokens(request)

    async def send(self, request: Request, *, node_id: str | None) -> ProviderReply:
        node = node_id or ""
        # The node's turn number, taken now: a node may send again (a summary) before an earlier send is done.
        key = (self._sent.get(node, 0), node)
        self._sent[node] = key[0] + 1
        self._waiting.add(key)
        try:
            await self._turn(key)
        finally:
            self._waiting.discard(key)
        try:
            return await self.inner.send(request, node_id=node_id)
        finally:
            self._in_flight = False
            self._notify()

    async def _turn(self, key: tuple[int, str]) -> None:
        while True:
            if not self._in_flight and min(self._waiting) == key:
                # Let every ready task run on first: the quiet-point check then
                # usually passes at once instead of polling on a timer.
                for _ in range(_SETTLE_CHECKPOINTS):
                    await anyio.lowlevel.checkpoint()
                await anyio.wait_all_tasks_blocked()
                if not self._in_flight and min(self._waiting) == key:
                    self._in_flight = True
                    self._notify()
                    return
                continue
            changed = self._changed
            await changed.wait()

    def _notify(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def aclose(self) -> None:
        await self.inner.aclose()
