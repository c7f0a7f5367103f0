"""Measuring candidate views the way the send path measures requests.

The fold never counts tokens its own way: a candidate view is compiled with
the same system text, tools, settings and result projection as the request it
stands for, and measured with the branch's counter and scale (one counter
everywhere). The compiler's block memo and the counter's piece cache make a
candidate cost O(what changed); a candidate that differs from the view last
counted whole in one window is counted from that view
(:mod:`runtime.measuring.measure_splice`): the same number, for the cost of the window.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import attrs

from runtime.measuring.image_count import measure_request
from runtime.measuring.measure import Measurement, TokenCounter, scaled_estimate
from runtime.measuring.measure_splice import SpliceBase
from runtime.request.compiler import (
    Request,
    RequestSettings,
    ResultProjection,
    ToolSpec,
    compile_request,
    render_blocks,
)
from runtime.values.image_rules import MESSAGES_IMAGES, ImageRule
from runtime.values.messages import Message, SystemMessage


class Measurer(Protocol):
    """What the pure fold asks of a measurement (the engine provides :class:`ViewMeasurer`)."""

    @property
    def scale(self) -> float: ...

    def estimate(self, view: Sequence[Message]) -> int: ...

    def block_tokens(self, message: Message) -> tuple[int, int]: ...


@attrs.frozen(eq=False)
class ViewMeasurer:
    """Compiles and measures views for one branch (see the module docstring)."""

    system: str | SystemMessage | None
    tools: tuple[ToolSpec, ...]
    settings: RequestSettings
    counter: TokenCounter
    scale: float
    projection: ResultProjection | None = None
    images: ImageRule = MESSAGES_IMAGES
    """The rule the images are counted by (the wire's, as for the request the view stands for)."""
    _splice: _Splice = attrs.field(factory=lambda: _Splice(), init=False, repr=False)

    def compile(self, view: Sequence[Message]) -> Request:
        return compile_request(
            system=self.system, tools=self.tools, view=view, settings=self.settings, projection=self.projection
        )

    def measure(self, view: Sequence[Message]) -> Measurement:
        return measure_request(self.compile(view), self.counter, self.scale, self.images)

    def estimate(self, view: Sequence[Message]) -> int:
        splice = self._splice
        if splice.counted is not None:
            # A second view after one counted whole: the first becomes the base (a one-off estimate builds none).
            view_counted, request_counted = splice.counted
            splice.counted = None
            splice.base = SpliceBase.build(view_counted, request_counted, self.counter)
        if splice.base is not None:
            counted = splice.base.counted_for(view, self.counter, self.projection)
            if counted is not None:
                return scaled_estimate(counted, self.scale)
        request = self.compile(view)
        splice.counted, splice.base = (tuple(view), request), None
        return measure_request(request, self.counter, self.scale, self.images).estimate

    def messages_estimate(self, messages: Sequence[Message]) -> int:
        """The scaled estimate of ``messages`` compiled alone (no system text, no tools)."""
        request = compile_request(
            system=None, tools=(), view=messages, settings=self.settings, projection=self.projection
        )
        return measure_request(request, self.counter, self.scale, self.images).estimate

    def block_tokens(self, message: Message) -> tuple[int, int]:
        """Counted tokens and characters of the blocks ``message`` renders to (unscaled)."""
        blocks = render_blocks(message, self.projection)
        return (
            sum(self.counter.count(b.json) for b in blocks),
            sum(len(b.json) for b in blocks),
        )

    def with_scale(self, scale: float) -> ViewMeasurer:
        return attrs.evolve(self, scale=scale)


@attrs.define(eq=False)
class _Splice:
    """The view a :class:`ViewMeasurer` last counted whole, as a base to count candidates from."""

    base: SpliceBase | None = None
    counted: tuple[tuple[Message, ...], Request] | None = None
    """The view last counted whole and its request, until a later estimate makes them the base."""
