"""foldline's actors: the thin anyio shells that run the pure core's decisions (DESIGN.md).

- :mod:`actors.record`: :class:`Record`, a branch's append-only record (O(1) fork).
- :mod:`actors.branch`: :class:`Branch`, the actor (record, view, lock, cache
  ledger, context state), and :class:`Turn`, the only handle that changes it.
- :mod:`actors.send`: the send step: compile, measure, decide, fold when due,
  place marks, send, take the reply in.
- :mod:`actors.folding`: driving the pure fold planner from the send step.
- :mod:`actors.cache_step`: cache marks before a send, cache evidence after it.
- :mod:`actors.operations`: the bounded and iterative operation loops.
- :mod:`actors.tools`: tools, the tool registry and the built-in tools.
- :mod:`actors.env`: :class:`RunEnv`, what a run hands every branch (provider,
  signals, clock, pricing).

The names below are loaded on first use, so ``import actors`` stays cheap::

    from actors import Branch, Turn, ToolRegistry
"""

from __future__ import annotations

from runtime.values.exports import lazy_getattr

_EXPORTS = {
    "Branch": "actors.branch",
    "BranchBusy": "actors.branch",
    "BranchJournal": "actors.branch",
    "ContextState": "actors.branch",
    "RequestRecord": "actors.branch",
    "Turn": "actors.branch",
    "Conversation": "actors.conversation",
    "Record": "actors.record",
    "RunEnv": "actors.env",
    "BUILTIN_TOOLS": "actors.tools",
    "Tool": "actors.tools",
    "ToolContext": "actors.tools",
    "ToolFailed": "actors.tools",
    "ToolRegistry": "actors.tools",
    "run_operation": "actors.operations",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_getattr(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
