"""The pricing table: per-model prices by prompt-length tier, and what a call cost.

The table is data: ``runtime/data/pricing.toml`` ships with foldline and a user
file adds or overrides entries by model (:meth:`PricingTable.merged_with`).
Every entry says where its figures come from (``source``) and when they were
read (``read_on``). A price nobody knows is absent, never invented; every
query that needs one says so (``None``, ``output_priced=False``).

File shape::

    schema = "foldline.pricing/v1"

    [models.claude-sonnet-4]
    source = "https://... (how the figures were read or derived)"
    read_on = 2026-10-17

    [[models.claude-sonnet-4.tiers]]      # ascending; all but the last bounded
    max_prompt_tokens = 200000
    input = 3.0                           # USD per million tokens
    output = 15.0
    cache_read = 0.30
    cache_write_5m = 3.75
    cache_write_1h = 6.0

    [[models.claude-sonnet-4.tiers]]      # the last tier has no bound
    input = 6.0

A model with more than one tier is *tier-priced*: its price depends on the
request's prompt length, the total of fresh, cache-read and cache-written input.
Loading reads a file; everything else here is pure.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Mapping
from os import PathLike
from types import MappingProxyType
from typing import Any

import attrs

from runtime.errors import ConfigError
from runtime.values.usage import Usage

PRICING_SCHEMA = "foldline.pricing/v1"
DEFAULT_PRICING_WHERE = "runtime/data/pricing.toml (packaged)"

PRICE_KEYS = ("input", "output", "cache_read", "cache_write_5m", "cache_write_1h")
_TIER_KEYS = frozenset(("max_prompt_tokens", *PRICE_KEYS))
_ENTRY_KEYS = frozenset(("source", "read_on", "tiers"))
_FILE_KEYS = frozenset(("schema", "models"))

BIT_FRESH = 1.0
BIT_CACHE_READ = 0.1
BIT_CACHE_WRITE_5M = 1.25
BIT_CACHE_WRITE_1H = 2.0
"""Base-input-token unit weights: what each kind of input token costs relative to fresh input."""

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_MACHINE_PATH = re.compile(r"^(/|~|\.{1,2}[/\\]|file:|[A-Za-z]:[/\\]|\\\\)")


@attrs.frozen
class PriceTier:
    """One price tier, in USD per million tokens; ``None`` where the price is unknown.

    ``max_prompt_tokens`` bounds the tier (inclusive); the last tier has none.
    """

    max_prompt_tokens: int | None
    input: float | None = None
    output: float | None = None
    cache_read: float | None = None
    cache_write_5m: float | None = None
    cache_write_1h: float | None = None


@attrs.frozen
class ModelPrice:
    """A model's entry: its tiers (ascending) and where the figures come from."""

    model: str
    source: str
    read_on: datetime.date
    tiers: tuple[PriceTier, ...]

    @property
    def is_tier_priced(self) -> bool:
        return len(self.tiers) > 1

    def tier_index_for(self, prompt_tokens: int) -> int:
        """The index of the tier a request of ``prompt_tokens`` total input is billed at."""
        for index, tier in enumerate(self.tiers):
            if tier.max_prompt_tokens is None or prompt_tokens <= tier.max_prompt_tokens:
                return index
        return len(self.tiers) - 1


@attrs.frozen
class Cost:
    """What calls cost.

    ``bit`` is in base-input-token units: fresh x1, cache read x0.1, 5m write
    x1.25, 1h write x2, plus output at the tier's output/input price ratio when
    ``output_priced`` (else output tokens are excluded from ``bit``). ``usd`` is
    ``None`` unless the table knows every price the usage needs.
    """

    bit: float
    usd: float | None
    output_priced: bool

    def __add__(self, other: Cost) -> Cost:
        usd = None if self.usd is None or other.usd is None else self.usd + other.usd
        return Cost(self.bit + other.bit, usd, self.output_priced and other.output_priced)


