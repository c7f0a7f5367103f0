"""Measuring in the provider's tokens from the first request: the pure half (issue 11, case 12).

Our count is o200k_base; Claude counts about 15% more (seed 000 saw 1.37 on
one claude-haiku-5-5 run), so an estimate at scale 1.0 lets a request the
provider counts over the ceiling through until a branch has calibrated. The
rules this module decides, for the send step to apply:

- **When to ask the provider for the exact count.** While the model's scale
  is uncalibrated (unless the request is under the ceiling even at
  :data:`UNCALIBRATED_MAX_SCALE`), and whenever the calibration's range
  around an estimate holds the ceiling (:meth:`ModelCalibration.bounds`:
  from the lowest ratio seen, less :data:`UNCERTAINTY`, to the scale, plus
  :data:`UNCERTAINTY`; the part of the request new since the last request
  the calibration took, :func:`unseen_tokens`, at the model family's
  uncalibrated maximum, :func:`unseen_scale`: DESIGN.md section 13, the
  contract on content it never saw), the decision waits for the provider's free
  count-tokens endpoint (``messages/count_tokens``; the simulator serves it)
  and decides on that count (:func:`needs_exact_count`,
  :func:`exact_measurement`). A request is thus refused without a count only
  when even its lowest bound is over the ceiling, and sent without one only
  when its highest bound fits.
- **Where there is no such endpoint, or the count failed**, a documented
  conservative figure stands in (:func:`fallback_measurement`): the model
  family's uncalibrated maximum (:func:`unseen_scale`: 1.0 for a family
  tokenized with o200k_base, else :data:`UNCALIBRATED_MAX_SCALE`, the most
  the simulator's token factor may be) while uncalibrated, the upper bound of
  :meth:`ModelCalibration.bounds` once calibrated.
- **The calibration belongs to the model configuration**: a
  :class:`CalibrationBook` holds one per model. A run starts every branch from
  one book; each branch adds its own evidence
  (:meth:`ModelCalibration.combined`), and a node starts with the evidence
  the nodes it depends on finished with (:func:`shared_evidence`, the one
  merge rule both schedulers call), so what it decides never hangs on the
  order in which concurrent branches are answered; every observation goes
  into the book the store keeps for the next run
  (:meth:`CalibrationBook.to_json`, :meth:`CalibrationBook.from_json`). A
  scale never falls.

No I/O, no clock: the caller sends the count request and stores the book.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterable, Mapping
from types import MappingProxyType
from typing import Any

import attrs

from runtime.measuring.calibration import MIN_CALIBRATION_TOKENS
from runtime.measuring.measure import Measurement, TokenCounter, check_scale, scaled_estimate
from runtime.request.compiler import Request

UNCERTAINTY = 0.05
"""How far a calibrated ratio may still move, as a share: the margin of :meth:`ModelCalibration.bounds`."""

MIN_SAMPLES = 1
"""Calibrating observations (of at least :data:`MIN_CALIBRATION_TOKENS` counted tokens) a model needs."""

UNCALIBRATED_MAX_SCALE = 2.0
"""The most provider tokens per o200k token assumed before a model is calibrated.

