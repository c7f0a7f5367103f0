"""The workspace tools against a writer that flips a directory and a symlink while they read.

A workspace holds ``d/f.txt`` ("inside"); outside it, ``out/f.txt`` holds a
marker, and a file beside it is named with it. A writer thread swaps ``d`` for
a symlink to ``out`` and back, as fast as it can, while the tools call
``read_file("d/f.txt")``, ``list_files("d")`` and ``grep`` over ``d``. An
*escape* is a result that shows the marker. The run is bounded in calls and
in seconds.

Usage: ``python scripts/sandbox_race.py [CALLS] [SECONDS] [--module FILE]``
(``--module``: a workspace module to measure instead of the current one,
e.g. an older ``actors/tools/workspace.py`` extracted with ``git show``).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MARKER = "OUTSIDE-THE-ROOT-7f3a"


@attrs.define
class RaceCounts:
    calls: dict[str, int] = attrs.Factory(lambda: {"read_file": 0, "list_files": 0, "grep": 0})
    escapes: dict[str, int] = attrs.Factory(lambda: {"read_file": 0, "list_files": 0, "grep": 0})
    flips: int = 0

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    @property
    def total_escapes(self) -> int:
        return sum(self.escapes.values())


def make_tree(base: Path) -> Path:
    """The workspace (returned) and the outside directory beside it."""
    (base / "ws" / "d").mkdir(parents=True)
    (base / "ws" / "d" / "f.txt").write_text("inside\n")
    (base / "out").mkdir()
    (base / "out" / "f.txt").write_text(f"{MARKER}\n")
    (base / "out" / f"{MARKER}.txt").write_text("a name a listing outside the root would show\n")
    return base / "ws"


def _flipper(root: Path, outside: Path, stop: threading.Event, counts: RaceCounts) -> None:
    d, real = root / "d", root / "d.real"
    while not stop.is_set():
        os.rename(d, real)
        os.symlink(outside, d)
        os.unlink(d)
        os.rename(real, d)
        counts.flips += 1


def race(functions: dict[str, Callable[..., str]], root: Path, calls: int, seconds: float) -> RaceCounts:
    """Call the tools ``calls`` times (at most ``seconds``) while a writer flips ``d``; count escapes."""
    counts = RaceCounts()
    stop = threading.Event()
    writer = threading.Thread(target=_flipper, args=(root, root.parent / "out", stop, counts), daemon=True)
    arguments: dict[str, dict[str, Any]] = {
        "read_file": {"path": "d/f.txt"},
        "list_files": {"path": "d"},
        "grep": {"pattern": "inside|OUTSIDE", "path": "d"},
    }
    names = list(arguments)
    deadline = time.monotonic() + seconds
    writer.start()
    try:
        for i in range(calls):
            if time.monotonic() > deadline:
                break
            name = names[i % len(names)]
            counts.calls[name] += 1
            try:
                text = functions[name](**arguments[name])
            except Exception as exc:  # refusals while d is a symlink or missing: expected, never an escape
                text = str(exc)
            if MARKER in text:
                counts.escapes[name] += 1
    finally:
        stop.set()
        writer.join()
    return counts


def tool_functions(root: Path, module_file: str | None = None) -> dict[str, Callable[..., str]]:
    """The three tools' plain functions over ``root`` (from ``module_file`` when given)."""
    if module_file is None:
        from actors.tools import workspace
    else:
        spec = importlib.util.spec_from_file_location("measured_workspace", module_file)
        assert spec is not None and spec.loader is not None
        workspace = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(workspace)
    return {tool.name: _plain(tool) for tool in workspace.workspace_tools(root)}


def _plain(tool: Any) -> Callable[..., str]:
    """A tool called to completion from this thread (each call its own short event loop)."""
    import anyio

    from actors.tools import ToolContext

    context = ToolContext(node_id=None, branch_id="race")

    def call(**arguments: Any) -> str:
        return str(anyio.run(tool.func, arguments, context))

    return call


def main(argv: list[str]) -> None:
    module = None
    if "--module" in argv:
        at = argv.index("--module")
        module = argv[at + 1]
        argv = argv[:at] + argv[at + 2 :]
    calls = int(argv[0]) if argv else 6_000
    seconds = float(argv[1]) if len(argv) > 1 else 60.0
    with tempfile.TemporaryDirectory() as tmp:
        root = make_tree(Path(tmp))
        counts = race(tool_functions(root, module), root, calls, seconds)
    print(f"{counts.total_escapes} escapes in {counts.total_calls} calls ({counts.flips} flips)")
    for name in counts.calls:
        print(f"  {name}: {counts.escapes[name]} of {counts.calls[name]}")


if __name__ == "__main__":
    main(sys.argv[1:])
