"""The flow on one time axis: each node's life, its requests, tool rounds, folds, spawns and end.

One row per node (in the order they started). The pale bar is the node's life
from ``NodeStarted`` to its end; darker blocks are requests (send to response),
thin lines between them the tool rounds (a response that asked for tools, up
to the next request); a spawn is an arrow from the parent's row to the child's
start, a ``depends_on`` edge a dashed arrow from the dependency's end to the
dependent's start (when the source names the dependencies: a store does); the end
is marked ✓ (finished), ✕ (failed) or ⊘ (skipped). The axis starts when the first
request is sent: the start-up before it (opening the provider) is left out and
its length said. :func:`timeline_legend` says what each mark is.
"""

from __future__ import annotations

from collections.abc import Callable

from runtime.display.model import NodePicture, RequestPoint, RunPicture
from runtime.display.svg import el, num, svg, title, void

WIDTH = 960.0
LEFT, RIGHT, TOP, ROW, AXIS = 130.0, 20.0, 10.0, 30.0, 34.0
END_GLYPHS = {"ok": "✓", "failed": "✕", "skipped": "⊘"}


def _ordered(run: RunPicture) -> list[NodePicture]:
    def key(node: NodePicture) -> tuple[float, str]:
        when = node.started_at if node.started_at is not None else node.ended_at
        return (when if when is not None else float("inf"), node.node_id)

    return sorted(run.nodes.values(), key=key)


def _request_marks(
    r: RequestPoint, previous: RequestPoint | None, y: float, mid: float, x_of: Callable[[float], float]
) -> list[str]:
    """One request's marks on its node's row: the tool round before it, its span or refusal, its folds."""
    parts: list[str] = []
    if previous is not None and previous.stop_reason == "tool_use" and previous.received_at is not None:
        start = previous.received_at
        stop = r.sent_at if r.sent_at is not None else r.decided_at
        parts.append(
            el(
                "line",
                {"class": "toolround", "x1": x_of(start), "x2": x_of(max(stop, start)), "y1": mid, "y2": mid},
                title(f"tool round after request #{previous.number}"),
            )
        )
    if r.sent_at is not None:
        stop = r.received_at if r.received_at is not None else r.sent_at
        parts.append(
            el(
                "rect",
                {
                    "class": "span" + (" side" if r.intent == "side" else ""),
                    "data-request": r.request_id,
                    "x": x_of(r.sent_at),
                    "y": y + 9,
                    "width": max(x_of(stop) - x_of(r.sent_at), 1.2),
                    "height": ROW - 18,
                },
                title(f"request #{r.number} ({r.request_id}): {r.action}"),
            )
        )
    elif r.refused:
        parts.append(
            el(
                "text",
                {
                    "class": "refusal",
                    "data-request": r.request_id,
                    "x": x_of(r.decided_at),
                    "y": mid + 4,
                    "text-anchor": "middle",
                },
                title(f"refused: {r.reasons[-1]}"),
                text="✕",
            )
        )
    for fold in r.folds:
        parts.append(
            el(
                "text",
                {"class": "tfold", "x": x_of(fold.time), "y": y + 7, "text-anchor": "middle"},
                title(f"fold freed {fold.tokens_freed:,} tokens"),
                text="▼",
            )
        )
    return parts


def _row(node: NodePicture, y: float, x_of: Callable[[float], float], run_end: float) -> list[str]:
    mid = y + ROW / 2
    parts = [el("text", {"class": "rowlabel", "x": LEFT - 8, "y": mid + 4, "text-anchor": "end"}, text=node.node_id)]
    if node.started_at is not None:
        end = node.ended_at if node.ended_at is not None else run_end
        parts.append(
            el(
                "rect",
                {
                    "class": f"life {node.status}",
                    "x": max(x_of(node.started_at), LEFT),
                    "y": y + 6,
                    "width": max(x_of(end) - max(x_of(node.started_at), LEFT), 1.0),
                    "height": ROW - 12,
                },
                title(f"{node.node_id}: {node.status}" + (f" ({node.reason})" if node.reason else "")),
            )
        )
    previous = None
    for r in node.requests:
        parts.extend(_request_marks(r, previous, y, mid, x_of))
        previous = r
    if node.ended_at is not None and node.status in END_GLYPHS:
        parts.append(
            el(
                "text",
                {"class": f"end {node.status}", "x": x_of(node.ended_at) + 7, "y": mid + 5},
                title(f"{node.status}" + (f": {node.reason}" if node.reason else "")),
                text=END_GLYPHS[node.status],
            )
        )
    return [el("g", {"class": "trow", "data-node": node.node_id}, *parts)]


