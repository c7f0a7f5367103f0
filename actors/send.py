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
:mod:`actors.operations`, the operation values in :mod:`runtime.config.operation`.

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
from actors.exact_count import uncalibrated_prior
from actors.final_tool import final_tool
from actors.fold_context import context_call
from actors.folding import Folding
from actors.inherit import not_permitted
from actors.pipeline import SendPipeline, TurnProgress
from actors.publisher import Publisher
from actors.shape import RequestShape, offered_tools
from actors.tools import ToolContext
from actors.tools.executor import OrderedRunner, RoundTools, run_calls
from runtime.config.operation import Operation
from runtime.config.profile import Profile
from runtime.contract.provider import image_rule_of, scrubber_of
from runtime.decision.ceiling import ResolvedCeiling
from runtime.fold.context_tool import CONTEXT_TOOL_NAME
from runtime.fold.cost import CostPrices, prices_or_default
from runtime.fold.settings import FoldSettings, fold_settings
from runtime.request.compiler import Intent, ToolSpec
from runtime.values.messages import AssistantResponse, Instruction, ToolCall
from runtime.values.server_edits import context_management_json

Spawn = Callable[[str], Awaitable[str]]


def installed_fold(
    profile: Profile, ceiling: ResolvedCeiling, operation: Operation, *, caching: bool, prices: CostPrices | None = None
) -> FoldSettings | None:
    """The fold installed for an operation: an iterative one's, by its profile and ceiling (else None).

    A bounded operation is never folded (refused as before). ``prices`` are the model's
    (the cost policy's; None: the defaults of :class:`runtime.fold.cost.CostPrices`).
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
        policy=profile.fold_policy,
        prices=prices,
        tail=profile.fold_tail,
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
    final: ToolSpec | None = attrs.field(init=False)
    """The final-answer tool of a typed operation on a model without structured outputs (:mod:`actors.final_tool`)."""
    shape: RequestShape = attrs.field(init=False)
    pipeline: SendPipeline = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        env, profile, branch = self.env, self.profile, self.turn.branch
        caching = bool(env.provider.caches_by_prefix and profile.prompt_caching)
        prices = prices_or_default(env.pricing.first_tier(env.model_name(profile)))
        self.fold = installed_fold(profile, self.ceiling, self.operation, caching=caching, prices=prices)
        tools, output = offered_tools(branch, profile), self.operation.output
        self.final = final_tool(output, env.model_name(profile), tools)
        self.shape = RequestShape(
            branch=branch,
            tools=tools if self.final is None else (*tools, self.final),
            model=env.model_name(profile),
            max_tokens=profile.max_tokens,
            result_bound=profile.tool_result_max_chars,
            counter=env.counter,
            thinking_json=profile.thinking,
            context_management_json=context_management_json(profile.server_context_edits),
            output_config_json=None if output is None or self.final else output.output_config_json(),
            images=image_rule_of(env.provider),
            prior=lambda: uncalibrated_prior(env, branch, env.model_name(profile)),
        )
        publish = Publisher(env.bus, branch.id, self.node_id)
        folding = None
        if self.fold is not None:
            folding = Folding(self.turn, self.fold, self.ceiling, self.shape, publish, env.clock, self.progress)
        self.pipeline = SendPipeline(
            self.turn, env, self.shape, self.ceiling, publish, folding, caching, self.node_id, self.progress
        )

    @property
    def branch(self) -> Branch:
        return self.turn.branch

    async def append_instruction(self, text: str, intent: Intent) -> None:
        """Append a user turn; at or past the notice line it carries the size notice."""
        instruction = Instruction(text)
        self.progress.notice_note = None
        if self.ceiling.ceiling is not None:
            # Decided on the request as sent, notice included (runtime.decision.send_bounds), in the provider's
            # tokens where the calibration asks for its count (actors.exact_count).
            choice = await self.pipeline.counts.notice_choice(self.branch.view(), text, intent)
            instruction = Instruction(text, notice=choice.notice)
            self.progress.notice_note = choice.reason if choice.action == "omit" else None
        with self.turn.batch():
            self.turn.append(instruction)
            self.progress.appended += 1
            self.turn.open_turn(self.progress.appended, self.progress.completed)

    async def send(self, intent: Intent) -> AssistantResponse:
        """Send the branch's view as one request (see :mod:`actors.pipeline`); return the response appended."""
        return await self.pipeline.send(intent)

    def round_tools(self) -> RoundTools:
        """What this turn's tool calls may use: the offered tools, the context tool, how failures go."""
        # Listed but not this profile's (an inherited setup keeps its emitter's tools listed: actors.inherit).
        offered = frozenset(t.name for t in self.shape.tools) - not_permitted(self.branch, self.profile)
        registry = self.env.registry.resolve(self.profile.tools)
        branch_tools: dict[str, OrderedRunner] = {}
        if CONTEXT_TOOL_NAME in offered:
            branch_tools[CONTEXT_TOOL_NAME] = lambda call: context_call(
                self.turn, call, settings=self.fold, shape=self.shape, completed=self.progress.completed
            )
        return RoundTools(
            offered=offered,
            tools={name: registry.tools[name] for name in offered if name in registry.tools},
            context=ToolContext(
                node_id=self.node_id,
                branch_id=self.branch.id,
                spawn=self.spawn,
                image_rule=image_rule_of(self.env.provider),
                scrub=scrubber_of(self.env.provider),
            ),
            tool_errors=self.profile.tool_errors,
            max_concurrent=registry.max_concurrent,
            branch_tools=branch_tools,
            publish=self.pipeline.publish,
        )

    async def run_tools(self, calls: Sequence[ToolCall]) -> None:
        """Run a round's calls (concurrently, under the registry's limit) and append their results in call order.

        Every call gets a result, even when a tool fails the node or the turn is
        cancelled (:mod:`actors.tools.executor`), so the view never holds an
        orphaned call.
        """
        await run_calls(calls, self.round_tools(), self.turn.append)
