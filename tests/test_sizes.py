"""The house size rules: no function over 80 lines, no module over 500, in runtime, actors and signals.

A function's length runs from its ``def`` line to its last line (docstring
included); nested functions and methods count on their own.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 500

# TEMPORARY, to be emptied as the branches rewriting these files merge (issue 10's send
# pipeline, issue 11's configuration, the bus work): each entry is a file owned elsewhere
# that is over a limit today. Nothing else may be added here.
KNOWN_OVER: set[str] = set()


def _sources() -> list[Path]:
    return sorted(p for top in ("runtime", "actors", "signals") for p in (ROOT / top).rglob("*.py"))


def _over_limits(path: Path, root: Path = ROOT) -> list[tuple[str, int]]:
    """(name, lines) for the module and each function over its limit; the module's name is its path."""
    rel = path.relative_to(root).as_posix()
    text = path.read_text(encoding="utf-8")
    over = []
    lines = len(text.splitlines())
    if lines > MAX_MODULE_LINES:
        over.append((rel, lines))
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                over.append((f"{rel}:{node.name}", length))
    return over


def test_no_function_over_80_lines_and_no_module_over_500() -> None:
    found = {name: lines for path in _sources() for name, lines in _over_limits(path)}
    new = {name: lines for name, lines in found.items() if name not in KNOWN_OVER}
    assert new == {}, f"over the size limits: {new}"


def test_the_temporary_list_holds_only_what_is_still_over() -> None:
    # An entry whose file got back under the limit is stale: delete it, so the list only shrinks.
    found = {name for path in _sources() for name, _ in _over_limits(path)}
    assert KNOWN_OVER <= found, f"no longer over a limit, remove from KNOWN_OVER: {sorted(KNOWN_OVER - found)}"


def test_the_measure_counts_from_def_to_last_line(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    path = tmp_path / "long.py"
    path.write_text(f"def long():\n{body}\n\n\ndef fits():\n{body[: body.rindex(chr(10))]}\n")
    # "long" is its def line plus 80 body lines; "fits" is 80 lines in all.
    assert _over_limits(path, tmp_path) == [("long.py:long", MAX_FUNCTION_LINES + 1)]
    big = tmp_path / "big.py"
    big.write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    assert _over_limits(big, tmp_path) == [("big.py", MAX_MODULE_LINES + 1)]
