"""The send path: how one operation runs on one branch.

This is the thin shell around the pure core. For every request it compiles
the branch's view (:mod:`runtime.compiler`), measures it
(:mod:`runtime.measure`), decides against the ceiling (:mod:`runtime.ceiling`),
places cache marks when both gates are on (:mod:`runtime.cache`), and only
then lets the provider send it; it publishes what it decided and feeds the
response back into the branch (calibration, delivery, cache ledger, record).

Operations:

- ``bounded``: one request, or a fixed planned sequence of instructions. A
  bounded request over its ceiling is refused, never rewritten.
- ``iterative``: a tool loop that runs until the model answers without tool
  calls, at most ``max_rounds`` requests.

A refusal is sticky on the branch: once refused, every later send on it raises
the same refusal until the caller clears it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

import anyio
import attrs
import structlog

from actors.branch import Branch, RequestRecord, Turn
from runtime.cache_step import CachePlan, plan_cache, record_cache_outcome
from runtime.calibration import Calibration
from runtime.ceiling import ResolvedCeiling, decide, notice_line, resolve_ceiling
from runtime.compiler import Request, RequestSettings, compile_request
from runtime.config import Profile
from runtime.env import RunEnv
from runtime.errors import FoldlineError, InputCeilingExceeded
from runtime.measure import Measurement, measure
from runtime.messages import AssistantResponse, Instruction, Message, TextPart, ToolCall, ToolResult
from runtime.providers.base import ProviderReply
from runtime.tools import ToolContext, ToolFailed
from runtime.usage import Usage
from signals.events import CacheRewrite, ContextDecision, RequestSent, ResponseReceived

log = structlog.get_logger("foldline.engine")

METHOD = "o200k_base x scale"


class RoundLimitExceeded(FoldlineError):
    """An iterative operation used all its rounds without a final answer."""


class OperationError(FoldlineError):
    """An operation cannot go on (e.g. a bounded request answered with tool calls)."""


@attrs.frozen
class Operation:
    """One agent operation on a branch.

    ``instructions`` has one entry for an iterative operation and for a single
    bounded request, several for a bounded planned sequence. ``max_input_tokens``
    is the per-call ceiling value (it may only lower the resolved ceiling).
    """

    kind: Literal["bounded", "iterative"]
    instructions: tuple[str, ...]
    max_rounds: int = 20
    max_input_tokens: int | str | None = None

    def __attrs_post_init__(self) -> None:
        if self.kind not in ("bounded", "iterative"):
            raise ValueError(f"operation kind must be 'bounded' or 'iterative', got {self.kind!r}")
        if not self.instructions:
            raise ValueError("an operation needs at least one instruction")
        if self.kind == "iterative" and len(self.instructions) != 1:
            raise ValueError("an iterative operation takes exactly one instruction")
        if self.max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1, got {self.max_rounds}")


@attrs.frozen
class OperationResult:
    answer: str
    rounds: int
    requests: int
    usage: Usage


Spawn = Callable[[str], Awaitable[str]]


@attrs.define(eq=False)
class _Driver:
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

    @property
    def branch(self) -> Branch:
        return self.turn.branch

    # -- compile and measure ----------------------------------------------------------

    def settings(self, intent: str) -> RequestSettings:
        model = self.profile.model or self.env.model.name
        return RequestSettings(model=model, max_tokens=self.profile.max_tokens, intent=intent)  # type: ignore[arg-type]

    def compile(self, view: Sequence[Message], intent: str) -> Request:
        branch = self.branch
        return compile_request(system=branch.system, tools=branch.tools, view=view, settings=self.settings(intent))

    def measure(self, request: Request) -> Measurement:
        return measure(request.pieces(), self.env.counter, self.branch.scale)

    # -- events -----------------------------------------------------------------------

    async def publish(self, event: Any, request_id: str | None = None) -> None:
        await self.env.bus.publish(event, branch_id=self.branch.id, node_id=self.node_id, request_id=request_id)

    async def publish_decision(
        self, m: Measurement, action: str, sent: bool, reason: str, request_id: str | None
    ) -> None:
        c = self.ceiling
        await self.publish(
            ContextDecision(
                ceiling=c.ceiling,
                ceiling_source=c.source,
                tier=c.tier,
                method=METHOD,
                estimate_before=m.estimate,
                estimate_after=m.estimate,
                action=action,
                stages=[],
                folded_ids=[],
                sent=sent,
                reason=reason,
            ),
            request_id,
        )

    # -- the turn's pieces ----------------------------------------------------------------

    async def append_instruction(self, text: str, intent: str) -> None:
        """Append a user turn; at or past the notice line it carries the size notice."""
        instruction = Instruction(text)
        if self.ceiling.ceiling is not None:
            m = self.measure(self.compile(self.branch.view() + (instruction,), intent))
            if decide(m, self.ceiling, can_fold=False).action == "notice":
                instruction = Instruction(text, notice=notice_line(m, self.ceiling.ceiling))
        with self.turn.batch():
            self.turn.append(instruction)
            self.appended += 1
            self.turn.update_state(open_turn=(self.appended, self.completed))

    async def send(self, intent: str) -> ProviderReply:
        """Measure, decide, place marks and send the branch's view as one request."""
        branch = self.branch
        if branch.refusal is not None:
            raise branch.refusal
        self.requests += 1
        request_id = f"{branch.id}:{self.requests}"
        view = branch.view()
        request = self.compile(view, intent)
        m = self.measure(request)
        decision = decide(m, self.ceiling, can_fold=False)
        if decision.action == "refuse":
            await self._refuse(m, decision.reason, request_id)
        plan: CachePlan | None = None
        if self.env.provider.caches_by_prefix and self.profile.prompt_caching:
            plan = plan_cache(request, branch.ledger, now=self.env.clock(), env=self.env)
            request = request.with_marks(plan.placement.marks)
        await self._check_rewrite(request, request_id)
        attempt_start = [self.env.clock()]

        async def before_attempt(attempt: int) -> None:
            attempt_start[0] = self.env.clock()
            measured = m if attempt == 1 else self.measure(request)
            verdict = decision if attempt == 1 else decide(measured, self.ceiling, can_fold=False)
            if verdict.action == "refuse":
                await self._refuse(measured, verdict.reason, request_id)
            await self.publish_decision(measured, verdict.action, True, verdict.reason, request_id)
            await self.publish(
                RequestSent(
                    digest=request.digest,
                    bytes=len(request.payload_bytes()),
                    attempt=attempt,
                    intent=intent,
                    marks=[_mark_json(mark) for mark in request.marks],
                    model=request.settings.model,
                ),
                request_id,
            )

        started = self.env.monotonic()
        reply = await self.env.provider.send(request, node_id=self.node_id, before_attempt=before_attempt)
        duration = self.env.monotonic() - started
        self.usage = self.usage + reply.usage
        await self.publish(
            ResponseReceived(usage=reply.usage.to_dict(), stop_reason=reply.stop_reason, duration_s=round(duration, 6)),
            request_id,
        )
        with self.turn.batch():
            self._absorb(reply, m, view, plan, attempt_start[0])
            self.completed += 1
            self.turn.update_state(open_turn=(self.appended, self.completed))
            self.turn.record_request(self._record_of(request, request_id, view, "sent", reply.usage))
        return reply

    def _record_of(
        self, request: Request, request_id: str, view: Sequence[Message], status: str, usage: Usage | None
    ) -> RequestRecord:
        s = request.settings
        return RequestRecord(
            request_id=request_id,
            node_id=self.node_id,
            digest=request.digest,
            recipe_version=request.recipe_version,
            system_id=self.branch.system.id if self.branch.system else None,
            tools_json=tuple(t.piece() for t in request.tools),
            view_ids=tuple(m.id for m in view),
            model=s.model,
            max_tokens=s.max_tokens,
            intent=s.intent,
            tool_choice_json=s.tool_choice_json,
            marks=tuple((tuple(mk.location), mk.ttl, getattr(mk, "role", "")) for mk in request.marks),
            status=status,
            usage=usage.to_dict() if usage is not None else None,
        )

    async def _refuse(self, m: Measurement, reason: str, request_id: str) -> None:
        ceiling = self.ceiling.ceiling
        assert ceiling is not None
        error = InputCeilingExceeded(
            estimate=m.estimate,
            ceiling=ceiling,
            counted=m.counted,
            scale=m.scale,
            largest_parts=list(m.parts),
            branch_id=self.branch.id,
        )
        self.turn.update_state(refusal=error)
        await self.publish_decision(m, "refuse", False, reason, request_id)
        log.info("request refused", branch=self.branch.id, node=self.node_id, estimate=m.estimate, ceiling=ceiling)
        raise error

    async def _check_rewrite(self, request: Request, request_id: str) -> None:
        """Record the request's message digests; report a rewrite of an earlier prefix."""
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
        self.turn.update_state(scale=scale, delivered=delivered)
        if plan is not None:
            self.turn.set_ledger(record_cache_outcome(plan, reply.usage, attempt_start=start, env=self.env))
        self.turn.append(_response_message(reply))

    async def run_tools(self, calls: Sequence[ToolCall]) -> None:
        """Run a round's calls in order and append their results.

        If a tool raises, or the turn is cancelled, every call of the round
        still gets a result (an error result) before the error propagates, so
        the view never holds an orphaned call.
        """
        known = {t.name for t in self.branch.tools}
        done = 0
        try:
            for call in calls:
                if call.name not in known:
                    result = ToolResult.for_call(
                        call, f"unknown tool {call.name!r}; available: {', '.join(sorted(known))}", is_error=True
                    )
                else:
                    tool = self.env.registry.get(call.name)
                    context = ToolContext(node_id=self.node_id, branch_id=self.branch.id, spawn=self.spawn)
                    output = await tool.func(call.arguments, context)
                    result = ToolResult.for_call(call, output)
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


