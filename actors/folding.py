"""Folding a branch before a send (DESIGN.md section 5): an object of its own.

A :class:`Folding` is installed for an iterative operation whose profile has
``context_management = true`` and a resolved ceiling. Before each main send
the pipeline (:mod:`actors.pipeline`) hands it the compiled, measured request;
while :func:`runtime.ceiling.decide` says the request is due to fold (at or
past the fold line, or over the ceiling), or, under immediate scheduling, once
a first fold has landed, it runs the pure planner (:mod:`runtime.fold.planner`),
has the ``side`` summary requests the planner asks for sent by a
:class:`Summarizer` (the pipeline), and lands each plan in one batch
(:meth:`actors.branch.Turn.commit_fold`). A refusal a landed fold may clear
resumes the turn, at most :data:`MAX_RESUMES` times.

It also decides the protected first round, names the cache anchors and the
tail_skip a folding branch needs, and runs the model's ``context`` tool
against the branch. Its dependencies are its constructor arguments: the turn,
the fold settings, the request shape, the event publisher and the clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, Protocol

import attrs

from actors.branch import Turn
from actors.cache_step import anchor_locations
from actors.publisher import Publisher
from actors.shape import RequestShape
from runtime.cache import TailSkip
from runtime.cache.blocks import Location
from runtime.ceiling import ResolvedCeiling, decide
from runtime.compiler import Intent, Request
from runtime.fold.context_tool import run_context_call
from runtime.fold.planner import FoldInput, FoldPlan, FoldPlanner, NeedSummary, SummaryResult
from runtime.fold.protected import decide as decide_first_round
from runtime.fold.protected import first_round, protected_ids, round_end_in_view
from runtime.fold.settings import FoldSettings
from runtime.logs import get_logger
from runtime.measure import Measurement
from runtime.messages import Message, Note, ToolCall, ToolResult
from signals.events import FoldCommitted

log = get_logger("foldline.fold")


MAX_RESUMES = 2
"""Refusals a fold may clear in one turn; past that the turn fails with the refusal."""


class Summarizer(Protocol):
    """Sends a fold's summary request (the send pipeline does); never raises a provider failure."""

    async def summarize(self, need: NeedSummary) -> SummaryResult: ...


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


@attrs.frozen
class Folded:
    """A request after the folds before its send: the view, the request and its measurement, and the run."""

    view: tuple[Message, ...]
    request: Request
    measurement: Measurement
    run: FoldRun


