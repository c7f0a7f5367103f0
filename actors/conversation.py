"""A branch you can talk to.

::

    async with Runtime(provider=provider) as rt:
        branch = rt.branch(Profile(system="...", tools=[my_tool]))
        reply = await branch.chat("Say hello.")          # one bounded request
        answer = await branch.run("Use the tool.", max_rounds=8)   # the tool loop
        child = branch.fork()                            # a clone of the view, on its own

A :class:`Conversation` wraps one :class:`~actors.branch.Branch` and runs each
call as an operation through :func:`actors.operations.run_operation`, the same
entry the flow scheduler uses, so a conversation gets the same ceiling,
folding, cache placement, tool execution and events as a flow's node. Each
operation is announced like a node's (``NodeStarted``, then ``NodeFinished``
or ``NodeFailed``) under the conversation's ``name``, which is also the node
id the provider sees (a scripted policy of that name answers it). A flow may
wrap a conversation's branch: ``Node(..., branch=conversation.branch)``.

``fork()`` clones the view (shared messages, O(view length)) into a new
conversation that lives on its own: its own turns, refusal state and cache
ledger. A branch is forked between its turns, never during one.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any, Protocol

import anyio
import anyio.lowlevel
import attrs

from actors.branch import Branch
from actors.env import RunEnv
from actors.inherit import inherit_view
from actors.operations import run_operation
from actors.shape import offered_tools
from actors.tools import ToolRegistry
from runtime.config.operation import Operation, OperationResult
from runtime.config.profile import Profile
from runtime.decision.ceiling import CeilingPolicy
from runtime.errors import FoldlineError
from signals.bus import SignalBus
from signals.events import NodeFailed, NodeFinished, NodeStarted


class ConversationHost(Protocol):
    """What a conversation needs of its runtime (:class:`runtime.runtime.Runtime` is one)."""

    @property
    def registry(self) -> ToolRegistry: ...

    @property
    def signals(self) -> SignalBus: ...

    def env(self) -> RunEnv: ...


DEFAULT_MAX_ROUNDS = 20
REPORT_HANDLER = "report"
"""The name under which :class:`runtime.runtime.Runtime` feeds its report from the bus."""

_counters: weakref.WeakKeyDictionary[ConversationHost, itertools.count[int]] = weakref.WeakKeyDictionary()


class BranchInTurn(FoldlineError):
    """A branch was forked while one of its turns was running."""


def _next_name(runtime: ConversationHost) -> str:
    counter = _counters.setdefault(runtime, itertools.count(1))
    return f"branch-{next(counter)}"


@attrs.define(eq=False)
class Conversation:
    """One branch of a runtime you talk to (see the module doc)."""

    runtime: ConversationHost
    profile: Profile
    branch: Branch
    name: str
    last: OperationResult | None = None
    """The result of the last operation (answer, rounds, requests, usage)."""
    _forks: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1), init=False)

    @classmethod
    def open(cls, runtime: ConversationHost, profile: Profile, *, name: str | None = None) -> Conversation:
        """A new conversation on a fresh branch set up from ``profile`` (system text and tools)."""
        registry = runtime.registry
        branch = Branch.create(system=profile.system, tools=registry.specs(profile.tools))
        return cls(runtime, profile, cls._attached(runtime, branch), name or _next_name(runtime))

    @staticmethod
    def _attached(runtime: ConversationHost, branch: Branch) -> Branch:
        journal = runtime.env().journal
        if journal is not None:
            branch.attach_journal(journal)
        return branch

    async def chat(self, text: str, *, max_input_tokens: CeilingPolicy = None, output: Any = None) -> Any:
        """Send one bounded request with ``text`` and return the model's answer.

        A bounded request runs no tools: a reply with tool calls fails it (use
        :meth:`run` for the tool loop). Over the ceiling it is refused, never folded.
        With ``output`` (a pydantic model class or a JSON schema) the answer is
        validated, corrected once if needed, and its typed value returned.
        """
        operation = Operation("bounded", (text,), max_input_tokens=max_input_tokens, output=output)
        result = await self._operate(operation)
        return result.answer if output is None else result.value

    async def run(
        self,
        text: str,
        *,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        max_input_tokens: CeilingPolicy = None,
        output: Any = None,
    ) -> Any:
        """Run the tool loop on ``text`` until the model answers (at most ``max_rounds`` requests).

        With ``output`` the answer's typed value is returned (as :meth:`chat`).
        """
        operation = Operation(
            "iterative", (text,), max_rounds=max_rounds, max_input_tokens=max_input_tokens, output=output
        )
        result = await self._operate(operation)
        return result.answer if output is None else result.value

    def fork(self, *, name: str | None = None, profile: Profile | None = None) -> Conversation:
        """A new conversation starting from a clone of this one's view; ``profile`` may set it up anew
        (by default keeping this branch's cached prefix, its setup as an instruction: :mod:`actors.inherit`)."""
        if self.branch.busy:
            raise BranchInTurn(f"{self.name}: a branch is forked between its turns, not during one")
        if profile is None:
            clone = self.branch.clone(cache=True)  # the same stable segment: what this branch cached is the clone's too
        else:
            registry = self.runtime.registry
            clone = inherit_view(
                self.branch,
                profile,
                listed=offered_tools(self.branch, self.profile),
                system=profile.system,
                tools=registry.specs(profile.tools),
            )
        child_name = name or f"{self.name}.fork-{next(self._forks)}"
        return Conversation(self.runtime, profile or self.profile, self._attached(self.runtime, clone), child_name)

    async def _operate(self, operation: Operation) -> OperationResult:
        bus = self.runtime.signals
        await bus.publish(NodeStarted(operation=operation.kind), node_id=self.name, branch_id=self.branch.id)
        try:
            result = await run_operation(
                self.branch, operation, env=self.runtime.env(), profile=self.profile, node_id=self.name
            )
        except Exception as exc:
            failed = NodeFailed(error_type=type(exc).__name__, message=str(exc) or type(exc).__name__)
            await bus.publish(failed, node_id=self.name, branch_id=self.branch.id)
            await _report_settled(self.runtime)
            raise
        await bus.publish(
            NodeFinished(rounds=result.rounds, answer_chars=len(result.answer)),
            node_id=self.name,
            branch_id=self.branch.id,
        )
        self.last = result
        await _report_settled(self.runtime)
        return result


async def _report_settled(runtime: ConversationHost) -> None:
    """Wait until the runtime's report handler has taken every event published so far,
    so ``rt.report()`` right after a call counts it (the handler is synchronous: an event
    it has read is folded in before it reads the next)."""
    while True:
        stats = runtime.signals.statistics().get(REPORT_HANDLER)
        if stats is None or stats.closed or stats.buffered == 0:
            return
        await anyio.lowlevel.checkpoint()
