"""One operation's turn on its branch: instructions in, requests out, tools run.

This is the thin shell around the pure core. :class:`TurnDriver` is one
operation's handle on its branch for one turn. It puts together what the turn
needs from the profile and the run: the request shape
(:mod:`actors.shape`), the folding when one is installed
(:mod:`actors.folding`), and the send pipeline (:mod:`actors.pipeline`), which
compiles, measures, folds, decides, places marks, sends one attempt at a
time, takes the reply in and records it. The driver appends the operation's
instructions (with the size notice at or past the notice line) and runs a
round's tool calls, the model's ``context`` tool against the branch. The
operation loops that drive it (bounded and iterative) are in
:mod:`actors.operations`, the operation values in :mod:`runtime.operation`.

A refusal is sticky on the branch: once refused, every later send on it raises
the same refusal until the caller clears it.

Folding (DESIGN.md section 5). An iterative operation whose profile has
``context_management = true`` and a resolved ceiling has a fold installed: the
pipeline folds before each main send while the request is due, lands each
fold in one batch, and resumes a refusal a fold cleared, at most twice per
turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import attrs

from actors.branch import Branch, Turn
from actors.env import RunEnv
from actors.folding import Folding, context_call
from actors.images import ImageOutput
from actors.pipeline import SendPipeline, TurnProgress
from actors.publisher import Publisher
from actors.shape import RequestShape, offered_tools
from actors.tools import ToolContext, ToolFailed
from runtime.ceiling import ResolvedCeiling, decide, notice_line
from runtime.compiler import Intent
from runtime.config import Profile
from runtime.errors import FoldlineError
from runtime.fold.context_tool import CONTEXT_TOOL_NAME
from runtime.fold.settings import FoldSettings, fold_settings
from runtime.messages import AssistantResponse, Instruction, ToolCall, ToolResult
from runtime.operation import Operation

Spawn = Callable[[str], Awaitable[str]]


def installed_fold(
    profile: Profile, ceiling: ResolvedCeiling, operation: Operation, *, caching: bool
) -> FoldSettings | None:
    """The fold installed for an operation: an iterative one's, by its profile and ceiling (else None).

    A bounded operation is never folded (refused as before).
    """
    if operation.kind != "iterative":
        return None
    return fold_settings(
        context_management=profile.context_management,
        ceiling=ceiling.ceiling,
        fold_at=profile.context_fold_at,
        target=profile.context_fold_target,
        tail_margin=profile.context_fold_tail_margin,
        result_bound=profile.tool_result_max_chars,
        caching=caching,
        scheduling=profile.fold_scheduling,
        strategy=profile.context_strategy,
    )


@attrs.define(eq=False)
class TurnDriver:
    """Runs one operation inside one turn (an identity object, lives for the turn)."""

    turn: Turn
    env: RunEnv
    profile: Profile
    operation: Operation
    node_id: str | None
    spawn: Spawn | None
    ceiling: ResolvedCeiling
    progress: TurnProgress = attrs.field(factory=TurnProgress)
    fold: FoldSettings | None = attrs.field(init=False)
    shape: RequestShape = attrs.field(init=False)
    pipeline: SendPipeline = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        env, profile, branch = self.env, self.profile, self.turn.branch
        caching = bool(env.provider.caches_by_prefix and profile.prompt_caching)
        self.fold = installed_fold(profile, self.ceiling, self.operation, caching=caching)
        self.shape = RequestShape(
            branch=branch,
            tools=offered_tools(branch, profile),
            model=env.model_name(profile),
            max_tokens=profile.max_tokens,
            result_bound=profile.tool_result_max_chars,
            counter=env.counter,
            thinking_json=profile.thinking,
        )
        publish = Publisher(env.bus, branch.id, self.node_id)
        folding = None
        if self.fold is not None:
            folding = Folding(self.turn, self.fold, self.ceiling, self.shape, publish, env.clock)
        self.pipeline = SendPipeline(
            self.turn, env, self.shape, self.ceiling, publish, folding, caching, self.node_id, self.progress
        )

    @property
    def branch(self) -> Branch:
        return self.turn.branch

    async def append_instruction(self, text: str, intent: Intent) -> None:
        """Append a user turn; at or past the notice line it carries the size notice."""
        instruction = Instruction(text)
        ceiling = self.ceiling.ceiling
        if ceiling is not None:
            m = self.shape.measure(self.shape.compile(self.branch.view() + (instruction,), intent))
            if decide(m, self.ceiling, can_fold=False).action == "notice":
                instruction = Instruction(text, notice=notice_line(m, ceiling))
        with self.turn.batch():
            self.turn.append(instruction)
            self.progress.appended += 1
            self.turn.open_turn(self.progress.appended, self.progress.completed)

    async def send(self, intent: Intent) -> AssistantResponse:
        """Send the branch's view as one request (see :mod:`actors.pipeline`); return the response appended."""
        return await self.pipeline.send(intent)

    async def run_tools(self, calls: Sequence[ToolCall]) -> None:
        """Run a round's calls in order and append their results.

        If a tool raises, or the turn is cancelled, every call of the round
        still gets a result (an error result) before the error propagates, so
        the view never holds an orphaned call. Calls of the context tool run
        here, against the branch.
        """
        known = {t.name for t in self.shape.tools}
        done = 0
        try:
            for call in calls:
                self.turn.append(await self._run_one(call, known))
                done += 1
        except BaseException as exc:
            # No checkpoint below: the error results land even while the turn is being cancelled.
            for call in calls[done:]:
                text = f"not run: {type(exc).__name__}: {exc}" if isinstance(exc, Exception) else "not run: cancelled"
                self.turn.append(ToolResult.for_call(call, text, is_error=True))
            if isinstance(exc, Exception) and not isinstance(exc, FoldlineError):
                raise ToolFailed(f"tool {calls[done].name!r} raised {type(exc).__name__}: {exc}") from exc
            raise

    async def _run_one(self, call: ToolCall, known: set[str]) -> ToolResult:
        if call.name not in known:
            return ToolResult.for_call(
                call, f"unknown tool {call.name!r}; available: {', '.join(sorted(known))}", is_error=True
            )
        if call.name == CONTEXT_TOOL_NAME and self.shape.offers_context_tool:
            return context_call(
                self.turn, call, settings=self.fold, shape=self.shape, completed=self.progress.completed
            )
        tool = self.env.registry.get(call.name)
        context = ToolContext(node_id=self.node_id, branch_id=self.branch.id, spawn=self.spawn)
        output = await tool.func(call.arguments, context)
        if isinstance(output, ImageOutput):
            return ToolResult.for_call(call, output.text, images=output.images)
        return ToolResult.for_call(call, output)