@attrs.define(eq=False)
class Folding:
    """Folds one branch for one operation's turn (see the module docstring)."""

    turn: Turn
    settings: FoldSettings
    ceiling: ResolvedCeiling
    shape: RequestShape
    publish: Publisher
    clock: Callable[[], float]
    resumes: int = 0
    """Refusals a fold cleared in this turn."""

    # -- cache placement with folding ---------------------------------------------------

    def anchors(self, request: Request, view: Sequence[Message]) -> tuple[Location, ...]:
        """The end of the protected first round and of the newest note (placement's step 5)."""
        view_ids = [m.id for m in view]
        round_end = round_end_in_view(self.turn.branch.state.protected_round, view_ids)
        newest_note = next((m.id for m in reversed(view) if isinstance(m, Note)), None)
        return anchor_locations(request, (round_end, newest_note))

    def tail_skip(self, m: Measurement) -> TailSkip | None:
        fold = self.settings
        return TailSkip.decide(
            estimate=m.estimate, ceiling=fold.ceiling, context_fold_at=fold.fold_at, margin=fold.tail_margin
        )

    def decide_first_round(self, view: Sequence[Message], intent: Intent, request_id: str) -> None:
        """Decide the protected first round once, in the compile of the first request carrying it whole."""
        if not self.settings.caching or self.turn.branch.state.protected_round is not None:
            return
        members = first_round(view)
        if members is None:
            return
        decision = decide_first_round(
            members,
            estimate_of=self.shape.measurer(intent).messages_estimate,
            ceiling=self.settings.ceiling,
            scale=self.turn.branch.scale,
            result_bound=self.settings.result_bound,
            now=self.clock(),
            by=request_id,
        )
        self.turn.protect_first_round(decision)

    # -- folding ------------------------------------------------------------------------

    def _mode(self, view: Sequence[Message], m: Measurement) -> Literal["full", "light"] | None:
        """How to fold a request before its send: fully when due, lightly under immediate scheduling."""
        fold = self.settings
        if decide(m, self.ceiling, can_fold=True, fold_at=fold.fold_at).action == "fold":
            return "full"
        if fold.scheduling == "immediate" and fold.strategy == "fold" and any(isinstance(x, Note) for x in view):
            # Immediate scheduling: once the conversation has reached its fold line (a fold
            # note stands in the view), each unit that leaves the kept tail is folded as soon as it can be.
            return "light"
        return None

    async def before_send(
        self, view: tuple[Message, ...], request: Request, m: Measurement, intent: Intent, summarizer: Summarizer
    ) -> Folded:
        """Fold while due; a refusal a landed fold may still clear resumes, at most twice per turn."""
        fold = self.settings
        plans: list[FoldPlan] = []
        ran = False
        while (mode := self._mode(view, m)) is not None:
            ran = ran or mode == "full"
            plan = await self._plan(view, intent, mode=mode, refusal=m.estimate > fold.ceiling, summarizer=summarizer)
            plans.append(plan)
            if not plan.landed:
                with self.turn.batch():
                    for message in plan.added:  # a rejected summary note: kept, outside the view
                        self.turn.add_to_record(message)
                    if not plan.deferred:
                        self.turn.hold_marks(plan.held_marks)
                break
            await self._commit(plan)
            view = self.turn.branch.view()
            request = self.shape.compile(view, intent)
            m = self.shape.measure(request)
            if m.estimate <= fold.ceiling or self.resumes >= MAX_RESUMES:
                break
            self.resumes += 1
            log.info(
                "fold resumes after a refusal", branch=self.turn.branch.id, estimate=m.estimate, resume=self.resumes
            )
        return Folded(view, request, m, FoldRun(tuple(plans), ran or any(p.landed for p in plans)))

    async def _plan(
        self,
        view: Sequence[Message],
        intent: Intent,
        *,
        mode: Literal["full", "light"],
        refusal: bool,
        summarizer: Summarizer,
    ) -> FoldPlan:
        state = self.turn.branch.state
        fold_input = FoldInput(
            record=self.turn.branch,
            view=tuple(view),
            delivered=state.delivered,
            recovered=state.recovered,
            protected=protected_ids(state.protected_round, view) if self.settings.caching else frozenset(),
            marks=tuple(state.pending_marks),
            settings=self.settings,
            mode=mode,
            refusal=refusal,
        )
        planner = FoldPlanner(fold_input, self.shape.measurer(intent))
        step = planner.start()
        while isinstance(step, NeedSummary):
            result = await summarizer.summarize(step)
            step = planner.resume(result, self.shape.measurer(intent))
        return step

    async def _commit(self, plan: FoldPlan) -> None:
        """Land a fold in one batch (its notes and copies, the view, the held marks, the rewrite cause)."""
        self.turn.commit_fold(
            plan.added, plan.view_ids, plan.held_marks, f"fold {plan.fold_id} ({'+'.join(plan.stages)})"
        )
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
            branch=self.turn.branch.id,
            fold=plan.fold_id,
            stages=list(plan.stages),
            before=plan.estimate_before,
            after=plan.estimate_after,
        )


def context_call(
    turn: Turn, call: ToolCall, *, settings: FoldSettings | None, shape: RequestShape, completed: int
) -> ToolResult:
    """Run one call of the model's context tool against the branch and apply what it changes.

    ``settings`` is None when no fold is installed for the operation (the
    tool still answers reads; a fold or restore says why it cannot).
    """
    branch = turn.branch
    outcome = run_context_call(
        call.arguments,
        view=branch.view(),
        record=branch,
        settings=settings,
        marks=tuple(branch.state.pending_marks),
        completed=completed,
        estimator=shape.measurer("continuing"),
    )
    result = ToolResult.for_call(call, outcome.text, is_error=outcome.is_error)
    recovered = outcome.recovered | ({result.id} if outcome.protect_answer else set())
    with turn.batch():
        if outcome.view_ids is not None:
            turn.set_view(outcome.view_ids)
        if recovered:
            turn.recover(recovered)
        if outcome.marks is not None:
            turn.hold_marks(outcome.marks)
        if outcome.rewrite_cause is not None:
            turn.explain_rewrite(outcome.rewrite_cause)
    return result
