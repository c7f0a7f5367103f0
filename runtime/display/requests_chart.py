"""Per node: every request in order, its input stacked by what the cache did, against the ceiling.

Each request is a ``<g class="req">`` carrying its id and usage as ``data-``
attributes (what the tests and a reader's tools look at) and a tooltip. Marks
above the bars show where a fold landed (and what it freed), a notice, a
refusal (a dashed outline at the refused estimate: nothing was sent) and a
cache rewrite. The ceiling is a solid step line, the fold line a dashed one;
a short dark tick on each bar is our estimate before the send.
"""

from __future__ import annotations

from collections.abc import Callable

from runtime.display.model import FoldMark, NodePicture, RequestPoint
from runtime.display.svg import AttrValue, axis_ticks, el, esc, nice_ceiling, num, svg, title, tokens, void

WIDTH, HEIGHT = 960.0, 250.0
LEFT, RIGHT, TOP, BOTTOM = 62.0, 14.0, 58.0, 34.0
SEGMENTS = (
    ("read", "cache read", "cache_read_input_tokens"),
    ("write-5m", "cache write 5m", "cache_write_5m_tokens"),
    ("write-1h", "cache write 1h", "cache_write_1h_tokens"),
    ("fresh", "fresh input", "input_tokens"),
)
OFF_SCALE = 0.25
MARK_ROWS = {"fold": 16.0, "notice": 30.0, "refuse": 30.0, "rewrite": 44.0}
MARK_GLYPHS = {"fold": "▼", "notice": "!", "refuse": "✕", "rewrite": "◆"}


def short(value: float) -> str:
    """An axis label: ``950``, ``12k``, ``1.5M``."""
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def _scale(node: NodePicture) -> tuple[float, bool]:
    """The axis top, and whether the ceiling is left off it (when the largest request is under a quarter of it)."""
    peak = max([1] + [max(r.estimate_after, r.usage.total_input if r.usage else 0) for r in node.requests])
    ceiling = max(node.ceilings(), default=0)
    if ceiling and peak < OFF_SCALE * ceiling:
        return nice_ceiling(peak * 1.1), True
    return nice_ceiling(max(peak, ceiling) * 1.04), False


def request_tooltip(r: RequestPoint) -> str:
    lines = [f"request #{r.number} ({r.request_id}): {r.action}" + (f", intent {r.intent}" if r.intent else "")]
    if r.usage is not None:
        u = r.usage
        lines.append(
            f"input {u.total_input:,}: cache read {u.cache_read_input_tokens:,}, write 5m {u.cache_write_5m_tokens:,}, "
            f"write 1h {u.cache_write_1h_tokens:,}, fresh {u.input_tokens:,}; output {u.output_tokens:,}"
        )
    else:
        lines.append("not sent: no usage")
    lines.append(f"estimate {r.estimate_after:,}" + (f" of ceiling {r.ceiling:,}" if r.ceiling else " (no ceiling)"))
    if r.fold_line is not None:
        target = f", target {r.fold_target:,}" if r.fold_target is not None else ""
        lines.append(f"fold line in force {r.fold_line:,}{target}")
    if r.attempts > 1:
        lines.append(f"{r.attempts} attempts")
    lines.extend(f"fold: {fold_text(f)}" for f in r.folds)
    lines.extend(
        f"cache rewrite: {w.cause or 'unexplained'} (from message {w.first_changed_message})" for w in r.rewrites
    )
    lines.extend(reason for reason in r.reasons if r.action in ("notice", "refuse"))
    return "\n".join(lines)


def fold_text(f: FoldMark) -> str:
    stages = "+".join(f.stages) or "marks"
    line = f" at the fold line {f.fold_line_tokens:,}" if f.fold_line_tokens is not None else ""
    text = f"{stages}{line}: {f.estimate_before:,} -> {f.estimate_after:,} tokens, freed {f.tokens_freed:,}"
    if f.target_tokens is not None:
        text += f"; target {f.target_tokens:,} ({f.policy or 'fixed'} policy) " + (
            "reached" if f.target_reached else "not reached"
        )
    else:
        text += " (target reached)" if f.target_reached else " (target not reached)"
    if f.stopped:
        text += f": {f.stopped}"
    if f.predicted_bit is not None and f.predicted_requests is not None:
        text += f"; predicted {f.predicted_bit:,.0f} BIT over {f.predicted_requests:g} requests"
    if f.realised_bit is not None and f.realised_requests is not None:
        text += f"; the previous cycle cost {f.realised_bit:,.0f} BIT over {f.realised_requests} requests"
    return text


