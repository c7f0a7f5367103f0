"""The floor of a lossless policy that shows every result once in full (pure).

:func:`lossless_floor` is the issue's floor (issue 31 item 4). Its input is a
workload's append-only request sequence (the ``naive`` run), one
:class:`FloorRequest` per main request, with what the workload itself says
is needed again: the fact lines a later step of the same node recalls (the
reader's probes and stage keys, :func:`runtime.bench.reader.recalls_of`).
No tuning knob decides what is needed again.

Derivation. Take one node's requests ``r_0 .. r_m`` in order. Every request
must carry the node's *head* (tools, system text and its first message: the
API needs the tools and system text on every request, and the task is what
the model works on); everything else a request carries is there only because
some step needs it. A lossless policy that shows every result once in full
must still show each token of ``r_j``'s new content (``total_j -
total_(j-1)``: the reply before it and the results that came back) to the
model once, and a token a later step needs again must be in that later
request too. The cheapest way to have a token in a request, at the provider's
prices (fresh 1.0, five-minute write 1.25, read 0.1), is:

- a token needed in no later request: sent once fresh (1.0); writing it
  (1.25) or sending it again only costs more;
- a token needed again in ``k >= 1`` later requests: written once (1.25) and
  read at each later need (0.1 each). Sending it fresh each time costs
  ``1 + k`` (more for every ``k >= 1``), and carrying it through the requests
  in between reads it more often than ``k`` times;
- the head: written once in ``r_0`` and read by each of ``r_1 .. r_m``.

``r_0`` carries the head and, for a child (or a node inheriting a view), what
it inherits from its emitter. Its new tokens (the lower bound's, those no
earlier request wrote: a top-level node's head, a child's own setup) are
written at 1.25, and the part of its head an earlier request wrote is read at
0.1. The rest of an inherited view was already shown in full to the emitter,
so a lossless policy need not show it again: it costs nothing here, and a
fact line in it that the child recalls later is read at each later need
(0.1, as the emitter wrote it). Output is every strategy's own
work: the naive run's output tokens at the model's output/input ratio.

So ``bit = sum over nodes of [ r_0's price + 0.1 x head x m
+ 1.0 x (new tokens not needed again) + 1.25 x (new tokens needed again)
+ 0.1 x (needed tokens x later needs) ] + ratio x output``.

What the floor ignores makes it lower, never higher: the cache's minimum
cacheable length (a 20-token line cannot be cached alone), its prefix rule
(a read needs the whole prefix before it unchanged), the calls a policy
needs to bring a line back, and any line of a result beyond the planted
facts a model might want again. It is a bound, not a policy: no strategy is
expected to reach it, and one that beats it shows a fault in its inputs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from runtime.bench.facts import fact_line, facts_in
from runtime.bench.lower_bound import LowerBound, priced_json
from runtime.bench.reader import ReaderPolicy, recalls_of, visible_text
from runtime.models.pricing import BIT_CACHE_READ, BIT_CACHE_WRITE_5M, BIT_FRESH
from runtime.scripted.policies import Reply
from runtime.sim.layout import Layout
from runtime.sim.tokens import SimTokenCounter


def _frozen_map(value: Mapping[str, int]) -> Mapping[str, int]:
    return dict(value)


@attrs.frozen
class FloorRequest:
    """One main request of the append-only sequence, as the floor needs it.

    ``shown`` maps each fact first shown to ``node`` in this request to its
    line's tokens; ``recalled`` names the facts this request's step recalls;
    ``written`` is the lower bound's new tokens for this request (only read
    for a node's first request).
    """

    node: str
    total_tokens: int
    head_tokens: int
    written: int
    shown: Mapping[str, int] = attrs.field(factory=dict, converter=_frozen_map)
    recalled: tuple[str, ...] = ()


@attrs.frozen
class FloorFigures:
    """The floor's parts (tokens) and its cost in base-input-token units."""

    requests: int
    first_written_tokens: int
    first_read_tokens: int
    head_read_tokens: int
    fresh_tokens: int
    needed_written_tokens: int
    needed_read_tokens: int
    needed_lines: int
    output_tokens: int
    output_ratio: float | None
    bit: float

    @property
    def output_priced(self) -> bool:
        return self.output_ratio is not None

    def to_json(self) -> dict[str, Any]:
        return priced_json(self)


def _check_count(value: int, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}: {value!r} is not a non-negative integer")


