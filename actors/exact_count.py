"""Deciding in the provider's tokens: the exact count a send asks for before it decides (issue 11, case 12).

Our count is o200k_base times the branch's scale; the provider counts with
its own tokenizer. :class:`ExactCounts` is one operation's turn's access to
the provider's count-tokens endpoint, under the rules of
:mod:`runtime.measuring.model_calibration`:

- it asks only when the run's calibration of the model says so
  (:func:`~runtime.measuring.model_calibration.needs_exact_count`: while uncalibrated,
  or when the ceiling lies within the calibration's range around the
  request), and never twice for the same request (counts are kept by request
  digest for the turn);
- each count is the branch's own evidence (``Branch.calibrations``, added to
  what the run started from: :class:`actors.env.ModelScales`; a node starts
  with its dependencies' final evidence, and a clone with its emitter's) and goes into
  the book the store keeps for later runs; the branch takes the scale (it
  never falls);
- a provider without the endpoint, a failed count or one that outlasts
  ``env.count_timeout_s`` never hangs the send and never lets it go over: the
  decision is made on :func:`~runtime.measuring.model_calibration.fallback_measurement`
  and the note says why. After a failure the turn asks no more.
"""

from __future__ import annotations

import anyio
import attrs

from actors.branch import Branch, Turn
from actors.env import RunEnv
from actors.shape import RequestShape
from runtime.contract.provider import ProviderError
from runtime.decision.ceiling import ResolvedCeiling, notice_line
from runtime.decision.send_bounds import NoticeChoice, choose_notice
from runtime.logs import get_logger
from runtime.measuring.measure import Measurement, scaled_estimate
from runtime.measuring.model_calibration import (
    UNCERTAINTY,
    ModelCalibration,
    exact_measurement,
    fallback_measurement,
    needs_exact_count,
    uncalibrated_scale,
    unseen_scale,
    unseen_tokens,
)
from runtime.models.limits import default_model_table
from runtime.request.compiler import Intent, Request
from runtime.values.messages import Instruction, Message

log = get_logger("foldline.engine")

METHOD = "o200k_base x scale"
"""How an estimate is made (the decision event names it)."""
METHOD_EXACT = "provider count_tokens"
"""The decision read the provider's own count."""
METHOD_FALLBACK = "o200k_base x conservative scale"
"""The decision read the fallback figure (no endpoint, or the count failed)."""

_NOTICE_RECOUNTS = 2
"""Counts of a re-rendered notice until it states the provider's figure of the request carrying it."""


@attrs.frozen
class Settled:
    """The measurement a decision reads, how it was made and why."""

    measurement: Measurement
    method: str = METHOD
    provider_count: int | None = None
    note: str | None = None

    def noted(self, reason: str) -> str:
        """A decision's reason with how its figure was had, when it was not our plain estimate."""
        return reason if self.note is None else f"{reason} ({self.note})"


def branch_calibration(env: RunEnv, branch: Branch, model: str) -> ModelCalibration:
    """``branch``'s calibration of ``model``: what the run started from, with the branch's own evidence."""
    return env.calibration.get(model).combined(branch.calibrations.get(model))


def family_maximum(model: str) -> float:
    """The most provider tokens per o200k token ``model``'s family may count uncalibrated content at.

    1.0 for a family the model table says is tokenized with o200k_base, else
    :data:`runtime.measuring.model_calibration.UNCALIBRATED_MAX_SCALE` (a model of no
    listed family included): :func:`runtime.measuring.model_calibration.unseen_scale`.
    """
    family = default_model_table().family(model)
    return unseen_scale(None if family is None else family.tokenizer)


def uncalibrated_prior(env: RunEnv, branch: Branch, model: str) -> float:
    """The scale ``branch`` measures ``model`` at least: its family's maximum while no exact count is to be had.

    A provider with a count endpoint gives the exact count where it matters,
    and a calibrated model has its own scale: 1.0 for both. Otherwise the
    family's uncalibrated maximum (:func:`family_maximum`: a bound that holds
    for every token factor the simulator takes, 1.0 for a family tokenized
    with o200k_base), so that a fold plans on the figure the send decides on.
    """
    if env.provider.counts_tokens:
        return 1.0
    if branch_calibration(env, branch, model).calibrated:
        return 1.0
    return family_maximum(model)


