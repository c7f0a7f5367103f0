"""The model table: each model's context window and output limit, as data.

``runtime/data/models.toml`` ships with foldline beside the pricing table and
follows its rules: every entry says where its figures come from (``source``)
and when they were read (``read_on``); a figure nobody has read is absent,
never invented, and every query that needs one says so (``None``).

File shape::

    schema = "foldline.models/v1"

    [models.claude-opus-4-6]
    source = "https://... (where the figures were read)"
    read_on = 2026-11-30
    context_window = 1000000      # the most input tokens one request may carry
    max_output_tokens = 128000    # the most max_tokens a request may ask for
    structured_outputs = false    # optional: the model lacks structured outputs (default true)

``structured_outputs`` says whether the model takes a typed result's
``output_config.format``. Absent means true (the default: every current model
does, and a model that does not refuses the request loudly rather than
answering wrongly). A model marked ``false`` is asked for a typed result
through a final-answer tool instead (:mod:`actors.final_tool`).

The context window is a hard ceiling whatever the configuration says: a
request over it is refused before it is sent (or folded), whatever its
``max_input_tokens``.

The table also holds a **token prior per model family** (``[families."PREFIX"]``:
a model belongs to the family of the longest listed prefix of its name): the
largest provider/o200k_base ratio on record for the family, and its tokenizer
when known. Where no exact count is to be had (chat completions has no count
endpoint, or a count failed), a send decides at the family's *uncalibrated
maximum* instead (issue 28: a prior is what was seen, not a bound): 1.0 for a
family whose ``tokenizer`` is o200k_base, else 2.0
(:func:`actors.exact_count.family_maximum`,
:func:`runtime.measuring.model_calibration.unseen_scale`)::

    [families."claude-"]
    source = "... (where the ratio was observed)"
    read_on = 2026-10-17
    token_prior = 1.37            # provider tokens per o200k_base token, from 1.0 to 2.0
    tokenizer = "o200k_base"      # optional: the family's own tokenizer, when it is known

A family whose tokenizer is foldline's (o200k_base) has the prior 1.0: our
count is the provider's. A model of no listed family takes the largest prior
the table lists (:meth:`ModelTable.token_prior`): no figure on record for it,
so the most conservative one that is. Loading reads a file; everything else
here is pure.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs

from runtime.errors import ConfigError

MODELS_SCHEMA = "foldline.models/v1"
DEFAULT_MODELS_WHERE = "runtime/data/models.toml (packaged)"
_ENTRY_KEYS = frozenset(("source", "read_on", "context_window", "max_output_tokens", "structured_outputs"))
_FAMILY_KEYS = frozenset(("source", "read_on", "token_prior", "tokenizer"))
MIN_TOKEN_PRIOR = 1.0
MAX_TOKEN_PRIOR = 2.0
"""A prior's bounds: never below our count, never above the most any send assumes uncalibrated
(:data:`runtime.measuring.model_calibration.UNCALIBRATED_MAX_SCALE`)."""
_LIMIT_MAX = 2**63 - 1


@attrs.frozen
class ModelLimits:
    """What one model accepts: ``context_window`` and ``max_output_tokens`` (None: not known),
    and whether it takes structured outputs (None: not stated, taken as true)."""

    model: str
    source: str
    read_on: datetime.date
    context_window: int | None = None
    max_output_tokens: int | None = None
    structured_outputs: bool | None = None


def _limit(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _LIMIT_MAX:
        raise ConfigError(f"{where}: {value!r} is not a positive 64-bit integer")
    return value


def _entry(model: str, raw: Any, where: str) -> ModelLimits:
    at = f"{where}: models.{model}"
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{at}: expected a table, got {raw!r}")
    source, read_on = _sourced(at, raw, _ENTRY_KEYS)
    return ModelLimits(
        model=model,
        source=source,
        read_on=read_on,
        context_window=_limit(raw.get("context_window"), f"{at}.context_window"),
        max_output_tokens=_limit(raw.get("max_output_tokens"), f"{at}.max_output_tokens"),
        structured_outputs=_flag(raw.get("structured_outputs"), f"{at}.structured_outputs"),
    )


def _flag(value: Any, where: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise ConfigError(f"{where}: {value!r} is not true or false")


@attrs.frozen
class FamilyPrior:
    """One model family's token prior: provider tokens per o200k_base token until calibrated (see the module)."""

    prefix: str
    source: str
    read_on: datetime.date
    token_prior: float
    tokenizer: str | None = None


def _sourced(at: str, raw: Mapping[str, Any], keys: frozenset[str]) -> tuple[str, datetime.date]:
    unknown = sorted(set(raw) - keys)
    if unknown:
        raise ConfigError(f"{at}.{unknown[0]}: unknown key; expected one of {', '.join(sorted(keys))}")
    source = raw.get("source")
    if not isinstance(source, str) or not source.strip():
        raise ConfigError(f"{at}.source: missing; every entry says where its figures come from")
    read_on = raw.get("read_on")
    if not isinstance(read_on, datetime.date) or isinstance(read_on, datetime.datetime):
        raise ConfigError(f"{at}.read_on: {read_on!r} is not a date (read_on = 2026-11-30)")
    return source, read_on


