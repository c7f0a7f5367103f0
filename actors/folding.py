"""The fold-driving half of the send step (DESIGN.md section 5).

:class:`FoldDriving` is mixed into :class:`actors.send.TurnDriver`: before
a send it runs the pure fold planner (:mod:`runtime.fold.planner`) while the
request is due to fold, sends the ``side`` summary requests the planner asks
for, and lands each plan in one ``turn.batch()`` (notes and copies into the
record, the new view, the pending marks, the rewrite cause). It also places
the cache anchors and tail_skip a folding branch needs, decides the protected
first round, and runs the model's ``context`` tool against the branch. It
relies on the driver's ``turn``, ``env``, ``profile``, ``ceiling``, ``fold``,
``compile``, ``measure``, ``publish`` and ``_record_of``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import structlog

from runtime.cache import TailSkip
from actors.cache_step import (
    CachePlan,
    anchor_locations,
    mark_json,
    plan_cache,
    record_cache_outcome,
)
from runtime.calibration import Calibration
from runtime.ceiling import decide
from runtime.compiler import Request, RequestSettings, compile_request
from runtime.fold.context_tool import run_context_call
from runtime.fold.planner import (
    FoldInput,
    FoldPlan,
    FoldPlanner,
    NeedSummary,
    SummaryResult,
)
from runtime.fold.protected import decide as decide_first_round
from runtime.fold.protected import first_round, protected_ids, round_end_in_view
from runtime.measure import Measurement
from runtime.messages import (
    Instruction,
    Message,
    Note,
    ToolCall,
    ToolResult,
)
from runtime.providers.base import ProviderError
from signals.events import (
    FoldCommitted,
    RequestSent,
    ResponseReceived,
)

log = structlog.get_logger("foldline.fold")


MAX_RESUMES = 2
"""Refusals a fold may clear in one turn; past that the turn fails with the refusal."""

SUMMARY_MAX_TOKENS = 1024
"""Output cap of a fold's summary request."""


@attrs.frozen
class FoldRun:
    """What the folds before one send did (for the decision event)."""

    plans: tuple[FoldPlan, ...] = ()
    ran: bool = False

    @property
    def stages(self) -> list[str]:
        return [stage for plan in self.plans for stage in plan.stages]

    @property
    def folded_ids(self) -> list[str]:
        return [mid for plan in self.plans for mid in plan.folded_ids]

    def reason(self, ceiling_reason: str) -> str:
        if not self.ran:
            return ceiling_reason
        landed = [p for p in self.plans if p.landed]
        if not landed:
            return f"{ceiling_reason}; the fold found nothing it may take"
        described = "; ".join(
            f"fold {p.fold_id} landed {'+'.join(p.stages)}: {p.estimate_before} -> {p.estimate_after} tokens"
            f" (target {'reached' if p.target_reached else 'missed'})"
            for p in landed
        )
        return f"{ceiling_reason}; {described}"