@attrs.define(eq=False)
class ExactCounts:
    """One turn's exact counts (see the module docstring)."""

    turn: Turn
    env: RunEnv
    ceiling: ResolvedCeiling
    shape: RequestShape
    calls: int = 0
    """Count-tokens calls made since the last decision was published (the pipeline takes them)."""
    _known: dict[str, tuple[int, str]] = attrs.field(factory=dict, init=False)
    """The provider's count of each request this turn counted, by digest, with what the decision says of it."""
    _failed: str | None = attrs.field(default=None, init=False)
    _added: dict[str, int] = attrs.field(factory=dict, init=False)
    """Requests that only add to one this turn counted exactly (the turn with its notice): what they add."""

    def calibration(self, model: str) -> ModelCalibration:
        """The branch's calibration of ``model``: what the run started from, with the branch's own evidence."""
        return branch_calibration(self.env, self.turn.branch, model)

    def adopt(self, model: str) -> None:
        """The branch takes the run's scale for ``model`` when it is larger than its own."""
        scale = self.calibration(model).scale
        if scale > self.turn.branch.scale:
            self.turn.raise_scale(scale)

    def take_calls(self) -> int:
        calls, self.calls = self.calls, 0
        return calls

    def known(self, request: Request, measured: Measurement) -> Measurement:
        """``measured``, with the provider's count in place of the estimate when this turn has it."""
        known = self._known.get(request.digest)
        return measured if known is None else exact_measurement(measured, known[0])

    async def settle(self, request: Request, measured: Measurement, *, over: Measurement | None = None) -> Settled:
        """The measurement to decide ``request`` on: the provider's count when the calibration asks for it.

        ``over``: a request this turn counted exactly that ``request`` only adds to (the same turn with the
        size notice): what is new is then what ``request`` adds, not the whole turn.
        """
        ceiling = self.ceiling.ceiling
        if ceiling is None:
            return Settled(measured)
        known = self._known.get(request.digest)
        if known is not None:
            return Settled(exact_measurement(measured, known[0]), METHOD_EXACT, known[0], known[1])
        model = request.settings.model
        calibration = self.calibration(model)
        calibration = attrs.evolve(calibration, scale=max(calibration.scale, measured.scale))
        if over is not None and over.counted <= measured.counted:
            self._added[request.digest] = measured.counted - over.counted  # the pipeline settles it again
        unseen = self._unseen(request, measured, calibration, ceiling)
        if not needs_exact_count(measured.counted, ceiling, calibration, unseen, family_maximum(model)):
            return Settled(measured)
        provider = self.env.provider
        if not provider.counts_tokens:
            why = f"provider {provider.name} has no count-tokens endpoint"
            return self._fallback(measured, model, calibration, why, unseen)
        if self._failed is not None:
            why = f"an earlier count of this turn failed ({self._failed})"
            return self._fallback(measured, model, calibration, why, unseen)
        self.calls += 1
        self.env.calibration.count_calls += 1
        try:
            with anyio.fail_after(self.env.count_timeout_s):
                count = await provider.count_tokens(request)
        except (ProviderError, TimeoutError) as exc:
            self.env.calibration.count_failures += 1
            self._failed = str(exc) or f"no answer within {self.env.count_timeout_s:g} s"
            log.warning("count_tokens failed", branch=self.turn.branch.id, error=self._failed)
            return self._fallback(measured, model, calibration, f"count_tokens failed: {self._failed}", unseen)
        note = self._exact_note(count, measured)
        if calibration.calibrated and unseen:
            note = f"{note}; {_unseen_note(unseen, model)}"
        self._known[request.digest] = (count, note)
        if request.settings.context_management_json is None:  # a server-edited count is of another request
            self.env.calibration.observe(model, measured.counted, count)
            self.turn.observe_count(model, measured.counted, count, request.message_digests())
        self.adopt(model)
        return Settled(exact_measurement(measured, count), METHOD_EXACT, count, note)

    def _unseen(self, request: Request, measured: Measurement, calibration: ModelCalibration, ceiling: int) -> int:
        """Our count of what ``request`` carries that the branch's calibration never saw (0 when it cannot matter).

        Not worked out when even the whole request at the family's maximum fits the ceiling, nor while
        uncalibrated (every token is then bounded at the maximum).
        """
        if not calibration.calibrated:
            return 0
        if request.digest in self._added:
            return self._added[request.digest]
        top = max(family_maximum(request.settings.model), calibration.scale * (1 + UNCERTAINTY))
        if scaled_estimate(measured.counted, top) <= ceiling:
            return 0
        seen = self.turn.branch.state.calibrated_digests
        return min(unseen_tokens(request, seen, self.env.counter), measured.counted)

    async def notice_choice(self, view: tuple[Message, ...], text: str, intent: Intent) -> NoticeChoice:
        """Whether the turn ``text`` appended to ``view`` carries the size notice, decided as it will be sent.

        On the provider's count where the calibration asks for one: a notice
        that fits by our estimate but not by the provider's count is left out
        (the choice says why), so nothing that fits is refused for its sake.
        """

        def compiled(notice: str | None) -> Request:
            return self.shape.compile(view + (Instruction(text, notice=notice),), intent)

        self.adopt(self.shape.model)
        bare = compiled(None)
        settled = await self.settle(bare, self.shape.measure(bare))
        choice = choose_notice(lambda n: self.known(r := compiled(n), self.shape.measure(r)), self.ceiling)
        ceiling = self.ceiling.ceiling
        if choice.action != "notice" or choice.notice is None or ceiling is None:
            return choice
        counted = settled.measurement if settled.provider_count is not None else None
        noticed = await self.settle(compiled(choice.notice), choice.measurement, over=counted)
        for _ in range(_NOTICE_RECOUNTS):
            # Counted by the provider: the notice states that count (a figure of other digits is counted again).
            if noticed.provider_count is None or noticed.measurement.estimate == choice.measurement.estimate:
                break
            line = notice_line(noticed.measurement, ceiling)
            request = compiled(line)
            choice = attrs.evolve(choice, notice=line, measurement=noticed.measurement)
            noticed = await self.settle(request, self.shape.measure(request), over=counted)
        if noticed.measurement.estimate <= ceiling:
            return attrs.evolve(choice, measurement=noticed.measurement)
        return NoticeChoice(
            "omit",
            None,
            settled.measurement,
            f"estimate {settled.measurement.estimate} fits the ceiling {ceiling} only without the notice "
            f"(the provider counts {noticed.measurement.estimate} with it): sent without the notice",
        )

    @staticmethod
    def _exact_note(count: int, measured: Measurement) -> str:
        return f"decided on the provider's count {count} (ours: {measured.counted} x {measured.scale:g})"

    @staticmethod
    def _fallback(
        measured: Measurement, model: str, calibration: ModelCalibration, why: str, unseen: int = 0
    ) -> Settled:
        maximum = family_maximum(model)
        fallback = fallback_measurement(measured, maximum, calibration, unseen)
        if calibration.calibrated:
            how = "the calibration's upper bound" + (f" ({_unseen_note(unseen, model)})" if unseen else "")
        else:
            how = f"the uncalibrated maximum scale {uncalibrated_scale(maximum, calibration, measured):g} for {model}"
        note = f"{why}: decided on {fallback.estimate}, {how}"
        return Settled(fallback, METHOD_FALLBACK, None, note)


def _unseen_note(unseen: int, model: str) -> str:
    """What a decision says of the part of its request no calibration saw."""
    return (
        f"{unseen} of our tokens are new since the last calibrated request, bounded at "
        f"{family_maximum(model):g} x for {model}"
    )
