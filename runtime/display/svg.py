"""A small SVG and HTML writer: escaped text and attributes, elements, numbers.

Every drawing in the report is built from these helpers, so nothing reaches the
page unescaped and every number is written the same way. Output is a plain
string; an SVG is inline in the page (no external file, font or script).
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping

AttrValue = str | int | float | None


def esc(text: object) -> str:
    """``text`` escaped for HTML/SVG text and attribute values (quotes included)."""
    return html.escape(str(text), quote=True)


def num(value: float) -> str:
    """A coordinate: at most two decimals, no trailing zeros (``12``, ``12.5``, ``12.25``)."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _attr_text(attrs: Mapping[str, AttrValue]) -> str:
    parts = []
    for name, value in attrs.items():
        if value is None:
            continue
        key = name.rstrip("_").replace("_", "-")
        shown = num(value) if isinstance(value, float) else str(value)
        parts.append(f' {key}="{esc(shown)}"')
    return "".join(parts)


def el(tag: str, attrs: Mapping[str, AttrValue] | None = None, *children: str, text: str | None = None) -> str:
    """An element: ``attrs`` (``None`` values left out; ``class_`` -> ``class``, ``data_x`` -> ``data-x``),
    then ``text`` escaped, then ``children`` as given (already markup)."""
    inner = (esc(text) if text is not None else "") + "".join(children)
    return f"<{tag}{_attr_text(attrs or {})}>{inner}</{tag}>"


def void(tag: str, attrs: Mapping[str, AttrValue] | None = None) -> str:
    """A childless element (``<rect .../>`` in SVG, ``<br>``-like in HTML written the XML way)."""
    return f"<{tag}{_attr_text(attrs or {})}/>"


def title(text: str) -> str:
    """An SVG ``<title>``: the tooltip of its parent shape."""
    return el("title", text=text)


def svg(width: float, height: float, label: str, parts: Iterable[str], *, class_: str = "chart") -> str:
    """An inline SVG of ``width`` x ``height`` user units that scales to its container."""
    return el(
        "svg",
        {
            "viewBox": f"0 0 {num(width)} {num(height)}",
            "width": num(width),
            "height": num(height),
            "role": "img",
            "aria-label": label,
            "class": class_,
        },
        title(label),
        *parts,
    )


def tokens(value: float | None) -> str:
    """A token count for people: ``12,345`` (``-`` for none)."""
    return "-" if value is None else f"{value:,.0f}"


def nice_step(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 times a power of ten at or above ``value`` (a tick step)."""
    if value <= 0:
        return 1.0
    power = 1.0
    while power * 10 <= value:
        power *= 10
    while power > value:
        power /= 10
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= value:
            return step * power
    return 10 * power


def nice_ceiling(value: float, ticks: int = 5) -> float:
    """An axis top at or above ``value`` that ``ticks`` equal steps of a round size reach."""
    step = nice_step(value / ticks)
    return step * max(1, math.ceil(value / step - 1e-9))


def axis_ticks(top: float, count: int = 5) -> list[float]:
    """Ticks from 0 to ``top`` at the round step :func:`nice_ceiling` chose (about ``count`` of them)."""
    step = nice_step(top / count)
    return [step * i for i in range(int(top / step + 1e-9) + 1)]
