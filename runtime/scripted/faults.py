"""Fault injection for the simulated server, from configuration.

A :class:`FaultRule` says which ``/v1/messages`` request of a node fails and
how: ``on_request = n`` (the n-th request of each matching node, 1-based) or
``every = n`` (every n-th). Kinds:

- ``"429"``, ``"529"``, ``"500"``: an error envelope (``rate_limit_error``,
  ``overloaded_error``, ``api_error``) with ``retry-after-ms`` and
  ``x-should-retry`` headers when configured;
- ``"drop"``: the connection closes without a response;
- ``"slow"``: the reply waits ``delay_s`` more on the server's sleep, then
  answers normally (it is a real reply, so it reads and writes the cache);
- ``"malformed"``: a 200 whose body is not valid JSON;
- ``"stream_error"``: a streaming request's events stop after the first
  content delta with an ``error`` event (``overloaded_error``), as when the
  API fails mid-stream (it reads and writes the cache, like a reply); a
  non-streaming request gets a 529 instead.

Every other faulted request reads and writes nothing in the cache.
:class:`FaultSchedule` counts requests per node and picks the first matching
rule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs

from runtime.errors import ConfigError

FAULT_KINDS = ("429", "529", "500", "drop", "slow", "malformed", "stream_error")
ERROR_KINDS = frozenset({"429", "529", "500"})
ERROR_TYPES: Mapping[str, str] = {"429": "rate_limit_error", "529": "overloaded_error", "500": "api_error"}
ERROR_MESSAGES: Mapping[str, str] = {
    "429": "Number of request tokens has exceeded your rate limit (simulated fault)",
    "529": "Overloaded (simulated fault)",
    "500": "Internal server error (simulated fault)",
}
MAX_DELAY_S = 600.0
"""The longest ``delay_s`` (and the simulator's ``latency_s``): the ``anthropic`` SDK's default timeout, ten minutes;
a longer wait only ever times the client out, and on a wall clock it would hold the server's caller that long."""
_RULE_KEYS = ("node", "on_request", "every", "kind", "retry_after_ms", "should_retry", "delay_s")


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


@attrs.frozen
class FaultRule:
    """One fault: which requests (``node``, ``on_request`` or ``every``) and what (``kind``)."""

    kind: str
    node: str | None = None
    on_request: int | None = None
    every: int | None = None
    retry_after_ms: int | None = None
    should_retry: bool | None = None
    delay_s: float | None = None

    def __attrs_post_init__(self) -> None:
        problem = self._problem()
        if problem is not None:
            raise ConfigError(f"FaultRule: {problem[0]}: {problem[1]}")

    @classmethod
    def from_obj(cls, obj: Any, where: str) -> FaultRule:
        """Validate one rule from a scenario file; errors are ConfigError starting with ``where``."""
        if not isinstance(obj, Mapping):
            raise ConfigError(f"{where}: {obj!r} is not a table describing a fault")
        for key in obj:
            if key not in _RULE_KEYS:
                raise ConfigError(f"{where}: unknown key {key!r} (expected one of {', '.join(_RULE_KEYS)})")
        kind = obj.get("kind")
        if isinstance(kind, int) and not isinstance(kind, bool):
            kind = str(kind)
        values: dict[str, Any] = {key: obj.get(key) for key in _RULE_KEYS}
        values["kind"] = kind
        # Validate before constructing so the message carries the scenario's key path.
        problem = cls._problem_of(**values)
        if problem is not None:
            raise ConfigError(f"{where}.{problem[0]}: {problem[1]}")
        if values["delay_s"] is not None:
            values["delay_s"] = float(values["delay_s"])
        return cls(**values)

    def _problem(self) -> tuple[str, str] | None:
        return self._problem_of(**{key: getattr(self, key) for key in _RULE_KEYS})

    @staticmethod
    def _problem_of(
        kind: Any, node: Any, on_request: Any, every: Any, retry_after_ms: Any, should_retry: Any, delay_s: Any
    ) -> tuple[str, str] | None:
        if kind not in FAULT_KINDS:
            return "kind", f"{kind!r} is not one of {', '.join(FAULT_KINDS)}"
        if node is not None and (not isinstance(node, str) or not node):
            return "node", f"{node!r} is not a non-empty node id"
        if (on_request is None) == (every is None):
            return "on_request", "give exactly one of 'on_request' (the n-th request) or 'every' (every n-th request)"
        if on_request is not None and not _positive_int(on_request):
            return "on_request", f"{on_request!r} is not a positive integer"
        if every is not None and not _positive_int(every):
            return "every", f"{every!r} is not a positive integer"
        if retry_after_ms is not None:
            if kind not in ERROR_KINDS:
                return "retry_after_ms", f"applies only to kinds 429, 529, 500, not {kind!r}"
            if isinstance(retry_after_ms, bool) or not isinstance(retry_after_ms, int) or retry_after_ms < 0:
                return "retry_after_ms", f"{retry_after_ms!r} is not an integer >= 0"
        if should_retry is not None:
            if kind not in ERROR_KINDS:
                return "should_retry", f"applies only to kinds 429, 529, 500, not {kind!r}"
            if not isinstance(should_retry, bool):
                return "should_retry", f"{should_retry!r} is not true or false"
        if kind == "slow":
            if delay_s is None:
                return "delay_s", "a 'slow' fault needs delay_s (seconds, > 0)"
            if (
                isinstance(delay_s, bool)
                or not isinstance(delay_s, (int, float))
                or not math.isfinite(delay_s)
                or delay_s <= 0
                or delay_s > MAX_DELAY_S
            ):
                return "delay_s", f"{delay_s!r} is not a number of seconds > 0 and at most {MAX_DELAY_S:g}"
        elif delay_s is not None:
            return "delay_s", f"applies only to kind 'slow', not {kind!r}"
        return None

    def matches(self, node: str | None, count: int) -> bool:
        """Whether this rule faults the ``count``-th (1-based) request of ``node``."""
        if self.node is not None and self.node != node:
            return False
        if self.on_request is not None:
            return count == self.on_request
        assert self.every is not None
        return count % self.every == 0

    def headers(self) -> dict[str, str]:
        """The response headers an error fault carries."""
        headers: dict[str, str] = {}
        if self.retry_after_ms is not None:
            headers["retry-after-ms"] = str(self.retry_after_ms)
        if self.should_retry is not None:
            headers["x-should-retry"] = "true" if self.should_retry else "false"
        return headers


@attrs.define(eq=False)
class FaultSchedule:
    """Counts ``/v1/messages`` requests per node and says which fault, if any, the next one gets."""

    rules: tuple[FaultRule, ...] = attrs.field(converter=tuple)
    _counts: dict[str | None, int] = attrs.field(factory=dict, init=False)

    def next_request(self, node: str | None) -> tuple[int, FaultRule | None]:
        """Count one request of ``node``; return its 1-based number and the first rule that matches."""
        count = self._counts.get(node, 0) + 1
        self._counts[node] = count
        for rule in self.rules:
            if rule.matches(node, count):
                return count, rule
        return count, None
