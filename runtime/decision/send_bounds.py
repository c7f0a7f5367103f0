"""Bounds a request meets before it is sent: the model's window, and the notice decided as sent (pure).

- :func:`bound_by_window`: the model's context window is a hard ceiling
  whatever the configuration says. A resolved ceiling above the window (or
  none at all, ``"none"``) becomes the window, with ``"window"`` as its
  source, so a 1,012,796-token request is refused (or folded) before it is
  sent instead of drawing the provider's 400 "prompt is too long".
- :func:`as_sent`: a decision says ``notice`` only for a request that
  carries the size notice (the turn that appended it, before its first
  answer); one at or past the notice line without it says ``pass`` and why,
  so the report counts the notices that were sent.
- :func:`choose_notice`: the size notice is decided on the request exactly
  as it will be sent. A turn at or past the notice line carries the notice
  only when the request *with the notice* still fits the ceiling, and the
  notice states that request's own figure; a request that fits only without
  the notice is sent without it, and the choice says why.

No I/O, no clock: the caller passes a ``measure`` function that compiles and
measures the request with a given notice (or none).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import attrs

from runtime.decision.ceiling import DEFAULT_NOTICE_AT, Decision, ResolvedCeiling, notice_line
from runtime.measuring.measure import Measurement
from runtime.values.messages import AssistantResponse, Instruction, Message

WINDOW_SOURCE = "window"
"""The ``ceiling_source`` of a ceiling the model's context window set."""

_MAX_NOTICE_ROUNDS = 4
"""Renderings of the notice until its stated figure is the figure of the request carrying it."""


def bound_by_window(resolved: ResolvedCeiling, model: str, window: int | None) -> ResolvedCeiling:
    """``resolved`` lowered to ``model``'s context window when it is above it or absent.

    ``window`` None (the model table does not know it) leaves ``resolved`` as it is.
    """
    if window is None:
        return resolved
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window: {window!r} is not a positive integer")
    if resolved.ceiling is not None and resolved.ceiling <= window:
        return resolved
    before = "no ceiling" if resolved.ceiling is None else f"ceiling {resolved.ceiling}"
    return ResolvedCeiling(
        window,
        WINDOW_SOURCE,  # type: ignore[arg-type]  # a source runtime.decision.ceiling's Literal does not list yet
        None,
        f"{resolved.reason}; {before} is above the context window of {model}: bounded by the window, "
        f"{window} tokens (model table)",
    )


@attrs.frozen
class NoticeChoice:
    """Whether a turn carries the size notice, the request's measurement as sent, and why.

    ``action``: ``"notice"`` (sent with the notice), ``"pass"`` (under the
    notice line, or no ceiling), ``"omit"`` (at or past the notice line, but the
    notice would push a fitting request over the ceiling: sent without it) or
    ``"over"`` (over the ceiling even without the notice; the send folds or
    refuses it as before).
    """

    action: Literal["notice", "pass", "omit", "over"]
    notice: str | None
    measurement: Measurement
    reason: str


def _notice_for(
    measure: Callable[[str | None], Measurement], first: Measurement, ceiling: int
) -> tuple[str, Measurement]:
    """The notice whose stated figure is the estimate of the request carrying it (a fixed point)."""
    stated = first
    text = notice_line(stated, ceiling)
    with_notice = measure(text)
    for _ in range(_MAX_NOTICE_ROUNDS):
        if with_notice.estimate == stated.estimate:
            break
        stated = with_notice
        text = notice_line(stated, ceiling)
        with_notice = measure(text)
    # Should the figure still move (a digit more changes the count), state the larger: never understate.
    if with_notice.estimate > stated.estimate:
        text = notice_line(with_notice, ceiling)
        with_notice = measure(text)
    return text, with_notice


def choose_notice(
    measure: Callable[[str | None], Measurement],
    resolved: ResolvedCeiling,
    *,
    notice_at: float = DEFAULT_NOTICE_AT,
) -> NoticeChoice:
    """Decide the notice on the request as it will be sent.

    ``measure(notice)`` measures the request with that notice line on the
    turn (None: without). Nothing at or under the ceiling is made to exceed it
    by the notice, and the notice never states a figure other than its own
    request's.
    """
    bare = measure(None)
    ceiling = resolved.ceiling
    if ceiling is None:
        return NoticeChoice("pass", None, bare, f"estimate {bare.estimate}; {resolved.reason}")
    if bare.estimate > ceiling:
        return NoticeChoice("over", None, bare, f"estimate {bare.estimate} is over the ceiling {ceiling}")
    line = round(notice_at * ceiling, 6)
    if bare.estimate < line:
        return NoticeChoice("pass", None, bare, f"estimate {bare.estimate} is under the notice line {line:g}")
    text, with_notice = _notice_for(measure, bare, ceiling)
    if with_notice.estimate <= ceiling:
        return NoticeChoice(
            "notice",
            text,
            with_notice,
            f"estimate {with_notice.estimate} with the notice reaches the notice line {line:g} "
            f"({notice_at:g} x ceiling {ceiling}) and fits the ceiling",
        )
    return NoticeChoice(
        "omit",
        None,
        bare,
        f"estimate {bare.estimate} fits the ceiling {ceiling} only without the notice "
        f"({with_notice.estimate} with it): sent without the notice",
    )


def carries_notice(view: Sequence[Message]) -> bool:
    """Whether a request carrying ``view`` sends the size notice: its last instruction has one, not yet answered."""
    for message in reversed(view):
        if isinstance(message, AssistantResponse):
            return False
        if isinstance(message, Instruction):
            return message.notice is not None
    return False


def as_sent(decision: Decision, view: Sequence[Message]) -> Decision:
    """``decision`` saying what is done with the request carrying ``view``: ``notice`` only when it sends one."""
    if decision.action != "notice" or carries_notice(view):
        return decision
    return attrs.evolve(
        decision,
        action="pass",
        reason=f"{decision.reason.removesuffix(': notice')}: sent without a size notice "
        "(one goes only with the turn that appends it)",
    )