def _bar(r: RequestPoint, x: float, width: float, y_of: Callable[[float], float]) -> list[str]:
    y = y_of
    parts: list[str] = []
    if r.usage is not None:
        base = 0
        for css, _label, field in SEGMENTS:
            value = getattr(r.usage, field)
            if value:
                parts.append(
                    void(
                        "rect",
                        {
                            "class": f"seg {css}",
                            "x": x,
                            "y": y(base + value),
                            "width": width,
                            "height": y(base) - y(base + value),
                        },
                    )
                )
            base += value
    elif r.refused:
        parts.append(
            void(
                "rect",
                {
                    "class": "refused-outline",
                    "x": x,
                    "y": y(r.estimate_after),
                    "width": width,
                    "height": y(0) - y(r.estimate_after),
                },
            )
        )
    if r.estimate_after:
        ey = y(r.estimate_after)
        parts.append(void("line", {"class": "estimate", "x1": x, "x2": x + width, "y1": ey, "y2": ey}))
    return parts


def _request_group(r: RequestPoint, x: float, width: float, y_of: Callable[[float], float]) -> str:
    u = r.usage
    attrs: dict[str, AttrValue] = {
        "class": "req" + (" refused" if r.refused else "") + (" side" if r.intent == "side" else ""),
        "data-request": r.request_id,
        "data-node": r.node_id,
        "data-number": r.number,
        "data-action": r.action,
        "data-sent": "yes" if r.sent else "no",
        "data-attempts": r.attempts,
        "data-estimate": r.estimate_after,
        "data-ceiling": r.ceiling,
        "data-read": u.cache_read_input_tokens if u else None,
        "data-write-5m": u.cache_write_5m_tokens if u else None,
        "data-write-1h": u.cache_write_1h_tokens if u else None,
        "data-fresh": u.input_tokens if u else None,
        "data-output": u.output_tokens if u else None,
    }
    return el("g", attrs, title(request_tooltip(r)), *_bar(r, x, width, y_of))


def _marks(r: RequestPoint, cx: float) -> list[str]:
    kinds = []
    if r.folds or r.action == "fold":
        kinds.append(
            ("fold", f"fold before request #{r.number}: " + ("; ".join(fold_text(f) for f in r.folds) or "fold"))
        )
    if r.action in ("notice", "refuse"):
        kinds.append((r.action, f"{r.action} at request #{r.number}: " + " / ".join(r.reasons)))
    if r.rewrites:
        causes = "; ".join(w.cause or "unexplained" for w in r.rewrites)
        kinds.append(("rewrite", f"cache rewrite at request #{r.number}: {causes}"))
    out = []
    for kind, text in kinds:
        out.append(
            el(
                "g",
                {"class": f"mark mark-{kind}", "data-request": r.request_id, "data-mark": kind},
                title(text),
                el("text", {"x": cx, "y": MARK_ROWS[kind], "text-anchor": "middle"}, text=MARK_GLYPHS[kind]),
            )
        )
    return out


def _lines(node: NodePicture, band: float, y_of: Callable[[float], float]) -> list[str]:
    """The ceiling (solid) and the fold or notice line (dashed) as step paths over the requests."""
    name, fold_at, known = node.dashed_line()
    ceiling_path, fold_path = [], []
    for i, r in enumerate(node.requests):
        if r.ceiling is None:
            continue
        x0, x1 = LEFT + i * band, LEFT + (i + 1) * band
        # The line in force at this request when the events say it (the cost model moves it), else the fraction.
        cy, fy = y_of(r.ceiling), y_of(r.fold_line if r.fold_line is not None else r.ceiling * fold_at)
        ceiling_path.append(f"M{num(x0)} {num(cy)}H{num(x1)}")
        fold_path.append(f"M{num(x0)} {num(fy)}H{num(x1)}")
    parts = []
    if ceiling_path:
        parts.append(el("path", {"class": "ceiling", "d": "".join(ceiling_path)}, title("ceiling")))
        parts.append(
            el(
                "path",
                {"class": "foldline", "d": "".join(fold_path)},
                title(
                    f"{name} in force at each request (the cost model's where it chose it)"
                    if any(r.fold_line is not None for r in node.requests)
                    else f"{name} ({fold_at:g} x ceiling: {known})"
                ),
            )
        )
    return parts


def _axes(top: float, n: int, band: float, y_of: Callable[[float], float]) -> list[str]:
    parts = []
    for tick in axis_ticks(top):
        y = y_of(tick)
        parts.append(void("line", {"class": "grid", "x1": LEFT, "x2": WIDTH - RIGHT, "y1": y, "y2": y}))
        parts.append(el("text", {"class": "axis", "x": LEFT - 6, "y": y + 3, "text-anchor": "end"}, text=short(tick)))
    step = max(1, round(n / 16))
    for i in range(0, n, step):
        parts.append(
            el(
                "text",
                {"class": "axis", "x": LEFT + (i + 0.5) * band, "y": HEIGHT - BOTTOM + 14, "text-anchor": "middle"},
                text=str(i + 1),
            )
        )
    parts.append(
        el(
            "text",
            {"class": "axis", "x": (LEFT + WIDTH - RIGHT) / 2, "y": HEIGHT - 4, "text-anchor": "middle"},
            text="request (in order)",
        )
    )
    parts.append(el("text", {"class": "axis", "x": 4, "y": TOP - 6}, text="input tokens"))
    return parts


