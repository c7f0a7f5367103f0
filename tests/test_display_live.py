"""The live view of `foldline run`: the board it draws on a terminal (driven under a pseudo-terminal), the
plain lines with --plain or without rich, and nothing of it when stderr is not a terminal."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from display_support import ROOT, SCENARIOS, run_cli

from runtime.display.live import Board, bar, progress_view
from signals.envelope import Event
from signals.sinks import read_jsonl

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
STYLE = re.compile(r"\x1b\[[0-9;]*m")


def _under_pty(*argv: str, timeout: float = 240.0) -> tuple[int, str, str]:
    """Run ``foldline *argv`` with stderr on a pseudo-terminal; (exit code, stdout, what the terminal got)."""
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "150", "LINES": "40"}
    env.pop("NO_COLOR", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", *argv],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    chunks: list[bytes] = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], timeout)
            if not ready:
                process.kill()
                raise AssertionError("the run drew nothing for too long")
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    out = process.stdout.read().decode() if process.stdout else ""
    code = process.wait(timeout=timeout)
    return code, out, b"".join(chunks).decode("utf-8", "replace")


def _in_process_under_pty(*argv: str) -> tuple[int, str]:
    """``main(argv)`` in this process with stderr on a pseudo-terminal; (exit code, what the terminal got).

    The view is chosen from the stream the command writes to (a terminal here), as in a subprocess; the
    subprocess only re-imported the package. The board itself is drawn under a subprocess (above)."""
    from runtime.cli.main import main

    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the terminal's last writer closed it
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        with open(slave, "w", encoding="utf-8") as err:
            assert err.isatty()
            code = main(list(argv), out=io.StringIO(), err=err)
        reader.join(timeout=30)
        assert not reader.is_alive(), "the terminal was not closed"
    finally:
        os.close(master)
    return code, b"".join(chunks).decode("utf-8", "replace")


def _last_frame_lines(screen: str, node_ids: list[str]) -> dict[str, str]:
    """The last line drawn for each node (escape codes removed)."""
    last: dict[str, str] = {}
    for raw in ANSI.sub("\n", STYLE.sub("", screen)).split("\n"):
        for node in node_ids:
            if raw.startswith(node + " ") and " req " in raw:
                last[node] = raw.rstrip()
    return last


@pytest.mark.slow
def test_live_board_under_a_terminal(tmp_path: Path) -> None:
    pytest.importorskip("rich")
    signals = tmp_path / "s.jsonl"
    code, out, screen = _under_pty("run", str(SCENARIOS / "fold.toml"), "--signals", str(signals))
    assert code == 0, screen
    assert "run run-" in out and "nodes:" in out  # the report still goes to stdout
    assert "\x1b[" in screen and "\x1b[?25l" in screen  # drawn in place, cursor hidden while drawing
    events = read_jsonl(signals)
    responses = {
        node: sum(1 for e in events if e.type == "ResponseReceived" and e.node_id == node)
        for node in ("reader", "lead", "digest")
    }
    frames = _last_frame_lines(screen, list(responses))
    assert set(frames) == set(responses)
    for node, count in responses.items():
        last = [e for e in events if e.type == "ContextDecision" and e.node_id == node][-1].data
        line = frames[node]
        assert re.match(rf"{node}\s+ok\s+{count} req\s+\[[█░]{{24}}\]", line), line
        assert f"{last['estimate_after']:,} / {last['ceiling']:,}" in line, line
        assert bar(last["estimate_after"], last["ceiling"]) in line
    for node in ("reader", "digest"):
        folds = sum(1 for e in events if e.type == "FoldCommitted" and e.node_id == node)
        assert folds >= 1 and f"folds {folds}" in frames[node], (node, frames[node])
    plain_screen = ANSI.sub("", screen)
    assert "[digest] fold: " in plain_screen and "[lead] spawned digest (inherits view)" in plain_screen
    assert "] response: in " not in plain_screen  # the board counts responses instead of printing them


@pytest.mark.slow
def test_plain_flag_keeps_the_plain_lines_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("NO_COLOR", raising=False)
    code, screen = _in_process_under_pty("run", str(SCENARIOS / "quickstart.toml"), "--plain")
    assert code == 0, screen
    assert "\x1b[" not in screen
    assert "[lead] started (iterative)" in screen and "[lead] spawned review-design" in screen
    assert "[lead] response: in " in screen


@pytest.mark.slow
def test_quiet_on_a_terminal_draws_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("NO_COLOR", raising=False)
    code, screen = _in_process_under_pty("run", str(SCENARIOS / "quickstart.toml"), "--quiet")
    assert code == 0 and screen.strip() == ""


@pytest.mark.slow
def test_a_pipe_gets_the_plain_lines() -> None:
    code, _, err = run_cli("run", str(SCENARIOS / "quickstart.toml"))
    assert code == 0 and "\x1b[" not in err and "[lead] started (iterative)" in err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _plain(stream: io.StringIO) -> object:
    return "plain printer"


def test_without_rich_a_terminal_gets_the_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rich", None)
    monkeypatch.setitem(sys.modules, "rich.live", None)
    with progress_view(_Terminal(), quiet=False, plain=False, plain_printer=_plain) as progress:  # type: ignore[arg-type]
        assert progress == "plain printer"


def test_the_view_chosen_for_each_case() -> None:
    with progress_view(_Terminal(), quiet=True, plain=False, plain_printer=_plain) as progress:  # type: ignore[arg-type]
        assert progress is None
    with progress_view(io.StringIO(), quiet=False, plain=False, plain_printer=_plain) as progress:  # type: ignore[arg-type]
        assert progress == "plain printer"
    with progress_view(_Terminal(), quiet=False, plain=True, plain_printer=_plain) as progress:  # type: ignore[arg-type]
        assert progress == "plain printer"


def _event(seq: int, kind: str, node: str | None, data: dict, request: str | None = None) -> Event:
    return Event.from_json(
        {
            "schema_version": 1,
            "type": kind,
            "id": f"run-x:{seq}",
            "time": float(seq),
            "seq": seq,
            "run_id": "run-x",
            "branch_id": "br-1" if node else None,
            "node_id": node,
            "request_id": request,
            "data": data,
        }
    )


def test_board_lines_follow_the_events() -> None:
    board = Board()
    board.feed(_event(1, "RunStarted", None, {"scenario": "s", "provider": "scripted", "nodes": ["a", "b"]}))
    assert board.lines() == ["waiting: a, b"]
    board.feed(_event(2, "NodeStarted", "a", {"operation": "iterative", "parent": None}))
    decision = {
        "action": "refuse",
        "ceiling": 4000,
        "ceiling_source": "profile",
        "estimate_after": 5000,
        "estimate_before": 5000,
        "folded_ids": [],
        "method": "m",
        "reason": "over",
        "sent": False,
        "stages": [],
        "tier": None,
    }
    changed, message = board.feed(_event(3, "ContextDecision", "a", decision, "br-1:1"))
    assert changed and message == "[a] refuse: over"
    changed, message = board.feed(_event(4, "NodeFailed", "a", {"error_type": "InputCeilingExceeded", "message": "m"}))
    assert message == "[a] FAILED: InputCeilingExceeded: m"
    (line_a, waiting) = board.lines()
    assert line_a == f"a  failed      0 req  {bar(5000, 4000)}   5,000 / 4,000   125%  refuse"
    assert bar(5000, 4000) == "[" + "█" * 24 + "]" and board.bar_style(board.nodes["a"]) == "red"
    assert waiting == "waiting: b"
    assert bar(None, 4000) == "[" + " " * 24 + "]" and "no ceiling" in bar(10, None)


@pytest.mark.slow
def test_the_styled_board_matches_its_plain_lines(tmp_path: Path) -> None:
    """The ceiling scenario's board through rich's own test console: a notice, a refusal, a failure in red."""
    rich_console = pytest.importorskip("rich.console")
    from runtime.display.live import _renderable

    signals = tmp_path / "s.jsonl"
    code, _, err = run_cli("run", str(SCENARIOS / "ceiling.toml"), "--signals", str(signals), "--quiet")
    assert code == 1, err
    board = Board()
    for event in read_jsonl(signals):
        board.feed(event)
    console = rich_console.Console(file=io.StringIO(), force_terminal=True, width=150, color_system="standard")
    console.print(_renderable(board))
    drawn = console.file.getvalue()
    assert re.sub(r"\x1b\[[0-9;]*m", "", drawn) == "\n".join(board.lines()) + "\n"
    (tight,) = [line for line in drawn.splitlines() if line.startswith("tight-review")]
    assert "\x1b[1;31mfailed" in tight and "\x1b[31m[" + "█" * 24 + "]" in tight and tight.endswith("refuse")
    (near,) = [line for line in board.lines() if line.startswith("near-limit")]
    last = [e for e in read_jsonl(signals) if e.type == "ContextDecision" and e.node_id == "near-limit"][-1].data
    shown = f"{last['estimate_after']:,} / {last['ceiling']:,}"
    share = f"{100 * last['estimate_after'] / last['ceiling']:.0f}%"  # past 80%, by the provider's count
    assert last["estimate_after"] >= 0.8 * last["ceiling"]
    assert re.search(rf"ok\s+1 req .*{shown}\s+{share}\s+notice$", near), near


def _drain(master: int) -> str:
    """Everything the terminal has received so far."""
    chunks = []
    while select.select([master], [], [], 0.5)[0]:
        chunks.append(os.read(master, 65536))
    return b"".join(chunks).decode("utf-8", "replace")


def test_the_live_board_draws_at_once_at_its_own_terminals_width() -> None:
    """A 160-column terminal gets 160 columns (not rich's 80 fallback), and a first frame before any event."""
    pytest.importorskip("rich")
    import fcntl
    import struct
    import termios

    from runtime.display.live import live_board, terminal_width

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    stream = os.fdopen(slave, "w", encoding="utf-8")
    try:
        assert terminal_width(stream) == 160
        long_reason = "over " + "x" * 120  # a 134-character line above the board
        with live_board(stream) as show:
            stream.flush()
            first = _drain(master)
            assert "starting the run: opening the provider" in first  # drawn before any event arrives
            show(_event(1, "RunStarted", None, {"scenario": "s", "provider": "scripted", "nodes": ["a"]}))
            show(_event(2, "NodeStarted", "a", {"operation": "iterative", "parent": None}))
            decision = {
                "action": "refuse",
                "ceiling": 4000,
                "ceiling_source": "profile",
                "estimate_after": 5000,
                "estimate_before": 5000,
                "folded_ids": [],
                "method": "m",
                "reason": long_reason,
                "sent": False,
                "stages": [],
                "tier": None,
            }
            show(_event(3, "ContextDecision", "a", decision, "br-1:1"))
        stream.flush()
        screen = STYLE.sub("", _drain(master))
    finally:
        stream.close()
        os.close(master)
    assert f"[a] refuse: {long_reason}" in screen  # one line: not wrapped at 80 columns
    assert terminal_width(io.StringIO()) is None
