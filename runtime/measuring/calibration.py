"""The branch's calibration: how much larger the provider counts than o200k_base does.

Our tokenizer is not the provider's. After a completed response, the provider's
reported input (fresh + cache read + cache write) divided by our count of the
same request is the ratio between the two; the scale takes the largest ratio
seen, so an estimate is never below what the provider has shown it counts. It
starts at 1.0 and never falls. Small requests are skipped: below
:data:`MIN_CALIBRATION_TOKENS` counted tokens, fixed overheads the provider adds
would dominate the ratio.
"""

from __future__ import annotations

import attrs

from runtime.measuring.measure import check_scale
from runtime.values.usage import Usage

MIN_CALIBRATION_TOKENS = 4000
"""The smallest counted input a response may calibrate from."""


@attrs.frozen
class Calibration:
    """A branch's scale (>= 1.0). Clones and stored branches keep it."""

    scale: float = attrs.field(default=1.0, converter=check_scale)

    def after_response(self, counted: int, usage: Usage) -> Calibration:
        """The calibration after a completed response to a request we counted at ``counted``.

        With ``counted`` >= :data:`MIN_CALIBRATION_TOKENS` the scale becomes
        max(scale, usage.total_input / counted); otherwise it is unchanged.
        """
        if isinstance(counted, bool) or not isinstance(counted, int) or counted < 0:
            raise ValueError(f"counted: {counted!r} is not a non-negative integer")
        if not isinstance(usage, Usage):
            raise TypeError(f"usage: expected a runtime.values.usage.Usage, got {type(usage).__name__}")
        if counted < MIN_CALIBRATION_TOKENS:
            return self
        ratio = usage.total_input / counted
        if ratio <= self.scale:
            return self
        return Calibration(scale=ratio)
