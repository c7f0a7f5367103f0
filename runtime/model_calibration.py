"""Measuring in the provider's tokens from the first request: the pure half (issue 11, case 12).

Our count is o200k_base; Claude counts about 15% more (seed 000 saw 1.37 on
one claude-haiku-5-5 run), so an estimate at scale 1.0 lets a request the
provider counts over the ceiling through until a branch has calibrated. The
rules this module decides, for the send step to apply:

- **When to ask the provider for the exact count.** While the model's scale
  is uncalibrated, and whenever an estimate lies within the calibration's
  uncertainty of the ceiling (:data:`UNCERTAINTY` of it), the decision waits
  for the provider's free count-tokens endpoint (``messages/count_tokens``;
  the simulator serves it) and decides on that count
  (:func:`needs_exact_count`, :func:`exact_measurement`).
- **Where there is no such endpoint**, a documented conservative prior for the
  model family stands in until a response calibrates (:func:`prior_scale`).
- **The calibration belongs to the model configuration**, not to a branch:
  one :class:`CalibrationBook` per run is shared by every branch on the same
  model, is kept in the store for the next run (:meth:`CalibrationBook.to_json`,
  :meth:`CalibrationBook.from_json`) and never falls.

No I/O, no clock: the caller sends the count request and stores the book.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs

from runtime.measure import Measurement, check_scale

UNCERTAINTY = 0.05
"""A calibrated estimate this close to the ceiling (as a share of it) is checked with an exact count."""

MIN_SAMPLES = 1
"""Exact counts (or calibrating responses) a model needs before its scale counts as calibrated."""

FAMILY_PRIORS: Mapping[str, float] = MappingProxyType({"claude-": 1.37})
"""Conservative scales by model-name prefix, for a provider with no count endpoint.

``claude-``: 1.37, the largest provider/o200k ratio on record (seed 000, D3:
93,525 and 95,483 input tokens counted by the provider for requests counted at
68,308 and 69,836 here). A model of no listed family has no prior (1.0).
"""


def prior_scale(model: str) -> float:
    """The conservative starting scale for ``model`` where no exact count is available."""
    for prefix, scale in FAMILY_PRIORS.items():
        if model.startswith(prefix):
            return scale
    return 1.0


@attrs.frozen
class ModelCalibration:
    """One model configuration's scale: provider tokens per o200k token, never falling."""

    scale: float = attrs.field(default=1.0, converter=check_scale)
    samples: int = 0

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
        return ModelCalibration(scale=max(self.scale, provider_count / counted), samples=self.samples + 1)


def needs_exact_count(estimate: int, ceiling: int | None, calibration: ModelCalibration) -> bool:
    """Whether the send must ask the provider for the exact count before deciding.

    No ceiling: never. Uncalibrated: always. Calibrated: when the estimate lies
    within :data:`UNCERTAINTY` of the ceiling, on either side.
    """
    if ceiling is None:
        return False
    if not calibration.calibrated:
        return True
    return abs(estimate - ceiling) <= math.ceil(UNCERTAINTY * ceiling)


def exact_measurement(measured: Measurement, provider_count: int) -> Measurement:
    """``measured`` with its estimate replaced by the provider's exact count (never below our own)."""
    if isinstance(provider_count, bool) or not isinstance(provider_count, int) or provider_count < 0:
        raise ValueError(f"provider_count: {provider_count!r} is not a non-negative integer")
    return attrs.evolve(measured, estimate=max(provider_count, measured.counted))


def _frozen_modelcalibration(entries: Mapping[str, ModelCalibration]) -> Mapping[str, ModelCalibration]:
    return MappingProxyType(dict(entries))


@attrs.frozen
class CalibrationBook:
    """The run's calibrations by model configuration, shared by all its branches."""

    entries: Mapping[str, ModelCalibration] = attrs.field(factory=dict, converter=_frozen_modelcalibration)

    def get(self, model: str) -> ModelCalibration:
        return self.entries.get(model, ModelCalibration())

    def observe(self, model: str, counted: int, provider_count: int) -> CalibrationBook:
        return CalibrationBook({**self.entries, model: self.get(model).observe(counted, provider_count)})

    def to_json(self) -> str:
        """Canonical JSON for the store."""
        data = {m: {"scale": c.scale, "samples": c.samples} for m, c in sorted(self.entries.items())}
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
            if not isinstance(raw, dict) or set(raw) != {"scale", "samples"}:
                raise ValueError(f"stored calibration: {model!r}: expected scale and samples, got {raw!r}")
            samples = raw["samples"]
            if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
                raise ValueError(f"stored calibration: {model!r}.samples: {samples!r} is not a count")
            entries[model] = ModelCalibration(scale=raw["scale"], samples=samples)
        return cls(entries)
