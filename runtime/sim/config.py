"""The simulated server's configuration (a frozen value)."""

from __future__ import annotations

import math
from typing import Any

import attrs

from runtime.errors import ConfigError
from runtime.inputs.bounds import MAX_TOKEN_FACTOR, TOKEN_FACTOR_REASON
from runtime.scripted.faults import MAX_DELAY_S, FaultRule
from runtime.sim.http import MAX_BODY_BYTES, HttpLimits


def _frozen_keys(value: Any) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise ConfigError(f"SimConfig.api_keys: {value!r} is a single string; give a set of keys or None")
    keys = frozenset(value)
    if not keys or not all(isinstance(key, str) and key for key in keys):
        raise ConfigError("SimConfig.api_keys: expected a non-empty set of non-empty strings, or None for any key")
    return keys


def _at_most(high: float) -> Any:
    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        if value > high:
            raise ConfigError(f"SimConfig.{attribute.name}: {value!r} is above the upper bound {high:g} seconds")

    return check


def _factor_bound(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if value > MAX_TOKEN_FACTOR:
        raise ConfigError(f"SimConfig.token_factor: {value!r} is above {MAX_TOKEN_FACTOR:g} ({TOKEN_FACTOR_REASON})")


def _number(low: float, *, inclusive: bool) -> Any:
    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        ok = (
            not isinstance(value, bool)
            and isinstance(value, (int, float))
            and math.isfinite(value)
            and (value >= low if inclusive else value > low)
        )
        if not ok:
            relation = ">=" if inclusive else ">"
            raise ConfigError(f"SimConfig.{attribute.name}: {value!r} is not a finite number {relation} {low}")

    return check


def _port(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
        raise ConfigError(f"SimConfig.port: {value!r} is not a port number (0-65535; 0 picks a free port)")


def _faults(value: Any) -> tuple[FaultRule, ...]:
    rules = tuple(value)
    for i, rule in enumerate(rules):
        if not isinstance(rule, FaultRule):
            raise ConfigError(f"SimConfig.faults[{i}]: {rule!r} is not a FaultRule (build one with FaultRule.from_obj)")
    return rules


def _bool(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"SimConfig.{attribute.name}: {value!r} is not true or false")


def _host(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"SimConfig.host: {value!r} is not a host name or address")


def _positive_int(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"SimConfig.{attribute.name}: {value!r} is not a positive integer")


_log_limit = _positive_int


@attrs.frozen(kw_only=True)
class SimConfig:
    """How the simulated server behaves.

    - ``token_factor``: its token count is o200k x this factor (per block, rounded up).
    - ``latency_s``: time between a request's start and its response's begin
      (on the server's sleep, virtual under a manual clock); entries a request
      writes become readable then.
    - ``lookback_collapse``: a run of tool_use (or tool_result) blocks in one
      message is one lookback position.
    - ``faults``: fault rules, first match wins.
    - ``api_keys``: the keys accepted; None accepts any non-empty key.
    - ``host``/``port``: where to listen; port 0 picks a free port.
    - ``request_log_limit``: how many served requests the log keeps (oldest dropped).
    - ``max_connections``: open connections at most; at the cap the longest-idle one is closed to admit a new one.
    - ``header_timeout_s`` / ``body_timeout_s`` / ``idle_timeout_s``: wall-time limits of one connection
      (a request's head after its first byte, its body after the head, the wait for the next request).
    - ``max_body_bytes``: the largest request body (the API's 32 MB); larger ones get the API's 413.
    - ``thread_tokenize_bytes``: bodies at least this large are decoded and counted in a worker thread,
      so a huge request never stalls the others.
    - ``thinking_key``: the key thinking blocks are signed with (None: a random key per server); a
      run's simulator derives it from the run id, so its resume verifies the blocks the stopped run got.
    """

    token_factor: float = attrs.field(default=1.15, validator=[_number(0.0, inclusive=False), _factor_bound])
    latency_s: float = attrs.field(default=0.0, validator=[_number(0.0, inclusive=True), _at_most(MAX_DELAY_S)])
    lookback_collapse: bool = attrs.field(default=True, validator=_bool)
    faults: tuple[FaultRule, ...] = attrs.field(default=(), converter=_faults)
    api_keys: frozenset[str] | None = attrs.field(default=None, converter=_frozen_keys)
    host: str = attrs.field(default="127.0.0.1", validator=_host)
    port: int = attrs.field(default=0, validator=_port)
    request_log_limit: int = attrs.field(default=10_000, validator=_log_limit)
    max_connections: int = attrs.field(default=1_024, validator=_positive_int)
    header_timeout_s: float = attrs.field(default=30.0, validator=_number(0.0, inclusive=False))
    body_timeout_s: float = attrs.field(default=120.0, validator=_number(0.0, inclusive=False))
    idle_timeout_s: float = attrs.field(default=60.0, validator=_number(0.0, inclusive=False))
    max_body_bytes: int = attrs.field(default=MAX_BODY_BYTES, validator=_positive_int)
    thread_tokenize_bytes: int = attrs.field(default=1_048_576, validator=_positive_int)
    thinking_key: bytes | None = attrs.field(default=None, repr=False)

    def http_limits(self) -> HttpLimits:
        """The per-connection limits of this configuration."""
        return HttpLimits(
            max_body_bytes=self.max_body_bytes,
            header_timeout_s=self.header_timeout_s,
            body_timeout_s=self.body_timeout_s,
            idle_timeout_s=self.idle_timeout_s,
        )
