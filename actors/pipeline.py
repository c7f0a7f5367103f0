"""The send pipeline: one request of any intent, from the branch to the provider and back.

Every request a branch sends, a main request of its operation (``continuing``
or ``final``) or a fold's ``side`` summary request, goes through the same
steps, in this order:

1. compile the messages it carries (:class:`actors.shape.RequestShape`) and
   measure them (:mod:`runtime.measuring.measure`), at the run's scale for the model;
2. for a main request, fold what a child inherited for its emitter's next fold
   (:mod:`actors.inherit_fold`), fold while due (:class:`actors.folding.Folding`, when
   installed) and decide against the ceiling (:func:`runtime.decision.ceiling.decide`),
   on the provider's exact count when the calibration asks for one
   (:mod:`actors.exact_count`; a folding branch of an uncalibrated model
   counts before it folds): over it, the branch is refused (sticky) and the
   refusal raised; a side request over it is answered with a failure instead;
3. place cache marks when both gates are on (:mod:`actors.cache_step`) and,
   for a main request, check it against the previous one for a prefix
   rewrite (:mod:`runtime.cache.rewrites`);
4. send ONE attempt: before each attempt the request is measured and decided
   again and the decision and ``RequestSent`` published; the provider sends
   exactly that attempt; a failed attempt is retried here, by the SDK's rules
   (:mod:`runtime.contract.retry`);
5. take the reply in, in one batch: calibration (the branch's and the run's), delivery (main), the cache
   ledger, the response appended to the view (main) or the prompt kept in the
   record (side), the request record; then ``ResponseReceived``.

A main send returns the message it appended. The pipeline is an identity
object that lives for one operation's turn; its dependencies are its
constructor arguments.
"""

from __future__ import annotations

from functools import partial
from typing import NoReturn

import anyio
import attrs

from actors.branch import RequestRecord, Turn
from actors.cache_step import CachePlan, cache_summary, mark_json, plan_cache, read_verdict, record_cache_outcome
from actors.env import RunEnv
from actors.exact_count import METHOD, ExactCounts, Settled
from actors.fold_words import FoldRun
from actors.folding import Folding
from actors.inherit_fold import fold_inherited, fresh_results
from actors.publisher import Publisher
from actors.record import describe_part
from actors.shape import RequestShape
from actors.side_answers import recorded_answer, summary_of
from runtime.cache import Placement, ReadVerdict
from runtime.cache.rewrites import find_rewrite, stable_digests
from runtime.contract.progress import reporting_progress
from runtime.contract.provider import AttemptFailed, ProviderError, ProviderReply
from runtime.contract.retry import retry_delay, should_retry
from runtime.decision.ceiling import Action, ResolvedCeiling, decide, refusal
from runtime.decision.send_bounds import as_sent
from runtime.fold.planner import NeedSummary, SummaryResult
from runtime.logs import get_logger
from runtime.measuring.calibration import MIN_CALIBRATION_TOKENS
from runtime.measuring.measure import Measurement
from runtime.request.compiler import Intent, Request
from runtime.values.messages import AssistantResponse, Instruction, Message
from runtime.values.usage import Usage
from signals.events import CacheRewrite, ContextDecision, RequestSent, ResponseReceived

log = get_logger("foldline.engine")

SIDE_REASON = "fold summary request"


@attrs.define(eq=False)
class TurnProgress:
    """What one operation's turn has done so far (resume state and the result's figures)."""

    appended: int = 0
    """Instructions of this operation appended so far."""
    completed: int = 0
    """Requests of this operation completed so far."""
    requests: int = 0
    """Main requests started in this turn."""
    summaries: int = 0
    """Side summary requests started in this turn."""
    usage: Usage = attrs.field(factory=Usage)
    notice_note: str | None = None
    """Why the last appended turn goes without the size notice, for the next decision's reason."""


@attrs.frozen
class Decided:
    """A decision to publish for one attempt: the measurement it read, the action and why."""

    measurement: Measurement
    action: Action
    reason: str
    before: int | None = None
    """The estimate before the folds (None: the measurement's own)."""
    folds: FoldRun = attrs.field(factory=FoldRun)
    method: str = METHOD
    provider_count: int | None = None
    """The provider's exact count the decision read (None: our estimate)."""


