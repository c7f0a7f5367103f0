"""Reading a request body: JSON with a depth bound, validation, context edits and the token layout.

These are the CPU-heavy steps of a request; the app runs them in a worker
thread for large bodies (see ``SimConfig.thread_tokenize_bytes``), so they are
plain functions of their arguments (the token counter is thread-safe).
"""

from __future__ import annotations

import json
import math
from typing import Any

import attrs

from runtime.inputs.nesting import nested_deeper_than
from runtime.sim.compaction import check_compaction_blocks, dropped_before_compaction
from runtime.sim.context_edits import apply_edits
from runtime.sim.errors import invalid_request
from runtime.sim.layout import Layout, build_layout
from runtime.sim.tokens import SimTokenCounter
from runtime.sim.validation import validate_request
from runtime.values.canonical import digest

MAX_JSON_DEPTH = 100
"""The deepest nesting of arrays and objects a request body may have."""


@attrs.frozen
class Decoded:
    body: Any
    payload_digest: str


@attrs.frozen
class Prepared:
    """The request as the model and the cache see it (context edits applied), and what was sent."""

    payload: dict[str, Any]
    layout: Layout
    sent: dict[str, Any] | None = None
    """The request as sent, when context edits changed it (its thinking signatures are checked as sent)."""
    original_tokens: int | None = None
    """The input tokens before context edits (None: the request has no ``context_management``)."""
    applied_edits: tuple[dict[str, Any], ...] = ()
    visible: dict[str, Any] | None = None
    """The request from its latest compaction block on, before context edits (None: it carries no compaction
    block; :mod:`runtime.sim.compaction`). Its thinking signatures are checked as it reads."""

    @property
    def asked(self) -> dict[str, Any]:
        """The request a model policy reads: as sent when a compaction dropped its start (a script finds
        its place by the replies the request holds), else as edited."""
        return self.sent if self.visible is not None and self.sent is not None else self.payload

    @property
    def signed(self) -> dict[str, Any]:
        """The request whose given-back thinking blocks are verified: what the model reads, before edits."""
        if self.visible is not None:
            return self.visible
        return self.sent if self.sent is not None else self.payload


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def _check_depth(value: Any) -> None:
    if nested_deeper_than(value, MAX_JSON_DEPTH):
        raise invalid_request(f"request body: JSON nested deeper than {MAX_JSON_DEPTH} levels")


def decode_body(body: bytes) -> Decoded:
    """The body as JSON and its digest; 400 when it is not UTF-8 JSON or nests too deep."""
    try:
        value = json.loads(body, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError as exc:
        raise invalid_request(f"request body: JSON nested deeper than {MAX_JSON_DEPTH} levels") from exc
    except (UnicodeDecodeError, ValueError) as exc:
        raise invalid_request(f"request body: not valid JSON ({exc})") from exc
    _check_depth(value)
    try:
        return Decoded(value, digest(value))
    except UnicodeEncodeError as exc:  # a \ud800-style escape: valid JSON syntax, not Unicode text
        lone = exc.object[exc.start : exc.end].encode("unicode_escape").decode("ascii")
        raise invalid_request(f"request body: not valid JSON (a string holds the lone surrogate {lone})") from exc


def prepare(body: Any, *, count_only: bool, counter: SimTokenCounter, lookback_collapse: bool) -> Prepared:
    """Validate a decoded body and lay it out in the simulator's tokens."""
    sent = validate_request(body, count_only=count_only)
    check_compaction_blocks(sent)
    visible = dropped_before_compaction(sent)
    payload = sent if visible is None else visible
    dropped = sent if visible is not None else None
    layout = build_layout(payload, counter, lookback_collapse=lookback_collapse)
    if payload.get("context_management") is None:
        return Prepared(payload, layout, dropped, visible=visible)

    def count(edited: dict[str, Any]) -> int:
        return build_layout(edited, counter, lookback_collapse=lookback_collapse).total_tokens

    edited = apply_edits(payload, layout.total_tokens, count)
    if not edited.applied:
        return Prepared(payload, layout, dropped, layout.total_tokens, visible=visible)
    edited_layout = build_layout(edited.payload, counter, lookback_collapse=lookback_collapse)
    return Prepared(edited.payload, edited_layout, sent, layout.total_tokens, edited.applied, visible)
