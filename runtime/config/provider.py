"""The provider and the model configuration, validated when built (pure)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

import attrs

from runtime.config.ceilings import check_window
from runtime.config.checks import (
    _ENV_NAME_EXPECTED,
    _ENV_NAME_RE,
    CeilingValue,
    _defaults_of,
    _evolve,
    _float_if_int,
    _table_fields,
    _tuple_if_array,
    _values_of,
    bad_value,
    check_array,
    check_bool,
    check_ceiling,
    check_choice,
    check_int,
    check_model_name,
    check_number,
    check_text,
    join_index,
    join_key,
    render_value,
    wrong_type,
)
from runtime.errors import ConfigError
from runtime.inputs.bounds import MAX_IN_FLIGHT, MAX_LATENCY_S, MAX_RETRIES, MAX_TOKEN_FACTOR, TOKEN_FACTOR_REASON

if TYPE_CHECKING:
    from runtime.scripted.faults import FaultRule


@attrs.frozen(kw_only=True)
class ModelConfig:
    """A model and its model-level ceiling value (None: unset)."""

    name: str
    max_input_tokens: CeilingValue = None

    def __attrs_post_init__(self) -> None:
        check_text(self.name, "ModelConfig.name", expected="a model name")
        check_ceiling(self.max_input_tokens, "ModelConfig.max_input_tokens")


PROVIDER_KINDS = ("scripted", "simulated", "anthropic", "openai")
REASONING_FIELDS = ("none", "reasoning_content", "reasoning", "reasoning_details")
CACHE_KEY_MODES = ("session", "header", "off")
CACHE_CONTROL_ASKS = ("ephemeral", "1h")
OPENAI_KEY_ENV = "OPENAI_API_KEY"
ANTHROPIC_KEY_ENV = "ANTHROPIC_API_KEY"
_OPENAI_ONLY = ("reasoning", "cache_key", "cache_control", "reasoning_effort")
_OPENAI_DEFAULTS: dict[str, Any] = {
    "reasoning": "none",
    "cache_key": "session",
    "cache_control": None,
    "reasoning_effort": None,
}


@attrs.frozen(kw_only=True)
class ProviderSpec:
    """Which provider answers, and its settings.

    - ``kind``: ``"scripted"`` (in process), ``"simulated"`` (the loopback
      Anthropic server) or ``"anthropic"`` (the real API).
    - ``model``, ``max_input_tokens``: the model and its model-level ceiling.
    - ``base_url``: the API's base URL (anthropic only; None: the SDK's).
    - ``api_key_env``: the environment variable holding the API key (None:
      the kind's, :attr:`key_env`).
    - ``token_factor``: how the simulated server's token counts relate to ours.
    - ``latency_s``: the simulated server's reply delay in (virtual) seconds.
    - ``lookback_collapse``: whether the simulated server counts a run of
      tool_use (or tool_result) blocks as one lookback position.
    - ``faults``: fault rules of the simulated server (simulated only).
    - ``max_retries``: retries of a failed call (0: none).
    - ``max_in_flight``: requests the provider has out at once, 1 to 1,024
      (kinds ``"simulated"`` and ``"anthropic"``; the scripted provider has no connections)
      (None: :data:`runtime.contract.in_flight.DEFAULT_MAX_IN_FLIGHT`); its
      HTTP client's connection pool is sized to it. Nodes at once are the
      flow's ``run.concurrency``, a separate setting.

    Kind ``"openai"`` (any chat-completions server through the ``openai``
    SDK; without ``base_url``, the simulator's chat-completions face) reads
    the model's dialect, set by the person, never guessed from the model's
    name or the address (:class:`runtime.providers.openai_wire.ChatDialect`):
    ``reasoning`` (the field reasoning comes back and goes back in, or
    ``"none"``), ``cache_key`` (the session key as ``prompt_cache_key`` and
    the ``X-Session-Id`` header, the header only, or ``"off"``),
    ``cache_control`` (a top-level ``"ephemeral"`` or ``"1h"`` ask, or unset)
    and ``reasoning_effort``. Its key is read from ``OPENAI_API_KEY`` unless ``api_key_env`` names another.
    """

    kind: Literal["scripted", "simulated", "anthropic", "openai"] = "simulated"
    model: str = "claude-haiku-5-5"
    max_input_tokens: CeilingValue = None
    base_url: str | None = None
    api_key_env: str | None = None
    token_factor: float = attrs.field(default=1.15, converter=_float_if_int)
    latency_s: float = attrs.field(default=0.0, converter=_float_if_int)
    lookback_collapse: bool = True
    faults: tuple[FaultRule, ...] = attrs.field(default=(), converter=_tuple_if_array)
    max_retries: int = 2
    max_in_flight: int | None = None
    reasoning: str = "none"
    cache_key: str = "session"
    cache_control: str | None = None
    reasoning_effort: str | None = None

    def __attrs_post_init__(self) -> None:
        _check_provider(_values_of(self), "ProviderSpec")

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any], where: str) -> ProviderSpec:
        """Build from a plain dict (the ``[provider]`` table); ``where`` is its key path."""
        fields = _table_fields(obj, where, cls)
        if "faults" in fields:
            from runtime.config.tables import fault_rule_from_obj  # the fault table's reader: only a file names faults

            faults_where = join_key(where, "faults")
            raw = check_array(fields["faults"], faults_where, expected="an array of fault rules")
            kind = fields.get("kind", "simulated")
            if raw and kind in PROVIDER_KINDS and kind != "simulated":
                raise _faults_kind_error(faults_where, kind)
            fields["faults"] = tuple(
                fault_rule_from_obj(item, join_index(faults_where, i)) for i, item in enumerate(raw)
            )
        _check_provider({**_defaults_of(cls), **fields}, where)
        return cls(**fields)

    @property
    def key_env(self) -> str:
        """The environment variable the API key is read from: ``api_key_env``, else the kind's."""
        if self.api_key_env is not None:
            return self.api_key_env
        return OPENAI_KEY_ENV if self.kind == "openai" else ANTHROPIC_KEY_ENV

    @property
    def model_config(self) -> ModelConfig:
        """The provider's model with its model-level ceiling value."""
        return ModelConfig(name=self.model, max_input_tokens=self.max_input_tokens)

    def evolve(self, **changes: Any) -> ProviderSpec:
        """A copy with ``changes`` applied, validated like a new provider spec."""
        return _evolve(self, changes)

    def with_kind(self, kind: str) -> ProviderSpec:
        """This spec for another provider kind (a command-line override).

        Settings that apply only to another kind are dropped rather than
        refused: ``faults`` unless the new kind is ``"simulated"``,
        ``base_url`` unless the kind stays ``"anthropic"`` or ``"openai"``
        (one's address is no server of the other), the openai dialect unless
        it is ``"openai"``, ``max_in_flight`` unless it is ``"simulated"`` or ``"anthropic"``.
        """
        check_choice(kind, "provider kind", PROVIDER_KINDS)
        changes: dict[str, Any] = {
            "kind": kind,
            "faults": self.faults if kind == "simulated" else (),
            "base_url": self.base_url if kind == self.kind and kind in ("anthropic", "openai") else None,
            "max_in_flight": self.max_in_flight if kind in IN_FLIGHT_KINDS else None,
        }
        if kind != "openai":
            changes.update(_OPENAI_DEFAULTS)
        return _evolve(self, changes)


IN_FLIGHT_KINDS = ("simulated", "anthropic")
"""The provider kinds ``max_in_flight`` applies to."""


def _check_provider(v: Mapping[str, Any], where: str) -> None:
    def at(key: str) -> str:
        return join_key(where, key)

    kind = check_choice(v["kind"], at("kind"), PROVIDER_KINDS)
    check_model_name(v["model"], at("model"))
    check_ceiling(v["max_input_tokens"], at("max_input_tokens"))
    # As the scenario loader does: a ceiling above the model's window refuses in code too.
    check_window(v["max_input_tokens"], where=at("max_input_tokens"), model=v["model"])
    if v["base_url"] is not None:
        if kind not in ("anthropic", "openai"):
            raise ConfigError(
                f'{at("base_url")}: set for provider kind "{kind}"; base_url applies only to kinds "anthropic" and "openai"'
            )
        _check_base_url(v["base_url"], at("base_url"))
    _check_dialect(v, kind, at)
    env = v["api_key_env"]
    if env is not None and not isinstance(env, str):
        raise wrong_type(at("api_key_env"), env, _ENV_NAME_EXPECTED)
    if env is not None and not _ENV_NAME_RE.fullmatch(env):
        raise bad_value(at("api_key_env"), env, _ENV_NAME_EXPECTED)
    factor = check_number(v["token_factor"], at("token_factor"), within=lambda x: x > 0, expected="a finite number > 0")
    if factor > MAX_TOKEN_FACTOR:
        raise ConfigError(
            f"{at('token_factor')}: {render_value(factor)} is above the upper bound {MAX_TOKEN_FACTOR:g} "
            f"({TOKEN_FACTOR_REASON})"
        )
    latency = check_number(
        v["latency_s"], at("latency_s"), within=lambda x: x >= 0, expected="a finite number of seconds >= 0"
    )
    _check_at_most(latency, MAX_LATENCY_S, at("latency_s"))
    check_bool(v["lookback_collapse"], at("lookback_collapse"))
    faults = check_array(v["faults"], at("faults"), expected="an array of fault rules")
    if faults:
        if kind != "simulated":
            raise _faults_kind_error(at("faults"), kind)
        from runtime.scripted.faults import FaultRule  # loaded only where faults are given

        for i, rule in enumerate(faults):
            if not isinstance(rule, FaultRule):
                raise wrong_type(join_index(at("faults"), i), rule, "a FaultRule")
    check_int(v["max_retries"], at("max_retries"), minimum=0, maximum=MAX_RETRIES, expected="an integer >= 0")
    if v["max_in_flight"] is not None:
        if kind not in IN_FLIGHT_KINDS:
            raise ConfigError(
                f'{at("max_in_flight")}: set for provider kind "{kind}"; max_in_flight applies only to kinds '
                '"simulated" and "anthropic" (the providers that send over the anthropic SDK)'
            )
        check_int(
            v["max_in_flight"], at("max_in_flight"), minimum=1, maximum=MAX_IN_FLIGHT, expected="a positive integer"
        )


def _check_dialect(v: Mapping[str, Any], kind: str, at: Callable[[str], str]) -> None:
    """The openai kind's dialect settings; set for another kind, they are refused (they would do nothing)."""
    if kind != "openai":
        for key in _OPENAI_ONLY:
            if v[key] != _OPENAI_DEFAULTS[key]:
                raise ConfigError(f'{at(key)}: set for provider kind "{kind}"; {key} applies only to kind "openai"')
        return
    check_choice(v["reasoning"], at("reasoning"), REASONING_FIELDS)
    check_choice(v["cache_key"], at("cache_key"), CACHE_KEY_MODES)
    if v["cache_control"] is not None:
        check_choice(v["cache_control"], at("cache_control"), CACHE_CONTROL_ASKS)
    if v["reasoning_effort"] is not None:
        check_text(
            v["reasoning_effort"], at("reasoning_effort"), expected="a reasoning effort such as low, medium or high"
        )


def _check_at_most(value: float, limit: float, where: str) -> None:
    if value > limit:
        raise ConfigError(f"{where}: {render_value(value)} is above the upper bound {limit:g}")


def _faults_kind_error(where: str, kind: str) -> ConfigError:
    return ConfigError(f'{where}: set for provider kind "{kind}"; fault injection applies only to kind "simulated"')


def _check_base_url(value: Any, where: str) -> None:
    expected = "an http:// or https:// URL with a host"
    if not isinstance(value, str):
        raise wrong_type(where, value, expected)
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        # urlsplit drops tabs and newlines before parsing, so such a URL passes below and fails in the HTTP client.
        raise bad_value(where, value, f"{expected}, with no spaces, tabs, newlines or control characters")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - parsing the port is the check
    except ValueError:
        raise bad_value(where, value, expected) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise bad_value(where, value, expected)