class FoldDriving:
    """Folding, anchors and the context tool for :class:`actors.send.TurnDriver`."""

    # -- cache placement with folding ---------------------------------------------------

    def _anchors(self, request: Request, view: Sequence[Message]) -> tuple[Any, ...]:
        """The end of the protected first round and of the newest note (placement's step 5)."""
        if self.fold is None:
            return ()
        view_ids = [m.id for m in view]
        round_end = round_end_in_view(self.branch.state.protected_round, view_ids)
        newest_note = next((m.id for m in reversed(view) if isinstance(m, Note)), None)
        return anchor_locations(request, (round_end, newest_note))

    def _tail_skip(self, m: Measurement) -> TailSkip | None:
        if self.fold is None:
            return None
        return TailSkip.decide(
            estimate=m.estimate,
            ceiling=self.fold.ceiling,
            context_fold_at=self.fold.fold_at,
            margin=self.fold.tail_margin,
        )

    def _decide_first_round(self, view: Sequence[Message], intent: str, request_id: str) -> None:
        """Decide the protected first round once, in the compile of the first request carrying it whole."""
        if self.fold is None or not self.caching or self.branch.state.protected_round is not None:
            return
        members = first_round(view)
        if members is None:
            return
        measurer = self.measurer(intent)
        decision = decide_first_round(
            members,
            estimate_of=measurer.messages_estimate,
            ceiling=self.fold.ceiling,
            scale=self.branch.scale,
            result_bound=self.profile.tool_result_max_chars,
            now=self.env.clock(),
            by=request_id,
        )
        self.turn.protect_first_round(decision)

    # -- folding ------------------------------------------------------------------------

    async def _fold_before_send(
        self, view: tuple[Message, ...], request: Request, m: Measurement, intent: str
    ) -> tuple[tuple[Message, ...], Request, Measurement, FoldRun]:
        """Fold while due; a refusal a landed fold may still clear resumes, at most twice per turn."""
        fold = self.fold
        assert fold is not None and self.ceiling.ceiling is not None
        plans: list[FoldPlan] = []
        ran = False
        while True:
            over = m.estimate > fold.ceiling
            if fold.due(m.estimate) or over:
                mode = "full"
            elif fold.scheduling == "immediate" and fold.strategy == "fold" and self._has_folded(view):
                # Immediate scheduling: once the conversation has reached its fold line,
                # each unit that leaves the kept tail is folded as soon as it can be.
                mode = "light"
            else:
                break
            ran = ran or mode == "full"
            plan = await self._plan_fold(view, intent, mode=mode, refusal=over)
            plans.append(plan)
            if not plan.landed:
                with self.turn.batch():
                    for message in plan.added:  # a rejected summary note: kept, outside the view
                        self.turn.add_to_record(message)
                    if not plan.deferred:
                        self.turn.hold_marks(plan.held_marks)
                break
            await self._commit(plan)
            view = self.branch.view()
            request = self.compile(view, intent)
            m = self.measure(request)
            if m.estimate <= fold.ceiling or self.resumes >= MAX_RESUMES:
                break
            self.resumes += 1
            log.info("fold resumes after a refusal", branch=self.branch.id, estimate=m.estimate, resume=self.resumes)
        return view, request, m, FoldRun(tuple(plans), ran or any(p.landed for p in plans))

    @staticmethod
    def _has_folded(view: Sequence[Message]) -> bool:
        """Whether a fold has landed in this view (a fold note stands in it)."""
        return any(isinstance(m, Note) for m in view)

    async def _plan_fold(self, view: Sequence[Message], intent: str, *, mode: str, refusal: bool) -> FoldPlan:
        fold = self.fold
        assert fold is not None
        state = self.branch.state
        fold_input = FoldInput(
            record=self.branch,
            view=tuple(view),
            delivered=state.delivered,
            recovered=state.recovered,
            protected=protected_ids(state.protected_round, view) if fold.caching else frozenset(),
            marks=tuple(state.pending_marks),
            settings=fold,
            mode=mode,  # type: ignore[arg-type]
            refusal=refusal,
        )
        planner = FoldPlanner(fold_input, self.measurer(intent))
        step = planner.start()
        while isinstance(step, NeedSummary):
            result = await self._send_summary(step)
            step = planner.resume(result, self.measurer(intent))
        return step

    async def _commit(self, plan: FoldPlan) -> None:
        """Land a fold in one batch: its notes and copies, the view, the pending marks and the rewrite cause."""
        cause = f"fold {plan.fold_id} ({'+'.join(plan.stages)})"
        self.turn.commit_fold(plan.added, plan.view_ids, plan.held_marks, cause)
        await self.publish(
            FoldCommitted(
                stages=list(plan.stages),
                agent_marks=plan.agent_marks,
                host_stages=plan.host_stages,
                tokens_freed=max(0, plan.estimate_before - plan.estimate_after),
                target_reached=plan.target_reached,
                estimate_before=plan.estimate_before,
                estimate_after=plan.estimate_after,
            )
        )
        log.info(
            "fold committed",
            branch=self.branch.id,
            fold=plan.fold_id,
            stages=list(plan.stages),
            before=plan.estimate_before,
            after=plan.estimate_after,
        )

    async def _send_summary(self, need: NeedSummary) -> SummaryResult:
        """Send one fold summary as a ``side`` request carrying only the span; never raises a provider failure."""
        branch = self.branch
        self.summaries += 1
        request_id = self.env.ids.request_id(branch.id, branch.state.request_serial, self.summaries)
        # The side request shares nothing with the conversation: no tools, no
        # system text of its own (the summarizer's instructions lead its one
        # user message, which is kept in the record, outside the view, so the
        # request can be replayed from its record).
        prompt = Instruction(f"{need.system}\n\n{need.prompt}")
        settings = RequestSettings(
            model=self.profile.model or self.env.model.name,
            max_tokens=min(self.profile.max_tokens, SUMMARY_MAX_TOKENS),
            intent="side",
        )
        request = compile_request(system=None, tools=(), view=(prompt,), settings=settings)
        m = self.measure(request)
        ceiling = self.ceiling.ceiling
        if ceiling is not None and m.estimate > ceiling:
            await self.publish_decision(
                m, "refuse", False, f"fold summary request: estimate {m.estimate} is over the ceiling {ceiling}",
                request_id,
            )
            return SummaryResult(failure=f"the summary request ({m.estimate} tokens) would exceed the ceiling")
        plan: CachePlan | None = None
        if self.caching:
            plan = plan_cache(request, branch.ledger, now=self.env.clock(), env=self.env)
            request = request.with_marks(plan.placement.marks)
        attempt_start = [self.env.clock()]

        async def before_attempt(attempt: int) -> None:
            attempt_start[0] = self.env.clock()
            measured = self.measure(request)
            verdict = decide(measured, self.ceiling, can_fold=False)
            await self.publish_decision(measured, "pass" if verdict.action != "notice" else "notice", True,
                                        f"fold summary request: {verdict.reason}", request_id)
            await self.publish(
                RequestSent(
                    digest=request.digest,
                    bytes=len(request.payload_bytes()),
                    attempt=attempt,
                    intent="side",
                    marks=[mark_json(mark) for mark in request.marks],
                    model=request.settings.model,
                ),
                request_id,
            )

        started = self.env.monotonic()
        try:
            # A side request names no node: it is not one of the node's own model turns.
            reply = await self.env.provider.send(request, node_id=None, before_attempt=before_attempt)
        except ProviderError as exc:
            with self.turn.batch():
                self.turn.add_to_record(prompt)
                self.turn.record_request(
                    self._record_of(request, request_id, (prompt,), "failed", None, plan, node_id=None, system_id=None)
                )
            log.info("fold summary request failed", branch=branch.id, error=str(exc))
            return SummaryResult(failure=f"the summary request failed: {exc}")
        duration = self.env.monotonic() - started
        self.usage = self.usage + reply.usage
        # As for a main request: the batch first, then the usage event, no checkpoint between.
        with self.turn.batch():
            self.turn.calibrate(m.counted, reply.usage)
            if plan is not None:
                self.turn.set_ledger(record_cache_outcome(plan, reply.usage, attempt_start=attempt_start[0], env=self.env))
            self.turn.add_to_record(prompt)
            self.turn.record_request(
                self._record_of(request, request_id, (prompt,), "sent", reply.usage, plan, node_id=None, system_id=None)
            )
        await self.publish(
            ResponseReceived(usage=reply.usage.to_dict(), stop_reason=reply.stop_reason, duration_s=round(duration, 6)),
            request_id,
        )
        text = reply.message().text
        if not text.strip():
            return SummaryResult(failure="the summary request answered with no text", usage=reply.usage)
        return SummaryResult(text=text, usage=reply.usage)

    # -- the context tool -------------------------------------------------------------------

    def context_call(self, call: ToolCall) -> ToolResult:
        """Run one call of the model's context tool against the branch and apply what it changes."""
        state = self.branch.state
        outcome = run_context_call(
            call.arguments,
            view=self.branch.view(),
            record=self.branch,
            settings=self.fold,
            marks=tuple(state.pending_marks),
            completed=self.completed,
            estimator=self.measurer("continuing"),
        )
        result = ToolResult.for_call(call, outcome.text, is_error=outcome.is_error)
        recovered = outcome.recovered | ({result.id} if outcome.protect_answer else set())
        with self.turn.batch():
            if outcome.view_ids is not None:
                self.turn.set_view(outcome.view_ids)
            if recovered:
                self.turn.recover(recovered)
            if outcome.marks is not None:
                self.turn.hold_marks(outcome.marks)
            if outcome.rewrite_cause is not None:
                self.turn.explain_rewrite(outcome.rewrite_cause)
        return result
