"""The input-ceiling policy: parse it, resolve it, and decide what a request does.

``max_input_tokens`` is a policy of foldline, never sent to a provider. It is a
positive int, ``"auto"``, ``"none"`` or unset, on a profile or a model
configuration, and may be lowered (never raised) per call. Unset and
``"auto"`` resolve to the first price tier's ``max_prompt_tokens`` for a model
the pricing table prices by prompt length, and to no ceiling for any other
model (the resolution says why). Before every send attempt, :func:`decide`
compares the request's estimate with the resolved ceiling; it is also the one
fold trigger (``can_fold``: at or past the fold line, or over the ceiling).
:func:`refusal` builds the error a refused request raises.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, Literal

import attrs

from runtime.errors import ConfigError, InputCeilingExceeded
from runtime.measuring.measure import Measurement
from runtime.models.pricing import PricingTable

AUTO = "auto"
NONE = "none"


class _Unset(enum.Enum):
    UNSET = "unset"

    def __repr__(self) -> str:
        return "UNSET"


UNSET = _Unset.UNSET
"""Pass this for a missing ``max_input_tokens`` key (an explicit None is refused)."""

CeilingPolicy = int | Literal["auto", "none"] | None
"""A parsed policy: a positive int, "auto", "none", or None for unset."""

CeilingSource = Literal["profile", "model", "call", "auto", "none", "unpriced"]
Action = Literal["pass", "notice", "fold", "refuse"]

DEFAULT_FOLD_AT = 0.8
"""The fold line's default share of the ceiling (``context_fold_at``)."""

DEFAULT_NOTICE_AT = DEFAULT_FOLD_AT
"""A turn appended at or past this share of the ceiling carries the size notice: the fold line."""

# A threshold within this distance of an integer is taken as that integer
# (0.14 x 100000 is 14000.000000000002 in binary floating point).
_FLOAT_NOISE_DECIMALS = 6


def parse_max_input_tokens(value: Any, where: str) -> CeilingPolicy:
    """Parse a ``max_input_tokens`` value from a scenario file or from code.

    ``where`` is the key path (``"scenarios/x.toml: nodes[2].max_input_tokens"``).
    Returns the positive int, ``"auto"``, ``"none"``, or None when ``value`` is
    :data:`UNSET` (a missing key). Refuses with :class:`ConfigError` naming
    ``where`` and the value: 0, negatives, booleans, floats (even integral ones),
    numeric strings, other words, and an explicit None.
    """
    if value is UNSET:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return int(value)
    if isinstance(value, str) and value in (AUTO, NONE):
        return value  # type: ignore[return-value]
    raise ConfigError(f'{where}: {value!r} is not a positive integer, "auto" or "none"')


def _check_parsed(value: Any, where: str) -> CeilingPolicy:
    """Accept an already parsed policy (None meaning unset), refusing anything else."""
    if value is None or value is UNSET:
        return None
    return parse_max_input_tokens(value, where)


@attrs.frozen
class ResolvedCeiling:
    """The ceiling in force for one request and where it came from.

    ``tier`` is the price-tier index an ``"auto"`` resolution read (0: the
    first tier), else None. ``reason`` is a sentence for the decision event.
    """

    ceiling: int | None
    source: CeilingSource
    tier: int | None
    reason: str


def _resolve_auto(model: str, pricing: PricingTable, how: str, source: CeilingSource) -> ResolvedCeiling:
    """Auto for ``model``; ``how`` names what asked for it ("unset", "auto (profile)", ...)."""
    entry = pricing.entry(model)
    if entry is None:
        return ResolvedCeiling(None, "unpriced", None, f"{how} on unpriced model {model}: no ceiling")
    if not entry.is_tier_priced:
        return ResolvedCeiling(None, "unpriced", None, f"{how} on flat-priced {model}: no ceiling")
    bound = entry.tiers[0].max_prompt_tokens
    read_as = f"{how}, read as auto" if how == "unset" else how
    return ResolvedCeiling(bound, source, 0, f"{read_as}: first price tier of {model} ends at {bound} prompt tokens")


def _resolve_policy(
    value: CeilingPolicy, origin: Literal["profile", "model"], model: str, pricing: PricingTable
) -> ResolvedCeiling:
    if value is None:
        return _resolve_auto(model, pricing, "unset", "auto")
    if value == AUTO:
        return _resolve_auto(model, pricing, f"auto ({origin})", "auto")
    if value == NONE:
        return ResolvedCeiling(None, "none", None, f'{origin} max_input_tokens is "none": no ceiling')
    return ResolvedCeiling(value, origin, None, f"{origin} max_input_tokens: {value}")  # type: ignore[arg-type]


