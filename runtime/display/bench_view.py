"""A ``foldline bench --json`` output: per workload the strategies side by side against the lower bound.

Each workload gets one bar per strategy (its cost in base-input-token units),
the lower bound as a vertical line, the ratio to the bound at the bar's end,
and a table of the figures the bench table prints. The targets close the page.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from runtime.display.svg import el, esc, nice_ceiling, svg, title, tokens, void
from runtime.models.pricing import BIT_CACHE_READ, BIT_CACHE_WRITE_1H, BIT_CACHE_WRITE_5M, BIT_FRESH

WIDTH, LEFT, RIGHT, TOP, BAR, GAP = 960.0, 130.0, 90.0, 24.0, 20.0, 8.0
SEGMENTS = (
    ("read", "cache_read_input_tokens", BIT_CACHE_READ),
    ("write-5m", "cache_write_5m_tokens", BIT_CACHE_WRITE_5M),
    ("write-1h", "cache_write_1h_tokens", BIT_CACHE_WRITE_1H),
    ("fresh", "input_tokens", BIT_FRESH),
)


def _segments(run: Mapping[str, Any]) -> list[tuple[str, float]]:
    """The cost split by what the cache did (BIT); what is left over is priced output."""
    usage = run["usage"]
    parts = [(css, float(usage.get(field, 0)) * weight) for css, field, weight in SEGMENTS]
    rest = float(run["cost"].get("bit") or 0.0) - sum(value for _, value in parts)
    if rest > 0.5:
        parts.append(("output", rest))
    return parts


def _ratio(run: Mapping[str, Any]) -> str:
    value = (run.get("ratios") or {}).get("to_bound")
    return "-" if value is None else f"{value:.2f} x bound"


def workload_chart(workload: Mapping[str, Any]) -> str:
    runs = workload["runs"]
    bound = float(workload["lower_bound"].get("bit") or 0.0)
    top = nice_ceiling(max([bound] + [float(r["cost"].get("bit") or 0.0) for r in runs.values()]) * 1.02)
    height = TOP + len(runs) * (BAR + GAP) + 10

    def x_of(value: float) -> float:
        return LEFT + (WIDTH - LEFT - RIGHT) * value / top

    parts = [
        el(
            "text",
            {"class": "axis", "x": WIDTH - RIGHT, "y": 14, "text-anchor": "end"},
            text="cost in base-input-token units (BIT)",
        )
    ]
    for i, (name, run) in enumerate(runs.items()):
        y = TOP + i * (BAR + GAP)
        bit = float(run["cost"].get("bit") or 0.0)
        usage = run["usage"]
        parts.append(
            el(
                "g",
                {
                    "class": "strategy" + (" ours" if name == "foldline" else ""),
                    "data-workload": workload["workload"],
                    "data-strategy": name,
                    "data-cost-bit": f"{bit:.2f}",
                    "data-requests": run.get("requests"),
                },
                title(
                    f"{name}: {bit:,.1f} BIT, {_ratio(run)}; read {usage.get('cache_read_input_tokens', 0):,}, "
                    f"fresh {usage.get('input_tokens', 0):,}, write 5m {usage.get('cache_write_5m_tokens', 0):,}, "
                    f"1h {usage.get('cache_write_1h_tokens', 0):,}"
                ),
                el("text", {"class": "rowlabel", "x": LEFT - 8, "y": y + BAR * 0.7, "text-anchor": "end"}, text=name),
                *_bar(run, y, x_of),
                el("text", {"class": "axis", "x": x_of(bit) + 6, "y": y + BAR * 0.7}, text=_ratio(run)),
            )
        )
    bx = x_of(bound)
    parts.append(
        el(
            "g",
            {"class": "bound", "data-workload": workload["workload"], "data-bound-bit": f"{bound:.2f}"},
            title(f"lower bound {bound:,.1f} BIT"),
            void("line", {"x1": bx, "x2": bx, "y1": TOP - 6, "y2": height - 6}),
            el("text", {"class": "axis", "x": bx + 4, "y": TOP - 8}, text=f"lower bound {bound:,.0f}"),
        )
    )
    return svg(WIDTH, height, f"{workload['workload']}: strategies against the lower bound", parts)


def _bar(run: Mapping[str, Any], y: float, x_of: Callable[[float], float]) -> list[str]:
    out, start = [], 0.0
    for css, value in _segments(run):
        if value > 0:
            out.append(
                void(
                    "rect",
                    {
                        "class": f"seg {css}",
                        "x": x_of(start),
                        "y": y,
                        "width": max(x_of(start + value) - x_of(start), 0.5),
                        "height": BAR,
                    },
                )
            )
        start += value
    return out


LEGEND = el(
    "div",
    {"class": "legend"},
    *(
        el("span", {"class": f"key {css}"}, text=label)
        for css, label in (
            ("read", "cache read"),
            ("write-5m", "cache write 5m"),
            ("write-1h", "cache write 1h"),
            ("fresh", "fresh input"),
            ("output", "output (when priced)"),
            ("fold-key", "lower bound"),
        )
    ),
    el("span", {"class": "glyph"}, text="bold: foldline"),
)

COLUMNS = (
    ("strategy", lambda n, r: n),
    ("cost BIT", lambda n, r: f"{float(r['cost'].get('bit') or 0):,.0f}"),
    ("x bound", lambda n, r: _ratio(r).split(" ")[0]),
    ("cached", lambda n, r: f"{float(r.get('cached_share') or 0):.3f}"),
    ("requests", lambda n, r: tokens(r.get("requests"))),
    ("peak", lambda n, r: tokens(r.get("peak_request_tokens"))),
    ("refused", lambda n, r: tokens(r.get("refusals"))),
    ("folds", lambda n, r: tokens(r.get("folds"))),
    (
        "rewrites e/u",
        lambda n, r: (
            f"{(r.get('rewrites') or {}).get('explained', 0)}/{(r.get('rewrites') or {}).get('unexplained', 0)}"
        ),
    ),
    ("unrecoverable B", lambda n, r: tokens(r.get("bytes_unrecoverable"))),
    ("status", lambda n, r: str(r.get("status", "-"))),
)


def workload_section(workload: Mapping[str, Any]) -> str:
    bound = workload["lower_bound"]
    head = "".join(f"<th>{esc(name)}</th>" for name, _ in COLUMNS)
    rows = "".join(
        "<tr>" + "".join(f"<td>{esc(cell(name, run))}</td>" for _, cell in COLUMNS) + "</tr>"
        for name, run in workload["runs"].items()
    )
    not_run = workload.get("not_run") or {}
    skipped = [el("p", {"class": "quiet"}, text=f"not run: {name}: {why}") for name, why in not_run.items()]
    return el(
        "section",
        {"class": "workload", "data-workload": workload["workload"]},
        el("h2", text=workload["workload"]),
        el("p", text=str(workload.get("description", ""))),
        el(
            "p",
            {"class": "quiet"},
            text=f"lower bound {float(bound.get('bit') or 0):,.1f} BIT: "
            f"{tokens(bound.get('write_tokens'))} tokens written once, "
            f"{tokens(bound.get('read_tokens'))} read, {tokens(bound.get('requests'))} requests",
        ),
        workload_chart(workload),
        LEGEND,
        f"<table class='figures'><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>",
        *skipped,
    )


def targets_section(document: Mapping[str, Any]) -> str:
    items = [
        el(
            "li",
            {"class": "met" if t.get("met") else "missed"},
            text=f"{'met' if t.get('met') else 'missed'}: {t.get('target')} ({t.get('detail')})",
        )
        for t in document.get("targets", [])
    ]
    return el("section", {"class": "targets"}, el("h2", text="targets"), el("ul", {}, *items))


def bench_body(document: Mapping[str, Any]) -> tuple[str, str]:
    """The page's heading and body for a bench document."""
    heading = (
        f"bench: {len(document['workloads'])} workloads, model {document.get('model')}, "
        f"provider {document.get('provider')}, sizes {document.get('sizes')}"
    )
    body = "".join(workload_section(w) for w in document["workloads"]) + targets_section(document)
    return heading, body
