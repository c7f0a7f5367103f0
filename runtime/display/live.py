"""The live view of ``foldline run`` on a terminal: one line per node, redrawn as events arrive.

Each line shows a node's state, its request count, its last estimate against
its ceiling as a bar (green under the fold line, amber at or past it, red on a
refusal) and its last ceiling action; nodes not started yet are listed on one
``waiting:`` line. Folds, notices, refusals, spawns, failures and skips are
also printed above the board as plain lines, so they stay in the scrollback.

:class:`Board` is the state (pure: fed events, it renders text lines);
:func:`progress_view` picks the view for a run: nothing with ``quiet``, the
plain progress lines when ``plain`` is asked for, when the stream is not a
terminal or when ``rich`` (the ``live`` extra) is not installed, and the live
board otherwise. rich draws the board: it redraws in place, keeps to the
terminal's width and restores the cursor when the run ends or fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

import attrs

from runtime.decision.ceiling import DEFAULT_FOLD_AT
from runtime.display import terminal
from signals.bus import Gap
from signals.envelope import Event

BAR_WIDTH = 24
REFRESH_SECONDS = 0.05
NOTABLE = ("notice", "refuse", "fold")
STATE_STYLES = {"running": "bold cyan", "ok": "green", "failed": "bold red", "skipped": "dim"}
NODE_EVENTS = ("RunStarted", "NodeStarted", "NodeFinished", "NodeFailed", "NodeSkipped")


@attrs.define(eq=False)
class NodeLine:
    node_id: str
    state: str = "waiting"
    requests: int = 0
    estimate: int | None = None
    ceiling: int | None = None
    action: str | None = None
    folds: int = 0


def bar(estimate: int | None, ceiling: int | None, width: int = BAR_WIDTH) -> str:
    """``[█████░░░░]`` filled to estimate/ceiling; ``[ no ceiling ]``-style text when there is none."""
    if estimate is None:
        return "[" + " " * width + "]"
    if not ceiling:
        return "[" + "no ceiling".center(width) + "]"
    filled = min(width, round(width * estimate / ceiling))
    return "[" + "█" * filled + "░" * (width - filled) + "]"


@attrs.define(eq=False)
class Board:
    """The live view's state: every node's line, fed one event at a time."""

    nodes: dict[str, NodeLine] = attrs.field(factory=dict)

    def _line(self, node_id: str | None) -> NodeLine:
        key = node_id or "-"
        return self.nodes.setdefault(key, NodeLine(key))

    def feed(self, event: Event) -> tuple[bool, str | None]:
        """Take one event: (whether the board changed, a line to print above it, if any)."""
        data = event.data
        kind = event.type
        if kind == "RunStarted":
            for node_id in data.get("nodes", ()):
                self._line(node_id)
            return True, None
        if kind in NODE_EVENTS[1:]:
            return True, self._node_event(event)
        if kind == "ContextDecision":
            line = self._line(event.node_id)
            line.estimate, line.ceiling = int(data.get("estimate_after") or 0), data.get("ceiling")
            line.action = data.get("action")
            if line.action == "fold":
                line.folds += 1
            shown = f"[{line.node_id}] {line.action}: {data.get('reason')}" if line.action in NOTABLE else None
            return True, shown
        if kind == "ResponseReceived":
            self._line(event.node_id).requests += 1
            return True, None
        if kind == "ChildSpawned":
            return False, f"[{event.node_id}] spawned {data['child']} (inherits {data['inherit']})"
        return False, None

    def _node_event(self, event: Event) -> str | None:
        line = self._line(event.node_id)
        data = event.data
        if event.type == "NodeStarted":
            line.state = "running"
            return None
        if event.type == "NodeFinished":
            line.state = "ok"
            return None
        if event.type == "NodeFailed":
            line.state = "failed"
            return f"[{line.node_id}] FAILED: {data['error_type']}: {data['message']}"
        line.state = "skipped"
        return f"[{line.node_id}] skipped: {data['reason']}"

    def rows(self) -> list[tuple[NodeLine | None, str]]:
        """The board: (node, its text line) per started node, then (None, the nodes still waiting)."""
        width = self.name_width()
        out: list[tuple[NodeLine | None, str]] = []
        for line in self.nodes.values():
            if line.state == "waiting":
                continue
            figures = (
                ""
                if line.estimate is None
                else f" {line.estimate:>7,} / " + (f"{line.ceiling:<7,}" if line.ceiling else "-      ")
            )
            share = f" {100 * line.estimate / line.ceiling:3.0f}%" if line.estimate is not None and line.ceiling else ""
            extra = f"  {line.action}" if line.action and line.action != "pass" else ""
            folds = f"  folds {line.folds}" if line.folds else ""
            text = (
                f"{line.node_id[:width]:<{width}}  {line.state:<7}  {line.requests:>4} req  "
                f"{bar(line.estimate, line.ceiling)}{figures}{share}{extra}{folds}"
            )
            out.append((line, text))
        waiting = [line.node_id for line in self.nodes.values() if line.state == "waiting"]
        if waiting:
            out.append((None, "waiting: " + ", ".join(waiting)))
        return out

    def name_width(self) -> int:
        return min(max((len(line.node_id) for line in self.nodes.values()), default=4), 24)

    def lines(self) -> list[str]:
        """The board as plain text lines."""
        return [text for _, text in self.rows()]

    def bar_style(self, line: NodeLine) -> str:
        if line.action == "refuse" or line.state == "failed":
            return "red"
        if line.estimate is not None and line.ceiling and line.estimate >= DEFAULT_FOLD_AT * line.ceiling:
            return "yellow"
        return "green"


def _renderable(board: Board) -> Any:
    from rich.text import Text

    text = Text()
    for line, plain in board.rows():
        if line is None:
            text.append(plain + "\n", style="dim")
            continue
        state_at = board.name_width() + 2
        start = plain.index("[", plain.index(" req"))
        end = plain.index("]", start) + 1
        text.append(plain[:state_at])
        text.append(plain[state_at : state_at + 7], style=STATE_STYLES.get(line.state, ""))
        text.append(plain[state_at + 7 : start])
        text.append(plain[start:end], style=board.bar_style(line))
        text.append(plain[end:] + "\n")
    text.rstrip()
    return text


@contextmanager
def live_board(stream: TextIO) -> Iterator[Callable[[Event | Gap], None]]:
    """The live board on ``stream`` (a terminal) through rich; the final board stays on screen."""
    from rich.console import Console
    from rich.live import Live

    board = Board()
    # The board is drawn on ``stream``: its own terminal's width, not whatever the standard streams say.
    console = Console(file=stream, highlight=False, soft_wrap=False, width=terminal_width(stream))
    last = [0.0]
    with Live(
        _starting(), console=console, auto_refresh=False, transient=False, redirect_stdout=False, redirect_stderr=False
    ) as live:
        live.refresh()  # the first frame at once: opening the provider takes a moment before the first event

        def show(event: Event | Gap) -> None:
            if isinstance(event, Gap):  # the CLI subscribes with "block": no gap reaches it, but say so if one does
                live.console.print(f"missed {event.count} event(s)", markup=False, highlight=False)
                return
            changed, message = board.feed(event)
            if message is not None:
                live.console.print(terminal.shown(message), markup=False, highlight=False)
            now = time.monotonic()
            urgent = message is not None or event.type in NODE_EVENTS
            if changed and (urgent or now - last[0] >= REFRESH_SECONDS):
                last[0] = now
                live.update(_renderable(board), refresh=True)

        try:
            yield show
        finally:
            live.update(_renderable(board), refresh=True)


def terminal_width(stream: TextIO) -> int | None:
    """The width of the terminal ``stream`` writes to (None: not known, rich decides)."""
    import os

    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return None
    return columns if columns > 0 else None  # a terminal that reports no size: rich decides


def _starting() -> Any:
    from rich.text import Text

    return Text("starting the run: opening the provider ...", style="dim")


def rich_available() -> bool:
    try:
        import rich.live  # noqa: F401
    except ImportError:
        return False
    return True


@contextmanager
def progress_view(
    stream: TextIO, *, quiet: bool, plain: bool, plain_printer: Callable[[TextIO], Callable[[Event | Gap], None]]
) -> Iterator[Callable[[Event | Gap], None] | None]:
    """The progress callback for a run: none, the plain lines, or the live board (see the module docstring)."""
    if quiet:
        yield None
        return
    if plain or not _is_terminal(stream) or not rich_available():
        yield plain_printer(stream)
        return
    with live_board(stream) as show:
        yield show


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
