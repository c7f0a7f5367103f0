"""The send step: how one request of an operation is prepared, sent and taken in.

This is the thin shell around the pure core. For every request it compiles
the branch's view (:mod:`runtime.compiler`), measures it
(:mod:`runtime.measure`), decides against the ceiling (:mod:`runtime.ceiling`),
places cache marks when both gates are on (:mod:`runtime.cache`), and only
then lets the provider send it; it publishes what it decided and feeds the
response back into the branch (calibration, delivery, cache ledger, record).

:class:`TurnDriver` is one operation's handle on its branch for one turn; the
operation loops that drive it (bounded and iterative) are in
:mod:`actors.operations`, the operation values in :mod:`runtime.operation`.

A refusal is sticky on the branch: once refused, every later send on it raises
the same refusal until the caller clears it.

Folding (DESIGN.md section 5). An iterative operation whose profile has
``context_management = true`` and a resolved ceiling has a fold installed.
Before each send the request is measured; at or past the fold line (or over
the ceiling, or, under immediate scheduling, before every request once a
first fold has landed) the pure
planner (:mod:`runtime.fold.planner`) decides the passes, this shell sends the
``side`` summary requests it asks for, and lands the result in one
``turn.batch()``: the new notes and copies into the record, the new view, the
pending marks, and the rewrite cause that explains the next request's
CacheRewrite. A refusal the fold clears resumes the turn, at most twice per
turn. The model's ``context`` tool calls are run here too, against the
branch (:mod:`runtime.fold.context_tool`). The folding half of the driver
lives in :mod:`actors.folding`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

import anyio
import attrs
import structlog

from actors.branch import Branch, RequestRecord, Turn
from runtime.cache import Placement, ReadVerdict
from actors.cache_step import (
    CachePlan,
    cache_summary,
    mark_json,
    plan_cache,
    read_verdict,
    record_cache_outcome,
)
from runtime.calibration import Calibration
from runtime.canonical import sha256_hex
from runtime.ceiling import ResolvedCeiling, decide
from runtime.compiler import Request, RequestSettings, ToolSpec, compile_request
from runtime.config import Profile
from actors.env import RunEnv
from runtime.errors import FoldlineError, InputCeilingExceeded
from runtime.fold.context_tool import CONTEXT_TOOL, CONTEXT_TOOL_NAME
from runtime.fold.measurer import ViewMeasurer
from runtime.fold.projection import BoundProjection, request_projection
from runtime.fold.settings import FoldSettings, fold_settings
from actors.folding import FoldDriving, FoldRun
from runtime.measure import Measurement, measure
from runtime.send_bounds import choose_notice
from runtime.messages import (
    AssistantResponse,
    Instruction,
    Message,
    ToolCall,
    ToolResult,
)
from runtime.operation import Operation
from runtime.providers.base import ProviderReply
from actors.tools import ToolArgumentError, ToolContext, ToolFailed
from runtime.usage import Usage
from signals.events import (
    CacheRewrite,
    ContextDecision,
    RequestSent,
    ResponseReceived,
)

log = structlog.get_logger("foldline.engine")

METHOD = "o200k_base x scale"




Spawn = Callable[[str], Awaitable[str]]


@attrs.define(eq=False)
class TurnDriver(FoldDriving):
    """Runs one operation inside one turn (an identity object, lives for the turn)."""

    turn: Turn
    env: RunEnv
    profile: Profile
    operation: Operation
    node_id: str | None
    spawn: Spawn | None
    ceiling: ResolvedCeiling
    requests: int = 0
    usage: Usage = attrs.field(factory=Usage)
    appended: int = 0
    """Instructions of this operation appended so far (resume state)."""
    completed: int = 0
    """Requests of this operation completed so far (resume state)."""
    resumes: int = 0
    """Refusals a fold cleared in this turn."""
    summaries: int = 0
    previous_placement: Placement | None = None
    notice_note: str | None = None
    """Why the last appended turn goes without the notice (issue 11), for the next decision's reason."""
    fold: FoldSettings | None = attrs.field(init=False)
    tools: tuple[ToolSpec, ...] = attrs.field(init=False)
    caching: bool = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        profile = self.profile
        self.caching = bool(self.env.provider.caches_by_prefix and profile.prompt_caching)
        installed = fold_settings(
            context_management=profile.context_management,
            ceiling=self.ceiling.ceiling,
            fold_at=profile.context_fold_at,
            target=profile.context_fold_target,
            tail_margin=profile.context_fold_tail_margin,
            result_bound=profile.tool_result_max_chars,
            caching=self.caching,
            scheduling=profile.fold_scheduling,
            strategy=profile.context_strategy,
        )
        # A bounded operation is never folded (refused as before); the tool set
        # still follows the profile alone, so the stable segment does not move.
        self.fold = installed if self.operation.kind == "iterative" else None
        tools = self.branch.tools
        offers = profile.context_management and profile.context_strategy == "fold"
        if offers and all(t.name != CONTEXT_TOOL_NAME for t in tools):
            tools = tools + (CONTEXT_TOOL,)
        self.tools = tools

    @property
    def branch(self) -> Branch:
        return self.turn.branch

    @property
    def offers_context_tool(self) -> bool:
        return any(t is CONTEXT_TOOL for t in self.tools)

    # -- compile and measure ----------------------------------------------------------

    def settings(self, intent: str) -> RequestSettings:
        model = self.profile.model or self.env.model.name
        return RequestSettings(model=model, max_tokens=self.profile.max_tokens, intent=intent)  # type: ignore[arg-type]

    def projection(self) -> BoundProjection | None:
        """The result bound's projection (None when nothing is bounded).

        An included protected round keeps the bound it was decided under.
        """
        return request_projection(self.branch, self.profile.tool_result_max_chars, self.branch.state.protected_round)

    def compile(self, view: Sequence[Message], intent: str) -> Request:
        branch = self.branch
        return compile_request(
            system=branch.system,
            tools=self.tools,
            view=view,
            settings=self.settings(intent),
            projection=self.projection(),
        )

    def measure(self, request: Request) -> Measurement:
        return measure(request.pieces(), self.env.counter, self.branch.scale)

    def measurer(self, intent: str) -> ViewMeasurer:
        branch = self.branch
        return ViewMeasurer(
            branch.system, self.tools, self.settings(intent), self.env.counter, branch.scale, self.projection()
        )

    # -- events -----------------------------------------------------------------------

    async def publish(self, event: Any, request_id: str | None = None) -> None:
        await self.env.bus.publish(event, branch_id=self.branch.id, node_id=self.node_id, request_id=request_id)

    async def publish_decision(
        self,
        m: Measurement,
        action: str,
        sent: bool,
        reason: str,
        request_id: str | None,
        *,
        before: int | None = None,
        folds: FoldRun | None = None,
    ) -> None:
        c = self.ceiling
        folds = folds or FoldRun()
        await self.publish(
            ContextDecision(
                ceiling=c.ceiling,
                ceiling_source=c.source,
                tier=c.tier,
                method=METHOD,
                estimate_before=m.estimate if before is None else before,
                estimate_after=m.estimate,
                action=action,
                stages=folds.stages,
                folded_ids=folds.folded_ids,
                sent=sent,
                reason=reason,
            ),
            request_id,
        )

    # -- the turn's pieces ----------------------------------------------------------------

    async def append_instruction(self, text: str, intent: str) -> None:
        """Append a user turn; at or past the notice line it carries the size notice."""
        instruction = Instruction(text)
        self.notice_note = None
        if self.ceiling.ceiling is not None:
            # Issue 11: decided on the request as sent, notice included (runtime.send_bounds).
            view = self.branch.view()
            choice = choose_notice(
                lambda notice: self.measure(self.compile(view + (Instruction(text, notice=notice),), intent)),
                self.ceiling,
            )
            instruction = Instruction(text, notice=choice.notice)
            self.notice_note = choice.reason if choice.action == "omit" else None
        with self.turn.batch():
            self.turn.append(instruction)
            self.appended += 1
            self.turn.update_state(open_turn=(self.appended, self.completed))

    async def send(self, intent: str) -> ProviderReply:
        """Measure, fold when due, decide, place marks and send the branch's view as one request."""
        branch = self.branch
        if branch.refusal is not None:
            raise branch.refusal
        self.requests += 1
        serial = branch.state.request_serial + 1
        self.turn.update_state(request_serial=serial)
        request_id = f"{branch.id}:{serial}"
        view = branch.view()
        self._decide_first_round(view, intent, request_id)
        request = self.compile(view, intent)
        m = self.measure(request)
        before = m.estimate
        folds = FoldRun()
        if self.fold is not None:
            view, request, m, folds = await self._fold_before_send(view, request, m, intent)
        decision = decide(m, self.ceiling, can_fold=False)
        if decision.action == "refuse":
            await self._refuse(m, decision.reason, request_id, before=before, folds=folds)
        action = "fold" if folds.stages else decision.action
        reason = folds.reason(decision.reason)
        if self.notice_note is not None:
            reason, self.notice_note = f"{reason}; {self.notice_note}", None
        plan: CachePlan | None = None
        if self.caching:
            plan = plan_cache(
                request,
                branch.ledger,
                now=self.env.clock(),
                env=self.env,
                anchors=self._anchors(request, view) if intent == "continuing" else (),
                tail_skip=self._tail_skip(m) if intent == "continuing" else None,
                previous=self.previous_placement,
            )
            request = request.with_marks(plan.placement.marks)
            self.previous_placement = plan.placement
        await self._check_rewrite(request, request_id)
        attempt_start = [self.env.clock()]

        async def before_attempt(attempt: int) -> None:
            attempt_start[0] = self.env.clock()
            if attempt == 1:
                await self.publish_decision(m, action, True, reason, request_id, before=before, folds=folds)
            else:
                measured = self.measure(request)
                verdict = decide(measured, self.ceiling, can_fold=False)
                if verdict.action == "refuse":
                    await self._refuse(measured, verdict.reason, request_id)
                await self.publish_decision(measured, verdict.action, True, verdict.reason, request_id)
            await self.publish(
                RequestSent(
                    digest=request.digest,
                    bytes=len(request.payload_bytes()),
                    attempt=attempt,
                    intent=intent,
                    marks=[mark_json(mark) for mark in request.marks],
                    model=request.settings.model,
                ),
                request_id,
            )

        started = self.env.monotonic()
        reply = await self.env.provider.send(request, node_id=self.node_id, before_attempt=before_attempt)
        duration = self.env.monotonic() - started
        self.usage = self.usage + reply.usage
        # The branch takes the response first and the usage event follows with no
        # checkpoint between: a cancellation can then never leave a counted usage
        # event without the response it belongs to (a store pairs the two).
        verdict = None
        if plan is not None:
            verdict = read_verdict(plan, reply.usage, attempt_start=attempt_start[0], route=self.env.route)
        with self.turn.batch():
            self._absorb(reply, m, view, plan, attempt_start[0])
            self.completed += 1
            self.turn.update_state(open_turn=(self.appended, self.completed))
            self.turn.record_request(
                self._record_of(request, request_id, view, "sent", reply.usage, plan, verdict=verdict)
            )
        await self.publish(
            ResponseReceived(
                usage=reply.usage.to_dict(),
                stop_reason=reply.stop_reason,
                duration_s=round(duration, 6),
                cache=cache_summary(plan, verdict) if plan is not None and verdict is not None else None,
            ),
            request_id,
        )
        return reply

    def _record_of(
        self,
        request: Request,
        request_id: str,
        view: Sequence[Message],
        status: str,
        usage: Usage | None,
        plan: CachePlan | None = None,
        *,
        node_id: str | None | Literal["own"] = "own",
        system_id: str | None | Literal["own"] = "own",
        verdict: ReadVerdict | None = None,
    ) -> RequestRecord:
        s = request.settings
        own_system = self.branch.system.id if self.branch.system else None
        return RequestRecord(
            request_id=request_id,
            node_id=self.node_id if node_id == "own" else node_id,
            digest=request.digest,
            recipe_version=request.recipe_version,
            system_id=own_system if system_id == "own" else system_id,
            tools_json=tuple(t.piece() for t in request.tools),
            view_ids=tuple(m.id for m in view),
            model=s.model,
            max_tokens=s.max_tokens,
            intent=s.intent,
            tool_choice_json=s.tool_choice_json,
            marks=tuple((tuple(mk.location), mk.ttl, getattr(mk, "role", "")) for mk in request.marks),
            status=status,
            usage=usage.to_dict() if usage is not None else None,
            result_bound=self.profile.tool_result_max_chars if s.intent != "side" else None,
            prompt_cache=(
                {**plan.placement.to_record(), **(verdict.to_dict() if verdict is not None else {})}
                if plan is not None
                else None
            ),
        )

    async def _refuse(
        self, m: Measurement, reason: str, request_id: str, *, before: int | None = None, folds: FoldRun | None = None
    ) -> None:
        ceiling = self.ceiling.ceiling
        assert ceiling is not None
        error = InputCeilingExceeded(
            estimate=m.estimate,
            ceiling=ceiling,
            counted=m.counted,
            scale=m.scale,
            largest_parts=[(self._describe_part(label), tokens) for label, tokens in m.parts],
            branch_id=self.branch.id,
        )
        self.turn.update_state(refusal=error)
        folds = folds or FoldRun()
        await self.publish_decision(m, "refuse", False, folds.reason(reason), request_id, before=before, folds=folds)
        log.info("request refused", branch=self.branch.id, node=self.node_id, estimate=m.estimate, ceiling=ceiling)
        raise error

    def _describe_part(self, label: str) -> str:
        """A measured part's label for people: a message's record index and kind, not its id."""
        index = self.branch.index_of(label)
        if index is None:
            return label
        message = self.branch.message_at(index)
        if isinstance(message, ToolResult):
            return f"#{index} tool result {message.name}"
        if isinstance(message, AssistantResponse):
            return f"#{index} assistant response"
        return f"#{index} {message.kind}"

    async def _check_rewrite(self, request: Request, request_id: str) -> None:
        """Record the request's digests; report a rewrite of an earlier prefix, with its cause.

        A change of the stable segment (tools, system text, model) rewrites
        everything after it; its cause names what changed. A rewrite of the
        messages is explained by the fold commit that made it (``rewrite_cause``)
        and is reported as unexplained otherwise.
        """
        stable = _stable_digests(request)
        last_stable = self.branch.state.last_stable
        if last_stable and stable != last_stable:
            changed = [name for name, a, b in zip(("tools", "system text", "model"), last_stable, stable) if a != b]
            await self.publish(
                CacheRewrite(
                    cause=f"stable segment changed: {', '.join(changed)}",
                    first_changed_message=0,
                    request_digest=request.digest,
                ),
                request_id,
            )
            self.turn.update_state(last_stable=stable, last_request_digests=())
        elif not last_stable:
            self.turn.update_state(last_stable=stable)
        digests = request.message_digests()
        previous = self.branch.state.last_request_digests
        if previous and tuple(digests[: len(previous)]) != tuple(previous):
            padded = digests + ("",) * len(previous)
            first = next(i for i, (a, b) in enumerate(zip(previous, padded)) if a != b)
            cause = self.branch.state.rewrite_cause
            await self.publish(
                CacheRewrite(cause=cause, first_changed_message=first, request_digest=request.digest), request_id
            )
            if cause is None:
                log.warning("unexplained prefix rewrite", branch=self.branch.id, first_changed_message=first)
        self.turn.update_state(last_request_digests=digests, rewrite_cause=None)

    def _absorb(
        self, reply: ProviderReply, m: Measurement, view: Sequence[Message], plan: CachePlan | None, start: float
    ) -> None:
        """Feed a completed response back: calibration, delivery, ledger, record."""
        state = self.branch.state
        scale = Calibration(state.scale).after_response(m.counted, reply.usage).scale
        delivered = state.delivered | {msg.id for msg in view}
        # What was restored or read is protected until a completed main request carried it.
        self.turn.update_state(scale=scale, delivered=delivered, recovered=frozenset())
        if plan is not None:
            self.turn.set_ledger(record_cache_outcome(plan, reply.usage, attempt_start=start, env=self.env))
        self.turn.append(reply.message())

    async def run_tools(self, calls: Sequence[ToolCall]) -> None:
        """Run a round's calls in order and append their results.

        If a tool raises, or the turn is cancelled, every call of the round
        still gets a result (an error result) before the error propagates, so
        the view never holds an orphaned call. Calls of the context tool run
        here, against the branch.
        """
        known = {t.name for t in self.tools}
        done = 0
        try:
            for call in calls:
                if call.name not in known:
                    result = ToolResult.for_call(
                        call, f"unknown tool {call.name!r}; available: {', '.join(sorted(known))}", is_error=True
                    )
                elif call.name == CONTEXT_TOOL_NAME and self.offers_context_tool:
                    result = self.context_call(call)
                else:
                    tool = self.env.registry.get(call.name)
                    context = ToolContext(node_id=self.node_id, branch_id=self.branch.id, spawn=self.spawn)
                    try:
                        output = await tool.func(call.arguments, context)
                        result = ToolResult.for_call(call, output)
                    except ToolArgumentError as bad:  # issue 11: untrusted arguments -> an error the model sees
                        result = ToolResult.for_call(call, str(bad), is_error=True)
                self.turn.append(result)
                done += 1
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                for call in calls[done:]:
                    text = f"not run: {type(exc).__name__}: {exc}" if isinstance(exc, Exception) else "not run: cancelled"
                    self.turn.append(ToolResult.for_call(call, text, is_error=True))
            if isinstance(exc, Exception) and not isinstance(exc, FoldlineError):
                raise ToolFailed(f"tool {calls[done].name!r} raised {type(exc).__name__}: {exc}") from exc
            raise


def _stable_digests(request: Request) -> tuple[str, str, str]:
    """Digests of the parts of the stable segment whose change rewrites the whole prefix."""
    tools = sha256_hex("\x1e".join(t.piece() for t in request.tools))
    system = sha256_hex(request.system or "")
    settings = sha256_hex(f"{request.settings.model}\x1e{request.settings.tool_choice_json}")
    return tools, system, settings