def _mark_json(mark: Any) -> dict[str, Any]:
    return {"location": list(mark.location), "ttl": mark.ttl, "role": getattr(mark, "role", None)}


def _response_message(reply: ProviderReply) -> AssistantResponse:
    parts: list[TextPart | ToolCall] = []
    for block in reply.content:
        kind = block.get("type")
        if kind == "text":
            parts.append(TextPart(block.get("text", "")))
        elif kind == "tool_use":
            parts.append(ToolCall.create(block["id"], block["name"], block.get("input") or {}))
    return AssistantResponse(tuple(parts), stop_reason=reply.stop_reason)


async def run_operation(
    branch: Branch,
    operation: Operation,
    *,
    env: RunEnv,
    profile: Profile,
    node_id: str | None = None,
    spawn: Spawn | None = None,
    resume: bool = False,
) -> OperationResult:
    """Run one operation on a branch, holding its lock for the whole turn.

    With ``resume``, an operation the branch shows as interrupted mid-turn
    (its ``open_turn`` state, restored from a store) continues from the
    branch's last stored state: instructions already appended are not
    appended again, completed requests are not sent again, and a round whose
    calls have no results yet runs just the missing calls.
    """
    ceiling = resolve_ceiling(
        model=profile.model or env.model.name,
        profile_value=profile.max_input_tokens,
        model_value=env.model.max_input_tokens,
        call_value=operation.max_input_tokens,
        pricing=env.pricing,
    )
    async with branch.turn() as turn:
        progress = branch.state.open_turn if resume and branch.state.open_turn is not None else (0, 0)
        driver = _Driver(turn, env, profile, operation, node_id, spawn, ceiling)
        driver.appended, driver.completed = progress
        turn.update_state(open_turn=progress)
        if operation.kind == "bounded":
            result = await _run_bounded(driver, *progress)
        else:
            result = await _run_iterative(driver, *progress)
        turn.update_state(open_turn=None)
        return result