An uncalibrated request whose count times this is under the ceiling is sent
without asking for the exact count. No tokenizer on record comes near it: the
largest ratio seen is 1.37 (seed 000), the simulator's are at most its token
factor.
"""


def _check_low(_instance: object, _attribute: attrs.Attribute, value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"low: {value!r} is not a finite ratio >= 0")


@attrs.frozen
class ModelCalibration:
    """One model configuration's scale: provider tokens per o200k token, never falling.

    ``scale`` is the largest ratio seen (at least 1.0), ``low`` the smallest
    (None: none seen), ``samples`` how many observations of at least
    :data:`MIN_CALIBRATION_TOKENS` counted tokens there were (smaller ones,
    where fixed overheads dominate, move the range but do not calibrate).
    """

    scale: float = attrs.field(default=1.0, converter=check_scale)
    samples: int = 0
    low: float | None = attrs.field(default=None, validator=_check_low)

    @property
    def calibrated(self) -> bool:
        return self.samples >= MIN_SAMPLES

    def observe(self, counted: int, provider_count: int) -> ModelCalibration:
        """The calibration after the provider counted ``provider_count`` for what we counted at ``counted``."""
        for name, value in (("counted", counted), ("provider_count", provider_count)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name}: {value!r} is not a non-negative integer")
        if counted == 0:
            return self
        ratio = provider_count / counted
        return ModelCalibration(
            scale=max(self.scale, ratio),
            samples=self.samples + (1 if counted >= MIN_CALIBRATION_TOKENS else 0),
            low=ratio if self.low is None else min(self.low, ratio),
        )

    def joined(self, other: ModelCalibration) -> ModelCalibration:
        """The least calibration holding both: the larger scale, the lower low, the larger sample count.

        Unlike :meth:`combined` (two disjoint bodies of evidence), it may take
        the same evidence twice (a dependency's, reached through two paths)
        without counting it twice: commutative, associative and idempotent, so
        the order in which evidence arrives never matters, and nothing falls.
        """
        lows = [low for low in (self.low, other.low) if low is not None]
        return ModelCalibration(
            scale=max(self.scale, other.scale),
            samples=max(self.samples, other.samples),
            low=min(lows) if lows else None,
        )

    def combined(self, other: ModelCalibration) -> ModelCalibration:
        """Both calibrations' evidence at once: the larger scale, the samples of both, the lower low."""
        lows = [low for low in (self.low, other.low) if low is not None]
        return ModelCalibration(
            scale=max(self.scale, other.scale), samples=self.samples + other.samples, low=min(lows) if lows else None
        )

    def bounds(self, counted: int, unseen: int = 0, unseen_scale: float = UNCALIBRATED_MAX_SCALE) -> tuple[int, int]:
        """The least and the most the provider may count for what we counted at ``counted`` (calibrated only).

        From the lowest ratio seen less :data:`UNCERTAINTY` to the scale plus
        it. The ``unseen`` of the ``counted`` tokens (content new since the
        last request the calibration took: :func:`unseen_tokens`) are bounded
        above at ``unseen_scale`` instead (the model family's uncalibrated
        maximum, :data:`UNCALIBRATED_MAX_SCALE` unless its tokenizer is ours):
        a calibration describes the content it was fitted on, not new content.
        """
        unseen = min(max(unseen, 0), counted)
        low = min(self.low if self.low is not None else self.scale, self.scale)
        high = self.scale * (1 + UNCERTAINTY)
        top = scaled_estimate(counted - unseen, high) + scaled_estimate(unseen, max(high, check_scale(unseen_scale)))
        return math.floor(counted * low * (1 - UNCERTAINTY)), top


def needs_exact_count(
    counted: int,
    ceiling: int | None,
    calibration: ModelCalibration,
    unseen: int = 0,
    unseen_scale: float = UNCALIBRATED_MAX_SCALE,
) -> bool:
    """Whether the send must ask the provider for the exact count of a request we counted at ``counted``.

    No ceiling: never. Uncalibrated: unless ``counted`` x
    :data:`UNCALIBRATED_MAX_SCALE` is under the ceiling. Calibrated: when the
    ceiling lies within :meth:`ModelCalibration.bounds` (below the lower bound
    the request is over whatever the count, at or above the upper it fits),
    the ``unseen`` part bounded at ``unseen_scale``.
    """
    if ceiling is None:
        return False
    if not calibration.calibrated:
        return scaled_estimate(counted, UNCALIBRATED_MAX_SCALE) > ceiling
    low, high = calibration.bounds(counted, unseen, unseen_scale)
    return low <= ceiling < high


def unseen_scale(tokenizer: str | None) -> float:
    """The most provider tokens per o200k token content no calibration saw may cost, for a model family.

    1.0 for a family tokenized with o200k_base (our count is the provider's),
    else :data:`UNCALIBRATED_MAX_SCALE`: the simulator refuses token factors
    beyond it (:data:`runtime.inputs.bounds.MAX_TOKEN_FACTOR`), and no
    tokenizer on record comes near it.
    """
    return 1.0 if tokenizer == "o200k_base" else UNCALIBRATED_MAX_SCALE


def unseen_tokens(request: Request, seen: Collection[str], counter: TokenCounter) -> int:
    """Our count of the text ``request`` carries in messages none of the ``seen`` message digests has.

    ``seen`` holds the :meth:`~runtime.request.compiler.Request.message_digests` of
    the last request the branch's calibration took (DESIGN.md section 13, the
    contract on content it never saw). Images are left out: the provider
    counts them by the documented rule we count them by, not by their bytes.
    """
    known = frozenset(seen)
    unseen = 0
    for digest, message in zip(request.message_digests(), request.messages, strict=True):
        if digest in known:
            continue
        for block in message.blocks:
            unseen += counter.count(block.count_json if block.count_json is not None else block.json)
    return unseen


def exact_measurement(measured: Measurement, provider_count: int) -> Measurement:
    """``measured`` with its estimate replaced by the provider's exact count, the figure decided on."""
    if isinstance(provider_count, bool) or not isinstance(provider_count, int) or provider_count < 0:
        raise ValueError(f"provider_count: {provider_count!r} is not a non-negative integer")
    return attrs.evolve(measured, estimate=provider_count)


def uncalibrated_scale(prior: float, calibration: ModelCalibration, measured: Measurement) -> float:
    """The scale an uncalibrated fallback decides at: the family's ``prior``, the calibration's or the measured one."""
    return max(check_scale(prior), calibration.scale, measured.scale)


def fallback_measurement(
    measured: Measurement, prior: float, calibration: ModelCalibration, unseen: int = 0
) -> Measurement:
    """The conservative figure decided on when no exact count is to be had (no endpoint, or it failed).

    Uncalibrated: the count at ``prior`` (the model family's uncalibrated
    maximum, :func:`unseen_scale`) or the scale measured with, whichever is
    larger. Calibrated: the upper bound of :meth:`ModelCalibration.bounds`,
    its ``unseen`` part at ``prior`` (never below ``measured``).
    """
    if calibration.calibrated:
        estimate = calibration.bounds(measured.counted, unseen, prior)[1]
    else:
        estimate = scaled_estimate(measured.counted, uncalibrated_scale(prior, calibration, measured))
    return attrs.evolve(measured, estimate=max(estimate, measured.estimate))


def _frozen_modelcalibration(entries: Mapping[str, ModelCalibration]) -> Mapping[str, ModelCalibration]:
    return MappingProxyType(dict(entries))


@attrs.frozen
class CalibrationBook:
    """Calibrations by model configuration: what a run starts its branches from, or what it learned."""

    entries: Mapping[str, ModelCalibration] = attrs.field(factory=dict, converter=_frozen_modelcalibration)

    def get(self, model: str) -> ModelCalibration:
        return self.entries.get(model, ModelCalibration())

    def observe(self, model: str, counted: int, provider_count: int) -> CalibrationBook:
        return CalibrationBook({**self.entries, model: self.get(model).observe(counted, provider_count)})

    def joined(self, other: CalibrationBook) -> CalibrationBook:
        """Each model's calibrations joined (:meth:`ModelCalibration.joined`); models in either book."""
        models = sorted(set(self.entries) | set(other.entries))
        return CalibrationBook({m: self.get(m).joined(other.get(m)) for m in models})

    def to_json(self) -> str:
        """Canonical JSON for the store."""
        data = {m: {"scale": c.scale, "samples": c.samples, "low": c.low} for m, c in sorted(self.entries.items())}
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> CalibrationBook:
        """The book a store kept; a malformed one is refused naming what is wrong."""
        try:
            data: Any = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"stored calibration: not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise ValueError("stored calibration: not an object of model calibrations")
        entries: dict[str, ModelCalibration] = {}
        for model, raw in data.items():
            if not isinstance(raw, dict) or set(raw) != {"scale", "samples", "low"}:
                raise ValueError(f"stored calibration: {model!r}: expected scale, samples and low, got {raw!r}")
            samples = raw["samples"]
            if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
                raise ValueError(f"stored calibration: {model!r}.samples: {samples!r} is not a count")
            try:
                entries[model] = ModelCalibration(scale=raw["scale"], samples=samples, low=raw["low"])
            except ValueError as exc:
                raise ValueError(f"stored calibration: {model!r}: {exc}") from None
        return cls(entries)


def shared_evidence(books: Iterable[CalibrationBook]) -> CalibrationBook:
    """What a node starts with: the evidence its dependencies finished with, joined (the one merge rule).

    Both schedulers (in process, :mod:`runtime.flows.flow`; on Temporal, the flow
    workflow's) call it when a node starts, with the final books of the nodes
    it depends on: all of them have finished by then, so what the node starts
    from never hangs on which concurrent branch was answered first, and a
    resumed run (or the same flow on the other engine) starts it from the same
    book. The join (:meth:`CalibrationBook.joined`) is order-independent and
    idempotent (a dependency's evidence reached through two paths counts once)
    and never lowers a scale. A branch takes it with
    :meth:`actors.branch.Branch.take_evidence`.
    """
    shared = CalibrationBook()
    for book in books:
        if not isinstance(book, CalibrationBook):
            raise TypeError(f"shared_evidence: expected CalibrationBook values, got {type(book).__name__}")
        shared = shared.joined(book)
    return shared
