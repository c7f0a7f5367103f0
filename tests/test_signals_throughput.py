"""The bus micro-benchmark: it checks its own accounting before it reports a figure."""

from __future__ import annotations

import math

import pytest

from signals.throughput import measure_bus_throughput

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("policy", ["block", "drop_oldest"])
@pytest.mark.parametrize("subscribers", [1, 3])
async def test_measure_bus_throughput_reports_a_rate_after_every_reader_accounted_for_every_event(
    policy: str, subscribers: int
) -> None:
    # 3,000 events over buffers of 1,024: the block readers must have applied backpressure
    # and the drop_oldest ones reported gaps; the function raises if any event is unaccounted for.
    rate = await measure_bus_throughput(3000, subscribers, policy)
    assert isinstance(rate, float)
    assert math.isfinite(rate) and rate > 0


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((0, 1, "block"), "events: 0 is not a positive integer"),
        ((10, 0, "block"), "subscribers: 0 is not a positive integer"),
        ((10, True, "block"), "subscribers: True is not a positive integer"),
        ((10, 1, "fast"), "policy: 'fast' is not one of 'block', 'drop_oldest'"),
    ],
)
async def test_bad_benchmark_arguments_are_refused(arguments: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        await measure_bus_throughput(*arguments)
