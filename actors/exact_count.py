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
from runtime.measuring.measure import Measurement
from runtime.measuring.model_calibration import (
    ModelCalibration,
    exact_measurement,
    fallback_measurement,
    needs_exact_count,
    uncalibrated_scale,
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


def branch_calibration(env: RunEnv, branch: Branch, model: str) -> ModelCalibration:
    """``branch``'s calibration of ``model``: what the run started from, with the branch's own evidence."""
    return env.calibration.get(model).combined(branch.calibrations.get(model))


def uncalibrated_prior(env: RunEnv, branch: Branch, model: str) -> float:
    """The scale ``branch`` measures ``model`` at least: its family's prior while no exact count is to be had.

    A provider with a count endpoint gives the exact count where it matters,
    and a calibrated model has its own scale: 1.0 for both. Otherwise the
    model table's prior for the family (1.0 for a family tokenized with
    o200k_base), so that a fold plans on the figure the send decides on.
    """
    if env.provider.counts_tokens:
        return 1.0
    if branch_calibration(env, branch, model).calibrated:
        return 1.0
    return default_model_table().token_prior(model)


@attrs.define(eq=False)
class ExactCounts:
    """One turn's exact counts (see the module docstring)."""

    turn: Turn
    env: RunEnv
    ceiling: ResolvedCeiling
    shape: RequestShape
    calls: int = 0
    """Count-tokens calls made since the last decision was published (the pipeline takes them)."""
    _known: dict[str, int] = attrs.field(factory=dict, init=False)
    _failed: str | None = attrs.field(default=None, init=False)

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
        count = self._known.get(request.digest)
        return measured if count is None else exact_measurement(measured, count)

    async def settle(self, request: Request, measured: Measurement) -> Settled:
        """The measurement to decide ``request`` on: the provider's count when the calibration asks for it."""
        ceiling = self.ceiling.ceiling
        if ceiling is None:
            return Settled(measured)
        count = self._known.get(request.digest)
        if count is not None:
            return Settled(exact_measurement(measured, count), METHOD_EXACT, count, self._exact_note(count, measured))
        model = request.settings.model
        calibration = self.calibration(model)
        calibration = attrs.evolve(calibration, scale=max(calibration.scale, measured.scale))
        if not needs_exact_count(measured.counted, ceiling, calibration):
            return Settled(measured)
        provider = self.env.provider
        if not provider.counts_tokens:
            return self._fallback(
                measured, model, calibration, f"provider {provider.name} has no count-tokens endpoint"
            )
        if self._failed is not None:
            return self._fallback(
                measured, model, calibration, f"an earlier count of this turn failed ({self._failed})"
            )
        self.calls += 1
        self.env.calibration.count_calls += 1
        try:
            with anyio.fail_after(self.env.count_timeout_s):
                count = await provider.count_tokens(request)
        except (ProviderError, TimeoutError) as exc:
            self.env.calibration.count_failures += 1
            self._failed = str(exc) or f"no answer within {self.env.count_timeout_s:g} s"
            log.warning("count_tokens failed", branch=self.turn.branch.id, error=self._failed)
            return self._fallback(measured, model, calibration, f"count_tokens failed: {self._failed}")
        self._known[request.digest] = count
        self.env.calibration.observe(model, measured.counted, count)
        self.turn.observe_count(model, measured.counted, count)
        self.adopt(model)
        return Settled(exact_measurement(measured, count), METHOD_EXACT, count, self._exact_note(count, measured))

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
        noticed = await self.settle(compiled(choice.notice), choice.measurement)
        for _ in range(_NOTICE_RECOUNTS):
            # Counted by the provider: the notice states that count (a figure of other digits is counted again).
            if noticed.provider_count is None or noticed.measurement.estimate == choice.measurement.estimate:
                break
            line = notice_line(noticed.measurement, ceiling)
            request = compiled(line)
            choice = attrs.evolve(choice, notice=line, measurement=noticed.measurement)
            noticed = await self.settle(request, self.shape.measure(request))
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
    def _fallback(measured: Measurement, model: str, calibration: ModelCalibration, why: str) -> Settled:
        prior = default_model_table().token_prior(model)
        fallback = fallback_measurement(measured, prior, calibration)
        if calibration.calibrated:
            how = "the calibration's upper bound"
        else:
            how = f"the prior scale {uncalibrated_scale(prior, calibration, measured):g} for {model}"
        note = f"{why}: decided on {fallback.estimate}, {how}"
        return Settled(fallback, METHOD_FALLBACK, None, note)
