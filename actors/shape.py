"""What a branch's requests are made of in one turn: compiling and measuring them.

A :class:`RequestShape` is fixed for one operation's turn: the branch, the
tools offered (the branch's, plus the context tool when the profile folds with
the fold strategy), the model, the output cap, the tool-result bound and the
token counter. The send pipeline (:mod:`actors.pipeline`) and the folding
(:mod:`actors.folding`) both compile and measure through it, so a main
request, a fold's trial view and a side summary request are shaped by one rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from actors.branch import Branch
from actors.inherit import folds_with_tool
from runtime.config.profile import Profile
from runtime.fold.context_tool import CONTEXT_TOOL, CONTEXT_TOOL_NAME
from runtime.fold.measurer import ViewMeasurer
from runtime.fold.projection import BoundProjection, request_projection
from runtime.measuring.image_count import measure_request
from runtime.measuring.measure import Measurement, TokenCounter
from runtime.request.compiler import Intent, Request, RequestSettings, ToolSpec, compile_request
from runtime.values.image_rules import MESSAGES_IMAGES, ImageRule
from runtime.values.messages import Instruction, Message

SUMMARY_MAX_TOKENS = 1024
"""Output cap of a fold's summary request."""


def offered_tools(branch: Branch, profile: Profile) -> tuple[ToolSpec, ...]:
    """The branch's tools, plus the context tool when the profile folds with the fold strategy.

    The tool set follows the profile alone (not whether a fold is installed
    for this operation), so the stable segment does not move between
    operations of one branch.
    """
    tools = branch.tools
    if folds_with_tool(profile) and all(t.name != CONTEXT_TOOL_NAME for t in tools):
        tools = tools + (CONTEXT_TOOL,)
    return tools


@attrs.frozen
class RequestShape:
    """Compiles and measures one branch's requests for one turn (see the module docstring)."""

    branch: Branch = attrs.field(eq=False)
    tools: tuple[ToolSpec, ...]
    model: str
    max_tokens: int
    result_bound: int | None
    counter: TokenCounter = attrs.field(eq=False)
    thinking_json: str | None = None
    """The profile's ``thinking`` field (canonical JSON), sent on main requests; None: not sent."""
    output_config_json: str | None = None
    """A typed operation's ``output_config`` (canonical JSON), sent on main requests; None: not sent."""
    context_management_json: str | None = None
    """The profile's ``server_context_edits`` as the request's ``context_management`` (canonical JSON), sent on
    main requests; None: not sent."""
    images: ImageRule = MESSAGES_IMAGES
    """The rule images are counted by: the provider's wire's (:func:`runtime.contract.provider.image_rule_of`)."""
    prior: Callable[[], float] = attrs.field(default=lambda: 1.0, eq=False)
    """The least scale a request is measured at now: the model family's prior while it is uncalibrated and the
    provider has no count endpoint (:func:`actors.exact_count.uncalibrated_prior`), else 1.0."""

    @property
    def scale(self) -> float:
        """The scale this turn measures at: the branch's, or the family's prior when that is larger."""
        return max(self.branch.scale, self.prior())

    @property
    def offers_context_tool(self) -> bool:
        return any(t is CONTEXT_TOOL for t in self.tools)

    def settings(self, intent: Intent) -> RequestSettings:
        return RequestSettings(
            model=self.model,
            max_tokens=self.max_tokens,
            intent=intent,
            thinking_json=self.thinking_json,
            output_config_json=self.output_config_json,
            context_management_json=self.context_management_json,
        )

    def projection(self) -> BoundProjection | None:
        """The result bound's projection (None when nothing is bounded).

        An included protected round keeps the bound it was decided under.
        """
        return request_projection(self.branch, self.result_bound, self.branch.state.protected_round)

    def compile(self, view: Sequence[Message], intent: Intent) -> Request:
        """A main request of the branch carrying ``view``."""
        branch = self.branch
        return compile_request(
            system=branch.system,
            tools=self.tools,
            view=view,
            settings=self.settings(intent),
            projection=self.projection(),
        )

    def compile_side(self, prompt: Instruction) -> Request:
        """A ``side`` request carrying only ``prompt``: no tools, no system text, a small output cap."""
        settings = RequestSettings(model=self.model, max_tokens=min(self.max_tokens, SUMMARY_MAX_TOKENS), intent="side")
        return compile_request(system=None, tools=(), view=(prompt,), settings=settings)

    def measure(self, request: Request) -> Measurement:
        return measure_request(request, self.counter, self.scale, self.images)

    def measurer(self, intent: Intent) -> ViewMeasurer:
        """The fold planner's view measurer, under the same rule as :meth:`compile`."""
        branch = self.branch
        return ViewMeasurer(
            branch.system,
            self.tools,
            self.settings(intent),
            self.counter,
            self.scale,
            self.projection(),
            images=self.images,
        )
