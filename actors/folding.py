"""Folding a branch before a send (DESIGN.md section 5): an object of its own.

A :class:`Folding` is installed for an iterative operation whose profile has
``context_management = true`` and a resolved ceiling. Before each main send
the pipeline (:mod:`actors.pipeline`) hands it the compiled, measured request;
while :func:`runtime.decision.ceiling.decide` says the request is due to fold (at or
past the fold line, or over the ceiling), or, under immediate scheduling, once
a first fold has landed, it runs the pure planner (:mod:`runtime.fold.planner`),
has the ``side`` summary requests the planner asks for sent by a
:class:`Summarizer` (the pipeline), and lands each plan in one batch
(:meth:`actors.branch.Turn.commit_fold`). A refusal a landed fold may clear
resumes the turn, at most :data:`MAX_RESUMES` times.

Under the ``cost`` fold policy (:attr:`runtime.fold.settings.FoldSettings.by_cost`)
the line and the target are the cost model's (:func:`runtime.fold.cost.decide_fold`),
asked before each main send with the branch's growth per request, measured from its
own record by :func:`view_growth` (the fixed fractions hold until two requests'
growth is known), the recalls it made (:func:`actors.fold_recalls.recall_profile`) and the requests made so
far, all read from the record, so a resumed run decides as the uninterrupted one did. Each ``FoldCommitted`` carries the prediction the commit was
chosen on and what the cycle the previous commit of this turn started really cost.

The cost model also chooses, per branch and before each request, how the newest rounds are
carried (the profile's ``fold_tail``, :func:`runtime.fold.after_read.choose_tail`): verbatim
until the line, or folded once read (the planner's ``read`` mode at the next request, with
no mark after the round, :meth:`runtime.cache.TailSkip.fold_next`, so it is sent fresh
and never written). Under after-read a full fold runs only when the kept prefix and notes leave
no room for the next round, and the protected first round may be released
(:mod:`actors.fold_tail`).

It also decides the protected first round and names the cache anchors and the
tail_skip a folding branch needs (the model's ``context`` tool runs in
:mod:`actors.fold_context`). Its dependencies are its constructor arguments: the turn,
the fold settings, the request shape, the event publisher, the clock and the
turn's spending so far.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, Protocol

import attrs

from actors.branch import Turn
from actors.cache_step import anchor_locations
from actors.fold_recalls import recall_profile
from actors.fold_tail import after_read_words, read_round_waiting, release_protected_round
from actors.fold_words import FoldRun, InForce, fold_committed, stopped_short
from actors.inherit import inherited_cached_ids, setup_ids
from actors.publisher import Publisher
from actors.shape import RequestShape
from runtime.cache import TailSkip
from runtime.cache.blocks import Location
from runtime.decision.ceiling import ResolvedCeiling, decide
from runtime.fold.after_read import TailChoice, choose_tail
from runtime.fold.cost import COST_TARGETS, GROWTH_WINDOW, CostDecision, decide_fold, predicted_cycle, usage_cost
from runtime.fold.measurer import Measurer
from runtime.fold.planner import FoldInput, FoldPlan, FoldPlanner, NeedSummary, SummaryResult
from runtime.fold.protected import decide as decide_first_round
from runtime.fold.protected import first_round, protected_ids, release_cause, revisit, round_end_in_view
from runtime.fold.settings import FoldSettings
from runtime.logs import get_logger
from runtime.measuring.measure import Measurement
from runtime.request.compiler import Intent, Request
from runtime.values.messages import AssistantResponse, Message, Note, ToolResult
from runtime.values.usage import Usage

log = get_logger("foldline.fold")


MAX_RESUMES = 2
"""Refusals a fold may clear in one turn; past that the turn fails with the refusal."""


class Spending(Protocol):
    """What the turn has spent so far (the pipeline's progress): usage of every reply, main requests."""

    @property
    def usage(self) -> Usage: ...

    @property
    def requests(self) -> int: ...


def view_growth(turn: Turn, measurer: Measurer, window: int = GROWTH_WINDOW, minimum: int = 2) -> float | None:
    """How fast the branch's view grows per request, from its own record (scaled tokens).

    Each main request's response, with what followed it into the view (tool results,
    instructions), is what the next request carried new; the mean of the last ``window``
    such increments is the growth. Notes, clipped copies and summary prompts are not
    growth (a fold's own, or outside the view) and are skipped. None before two
    increments are known.
    """
    branch = turn.branch
    delivered, in_view = branch.state.delivered, set(branch.view_ids())
    sizes: list[int] = []
    current = 0
    for index in range(branch.record_length() - 1, -1, -1):
        message = branch.message_at(index)
        if isinstance(message, Note) or (isinstance(message, ToolResult) and message.clipped_from is not None):
            continue
        if message.id not in delivered and message.id not in in_view:
            continue
        current += measurer.block_tokens(message)[0]
        if isinstance(message, AssistantResponse):
            sizes.append(current)
            current = 0
            if len(sizes) >= window:
                break
    if len(sizes) < max(1, minimum):
        return None
    return max(1.0, sum(sizes) / len(sizes) * measurer.scale)


@attrs.frozen
class CycleStart:
    """Where a cycle stands: what the turn had spent (BIT) and its main requests completed, before a fold."""

    cost_bit: float
    requests: int


@attrs.frozen
class CycleFigures:
    """What a commit records of the cost model: its prediction, and the previous cycle realised."""

    growth: float | None = None
    predicted_bit: float | None = None
    predicted_requests: float | None = None
    realised_bit: float | None = None
    realised_requests: int | None = None


class Summarizer(Protocol):
    """Sends a fold's summary request (the send pipeline does); never raises a provider failure."""

    async def summarize(self, need: NeedSummary) -> SummaryResult: ...


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
    spending: Spending | None = None
    resumes: int = 0
    """Refusals a fold cleared in this turn."""
    cost: CostDecision | None = None
    """The cost model's last decision (None: the fixed fractions are in force)."""
    growth: float | None = None
    """The growth per request the last decision was made with."""
    cycle: CycleStart | None = None
    """Where the cycle of this turn's last commit began."""
    spent: CycleStart | None = None
    """The turn's spending before the folds of the send being prepared (their summaries not in it)."""
    recall_tokens: dict[str, int] = attrs.field(factory=dict)
    """Counted tokens of the messages :func:`recall_profile` measured, by id (see there)."""
    tail: TailChoice | None = None
    """The cost model's choice of tail before the send being prepared (None: not chosen by cost)."""
    after_read: bool = False
    """Whether rounds are folded once read before the send being prepared (the choice, or the setting)."""

    # -- cache placement with folding ---------------------------------------------------

    def anchors(self, request: Request, view: Sequence[Message]) -> tuple[Location, ...]:
        """The end of the protected first round and of the newest note (placement's step 5)."""
        view_ids = [m.id for m in view]
        round_end = round_end_in_view(self.turn.branch.state.protected_round, view_ids)
        newest_note = next((m.id for m in reversed(view) if isinstance(m, Note)), None)
        return anchor_locations(request, (round_end, newest_note))

    def tail_skip(self, m: Measurement, view: Sequence[Message] = ()) -> TailSkip | None:
        """No turn mark when a fold is expected to follow: near the line, or (after-read) when the
        request ends with a round's results, which the next request folds."""
        fold = self.settings
        if self.after_read and view and isinstance(view[-1], ToolResult):
            return TailSkip.fold_next(estimate=m.estimate, ceiling=fold.ceiling)
        return TailSkip.decide(
            estimate=m.estimate, ceiling=fold.ceiling, context_fold_at=self._fold_at(), margin=fold.tail_margin
        )

    def _fold_at(self) -> float:
        """The fold line in force as a share of the ceiling (the cost model's, else the setting)."""
        fold = self.settings
        if self.cost is None or self.cost.line is None:
            return fold.fold_at
        return min(1.0, max(self.cost.line / fold.ceiling, fold.tail_margin + 1e-6))

    def in_force(self) -> InForce:
        """The fold line and target in force now, in tokens (the cost model's when it chose them)."""
        by_cost = self.cost is not None and self.cost.line is not None
        return InForce(
            line=int(self._fold_at() * self.settings.ceiling),
            target=int(self._plan_settings().target_tokens),
            chosen_by="cost model" if by_cost else "fixed fractions",
        )

    def _target(self) -> float:
        """The target in force: the cost model's choice, else the setting."""
        if self.cost is None:
            return self.settings.target
        if self.cost.choice is None:  # over the hard limit with no candidate leaving room: the deepest
            return min(COST_TARGETS) if self.cost.commit else self.settings.target
        return self.settings.target if self.cost.choice.target is None else self.cost.choice.target

    def _ask_cost(self, view: Sequence[Message], m: Measurement, intent: Intent) -> None:
        """Ask the cost model before a send (the cost policy, once the growth is known)."""
        fold = self.settings
        self.cost, self.tail = None, None
        self.after_read = fold.tail == "after-read" and fold.strategy == "fold"
        if self.spending is not None:
            # Before this send's folds: their summary requests belong to the cycle they start.
            self.spent = CycleStart(usage_cost(self.spending.usage, fold.prices), self.spending.requests - 1)
        if not fold.by_cost:
            return
        measurer = self.shape.measurer(intent)
        self.growth = view_growth(self.turn, measurer, minimum=1 if fold.after_read_possible else 2)
        if self.growth is None:
            return
        recalls = recall_profile(self.turn, measurer, self.recall_tokens)
        kept = measurer.estimate(view[: self._kept_prefix(view)])
        decision = self.cost = decide_fold(
            tokens=m.estimate,
            growth=self.growth,
            ceiling=fold.ceiling,
            margin=fold.tail_margin,
            kept_prefix_tokens=kept,
            prices=fold.prices,
            caching=fold.caching,
            recalls=recalls,
            elapsed_requests=None if recalls is None else recalls.requests,
        )
        if fold.after_read_possible:
            self.tail = choose_tail(
                decision,
                growth=self.growth,
                kept_tokens=kept,
                prices=fold.prices,
                caching=fold.caching,
                recalls=recalls,
            )
            self.after_read = fold.tail == "after-read" or self.tail.tail == "after-read"
            if not self.after_read and view_growth(self.turn, measurer) is None:
                self.cost = None  # one increment prices the tail; the fold line waits for two
        if self.after_read:
            # Rounds fold once read, at no rewrite, so the next request carries what stays (the kept prefix and
            # notes) and its own round: a full fold only when that would cross the hard limit (or the request is
            # over the ceiling, :meth:`_mode`).
            hard = fold.ceiling * (1 - fold.tail_margin) - self.growth
            self.cost = attrs.evolve(decision, commit=kept > hard)
            if recalls is not None:
                release_protected_round(
                    self.turn, view, measurer, kept=kept, elapsed=recalls.requests, prices=fold.prices, now=self.clock()
                )

    def _kept_prefix(self, view: Sequence[Message]) -> int:
        """How many of the view's first messages a fold leaves in place (the cached prefix it keeps)."""
        end = 1
        protected = protected_ids(self.turn.branch.state.protected_round, view) if self.settings.caching else set()
        for position, message in enumerate(view):
            if message.id in protected or (self.settings.caching and isinstance(message, Note)):
                end = position + 1
        return min(end, len(view))

    def decide_first_round(self, view: Sequence[Message], intent: Intent, request_id: str) -> None:
        """Decide the protected first round once, in the compile of the first request carrying it whole;
        release it when the ceiling in force cannot hold it (:func:`runtime.fold.protected.revisit`)."""
        if not self.settings.caching:
            return
        current = self.turn.branch.state.protected_round
        if current is not None:
            released = revisit(current, self.settings.ceiling, now=self.clock(), by=request_id)
            if released is not None:
                with self.turn.batch():
                    self.turn.protect_first_round(released)
                    self.turn.explain_rewrite(release_cause(released, current.ceiling))
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

    def _mode(self, view: Sequence[Message], m: Measurement) -> Literal["full", "light", "read"] | None:
        """How to fold a request before its send: fully when due, each read round under after-read,
        lightly under immediate scheduling."""
        fold = self.settings
        if self.cost is not None:
            if self.cost.commit or m.estimate > fold.ceiling:
                return "full"
        elif decide(m, self.ceiling, can_fold=True, fold_at=fold.fold_at).action == "fold":
            return "full"
        if self.after_read and read_round_waiting(view, self.turn.branch.state.delivered):
            return "read"
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
        ran, read = False, False
        self._ask_cost(view, m, intent)
        in_force = self.in_force()
        while (mode := self._mode(view, m)) is not None:
            ran = ran or mode == "full"
            plan = await self._plan(view, intent, mode=mode, refusal=m.estimate > fold.ceiling, summarizer=summarizer)
            read = read or (mode == "read" and plan.landed)
            plans.append(plan)
            if not plan.landed:
                with self.turn.batch():
                    for message in plan.added:  # a rejected summary note: kept, outside the view
                        self.turn.add_to_record(message)
                    if not plan.deferred:
                        self.turn.hold_marks(plan.held_marks)
                break
            await self._commit(plan, read=mode == "read")
            view = self.turn.branch.view()
            request = self.shape.compile(view, intent)
            m = self.shape.measure(request)
            self.cost = attrs.evolve(self.cost, commit=False) if self.cost is not None else None
            if m.estimate <= fold.ceiling or self.resumes >= MAX_RESUMES:
                break
            self.resumes += 1
            log.info(
                "fold resumes after a refusal", branch=self.turn.branch.id, estimate=m.estimate, resume=self.resumes
            )
        ran = ran or any(p.landed for p in plans if not read)
        why = self.cost.reason if self.cost is not None and ran else ""
        return Folded(
            view,
            request,
            m,
            FoldRun(tuple(plans), ran, why, in_force, after_read_words(self.tail, self.settings.tail) if read else ""),
        )

    async def _plan(
        self,
        view: Sequence[Message],
        intent: Intent,
        *,
        mode: Literal["full", "light", "read"],
        refusal: bool,
        summarizer: Summarizer,
    ) -> FoldPlan:
        state = self.turn.branch.state
        fold_input = FoldInput(
            record=self.turn.branch,
            view=tuple(view),
            delivered=state.delivered,
            recovered=state.recovered,
            protected=(protected_ids(state.protected_round, view) if self.settings.caching else frozenset())
            | setup_ids(self.turn.branch),
            marks=tuple(state.pending_marks),
            settings=self._plan_settings(),
            mode=mode,
            refusal=refusal,
            inherited=inherited_cached_ids(self.turn.branch) if self.settings.caching else frozenset(),
        )
        planner = FoldPlanner(fold_input, self.shape.measurer(intent))
        step = planner.start()
        while isinstance(step, NeedSummary):
            result = await summarizer.summarize(step)
            step = planner.resume(result, self.shape.measurer(intent))
        return step

    def _plan_settings(self) -> FoldSettings:
        """The settings the planner folds by: the cost model's target when it chose one."""
        target = self._target()
        if target == self.settings.target:
            return self.settings
        return attrs.evolve(self.settings, target=target, fold_at=max(self.settings.fold_at, target + 1e-6))

    def _cycle_figures(self, read: bool) -> CycleFigures:
        """The prediction this commit was chosen on and what the previous commit's cycle cost.

        A fold after read predicts one request at the tail choice's after-read figure.
        """
        figures = CycleFigures()
        if read and self.tail is not None and self.growth is not None:
            figures = CycleFigures(growth=round(self.growth, 1), predicted_bit=round(self.tail.after_read_bit, 3))
            figures = attrs.evolve(figures, predicted_requests=1.0)
        elif self.cost is not None and self.growth is not None:
            figures = CycleFigures(
                growth=round(self.growth, 1),
                predicted_bit=_rounded(predicted_cycle(self.cost, self.growth, self.settings.prices)),
                predicted_requests=_rounded(self.cost.horizon_requests),
            )
        spent = self.spent
        if spent is not None:
            if self.cycle is not None:
                figures = attrs.evolve(
                    figures,
                    realised_bit=round(spent.cost_bit - self.cycle.cost_bit, 3),
                    realised_requests=spent.requests - self.cycle.requests,
                )
            self.cycle = spent
        return figures

    async def _commit(self, plan: FoldPlan, *, read: bool = False) -> None:
        """Land a fold in one batch (its notes and copies, the view, the held marks, the rewrite cause)."""
        self.turn.commit_fold(
            plan.added, plan.view_ids, plan.held_marks, f"fold {plan.fold_id} ({'+'.join(plan.stages)})"
        )
        figures = self._cycle_figures(read)
        await self.publish(
            attrs.evolve(
                fold_committed(plan),
                policy="cost" if self.cost is not None else "fixed",
                target_tokens=int(self._plan_settings().target_tokens),
                fold_line_tokens=self.in_force().line,
                stopped=stopped_short(plan, int(self._plan_settings().target_tokens)) or None,
                growth_tokens=figures.growth,
                predicted_bit=figures.predicted_bit,
                predicted_requests=figures.predicted_requests,
                realised_bit=figures.realised_bit,
                realised_requests=figures.realised_requests,
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


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
