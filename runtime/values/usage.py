"""Token usage of one model call, in the shape Anthropic reports it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs


@attrs.frozen
class Usage:
    """One call's usage: uncached input, cache read, cache write per lifetime, output.

    ``input_tokens`` is what the API reports as input: only the tokens after the
    last cache breakpoint. The total input of the request is
    :attr:`total_input`.
    """

    input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_write_5m_tokens: int = 0
    cache_write_1h_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    """Of ``output_tokens``, those the provider reported as reasoning (chat completions report them)."""

    @property
    def cache_write_tokens(self) -> int:
        return self.cache_write_5m_tokens + self.cache_write_1h_tokens

    @property
    def total_input(self) -> int:
        """Fresh input + cache read + cache write: what the provider counted."""
        return self.input_tokens + self.cache_read_input_tokens + self.cache_write_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.cache_read_input_tokens + other.cache_read_input_tokens,
            self.cache_write_5m_tokens + other.cache_write_5m_tokens,
            self.cache_write_1h_tokens + other.cache_write_1h_tokens,
            self.output_tokens + other.output_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )

    @classmethod
    def from_anthropic(cls, usage: Mapping[str, Any]) -> Usage:
        """Read an Anthropic ``usage`` object (a dict, as the API sends it).

        The per-lifetime split comes from ``cache_creation``; when a provider
        reports only the total ``cache_creation_input_tokens``, it is taken as
        five-minute writes (the API's default lifetime). The ``compaction``
        entries of ``usage.iterations`` (a server-side compaction's passes,
        billed but not in the top-level fields) are added in: the usage is
        what the call costs.
        """
        creation_total = int(usage.get("cache_creation_input_tokens") or 0)
        split = usage.get("cache_creation") or None
        if split:
            w5 = int(split.get("ephemeral_5m_input_tokens") or 0)
            w1 = int(split.get("ephemeral_1h_input_tokens") or 0)
        else:
            w5, w1 = creation_total, 0
        top = cls(
            input_tokens=int(usage.get("input_tokens") or 0),
            cache_read_input_tokens=int(usage.get("cache_read_input_tokens") or 0),
            cache_write_5m_tokens=w5,
            cache_write_1h_tokens=w1,
            output_tokens=int(usage.get("output_tokens") or 0),
        )
        for entry in usage.get("iterations") or ():
            if isinstance(entry, Mapping) and entry.get("type") == "compaction":
                top = top + cls.from_anthropic({k: v for k, v in entry.items() if k != "iterations"})
        return top

    def to_dict(self) -> dict[str, int]:
        """The counts by name; ``reasoning_tokens`` only when a provider reported some."""
        out = {
            "input_tokens": self.input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_write_5m_tokens": self.cache_write_5m_tokens,
            "cache_write_1h_tokens": self.cache_write_1h_tokens,
            "output_tokens": self.output_tokens,
        }
        if self.reasoning_tokens:
            out["reasoning_tokens"] = self.reasoning_tokens
        return out
