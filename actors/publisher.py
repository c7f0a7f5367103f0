"""Publishing one branch's events: the branch and node they belong to, filled in once."""

from __future__ import annotations

from typing import Any

import attrs

from signals.bus import SignalBus


@attrs.frozen
class Publisher:
    """Publishes events of one branch (and the node running on it) on the run's bus."""

    bus: SignalBus = attrs.field(eq=False)
    branch_id: str
    node_id: str | None

    async def __call__(self, event: Any, request_id: str | None = None) -> None:
        await self.bus.publish(event, branch_id=self.branch_id, node_id=self.node_id, request_id=request_id)