def timeline_legend() -> str:
    """What each mark of the timeline is."""
    keys = [
        ("key life-key", "node's life"),
        ("key span-key", "request (send to response)"),
        ("key side-key", "fold summary request"),
        ("key toolround-key", "tool round"),
        ("key spawn-key", "spawn"),
        ("key depends-key", "depends_on (waits for)"),
        ("key glyph", "▼ fold"),
        ("key glyph", "✕ refusal / failed"),
        ("key glyph", "✓ finished  ⊘ skipped"),
    ]
    return el("div", {"class": "legend"}, *(el("span", {"class": css}, text=text) for css, text in keys))


def _arrow(x1: float, y1: float, x2: float, y2: float, text: str, css: str = "spawn") -> str:
    head = 5.0
    direction = 1.0 if y2 >= y1 else -1.0
    points = f"{num(x2)},{num(y2)} {num(x2 - head)},{num(y2 - direction * head * 1.6)} {num(x2 + head)},{num(y2 - direction * head * 1.6)}"
    return el(
        "g",
        {"class": css},
        title(text),
        void("line", {"x1": x1, "y1": y1, "x2": x2, "y2": y2 - direction * head * 1.6}),
        void("polygon", {"points": points}),
    )


def timeline(run: RunPicture) -> str:
    """The SVG of the whole flow on one time axis."""
    nodes = _ordered(run)
    run_start = run.started_at or 0.0
    # The start-up before the first request (opening the provider, the first compile) is left out.
    firsts = [r.sent_at or r.decided_at for n in nodes for r in n.requests[:1]]
    starts = [t for t in firsts if t] or [n.started_at for n in nodes if n.started_at is not None]
    start = min(starts) if starts else run_start
    end = max(run.ended_at or start, max((n.ended_at or start for n in nodes), default=start), start + 1e-6)
    span = end - start
    height = TOP + ROW * max(len(nodes), 1) + AXIS

    def x_of(t: float) -> float:
        return LEFT + (WIDTH - LEFT - RIGHT) * (t - start) / span

    parts: list[str] = []
    for i in range(6):
        t = start + span * i / 5
        x = x_of(t)
        parts.append(void("line", {"class": "grid", "x1": x, "x2": x, "y1": TOP, "y2": height - AXIS + 4}))
        parts.append(
            el(
                "text",
                {"class": "axis", "x": x, "y": height - AXIS + 16, "text-anchor": "middle"},
                text=f"{t - start:.2f}s",
            )
        )
    parts.append(
        el(
            "text",
            {"class": "axis", "x": (LEFT + WIDTH) / 2, "y": height - 4, "text-anchor": "middle"},
            text="seconds since the first request"
            + (f" (the start-up before it, {start - run_start:.2f} s, left out)" if start > run_start else ""),
        )
    )
    rows = {node.node_id: TOP + i * ROW for i, node in enumerate(nodes)}
    for node in nodes:
        parts.extend(_row(node, rows[node.node_id], x_of, end))
    for spawn in run.spawns:
        if spawn.parent in rows and spawn.child in rows:
            child = run.nodes[spawn.child]
            x2 = x_of(child.started_at if child.started_at is not None else spawn.time)
            parts.append(
                _arrow(
                    x_of(spawn.time),
                    rows[spawn.parent] + ROW / 2,
                    x2,
                    rows[spawn.child] + ROW / 2,
                    f"{spawn.parent} spawned {spawn.child} (inherits {spawn.inherit}, {spawn.view_length} messages)",
                )
            )
    parts.extend(_depends_edges(run, rows, x_of))
    return svg(WIDTH, height, f"timeline of {len(nodes)} nodes over {span:.2f} s", parts)


def _depends_edges(run: RunPicture, rows: dict[str, float], x_of: Callable[[float], float]) -> list[str]:
    """A dashed arrow from each dependency's end to its dependent's start."""
    parts = []
    for node in run.nodes.values():
        for need in node.depends_on:
            before = run.nodes.get(need)
            if before is None or need not in rows or node.node_id not in rows or before.ended_at is None:
                continue
            x2 = x_of(node.started_at if node.started_at is not None else before.ended_at)
            parts.append(
                _arrow(
                    x_of(before.ended_at),
                    rows[need] + ROW / 2,
                    x2,
                    rows[node.node_id] + ROW / 2,
                    f"{node.node_id} depends on {need}",
                    css="depends",
                )
            )
    return parts
