"""Per-model facts the simulated server enforces, as data.

``min_cacheable_tokens`` is the shortest prefix a cache mark may write (a
shorter one is processed without caching and without an error);
``context_window`` is the most input tokens a request may carry (past it the
API answers 400 "prompt is too long"). Both are in the simulator's own token
count.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import attrs

from runtime.sim.errors import SimAPIError


@attrs.frozen
class ModelFacts:
    name: str
    min_cacheable_tokens: int
    context_window: int


MODELS: Mapping[str, ModelFacts] = MappingProxyType(
    {
        facts.name: facts
        for facts in (
            ModelFacts("claude-haiku-5-5", 512, 1_000_000),
            ModelFacts("claude-haiku-4-5", 4_096, 200_000),
            ModelFacts("claude-sonnet-4-5", 1_024, 200_000),
            ModelFacts("claude-sonnet-5", 1_024, 1_000_000),
            ModelFacts("claude-opus-4-6", 4_096, 200_000),
            ModelFacts("claude-opus-5", 512, 1_000_000),
        )
    }
)


def model_facts(model: str) -> ModelFacts:
    """The facts of ``model``; an unknown model is the API's 404 ``not_found_error``."""
    facts = MODELS.get(model)
    if facts is None:
        raise SimAPIError(404, "not_found_error", f"model: {model}")
    return facts
