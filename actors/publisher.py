"""Publishing one branch's events: the branch and node they belong to, filled in once."""

from __future__ import annotations

from typing import Any

import attrs

from runtime.contract.progress import ReplyProgress
from signals.bus import SignalBus
from signals.events import ReplyDelta


@attrs.frozen
class Publisher:
    """Publishes events of one branch (and the node running on it) on the run's bus."""

    bus: SignalBus = attrs.field(eq=False)
    branch_id: str
    node_id: str | None

    async def __call__(self, event: Any, request_id: str | None = None) -> None:
        await self.bus.publish(event, branch_id=self.branch_id, node_id=self.node_id, request_id=request_id)

    def reply_progress(self, request_id: str, attempt: int) -> ReplyProgress:
        """The progress hook of one send attempt: each streamed piece as a low-priority ``ReplyDelta``.

        A piece costs one attribute check while no subscription takes deltas;
        the bus never waits for one that does (:meth:`SignalBus.publish_progress`).
        """
        bus, branch_id, node_id = self.bus, self.branch_id, self.node_id
        index = 0

        def hook(kind: str, text: str) -> None:
            nonlocal index
            if bus.wants_progress:
                delta = ReplyDelta(kind=kind, text=text, attempt=attempt, index=index)
                bus.publish_progress(delta, branch_id=branch_id, node_id=node_id, request_id=request_id)
            index += 1

        return hook