def resolve_ceiling(
    *,
    model: str,
    profile_value: CeilingPolicy,
    model_value: CeilingPolicy,
    call_value: CeilingPolicy,
    pricing: PricingTable,
) -> ResolvedCeiling:
    """Resolve the ceiling of one request.

    The profile's value if set, else the model configuration's, else unset
    (read as auto). A per-call value may lower the result, never raise it: a
    call value above the ceiling, or a call ``"none"`` (or a call ``"auto"``
    that finds no ceiling) under one, raises :class:`ConfigError` naming
    ``call.max_input_tokens`` and both values. A call ``"auto"`` resolves like
    auto for the model and then follows the same rule.
    """
    profile = _check_parsed(profile_value, "profile.max_input_tokens")
    configured = _check_parsed(model_value, "model.max_input_tokens")
    call = _check_parsed(call_value, "call.max_input_tokens")
    if profile is not None:
        base = _resolve_policy(profile, "profile", model, pricing)
    else:
        base = _resolve_policy(configured, "model", model, pricing)
    if call is None:
        return base
    if call == NONE:
        wanted = ResolvedCeiling(None, "call", None, 'call max_input_tokens is "none"')
    elif call == AUTO:
        wanted = _resolve_auto(model, pricing, "auto (call)", "call")
    else:
        wanted = ResolvedCeiling(call, "call", None, f"call max_input_tokens: {call}")  # type: ignore[arg-type]
    if base.ceiling is None:
        return wanted if wanted.ceiling is not None else base
    if wanted.ceiling is None or wanted.ceiling > base.ceiling:
        found = "no ceiling" if wanted.ceiling is None else str(wanted.ceiling)
        detail = f" (resolves to {found})" if call == AUTO else ""
        raise ConfigError(
            f"call.max_input_tokens: {call!r}{detail} would raise the ceiling {base.ceiling} "
            f"({base.reason}); a per-call value may only lower it, never raise or remove it"
        )
    if wanted.ceiling == base.ceiling:
        return base
    return attrs.evolve(wanted, reason=f"{wanted.reason}, below {base.ceiling} ({base.reason})")


@attrs.frozen
class Decision:
    """What to do with a measured request: ``pass``, ``notice``, ``fold`` or ``refuse``."""

    action: Action
    estimate: int
    ceiling: int | None
    reason: str


def _check_fraction(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ValueError(f"{name}: {value!r} is not a fraction of the ceiling in (0, 1]")
    return float(value)


def line_at(fraction: float, ceiling: int) -> float:
    """``fraction`` x ``ceiling`` in tokens, with binary floating-point noise rounded away."""
    return round(fraction * ceiling, _FLOAT_NOISE_DECIMALS)


def _tokens(line: float) -> str:
    """A threshold as text: whole numbers without a decimal point or exponent."""
    return str(int(line)) if line == int(line) else f"{line:.2f}"


def decide(
    measurement: Measurement,
    resolved: ResolvedCeiling,
    *,
    can_fold: bool,
    fold_at: float = DEFAULT_FOLD_AT,
    notice_at: float = DEFAULT_NOTICE_AT,
) -> Decision:
    """Decide one send attempt.

    No ceiling: pass. Over the ceiling (strictly greater; equal is sent): fold
    when ``can_fold``, else refuse. At or past ``fold_at`` x ceiling with
    ``can_fold``: fold. At or past ``notice_at`` x ceiling: notice. Else pass.
    """
    fold_at = _check_fraction("fold_at", fold_at)
    notice_at = _check_fraction("notice_at", notice_at)
    estimate, ceiling = measurement.estimate, resolved.ceiling
    if ceiling is None:
        return Decision("pass", estimate, None, f"estimate {estimate}; {resolved.reason}")
    if estimate > ceiling:
        if can_fold:
            return Decision("fold", estimate, ceiling, f"estimate {estimate} is over the ceiling {ceiling}: fold")
        return Decision(
            "refuse", estimate, ceiling, f"estimate {estimate} is over the ceiling {ceiling} and nothing may fold"
        )
    fold_line = line_at(fold_at, ceiling)
    if can_fold and estimate >= fold_line:
        return Decision(
            "fold",
            estimate,
            ceiling,
            f"estimate {estimate} reaches the fold line {_tokens(fold_line)} ({fold_at:g} x ceiling {ceiling})",
        )
    notice_line_at = line_at(notice_at, ceiling)
    if estimate >= notice_line_at:
        return Decision(
            "notice",
            estimate,
            ceiling,
            f"estimate {estimate} reaches {_tokens(notice_line_at)} ({notice_at:g} x ceiling {ceiling}): notice",
        )
    return Decision(
        "pass",
        estimate,
        ceiling,
        f"estimate {estimate} is under {_tokens(notice_line_at)} ({notice_at:g} x ceiling {ceiling})",
    )


def notice_line(measurement: Measurement, ceiling: int) -> str:
    """The one line a turn at or past the notice line carries; the same numbers give the same text."""
    if isinstance(ceiling, bool) or not isinstance(ceiling, int) or ceiling <= 0:
        raise ValueError(f"ceiling: {ceiling!r} is not a positive integer")
    percent = measurement.estimate * 100 // ceiling
    return (
        f"[context] This request is about {measurement.estimate} tokens, {percent}% of its "
        f"{ceiling}-token ceiling. Your context tool can reduce it: fold marks spans to fold, "
        "read_result reads a folded original in ranges, restore brings one back when it fits."
    )


def refusal(
    measurement: Measurement,
    ceiling: int,
    *,
    branch_id: str | None = None,
    describe: Callable[[str], str] = str,
) -> InputCeilingExceeded:
    """The error for refusing ``measurement`` under ``ceiling`` (the caller raises it).

    ``describe`` turns a measured part's label (a message id, ``"tools"``, ...)
    into the words the error shows for it (the send path names a message by
    its record index and kind).
    """
    return InputCeilingExceeded(
        estimate=measurement.estimate,
        ceiling=ceiling,
        counted=measurement.counted,
        scale=measurement.scale,
        largest_parts=[(describe(label), tokens) for label, tokens in measurement.parts],
        branch_id=branch_id,
    )