def _family(prefix: str, raw: Any, where: str) -> FamilyPrior:
    at = f"{where}: families.{prefix}"
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{at}: expected a table, got {raw!r}")
    if not prefix:
        raise ConfigError(f"{at}: a family is a non-empty model-name prefix")
    source, read_on = _sourced(at, raw, _FAMILY_KEYS)
    prior = raw.get("token_prior")
    if (
        isinstance(prior, bool)
        or not isinstance(prior, (int, float))
        or not MIN_TOKEN_PRIOR <= prior <= MAX_TOKEN_PRIOR
    ):
        raise ConfigError(
            f"{at}.token_prior: {prior!r} is not a number from {MIN_TOKEN_PRIOR} to {MAX_TOKEN_PRIOR} "
            "(provider tokens per o200k_base token)"
        )
    tokenizer = raw.get("tokenizer")
    if tokenizer is not None and (not isinstance(tokenizer, str) or not tokenizer):
        raise ConfigError(f"{at}.tokenizer: {tokenizer!r} is not a tokenizer name")
    if tokenizer == "o200k_base" and prior != 1.0:
        raise ConfigError(f"{at}.token_prior: {prior!r}; a family tokenized with o200k_base (ours) has the prior 1.0")
    return FamilyPrior(prefix, source, read_on, float(prior), tokenizer)


def _frozen_families(entries: Mapping[str, FamilyPrior]) -> Mapping[str, FamilyPrior]:
    return MappingProxyType(dict(entries))


def _frozen_modellimits(entries: Mapping[str, ModelLimits]) -> Mapping[str, ModelLimits]:
    return MappingProxyType(dict(entries))


@attrs.frozen
class ModelTable:
    """Model limits by model name (a model not in the table has no known limits), and token priors by family."""

    entries: Mapping[str, ModelLimits] = attrs.field(converter=_frozen_modellimits)
    families: Mapping[str, FamilyPrior] = attrs.field(factory=dict, converter=_frozen_families)

    @classmethod
    def from_toml(cls, text: str, where: str) -> ModelTable:
        from runtime.inputs.toml_text import TomlRefused, parse_toml

        try:
            data = parse_toml(text)
        except TomlRefused as exc:
            raise ConfigError(f"{where}: not valid TOML: {exc}") from None
        if data.get("schema") != MODELS_SCHEMA:
            raise ConfigError(f'{where}: schema: expected "{MODELS_SCHEMA}", got {data.get("schema")!r}')
        unknown = sorted(set(data) - {"schema", "models", "families"})
        if unknown:
            raise ConfigError(f"{where}: {unknown[0]}: unknown key; expected schema, models, families")
        models = data.get("models", {})
        if not isinstance(models, Mapping):
            raise ConfigError(f"{where}: models: expected a table of model entries")
        families = data.get("families", {})
        if not isinstance(families, Mapping):
            raise ConfigError(f"{where}: families: expected a table of model-family entries")
        return cls(
            {name: _entry(name, raw, where) for name, raw in models.items()},
            {prefix: _family(prefix, raw, where) for prefix, raw in families.items()},
        )

    def family(self, model: str) -> FamilyPrior | None:
        """The family of ``model``: the entry of the longest listed prefix of its name, or None."""
        matches = [f for prefix, f in self.families.items() if model.startswith(prefix)]
        return max(matches, key=lambda f: len(f.prefix), default=None)

    def token_prior(self, model: str) -> float:
        """Provider tokens per o200k_base token assumed for ``model`` until calibrated.

        Its family's prior; for a model of no listed family, the largest prior
        listed (1.0 when the table lists none).
        """
        family = self.family(model)
        if family is not None:
            return family.token_prior
        return max((f.token_prior for f in self.families.values()), default=MIN_TOKEN_PRIOR)

    def limits(self, model: str) -> ModelLimits | None:
        return self.entries.get(model)

    def context_window(self, model: str) -> int | None:
        """The model's context window in tokens, or None when the table does not know it."""
        entry = self.entries.get(model)
        return None if entry is None else entry.context_window

    def structured_outputs(self, model: str) -> bool:
        """Whether ``model`` takes ``output_config.format``: its entry's fact, true when the table does not say."""
        entry = self.entries.get(model)
        return entry is None or entry.structured_outputs is not False

    def max_output_tokens(self, model: str) -> int | None:
        """The model's output limit, or None when the table does not know it."""
        entry = self.entries.get(model)
        return None if entry is None else entry.max_output_tokens


_DEFAULT: ModelTable | None = None


def default_model_table() -> ModelTable:
    """The table packaged with foldline (read once)."""
    global _DEFAULT
    if _DEFAULT is None:
        from importlib import resources  # the packaged file's reader, loaded with the table

        text = resources.files("runtime.data").joinpath("models.toml").read_text(encoding="utf-8")
        _DEFAULT = ModelTable.from_toml(text, DEFAULT_MODELS_WHERE)
    return _DEFAULT
