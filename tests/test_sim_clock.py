"""The manual clock the simulator runs on in tests and scenarios."""

from __future__ import annotations

import pytest

from runtime.sim.clock import ManualClock


def test_it_moves_only_when_advanced() -> None:
    clock = ManualClock(10.0)
    assert clock() == 10.0 == clock()
    assert clock.advance(2.5) == 12.5
    assert clock() == 12.5


@pytest.mark.parametrize("bad", [-1, float("inf"), float("nan"), True, "1"])
def test_bad_values_are_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="ManualClock: seconds"):
        ManualClock().advance(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ManualClock: now"):
        ManualClock(bad)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_its_sleep_advances_virtual_time() -> None:
    clock = ManualClock()
    await clock.sleep(300.0)
    assert clock() == 300.0
