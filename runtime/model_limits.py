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

The context window is a hard ceiling whatever the configuration says: a
request over it is refused before it is sent (or folded), whatever its
``max_input_tokens``. Loading reads a file; everything else here is pure.
"""

from __future__ import annotations

import datetime
import tomllib
from collections.abc import Mapping
from importlib import resources
from types import MappingProxyType
from typing import Any

import attrs

from runtime.errors import ConfigError

MODELS_SCHEMA = "foldline.models/v1"
DEFAULT_MODELS_WHERE = "runtime/data/models.toml (packaged)"
_ENTRY_KEYS = frozenset(("source", "read_on", "context_window", "max_output_tokens"))
_LIMIT_MAX = 2**63 - 1


@attrs.frozen
class ModelLimits:
    """What one model accepts: ``context_window`` and ``max_output_tokens`` (None: not known)."""

    model: str
    source: str
    read_on: datetime.date
    context_window: int | None = None
    max_output_tokens: int | None = None


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
    unknown = sorted(set(raw) - _ENTRY_KEYS)
    if unknown:
        raise ConfigError(f"{at}.{unknown[0]}: unknown key; expected one of {', '.join(sorted(_ENTRY_KEYS))}")
    source = raw.get("source")
    if not isinstance(source, str) or not source.strip():
        raise ConfigError(f"{at}.source: missing; every entry says where its figures come from")
    read_on = raw.get("read_on")
    if not isinstance(read_on, datetime.date) or isinstance(read_on, datetime.datetime):
        raise ConfigError(f"{at}.read_on: {read_on!r} is not a date (read_on = 2026-11-30)")
    return ModelLimits(
        model=model,
        source=source,
        read_on=read_on,
        context_window=_limit(raw.get("context_window"), f"{at}.context_window"),
        max_output_tokens=_limit(raw.get("max_output_tokens"), f"{at}.max_output_tokens"),
    )


def _frozen_modellimits(entries: Mapping[str, ModelLimits]) -> Mapping[str, ModelLimits]:
    return MappingProxyType(dict(entries))


@attrs.frozen
class ModelTable:
    """Model limits by model name; a model not in the table has no known limits."""

    entries: Mapping[str, ModelLimits] = attrs.field(converter=_frozen_modellimits)

    @classmethod
    def from_toml(cls, text: str, where: str) -> ModelTable:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{where}: not valid TOML: {exc}") from exc
        if data.get("schema") != MODELS_SCHEMA:
            raise ConfigError(f'{where}: schema: expected "{MODELS_SCHEMA}", got {data.get("schema")!r}')
        unknown = sorted(set(data) - {"schema", "models"})
        if unknown:
            raise ConfigError(f"{where}: {unknown[0]}: unknown key; expected schema, models")
        models = data.get("models", {})
        if not isinstance(models, Mapping):
            raise ConfigError(f"{where}: models: expected a table of model entries")
        return cls({name: _entry(name, raw, where) for name, raw in models.items()})

    def limits(self, model: str) -> ModelLimits | None:
        return self.entries.get(model)

    def context_window(self, model: str) -> int | None:
        """The model's context window in tokens, or None when the table does not know it."""
        entry = self.entries.get(model)
        return None if entry is None else entry.context_window

    def max_output_tokens(self, model: str) -> int | None:
        """The model's output limit, or None when the table does not know it."""
        entry = self.entries.get(model)
        return None if entry is None else entry.max_output_tokens


_DEFAULT: ModelTable | None = None


def default_model_table() -> ModelTable:
    """The table packaged with foldline (read once)."""
    global _DEFAULT
    if _DEFAULT is None:
        text = resources.files("runtime.data").joinpath("models.toml").read_text(encoding="utf-8")
        _DEFAULT = ModelTable.from_toml(text, DEFAULT_MODELS_WHERE)
    return _DEFAULT
