"""The model a benchmark runs and prices on: checked to be priced and served (pure).

(Moved out of :mod:`runtime.bench.harness`, which re-exports both.)
"""

from __future__ import annotations

from runtime.config import Scenario
from runtime.errors import ConfigError
from runtime.models.pricing import PricingTable


def priced_model(pricing: PricingTable, model: str) -> None:
    """Check that ``model`` has every price the bench needs (output included) and that the simulator serves it.

    ConfigError naming the model and what is missing otherwise.
    """
    from runtime.sim.models import served_models

    served = served_models()
    tier = pricing.first_tier(model)
    if tier is None:
        raise ConfigError(
            f"--model: {model!r} is not in the pricing table; priced models: "
            f"{', '.join(sorted(m for m in served if pricing.first_tier(m) is not None))}"
        )
    missing = [name for name in ("input", "output", "cache_read", "cache_write_5m") if getattr(tier, name) is None]
    if missing:
        raise ConfigError(
            f"--model: {model!r} has no {', '.join(missing)} price in the pricing table; the bench "
            "prices what users pay, so it needs every price"
        )
    if model not in served:
        raise ConfigError(f"--model: the simulated server does not serve {model!r}; it serves {', '.join(served)}")


def with_model(scenario: Scenario, model: str) -> Scenario:
    """``scenario`` run on ``model`` (the provider's model; ceilings and scripts unchanged)."""
    return scenario.evolve(provider=scenario.provider.evolve(model=model))
