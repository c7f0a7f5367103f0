"""The workspace sandbox against an adversary (issue 28, items 5 and 7).

Item 5: a writer flipping a directory and a symlink while the tools read must
never get a byte (or a name) from outside the root. Item 7: a symlink loop or
a name the system refuses is skipped and named, never failing a whole walk,
and no message shows the workspace's host path.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.tools import ToolContext, WorkspacePathError, workspace_tools
from actors.tools.sandbox import MAX_LINK_HOPS, Sandbox, SandboxError

ROOT = Path(__file__).resolve().parents[1]
CONTEXT = ToolContext(node_id=None, branch_id="b")


def _race_module() -> Any:
    spec = importlib.util.spec_from_file_location("foldline_sandbox_race", ROOT / "scripts" / "sandbox_race.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_writer_flipping_a_directory_and_a_symlink_gets_nothing_from_outside(tmp_path: Path) -> None:
    race = _race_module()
    root = race.make_tree(tmp_path)
    # Bounded: 1,500 calls or 8 seconds, whichever ends first. The tools before the fix showed the
    # outside marker in 94 of 6,000 calls of this race (scripts/sandbox_race.py --module <old workspace.py>).
    counts = race.race(race.tool_functions(root), root, calls=1_500, seconds=8.0)
    assert counts.flips > 100 and counts.total_calls >= 300, counts
    assert counts.total_escapes == 0, counts.escapes


async def call(root: Path, name: str, **arguments: Any) -> Any:
    tools = {t.name: t for t in workspace_tools(root)}
    return await tools[name].func(arguments, CONTEXT)


@pytest.fixture
def looped(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "a.py").write_text("ceiling = 1\n")
    (ws / "loop").symlink_to("loop")  # a link to itself
    (ws / "src" / "ping").symlink_to("../pong")
    (ws / "pong").symlink_to("src/ping")  # a loop of two
    (ws / "z.txt").write_text("ceiling at the end\n")
    return ws


@pytest.mark.anyio
async def test_a_symlink_loop_is_skipped_and_named_by_list_files(looped: Path) -> None:
    lines = (await call(looped, "list_files")).splitlines()
    assert lines[0] == "5 entries under '.' matching '*'"
    assert "loop  symlink loop; skipped" in lines
    assert "pong  symlink loop; skipped" in lines and "src/ping  symlink loop; skipped" in lines
    assert "src/a.py  12 bytes" in lines and "z.txt  19 bytes" in lines


@pytest.mark.anyio
async def test_a_symlink_loop_is_skipped_and_named_by_grep(looped: Path) -> None:
    lines = (await call(looped, "grep", pattern="ceiling")).splitlines()
    assert lines == [
        "2 matching lines for 'ceiling' under '.'",
        "z.txt:1: ceiling at the end",
        "src/a.py:1: ceiling = 1",
        "... skipped (a symlink loop or unreadable): loop, pong, src/ping",
    ]


@pytest.mark.anyio
async def test_reading_through_a_loop_is_an_error_naming_the_path_only(looped: Path) -> None:
    with pytest.raises(WorkspacePathError) as caught:
        await call(looped, "read_file", path="loop/x")
    assert str(caught.value) == f"path 'loop/x' passes through more than {MAX_LINK_HOPS} symlinks (a symlink loop)"


@pytest.mark.anyio
@pytest.mark.parametrize("tool", ["read_file", "list_files", "grep"])
async def test_an_over_long_name_is_refused_without_the_host_path(tmp_path: Path, tool: str) -> None:
    ws = tmp_path / "ws"
    (ws / "docs").mkdir(parents=True)
    name = "n" * 300  # above the 255-byte name limit
    arguments: dict[str, Any] = {"path": f"docs/{name}"} if tool != "grep" else {"pattern": "x", "path": name}
    with pytest.raises(WorkspacePathError) as caught:
        await call(ws, tool, **arguments)
    message = str(caught.value)
    assert "File name too long" in message and name in message
    assert str(tmp_path) not in message and "/ws" not in message


@pytest.mark.anyio
async def test_a_tree_deeper_than_the_path_limit_is_walked_and_named_relative_to_the_root(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    try:  # 20 x 250 bytes: far beyond PATH_MAX (4096), so built relative to held descriptors
        for _ in range(20):
            os.mkdir("d" * 250, dir_fd=fd)
            fd, parent = os.open("d" * 250, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd), fd
            os.close(parent)
        leaf = os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, b"ceiling deep down\n")
        os.close(leaf)
    finally:
        os.close(fd)
    deep = "/".join(["d" * 250] * 20) + "/leaf.txt"
    listed = await call(ws, "list_files")
    assert listed.splitlines() == ["1 entries under '.' matching '*'", f"{deep}  18 bytes"]
    found = await call(ws, "grep", pattern="ceiling")
    assert found.splitlines()[1] == f"{deep}:1: ceiling deep down"


def test_symlinks_inside_the_root_are_followed_on_held_descriptors(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "a" / "b").mkdir(parents=True)
    (ws / "a" / "b" / "f.txt").write_text("x")
    (ws / "up").symlink_to("a/b/../b")  # '..' inside a target is walked on the held descriptors
    (ws / "abs").symlink_to(ws / "a" / "b" / "f.txt")  # absolute, inside the root
    (ws / "a" / "out").symlink_to("../..")  # climbs above the root
    box = Sandbox.at(ws)
    with box.open("up/f.txt") as opened:
        assert opened.name == "a/b/f.txt" and opened.is_file
    with box.open("abs") as opened:
        assert opened.name == "a/b/f.txt"
    with pytest.raises(SandboxError, match="leads outside the workspace root"), box.open("a/out/ws/a"):
        pass


def test_a_root_replaced_after_the_tools_were_built_is_refused(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    box = Sandbox.at(ws)
    ws.rename(tmp_path / "old")
    (tmp_path / "elsewhere").mkdir()
    ws.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SandboxError, match="the workspace root was replaced"), box.open("x"):
        pass


NAMES = ["a", "b", "c"]
TARGETS = ["a", "b", "c", "..", "../..", "a/..", "b/c", "/", "/etc", "c/../../x", ".", "a/b/../../.."]


@st.composite
def trees(draw: st.DrawFn) -> list[tuple[str, str, str]]:
    """Entries (kind, relative path, symlink target) of a small tree: directories, files and symlinks."""
    entries: list[tuple[str, str, str]] = []
    for _ in range(draw(st.integers(1, 10))):
        where = "/".join(draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3)))
        kind = draw(st.sampled_from(["dir", "file", "link"]))
        entries.append((kind, where, draw(st.sampled_from(TARGETS)) if kind == "link" else ""))
    return entries


def _build(root: Path, outside: Path, entries: list[tuple[str, str, str]]) -> None:
    for kind, where, target in entries:
        path = root / where
        if not path.parent.is_dir() or os.path.lexists(path):
            continue  # a parent that is a file or a link, or a name already taken: skipped
        if kind == "dir":
            path.mkdir()
        elif kind == "file":
            path.write_text("inside\n")
        else:
            path.symlink_to(outside if target == "/etc" else target)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=trees(), paths=st.lists(st.lists(st.sampled_from([*NAMES, ".."]), max_size=4), max_size=6))
def test_whatever_the_tree_every_descriptor_the_sandbox_returns_is_inside_the_root(
    entries: list[tuple[str, str, str]], paths: list[list[str]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root, outside = Path(tmp) / "ws", Path(tmp) / "out"
        root.mkdir()
        outside.mkdir()
        (outside / "secret").write_text("outside\n")
        _build(root, outside, entries)
        box = Sandbox.at(root)
        for parts in [[], *paths]:
            try:
                with box.open(tuple(parts)) as opened:
                    real = Path(os.readlink(f"/proc/self/fd/{opened.fd}"))
                    assert real == root.resolve() or real.is_relative_to(root.resolve()), (parts, real)
                    assert real == root.resolve().joinpath(*opened.parts)
            except SandboxError:
                pass  # refused (outside, missing, a loop, not a directory): nothing opened
        listed = {t.name: t for t in workspace_tools(root)}["list_files"]
        text = anyio.run(listed.func, {}, CONTEXT)
        assert "secret" not in text and tmp not in text