ZERO_COST = Cost(bit=0.0, usd=0.0, output_priced=True)
"""The cost of no calls: the identity of :meth:`Cost.__add__`."""


def _key_path(*parts: str | int) -> str:
    path = ""
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            segment = part if _BARE_KEY.fullmatch(part) else f'"{part}"'
            path += f".{segment}" if path else segment
    return path


def _check_keys(table: Mapping[str, Any], allowed: frozenset[str], where: str, *path: str | int) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(
            f"{where}: {_key_path(*path, unknown[0])}: unknown key; expected one of {', '.join(sorted(allowed))}"
        )


def _parse_price(value: Any, where: str, path: tuple[str | int, ...]) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}: {_key_path(*path)}: {value!r} is not a number (USD per million tokens)")
    if not math.isfinite(value) or value < 0:
        raise ConfigError(
            f"{where}: {_key_path(*path)}: {value!r} is not a non-negative price (USD per million tokens)"
        )
    return float(value)


def _parse_tier(raw: Any, where: str, model: str, index: int, last: bool) -> PriceTier:
    path: tuple[str | int, ...] = ("models", model, "tiers", index)
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: {_key_path(*path)}: expected a table of prices, got {raw!r}")
    _check_keys(raw, _TIER_KEYS, where, *path)
    bound = raw.get("max_prompt_tokens")
    if last and bound is not None:
        raise ConfigError(
            f"{where}: {_key_path(*path, 'max_prompt_tokens')}: {bound!r} on the last tier; "
            "the last tier is unbounded and has no max_prompt_tokens"
        )
    if not last:
        if bound is None:
            raise ConfigError(
                f"{where}: {_key_path(*path, 'max_prompt_tokens')}: missing; every tier but the last needs its bound"
            )
        if isinstance(bound, bool) or not isinstance(bound, int) or bound <= 0:
            raise ConfigError(f"{where}: {_key_path(*path, 'max_prompt_tokens')}: {bound!r} is not a positive integer")
    prices = {key: _parse_price(raw[key], where, (*path, key)) for key in PRICE_KEYS if key in raw}
    return PriceTier(max_prompt_tokens=bound, **prices)


def _parse_read_on(value: Any, where: str, path: tuple[str | int, ...]) -> datetime.date:
    if isinstance(value, datetime.datetime):
        raise ConfigError(f"{where}: {_key_path(*path)}: {value!r} is a date and time; expected a date like 2026-10-17")
    if isinstance(value, datetime.date):
        return value
    if isinstance(value, str):
        try:
            return datetime.date.fromisoformat(value)
        except ValueError:
            pass
    raise ConfigError(f"{where}: {_key_path(*path)}: {value!r} is not a date; expected a date like 2026-10-17")


def _parse_entry(model: str, raw: Any, where: str) -> ModelPrice:
    path = ("models", model)
    if not model:
        raise ConfigError(f'{where}: models."": a model name must not be empty')
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: {_key_path(*path)}: expected a table, got {raw!r}")
    _check_keys(raw, _ENTRY_KEYS, where, *path)
    for key in ("source", "read_on", "tiers"):
        if key not in raw:
            raise ConfigError(f"{where}: {_key_path(*path, key)}: missing; every entry needs source, read_on and tiers")
    source = raw["source"]
    if not isinstance(source, str) or not source.strip():
        raise ConfigError(f"{where}: {_key_path(*path, 'source')}: {source!r} is not a URL or document reference")
    if _MACHINE_PATH.match(source.strip()):
        raise ConfigError(
            f"{where}: {_key_path(*path, 'source')}: {source!r} is a path on a machine; "
            "expected a URL or a document reference"
        )
    read_on = _parse_read_on(raw["read_on"], where, (*path, "read_on"))
    raw_tiers = raw["tiers"]
    if not isinstance(raw_tiers, list) or not raw_tiers:
        raise ConfigError(
            f"{where}: {_key_path(*path, 'tiers')}: expected a non-empty array of tables, got {raw_tiers!r}"
        )
    tiers = tuple(
        _parse_tier(tier, where, model, index, index == len(raw_tiers) - 1) for index, tier in enumerate(raw_tiers)
    )
    bounds = [tier.max_prompt_tokens or 0 for tier in tiers[:-1]]  # all set: checked per tier
    for index in range(1, len(bounds)):
        previous, current = bounds[index - 1], bounds[index]
        if current <= previous:
            raise ConfigError(
                f"{where}: {_key_path(*path, 'tiers', index, 'max_prompt_tokens')}: {current} is not above "
                f"the previous tier's {previous}; tiers must be in ascending order"
            )
    return ModelPrice(model=model, source=source, read_on=read_on, tiers=tiers)