def node_chart(node: NodePicture) -> str:
    """The SVG of one node's requests (an empty note when it made none)."""
    n = len(node.requests)
    if n == 0:
        return el("p", {"class": "empty"}, text="No requests: the node never reached the model.")
    name, line_at, _ = node.dashed_line()
    top, off_scale = _scale(node)
    plot_h = HEIGHT - TOP - BOTTOM
    band = (WIDTH - LEFT - RIGHT) / n
    width = max(min(band * 0.78, 28.0), 0.6)

    def y_of(value: float) -> float:
        return TOP + plot_h * (1 - value / top)

    parts = _axes(top, n, band, y_of)
    for i, r in enumerate(node.requests):
        x = LEFT + i * band + (band - width) / 2
        parts.append(_request_group(r, x, width, y_of))
        parts.extend(_marks(r, x + width / 2))
    if off_scale:
        ceiling = max(node.ceilings())
        peak = max(max(r.estimate_after, r.usage.total_input if r.usage else 0) for r in node.requests)
        parts.append(
            el(
                "text",
                {"class": "offscale", "x": WIDTH - RIGHT, "y": TOP - 6, "text-anchor": "end"},
                text=f"↑ ceiling {ceiling:,} and {name} {round(ceiling * line_at):,} are off this scale: "
                f"the largest request is {100 * peak / ceiling:.0f}% of the ceiling",
            )
        )
    else:
        parts.extend(_lines(node, band, y_of))
    return svg(WIDTH, HEIGHT, f"node {node.node_id}: {n} requests against the ceiling", parts)


def legend() -> str:
    items = [el("span", {"class": f"key {css}"}, text=label) for css, label, _ in SEGMENTS]
    items += [
        el("span", {"class": "key estimate-key"}, text="our estimate"),
        el("span", {"class": "key ceiling-key"}, text="ceiling"),
        el("span", {"class": "key fold-key"}, text="fold line (notice line for a node that does not fold)"),
        el("span", {"class": "key refused-key"}, text="refused (not sent)"),
        el("span", {"class": "glyph"}, text="▼ fold  ! notice  ✕ refusal  ◆ cache rewrite"),
    ]
    return el("div", {"class": "legend"}, *items)


def node_notes(node: NodePicture) -> str:
    """Below the chart: each fold (and what it saved), refusal, notice and cache rewrite, at its request."""
    rows = []
    for r in node.requests:
        where = f"request #{r.number} ({r.request_id})"
        rows += [
            el("li", {"class": "fold", "data-request": r.request_id}, text=f"{where}: fold {fold_text(f)}")
            for f in r.folds
        ]
        if r.action in ("refuse", "notice"):
            rows.append(
                el(
                    "li",
                    {"class": r.action, "data-request": r.request_id},
                    text=f"{where}: {r.action}: " + " / ".join(r.reasons),
                )
            )
        rows += [
            el(
                "li",
                {"class": "rewrite", "data-request": r.request_id},
                text=f"{where}: cache rewrite from message {w.first_changed_message}: {w.cause or 'unexplained'}",
            )
            for w in r.rewrites
        ]
    rows += [
        el("li", {"class": "fold"}, text=f"after the last request: fold {fold_text(f)}") for f in node.trailing_folds
    ]
    if not rows:
        return el("p", {"class": "quiet"}, text="No folds, notices, refusals or cache rewrites.")
    return el("ul", {"class": "marks"}, *rows)


def request_table(node: NodePicture) -> str:
    """Every request's figures (collapsed on screen)."""
    head = "".join(
        el("th", text=h)
        for h in (
            "#",
            "request",
            "action",
            "read",
            "write 5m",
            "write 1h",
            "fresh",
            "input",
            "output",
            "estimate",
            "ceiling",
            "cost BIT",
        )
    )
    rows = []
    for r in node.requests:
        u = r.usage
        cells = [
            str(r.number),
            r.request_id,
            r.action + (f" ({r.intent})" if r.intent == "side" else ""),
            tokens(u.cache_read_input_tokens if u else None),
            tokens(u.cache_write_5m_tokens if u else None),
            tokens(u.cache_write_1h_tokens if u else None),
            tokens(u.input_tokens if u else None),
            tokens(u.total_input if u else None),
            tokens(u.output_tokens if u else None),
            tokens(r.estimate_after),
            tokens(r.ceiling),
            "-" if r.cost_bit is None else f"{r.cost_bit:,.1f}",
        ]
        rows.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    table = f"<table class='figures'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    return el("details", {}, el("summary", text=f"every request's figures ({len(node.requests)})"), table)
