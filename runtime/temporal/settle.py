"""Temporal operations awaited inside a workflow whose tasks anyio may cancel.

The SDK answers a cancelled wait on one of its operations (an activity, a
local activity, a child workflow's start, a signal to another workflow) by
adding a cancel command and waiting on. anyio's cancel scope cancels the
tasks inside it again on every turn of the event loop until they are gone,
so each turn adds another command and the workflow task never yields:
Temporal's deadlock detector fails it (and retries it, with the same end).
That is what a flow's failing body did to its event pump's write.

- :func:`settled` awaits an operation's handle: cancelled, it asks Temporal
  to cancel the operation once and waits, shielded, for it to end;
- :func:`shielded` awaits an operation that ends at the next workflow task
  anyway (a child workflow's start, a signal): the cancellation comes after it.

Only called from inside a workflow; asyncio only, as every Temporal workflow.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

import anyio
from temporalio import workflow

T = TypeVar("T")


async def settled(handle: Any) -> Any:
    """The result of a started operation's handle (an activity's); cancelled, the operation is cancelled once,
    then this waits for its end (shielded) and raises the cancellation."""
    try:
        await workflow.wait_condition(handle.done)
    except anyio.get_cancelled_exc_class():
        handle.cancel()
        with anyio.CancelScope(shield=True):
            await workflow.wait_condition(handle.done)
        raise
    return handle.result()


async def shielded(operation: Awaitable[T]) -> T:
    """Await a quick operation (it ends at the next workflow task) out of reach of anyio's cancellation."""
    with anyio.CancelScope(shield=True):
        result = await operation
    return result