@attrs.frozen
class PricingTable:
    """Model prices by name (exact model names; no aliases or dated snapshots)."""

    models: tuple[ModelPrice, ...] = ()
    _index: Mapping[str, ModelPrice] = attrs.field(init=False, eq=False, repr=False, hash=False)

    def __attrs_post_init__(self) -> None:
        index: dict[str, ModelPrice] = {}
        for entry in self.models:
            if entry.model in index:
                raise ValueError(f"PricingTable: model {entry.model!r} appears twice")
            index[entry.model] = entry
        object.__setattr__(self, "_index", MappingProxyType(index))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], where: str) -> PricingTable:
        """Validate a parsed pricing file; ``where`` names it in every error."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: expected a table at the top level, got {data!r}")
        _check_keys(data, _FILE_KEYS, where)
        schema = data.get("schema")
        if schema != PRICING_SCHEMA:
            raise ConfigError(f"{where}: schema: {schema!r}; expected {PRICING_SCHEMA!r}")
        models = data.get("models", {})
        if not isinstance(models, Mapping):
            raise ConfigError(f"{where}: models: expected a table of model entries, got {models!r}")
        return cls(tuple(_parse_entry(model, raw, where) for model, raw in models.items()))

    @classmethod
    def from_toml(cls, text: str, where: str) -> PricingTable:
        """Parse and validate pricing TOML text; ``where`` names it in every error."""
        from runtime.inputs.toml_text import TomlRefused, parse_toml

        try:
            data = parse_toml(text)
        except TomlRefused as exc:
            raise ConfigError(f"{where}: not valid TOML: {exc}") from None
        return cls.from_mapping(data, where)

    @classmethod
    def load(cls, path: str | PathLike[str]) -> PricingTable:
        """Read and validate a user pricing file."""
        from runtime.inputs.bounds import MAX_PRICING_BYTES
        from runtime.inputs.files import FileTooLarge, read_bounded

        where = str(path)
        try:
            raw = read_bounded(path, MAX_PRICING_BYTES, what="a pricing file")
        except FileTooLarge as exc:
            raise ConfigError(f"{where}: {exc}") from None
        except OSError as exc:
            raise ConfigError(f"{where}: cannot read the pricing file: {exc.strerror or exc}") from exc
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{where}: not UTF-8 text: {exc}") from exc
        return cls.from_toml(text, where)

    @classmethod
    def load_default(cls) -> PricingTable:
        """The table packaged with foldline."""
        from importlib import resources  # the packaged file's reader, loaded with the table

        text = resources.files("runtime.data").joinpath("pricing.toml").read_text(encoding="utf-8")
        return cls.from_toml(text, DEFAULT_PRICING_WHERE)

    def merged_with(self, other: PricingTable) -> PricingTable:
        """This table with ``other``'s entries added, replacing ours for the same model."""
        merged = dict(self._index)
        merged.update(other._index)
        return PricingTable(tuple(merged.values()))

    def entry(self, model: str) -> ModelPrice | None:
        return self._index.get(model)

    def is_tier_priced(self, model: str) -> bool:
        """Whether the table prices ``model`` by prompt length (more than one tier)."""
        entry = self.entry(model)
        return entry is not None and entry.is_tier_priced

    def first_tier(self, model: str) -> PriceTier | None:
        """The model's first tier (its only one when flat-priced); None for an unknown model."""
        entry = self.entry(model)
        return entry.tiers[0] if entry is not None else None

    def cost(self, usage: Usage, model: str) -> Cost:
        """What one call of ``model`` with ``usage`` cost (the tier chosen by its total input)."""
        if not isinstance(usage, Usage):
            raise TypeError(f"usage: expected a runtime.values.usage.Usage, got {type(usage).__name__}")
        tier = self._tier_for(usage, model)
        input_bits = (
            BIT_FRESH * usage.input_tokens
            + BIT_CACHE_READ * usage.cache_read_input_tokens
            + BIT_CACHE_WRITE_5M * usage.cache_write_5m_tokens
            + BIT_CACHE_WRITE_1H * usage.cache_write_1h_tokens
        )
        ratio = _output_ratio(tier)
        output_priced = ratio is not None
        bit = input_bits + (ratio * usage.output_tokens if ratio is not None else 0.0)
        return Cost(bit=bit, usd=_usd(tier, usage), output_priced=output_priced)

    def cost_bit(self, usage: Usage, model: str) -> float:
        """Base-input-token units of one call; output counted only when the table prices it."""
        return self.cost(usage, model).bit

    def cost_usd(self, usage: Usage, model: str) -> float | None:
        """Dollars of one call, or None when a price the usage needs is unknown."""
        return self.cost(usage, model).usd

    def missing_prices(self, usage: Usage, model: str) -> tuple[str, ...]:
        """The prices one call's dollars need that the table lacks, each named (empty when its dollars are known).

        ``("claude-x: no entry",)`` for an unknown model; else ``"claude-x output (prompts over 100,000 tokens)"``
        for each price key of the call's tier that its usage needs.
        """
        entry = self.entry(model)
        if entry is None:
            return (f"{model}: no entry",) if any(count for _, count in _usage_by_key(usage)) else ()
        index = entry.tier_index_for(usage.total_input)
        tier = entry.tiers[index]
        where = ""
        if entry.is_tier_priced:
            low = entry.tiers[index - 1].max_prompt_tokens if index else None
            bound = tier.max_prompt_tokens
            where = f" (prompts over {low:,} tokens)" if bound is None else f" (prompts up to {bound:,} tokens)"
        return tuple(
            f"{model} {key}{where}" for key, count in _usage_by_key(usage) if count and getattr(tier, key) is None
        )

    def _tier_for(self, usage: Usage, model: str) -> PriceTier | None:
        entry = self.entry(model)
        if entry is None:
            return None
        return entry.tiers[entry.tier_index_for(usage.total_input)]


def _usage_by_key(usage: Usage) -> tuple[tuple[str, int], ...]:
    """Each price key with the tokens of ``usage`` it prices."""
    return (
        ("input", usage.input_tokens),
        ("cache_read", usage.cache_read_input_tokens),
        ("cache_write_5m", usage.cache_write_5m_tokens),
        ("cache_write_1h", usage.cache_write_1h_tokens),
        ("output", usage.output_tokens),
    )


def _output_ratio(tier: PriceTier | None) -> float | None:
    if tier is None or tier.input is None or tier.output is None or tier.input == 0:
        return None
    return tier.output / tier.input


def _usd(tier: PriceTier | None, usage: Usage) -> float | None:
    """Dollars, or None when a price the usage needs is unknown (as :meth:`PricingTable.missing_prices` names)."""
    if tier is None:  # an unknown model: a call that used nothing still costs nothing
        return None if any(count for _, count in _usage_by_key(usage)) else 0.0
    total = 0.0
    for key, tokens in _usage_by_key(usage):
        price = getattr(tier, key)
        if tokens:
            if price is None:
                return None
            total += tokens * price / 1_000_000
    return total