def lossless_floor(requests: Sequence[FloorRequest], *, output_tokens: int, output_ratio: float | None) -> FloorFigures:
    """The floor of a lossless policy over ``requests`` (derivation in the module docstring).

    ``output_ratio`` None: output unpriced (``bit`` leaves it out).
    """
    _check_count(output_tokens, "output_tokens")
    parts = dict.fromkeys(
        ("first_written", "first_read", "head_read", "fresh", "needed_written", "needed_read", "lines"), 0
    )
    by_node: dict[str, list[FloorRequest]] = {}
    for i, request in enumerate(requests):
        for name in ("total_tokens", "head_tokens", "written"):
            _check_count(getattr(request, name), f"requests[{i}].{name}")
        by_node.setdefault(request.node, []).append(request)
    for node_requests in by_node.values():
        _node_floor(node_requests, parts)
    bit = (
        BIT_CACHE_WRITE_5M * (parts["first_written"] + parts["needed_written"])
        + BIT_CACHE_READ * (parts["first_read"] + parts["head_read"] + parts["needed_read"])
        + BIT_FRESH * parts["fresh"]
    )
    if output_ratio is not None:
        bit += output_ratio * output_tokens
    return FloorFigures(
        len(requests),
        parts["first_written"],
        parts["first_read"],
        parts["head_read"],
        parts["fresh"],
        parts["needed_written"],
        parts["needed_read"],
        parts["lines"],
        output_tokens,
        output_ratio,
        bit,
    )


def _node_floor(requests: Sequence[FloorRequest], parts: dict[str, int]) -> None:
    """Add one node's requests (in order) to ``parts``."""
    first = requests[0]
    written = min(first.written, first.total_tokens)
    parts["first_written"] += written
    parts["first_read"] += min(first.head_tokens, first.total_tokens - written)
    shown_at: dict[str, tuple[int, int]] = {}
    for j, request in enumerate(requests):
        for fact, tokens in request.shown.items():
            shown_at.setdefault(fact, (j, tokens))
    needs: dict[str, int] = {}
    for k, request in enumerate(requests):
        for fact in request.recalled:
            at = shown_at.get(fact)
            if at is not None and at[0] < k:
                needs[fact] = needs.get(fact, 0) + 1
                parts["needed_read"] += at[1]
    previous = first.total_tokens
    for j, request in enumerate(requests[1:], start=1):
        new = max(0, request.total_tokens - previous)
        previous = request.total_tokens
        needed = sum(tokens for fact, tokens in request.shown.items() if needs.get(fact) and shown_at[fact][0] == j)
        needed = min(needed, new)
        parts["head_read"] += first.head_tokens
        parts["fresh"] += new - needed
        parts["needed_written"] += needed
    parts["lines"] += len(needs)


@attrs.define(eq=False)
class FloorTrace:
    """Collects :class:`FloorRequest` s from the payloads a run's readers answer (an identity object).

    Wrap each node's reader with :meth:`tap`; ``written`` comes from the
    lower bound fed the same payloads (:meth:`add` takes it).
    """

    counter: SimTokenCounter
    _rows: list[tuple[str, int, int, int, dict[str, int], tuple[str, ...]]] = attrs.field(factory=list, init=False)
    _seen: dict[str, set[str]] = attrs.field(factory=dict, init=False)
    _written: list[int] = attrs.field(factory=list, init=False)

    def add(self, reader: ReaderPolicy, request: Mapping[str, Any], layout: Layout, written: int) -> None:
        """Record one request ``reader`` is about to answer (validated, with its layout), ``written`` its new
        tokens by the lower bound (:meth:`runtime.bench.lower_bound.LowerBound.prepared` gives both)."""
        head = max(
            (b.prefix_tokens for b in layout.blocks if b.location[0] != "messages" or b.location[1] == 0),
            default=0,
        )
        seen = self._seen.setdefault(reader.node_id, set())
        shown = {fact: self._line_tokens(fact) for fact in facts_in(visible_text(request)) if fact not in seen}
        seen.update(shown)
        step = reader.steps_taken
        recalled = tuple(f for f, _ in recalls_of(reader.steps[step])) if step < len(reader.steps) else ()
        self._rows.append((reader.node_id, step, layout.total_tokens, head, shown, recalled))
        self._written.append(written)

    def _line_tokens(self, fact: str) -> int:
        return math.ceil(self.counter.count_text(fact_line(fact).strip()) * self.counter.token_factor)

    def requests(self) -> tuple[FloorRequest, ...]:
        """The requests so far; a step answered over several requests recalls in its last one only."""
        last: dict[tuple[str, int], int] = {}
        for i, (node, step, *_rest) in enumerate(self._rows):
            last[(node, step)] = i
        return tuple(
            FloorRequest(node, total, head, written, shown, recalled if last[(node, step)] == i else ())
            for i, ((node, step, total, head, shown, recalled), written) in enumerate(
                zip(self._rows, self._written, strict=True)
            )
        )


@attrs.define(eq=False)
class FloorTap:
    """A reader whose every payload is shown to the lower bound and the floor's trace first (laid out once)."""

    reader: ReaderPolicy
    trace: FloorTrace
    bound: LowerBound

    def respond(self, payload: Mapping[str, Any]) -> Reply:
        request, layout = self.bound.prepared(payload)
        written, _read = self.bound.add_layout(layout)
        self.trace.add(self.reader, request, layout, written)
        return self.reader.respond(payload)
