"""The lower bound of a workload's cost: an append-only conversation cached perfectly (pure).

Given the requests a workload generates with no ceiling (the append-only
sequence), the bound charges every token the first time any request carries
it at the five-minute cache-write price and on every later request at the
cache-read price: no fresh input, no second write, no expiry, no minimum
cacheable length and no lookback limit. It is the physical limit for an
append-only conversation, plus its output.

A token is "the same token" when the whole prefix up to and including its
block is the same (the provider's rule): the bound lays each request out as
the simulated server does (:func:`runtime.sim.layout.build_layout`, the
server's own token count) and looks up the prefix key of each block. So
children cloned from a lead read the prefix the lead wrote.

:class:`LowerBound` takes payloads one at a time (memory: one key per
distinct block prefix). Nothing here reads a clock or does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from runtime.models.pricing import BIT_CACHE_READ, BIT_CACHE_WRITE_5M
from runtime.sim.layout import Layout, build_layout
from runtime.sim.tokens import SimTokenCounter
from runtime.sim.validation import validate_request


@attrs.frozen
class BoundFigures:
    """The bound's token counts and its cost in base-input-token units.

    ``bit`` is ``write_tokens x 1.25 + read_tokens x 0.1`` plus output at
    ``output_ratio`` when it is known (``output_priced``).
    """

    requests: int
    write_tokens: int
    read_tokens: int
    output_tokens: int
    output_ratio: float | None
    bit: float

    @property
    def output_priced(self) -> bool:
        return self.output_ratio is not None

    def to_json(self) -> dict[str, Any]:
        return priced_json(self)


def priced_json(figures: Any) -> dict[str, Any]:
    """Priced figures (an attrs value with ``output_ratio`` and ``bit``) as JSON: each field in its order,
    ``output_ratio`` read as ``output_priced`` in its place, ``bit`` to 3 places."""
    out: dict[str, Any] = {}
    for key, value in attrs.asdict(figures).items():
        if key == "output_ratio":
            out["output_priced"] = value is not None
        else:
            out[key] = value
    out["bit"] = round(out["bit"], 3)
    return out


@attrs.define(eq=False)
class LowerBound:
    """Accumulates the bound over a request sequence (an identity object)."""

    counter: SimTokenCounter
    lookback_collapse: bool = True
    requests: int = 0
    write_tokens: int = 0
    read_tokens: int = 0
    _seen: set[str] = attrs.field(factory=set, init=False)

    def add(self, payload: Mapping[str, Any]) -> tuple[int, int]:
        """Add one request (an Anthropic payload); returns its ``(written, read)`` tokens.

        The payload is validated and normalized as the server does; a payload
        the server would refuse raises its error.
        """
        return self.add_layout(self.prepared(payload)[1])

    def prepared(self, payload: Mapping[str, Any]) -> tuple[dict[str, Any], Layout]:
        """``payload`` validated and normalized as the server does, and its layout (for a caller that needs both)."""
        request = validate_request(dict(payload))
        return request, build_layout(request, self.counter, lookback_collapse=self.lookback_collapse)

    def add_layout(self, layout: Layout) -> tuple[int, int]:
        """Add one request by its layout (:meth:`prepared`); returns its ``(written, read)`` tokens."""
        read = 0
        for block in layout.blocks:
            if block.key in self._seen:
                read = block.prefix_tokens
        for block in layout.blocks:
            self._seen.add(block.key)
        written = layout.total_tokens - read
        self.requests += 1
        self.write_tokens += written
        self.read_tokens += read
        return written, read

    def figures(self, *, output_tokens: int, output_ratio: float | None) -> BoundFigures:
        """The bound so far, with ``output_tokens`` of output at ``output_ratio`` (None: unpriced)."""
        if isinstance(output_tokens, bool) or not isinstance(output_tokens, int) or output_tokens < 0:
            raise ValueError(f"output_tokens: {output_tokens!r} is not a non-negative integer")
        bit = BIT_CACHE_WRITE_5M * self.write_tokens + BIT_CACHE_READ * self.read_tokens
        if output_ratio is not None:
            bit += output_ratio * output_tokens
        return BoundFigures(self.requests, self.write_tokens, self.read_tokens, output_tokens, output_ratio, bit)
