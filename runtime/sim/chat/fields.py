"""The standard chat-completions fields the simulator takes beyond what it answers from, each checked (pure).

Per field, what the simulated server does with it, as OpenAI documents it:

- ignored after a range check (they shape sampling, billing or storage, which
  the deterministic simulator has no use for): ``temperature`` (0 to 2), ``top_p`` (0 to 1),
  ``frequency_penalty`` and ``presence_penalty`` (-2 to 2), ``seed`` (an
  integer), ``logit_bias`` (token ids to -100..100), ``metadata`` (at most 16
  string pairs), ``store`` (boolean), ``service_tier``, ``verbosity``,
  ``safety_identifier``, ``prompt_cache_retention``, ``modalities``
  (``["text"]`` only), ``top_logprobs`` (0 to 20, with ``logprobs``);
- honoured: ``n`` (1 only: one choice, as asked) and ``logprobs`` (false or
  absent: the simulator has no token probabilities, so ``true`` is refused
  saying so).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SERVICE_TIERS = ("auto", "default", "flex", "scale", "priority")
VERBOSITIES = ("low", "medium", "high")
RETENTIONS = ("in_memory", "24h")
STANDARD_FIELDS = frozenset(
    {
        "top_p",
        "frequency_penalty",
        "presence_penalty",
        "seed",
        "logit_bias",
        "metadata",
        "store",
        "service_tier",
        "verbosity",
        "safety_identifier",
        "prompt_cache_retention",
        "modalities",
        "n",
        "logprobs",
        "top_logprobs",
    }
)


class FieldError(ValueError):
    """A standard field with a value it may not have: the field, the value and what was expected."""

    def __init__(self, field: str, value: Any, expected: str) -> None:
        super().__init__(f"{field}: {str(value)[:80]} is not {expected}")
        self.field = field


def _error(field: str, value: Any, expected: str) -> FieldError:
    return FieldError(field, value, expected)


def _number(body: Mapping[str, Any], field: str, low: float, high: float) -> None:
    value = body.get(field)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise _error(field, value, f"a number from {low:g} to {high:g}")


def _choice(body: Mapping[str, Any], field: str, options: tuple[str, ...]) -> None:
    value = body.get(field)
    if value is not None and value not in options:
        raise _error(field, value, "one of " + ", ".join(options))


def check_standard_fields(body: Mapping[str, Any]) -> None:
    """Check the fields of :data:`STANDARD_FIELDS` a body carries (see the module docstring); FieldError if not."""
    _number(body, "temperature", 0, 2)
    _number(body, "top_p", 0, 1)
    _number(body, "frequency_penalty", -2, 2)
    _number(body, "presence_penalty", -2, 2)
    _choice(body, "service_tier", SERVICE_TIERS)
    _choice(body, "verbosity", VERBOSITIES)
    _choice(body, "prompt_cache_retention", RETENTIONS)
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise _error("seed", seed, "an integer")
    for field in ("store", "logprobs"):
        if body.get(field) is not None and not isinstance(body[field], bool):
            raise _error(field, body[field], "true or false")
    if body.get("logprobs") is True:
        raise _error("logprobs", True, "false: the simulator has no token probabilities to return")
    top = body.get("top_logprobs")
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= 20):
        raise _error("top_logprobs", top, "an integer from 0 to 20")
    n = body.get("n")
    if n is not None and n != 1:
        raise _error("n", n, "1 (the simulator answers one choice)")
    _check_maps(body)


def _check_maps(body: Mapping[str, Any]) -> None:
    metadata = body.get("metadata")
    if metadata is not None and (
        not isinstance(metadata, Mapping)
        or len(metadata) > 16
        or not all(
            isinstance(k, str) and len(k) <= 64 and isinstance(v, str) and len(v) <= 512 for k, v in metadata.items()
        )
    ):
        raise _error("metadata", metadata, "an object of at most 16 string keys (64 chars) and values (512 chars)")
    bias = body.get("logit_bias")
    if bias is not None and (
        not isinstance(bias, Mapping)
        or len(bias) > 300
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and -100 <= v <= 100 for v in bias.values())
    ):
        raise _error("logit_bias", bias, "an object of token ids to numbers from -100 to 100")
    for field in ("safety_identifier",):
        value = body.get(field)
        if value is not None and (not isinstance(value, str) or len(value) > 512):
            raise _error(field, value, "a string of at most 512 characters")
    modalities = body.get("modalities")
    if modalities is not None and modalities != ["text"]:
        raise _error("modalities", modalities, '["text"] (the simulator answers text only)')