@attrs.frozen
class Outgoing:
    """One request ready to leave and what the pipeline needs to send, take in and record it."""

    request_id: str
    request: Request
    """The compiled request with its marks."""
    carried: tuple[Message, ...]
    """The messages it carries: the branch's view (main) or the summary prompt (side)."""
    measurement: Measurement
    """The measurement the response calibrates against (the request without its marks)."""
    first: Decided
    plan: CachePlan | None
    side: bool


class _SideRefused(Exception):
    """A side request over the ceiling: answered with a failure, never sticky on the branch."""


@attrs.define(eq=False)
class SendPipeline:
    """Sends one branch's requests for one operation's turn (see the module docstring)."""

    turn: Turn
    env: RunEnv
    shape: RequestShape
    ceiling: ResolvedCeiling
    publish: Publisher
    folding: Folding | None
    caching: bool
    node_id: str | None
    progress: TurnProgress = attrs.field(factory=TurnProgress)
    previous_placement: Placement | None = None
    counts: ExactCounts = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.counts = ExactCounts(self.turn, self.env, self.ceiling, self.shape)

    # -- the two intents ------------------------------------------------------------------

    async def send(self, intent: Intent) -> AssistantResponse:
        """Send the branch's view as one main request; return the response it appended."""
        branch = self.turn.branch
        if branch.refusal is not None:
            raise branch.refusal
        self.progress.requests += 1
        request_id = self.env.ids.request_id(branch.id, self.turn.next_request_serial())
        outgoing = await self._prepare_main(intent, request_id)
        reply, attempt_start, duration = await self._attempts(outgoing)
        return await self._take_in(outgoing, reply, attempt_start, duration)

    async def summarize(self, need: NeedSummary) -> SummaryResult:
        """Send one fold summary as a ``side`` request carrying only the span; never raises a provider failure.

        The side request shares nothing with the conversation: no tools, no
        system text of its own (the summarizer's instructions lead its one
        user message, which is kept in the record, outside the view, so the
        request can be replayed from its record).
        """
        branch = self.turn.branch
        self.progress.summaries += 1
        request_id = self.env.ids.request_id(branch.id, branch.state.request_serial, self.progress.summaries)
        prompt = Instruction(f"{need.system}\n\n{need.prompt}")
        request = self.shape.compile_side(prompt)
        answered = recorded_answer(branch, request)
        if answered is not None:  # answered and stored before (its usage counted then): not asked again
            log.info("fold summary taken from the record", branch=branch.id, reply=answered.id)
            return summary_of(answered.text, None)
        outgoing: Outgoing | None = None
        try:
            outgoing = await self._prepare_side(prompt, request, request_id)
            reply, attempt_start, duration = await self._attempts(outgoing)
        except _SideRefused as refused:
            return SummaryResult(failure=str(refused))
        except ProviderError as exc:
            assert outgoing is not None
            with self.turn.batch():
                self.turn.add_to_record(prompt)
                self.turn.record_request(self._record_of(outgoing, "failed", None))
            log.info("fold summary request failed", branch=branch.id, error=str(exc))
            return SummaryResult(failure=f"the summary request failed: {exc}")
        return summary_of((await self._take_in(outgoing, reply, attempt_start, duration)).text, reply.usage)

    # -- compile, measure, fold, decide, place marks ------------------------------------

    async def _prepare_main(self, intent: Intent, request_id: str) -> Outgoing:
        self.counts.adopt(self.shape.model)
        # A child first folds what its emitter carried fresh to fold next (actors.inherit_fold).
        inherited = await fold_inherited(
            self.turn, self.shape, intent, self.publish, self.ceiling.ceiling, self.caching
        )
        view = self.turn.branch.view()
        if self.folding is not None:
            self.folding.decide_first_round(view, intent, request_id)
        request = self.shape.compile(view, intent)
        m = self.shape.measure(request)
        if self.folding is not None and not self.counts.calibration(self.shape.model).calibrated:
            # Fold on the provider's figures: an uncalibrated model counts before the fold decides.
            await self.counts.settle(request, m)
            m = self.counts.known(request, self.shape.measure(request))
        before = m.estimate if inherited is None else inherited.estimate_before
        folds = FoldRun()
        if self.folding is not None:
            folded = await self.folding.before_send(view, request, m, intent, self)
            view, request, m, folds = folded.view, folded.request, folded.measurement, folded.run
        folds = attrs.evolve(folds, inherited=inherited)
        settled = await self.counts.settle(request, m)
        m = settled.measurement
        decision = as_sent(decide(m, self.ceiling, can_fold=False), view)
        if decision.action == "refuse":
            await self._refuse(
                m, settled.noted(decision.reason), request_id, before=before, folds=folds, settled=settled
            )
        plan: CachePlan | None = None
        if self.caching:
            # A folding branch anchors its continuing requests and may skip their turn mark.
            folding = self.folding if intent == "continuing" else None
            plan = plan_cache(
                request,
                self.turn.branch.ledger,
                now=self.env.clock(),
                env=self.env,
                anchors=folding.anchors(request, view) if folding is not None else (),
                tail_skip=folding.tail_skip(m, view) if folding is not None else None,
                previous=self.previous_placement,
            )
            request = request.with_marks(plan.placement.marks)
            self.previous_placement = plan.placement
        await self._check_rewrite(request, request_id)
        action: Action = "fold" if folds.stages else decision.action
        reason = settled.noted(folds.reason(decision.reason))
        if self.progress.notice_note is not None:
            reason, self.progress.notice_note = f"{reason}; {self.progress.notice_note}", None
        first = Decided(m, action, reason, before, folds, settled.method, settled.provider_count)
        return Outgoing(request_id, request, view, m, first, plan, side=False)

    async def _prepare_side(self, prompt: Instruction, request: Request, request_id: str) -> Outgoing:
        """Measure, decide and mark ``request``, the side request carrying ``prompt``."""
        self.counts.adopt(self.shape.model)
        settled = await self.counts.settle(request, self.shape.measure(request))
        m = settled.measurement
        ceiling = self.ceiling.ceiling
        if ceiling is not None and m.estimate > ceiling:
            reason = settled.noted(f"{SIDE_REASON}: estimate {m.estimate} is over the ceiling {ceiling}")
            await self._decision(
                Decided(m, "refuse", reason, method=settled.method, provider_count=settled.provider_count),
                False,
                request_id,
            )
            raise _SideRefused(f"the summary request ({m.estimate} tokens) would exceed the ceiling")
        plan: CachePlan | None = None
        if self.caching:
            plan = plan_cache(request, self.turn.branch.ledger, now=self.env.clock(), env=self.env)
            request = request.with_marks(plan.placement.marks)
        outgoing = Outgoing(request_id, request, (prompt,), m, Decided(m, "pass", ""), plan, side=True)
        return attrs.evolve(outgoing, first=self._redecide(outgoing))

    def _redecide(self, outgoing: Outgoing) -> Decided:
        """Measure and decide the request as it leaves (marks included), for an attempt.

        A first decision made on the provider's count (or the fallback) holds
        for every attempt of the same request: marks are not counted by the provider.
        """
        measured = self.shape.measure(outgoing.request)
        first = outgoing.first
        if first.method != METHOD:
            measured = attrs.evolve(measured, estimate=first.measurement.estimate)
        verdict = as_sent(decide(measured, self.ceiling, can_fold=False), outgoing.carried)
        if outgoing.side:
            # A side request was checked against the ceiling before its marks; it is sent (it carries no notice).
            return Decided(
                measured,
                "pass",
                f"{SIDE_REASON}: {verdict.reason}",
                method=first.method,
                provider_count=first.provider_count,
            )
        return Decided(
            measured, verdict.action, verdict.reason, method=first.method, provider_count=first.provider_count
        )

    async def _check_rewrite(self, request: Request, request_id: str) -> None:
        """Report a rewrite of the previous request's prefix, with its cause; remember this request's digests."""
        state = self.turn.branch.state
        settings = request.settings
        stable = stable_digests(
            [t.piece() for t in request.tools], request.system, settings.model, settings.tool_choice_json
        )
        digests = request.message_digests()
        rewrite = find_rewrite(state.last_stable, state.last_request_digests, stable, digests, state.rewrite_cause)
        if rewrite is not None:
            await self.publish(
                CacheRewrite(
                    cause=rewrite.cause,
                    first_changed_message=rewrite.first_changed_message,
                    request_digest=request.digest,
                ),
                request_id,
            )
            if rewrite.cause is None:
                log.warning(
                    "unexplained prefix rewrite",
                    branch=self.turn.branch.id,
                    first_changed_message=rewrite.first_changed_message,
                )
        self.turn.sent_prefix(stable, digests)

    # -- send, one attempt at a time ----------------------------------------------------

    async def _attempts(self, outgoing: Outgoing) -> tuple[ProviderReply, float, float]:
        """Send attempts until one completes; returns the reply, its attempt's start and the whole duration."""
        provider = self.env.provider
        node_id = None if outgoing.side else self.node_id  # a side request is not one of the node's turns
        started = self.env.monotonic()
        attempt = 0
        while True:
            attempt += 1
            attempt_start = self.env.clock()
            await self._announce(outgoing, attempt)
            try:
                with reporting_progress(self.publish.reply_progress(outgoing.request_id, attempt)):
                    reply = await provider.send(outgoing.request, node_id=node_id)
            except AttemptFailed as failure:
                delay = self._retry_delay(failure, attempt)
                log.info(
                    "retrying request", node=node_id, status=failure.status, attempt=attempt, delay_s=round(delay, 3)
                )
                await anyio.sleep(delay)
                continue
            return attrs.evolve(reply, attempts=attempt), attempt_start, self.env.monotonic() - started

    async def _announce(self, outgoing: Outgoing, attempt: int) -> None:
        """Decide the attempt (measured again after the first) and publish the decision and RequestSent."""
        decided = outgoing.first if attempt == 1 else self._redecide(outgoing)
        if decided.action == "refuse":
            await self._refuse(decided.measurement, decided.reason, outgoing.request_id)
        await self._decision(decided, True, outgoing.request_id)
        request = outgoing.request
        await self.publish(
            RequestSent(
                digest=request.digest,
                bytes=len(request.payload_bytes()),
                attempt=attempt,
                intent=request.settings.intent,
                marks=[mark_json(mark) for mark in request.marks],
                model=request.settings.model,
            ),
            outgoing.request_id,
        )

    def _retry_delay(self, failure: AttemptFailed, attempt: int) -> float:
        """Seconds to wait before retrying a failed attempt; raises the final error when it is not retried."""
        retries = attempt - 1
        if retries >= self.env.provider.max_retries or not should_retry(failure.status, failure.headers):
            raise ProviderError(
                f"{failure} (after {attempt} attempt{'s' if retries else ''})",
                status=failure.status,
                error_type=failure.error_type,
            ) from failure
        return retry_delay(retries, failure.headers, jitter=self.env.jitter(), now=self.env.clock())

    # -- take the reply in, record --------------------------------------------------------

    async def _take_in(
        self, outgoing: Outgoing, reply: ProviderReply, attempt_start: float, duration: float
    ) -> AssistantResponse:
        """Feed a completed response back in one batch, then publish ResponseReceived.

        The branch takes the response first and the usage event follows with no
        checkpoint between: a cancellation can then never leave a counted usage
        event without the response it belongs to (a store pairs the two).
        """
        self.progress.usage = self.progress.usage + reply.usage
        # A summary's reply names what it answered, so a fold asking for it again finds it (actors.side_answers).
        answers = outgoing.side
        message = reply.message(
            outgoing.request.context_digest() if reply.has_thinking or answers else None, answers=answers
        )
        plan = outgoing.plan
        verdict = None
        if plan is not None and not outgoing.side:
            verdict = read_verdict(plan, reply.usage, attempt_start=attempt_start, route=self.env.route)
        with self.turn.batch():
            counted = outgoing.measurement.counted
            if not reply.server_edited:  # an edited or compacted request's usage counts another request
                self.turn.calibrate(counted, reply.usage)
            if counted >= MIN_CALIBRATION_TOKENS and not reply.server_edited:
                model = outgoing.request.settings.model
                self.env.calibration.observe(model, counted, reply.usage.total_input)
                self.turn.observe_count(model, counted, reply.usage.total_input, outgoing.request.message_digests())
            if not outgoing.side:
                self.turn.deliver(m.id for m in outgoing.carried)
                self.turn.carried_fresh(fresh_results(plan.placement if plan is not None else None, outgoing.carried))
            if plan is not None:
                self.turn.set_ledger(record_cache_outcome(plan, reply.usage, attempt_start=attempt_start, env=self.env))
            if outgoing.side:
                for carried in (*outgoing.carried, message):
                    self.turn.add_to_record(carried)
            else:
                self.turn.append(message)
                self.progress.completed += 1
                self.turn.open_turn(self.progress.appended, self.progress.completed)
            self.turn.record_request(self._record_of(outgoing, "sent", reply.usage, verdict))
        await self.publish(
            ResponseReceived(
                usage=reply.usage.to_dict(),
                stop_reason=reply.stop_reason,
                duration_s=round(duration, 6),
                cache=cache_summary(plan, verdict) if plan is not None and verdict is not None else None,
                context_management=reply.context_management,
            ),
            outgoing.request_id,
        )
        return message

    def _record_of(
        self, outgoing: Outgoing, status: str, usage: Usage | None, verdict: ReadVerdict | None = None
    ) -> RequestRecord:
        request, plan = outgoing.request, outgoing.plan
        s = request.settings
        system = self.turn.branch.system
        return RequestRecord(
            request_id=outgoing.request_id,
            node_id=None if outgoing.side else self.node_id,
            digest=request.digest,
            recipe_version=request.recipe_version,
            system_id=system.id if system is not None and not outgoing.side else None,
            tools_json=tuple(t.piece() for t in request.tools),
            view_ids=tuple(m.id for m in outgoing.carried),
            model=s.model,
            max_tokens=s.max_tokens,
            intent=s.intent,
            tool_choice_json=s.tool_choice_json,
            marks=tuple((tuple(mk.location), mk.ttl, getattr(mk, "role", "")) for mk in request.marks),
            status=status,
            usage=usage.to_dict() if usage is not None else None,
            result_bound=self.shape.result_bound if s.intent != "side" else None,
            thinking_json=s.thinking_json,
            output_config_json=s.output_config_json,
            context_management_json=s.context_management_json,
            prompt_cache=(
                {**plan.placement.to_record(), **(verdict.to_dict() if verdict is not None else {})}
                if plan is not None
                else None
            ),
        )

    # -- decisions and refusals -----------------------------------------------------------

    async def _decision(self, decided: Decided, sent: bool, request_id: str) -> None:
        c, m = self.ceiling, decided.measurement
        await self.publish(
            ContextDecision(
                ceiling=c.ceiling,
                ceiling_source=c.source,
                tier=c.tier,
                method=decided.method,
                estimate_before=m.estimate if decided.before is None else decided.before,
                estimate_after=m.estimate,
                action=decided.action,
                stages=decided.folds.stages,
                folded_ids=decided.folds.folded_ids,
                sent=sent,
                reason=decided.reason,
                provider_count=decided.provider_count,
                count_calls=self.counts.take_calls(),
                fold_line=None if decided.folds.in_force is None else decided.folds.in_force.line,
                fold_target=None if decided.folds.in_force is None else decided.folds.in_force.target,
            ),
            request_id,
        )

    async def _refuse(
        self,
        m: Measurement,
        reason: str,
        request_id: str,
        *,
        before: int | None = None,
        folds: FoldRun | None = None,
        settled: Settled | None = None,
    ) -> NoReturn:
        """Refuse the branch (sticky), publish the refusal and raise it."""
        ceiling = self.ceiling.ceiling
        assert ceiling is not None
        error = refusal(m, ceiling, branch_id=self.turn.branch.id, describe=partial(describe_part, self.turn.branch))
        self.turn.refuse(error)
        folds = folds or FoldRun()
        method, count = (settled.method, settled.provider_count) if settled is not None else (METHOD, None)
        decided = Decided(m, "refuse", folds.reason(reason), before, folds, method, count)
        await self._decision(decided, False, request_id)
        log.info("request refused", branch=self.turn.branch.id, node=self.node_id, estimate=m.estimate, ceiling=ceiling)
        raise error
