"""Ceilings and output caps checked against each other and the model, at load (pure).

A per-call ``max_input_tokens`` may only lower the ceiling it runs under, and
that ceiling is known before anything runs: the profile's value if set, else
the model configuration's (``[provider] max_input_tokens``), else auto (the
first price tier for a tier-priced model). :func:`check_call_ceiling` resolves
the ceiling exactly as a send will (:func:`runtime.decision.ceiling.resolve_ceiling`),
so a value the send would refuse is refused here instead, naming the key path,
before any node runs and before anything is sent.

The model table bounds the rest: an integer ceiling above the model's context
window, and a ``max_tokens`` above its output limit, are refused. Where the
table does not know a figure nothing is invented; the window then bounds
nothing and ``max_tokens`` keeps its generic bound.
"""

from __future__ import annotations

from runtime.config.checks import CeilingValue, render_value
from runtime.config.profile import Profile
from runtime.decision.ceiling import resolve_ceiling
from runtime.errors import ConfigError
from runtime.models.limits import ModelTable, default_model_table
from runtime.models.pricing import PricingTable

_PRICING: PricingTable | None = None


def default_pricing() -> PricingTable:
    """The packaged pricing table, read once (what ``auto`` resolves against at load)."""
    global _PRICING
    if _PRICING is None:
        _PRICING = PricingTable.load_default()
    return _PRICING


def check_call_ceiling(
    *,
    where: str,
    model: str,
    profile_value: CeilingValue,
    model_value: CeilingValue,
    call_value: CeilingValue,
    pricing: PricingTable | None = None,
) -> None:
    """Refuse a per-call value that would raise or remove the ceiling it runs under.

    ``where`` is the call value's key path (``nodes[1].max_input_tokens``).
    """
    if call_value is None:
        return
    try:
        resolve_ceiling(
            model=model,
            profile_value=profile_value,
            model_value=model_value,
            call_value=call_value,
            pricing=pricing or default_pricing(),
        )
    except ConfigError as exc:
        detail = str(exc).removeprefix("call.max_input_tokens: ")
        raise ConfigError(f"{where}: {detail}") from None


def check_call_under_profile(call_value: CeilingValue, profile: Profile, *, where: str) -> None:
    """What a code-built node can decide without the run's model configuration.

    Under a profile's integer ceiling a call may not be ``"none"`` nor a larger
    integer; a call ``"auto"`` is resolved when the profile names its model.
    The model-level value (the provider's) is checked when the run starts.
    """
    limit = profile.max_input_tokens
    if call_value is None or not isinstance(limit, int):
        return
    if call_value == "none" or (isinstance(call_value, int) and call_value > limit):
        raise ConfigError(
            f"{where}: {render_value(call_value)} would raise the profile's ceiling of {limit}; "
            f"a per-call value may only lower it, never raise or remove it"
        )
    if call_value == "auto" and profile.model is not None:
        check_call_ceiling(
            where=where, model=profile.model, profile_value=limit, model_value=None, call_value=call_value
        )


def check_window(value: CeilingValue, *, where: str, model: str, table: ModelTable | None = None) -> None:
    """Refuse an integer ceiling above ``model``'s context window (when the table knows it)."""
    if not isinstance(value, int) or isinstance(value, bool):
        return
    window = (table or default_model_table()).context_window(model)
    if window is not None and value > window:
        raise ConfigError(
            f"{where}: {render_value(value)} is above the context window of {model} ({window} tokens, "
            f"from the model table); no request can carry more, so the ceiling must be at most {window}"
        )


def check_output_limit(value: int, *, where: str, model: str, table: ModelTable | None = None) -> None:
    """Refuse a ``max_tokens`` above ``model``'s output limit (when the table knows it)."""
    limit = (table or default_model_table()).max_output_tokens(model)
    if limit is not None and value > limit:
        raise ConfigError(
            f"{where}: {render_value(value)} is above the output limit of {model} ({limit} tokens, "
            f"from the model table); expected a positive integer <= {limit}"
        )
