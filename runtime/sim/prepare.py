"""Reading a request body: JSON with a depth bound, validation and the token layout.

These are the CPU-heavy steps of a request; the app runs them in a worker
thread for large bodies (see ``SimConfig.thread_tokenize_bytes``), so they are
plain functions of their arguments (the token counter is thread-safe).
"""

from __future__ import annotations

import json
import math
from typing import Any

import attrs

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
    payload: dict[str, Any]
    layout: Layout


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def _check_depth(value: Any) -> None:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > MAX_JSON_DEPTH:
            raise invalid_request(f"request body: JSON nested deeper than {MAX_JSON_DEPTH} levels")
        stack.extend((child, depth + 1) for child in children)


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
    payload = validate_request(body, count_only=count_only)
    return Prepared(payload, build_layout(payload, counter, lookback_collapse=lookback_collapse))