async def _run_bounded(driver: _Driver, appended: int, completed: int) -> OperationResult:
    reply_message: AssistantResponse | None = None
    steps = driver.operation.instructions
    for i, text in enumerate(steps):
        if i < completed:
            continue
        intent = "final" if i == len(steps) - 1 else "continuing"
        if i >= appended:
            await driver.append_instruction(text, intent)
        reply = await driver.send(intent)
        reply_message = _response_message(reply)
        if reply_message.tool_calls:
            calls = reply_message.tool_calls
            await _answer_unrun(driver, calls, "tools are not run in a bounded operation")
            raise OperationError(
                f"a bounded operation's request was answered with tool calls ({', '.join(c.name for c in calls)})"
            )
    if reply_message is None:
        reply_message = _last_answer(driver)
    return OperationResult(reply_message.text, len(steps), driver.requests, driver.usage)


def _last_answer(driver: _Driver) -> AssistantResponse:
    for message in reversed(driver.branch.view()):
        if isinstance(message, AssistantResponse):
            return message
    raise OperationError("the resumed operation has no answer in its view")


async def _answer_unrun(driver: _Driver, calls: Sequence[ToolCall], why: str) -> None:
    for call in calls:
        driver.turn.append(ToolResult.for_call(call, f"not run: {why}", is_error=True))


async def _run_iterative(driver: _Driver, appended: int, completed: int) -> OperationResult:
    if appended == 0:
        await driver.append_instruction(driver.operation.instructions[0], "continuing")
    elif completed:
        # Resumed after at least one response: finish its round before sending again.
        last = _last_answer(driver)
        if not last.tool_calls:
            return OperationResult(last.text, completed, driver.requests, driver.usage)
        answered = {m.call_id for m in driver.branch.view() if isinstance(m, ToolResult)}
        await driver.run_tools([c for c in last.tool_calls if c.call_id not in answered])
    for round_no in range(completed + 1, driver.operation.max_rounds + 1):
        reply = await driver.send("continuing")
        message = _response_message(reply)
        if not message.tool_calls:
            return OperationResult(message.text, round_no, driver.requests, driver.usage)
        await driver.run_tools(message.tool_calls)
    raise RoundLimitExceeded(
        f"no final answer after {driver.operation.max_rounds} rounds (max_rounds={driver.operation.max_rounds})"
    )
