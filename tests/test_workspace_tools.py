"""The workspace tools: real files, read in ranges, never outside their root."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from actors.tools import Tool, ToolArgumentError, ToolContext, ToolFailed, WorkspacePathError, workspace_tools

CONTEXT = ToolContext(node_id=None, branch_id="b")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "docs").mkdir(parents=True)
    (ws / "docs" / "a.md").write_text("alpha line\nthe ceiling holds\n")
    (ws / "docs" / "b.txt").write_text("beta\n" * 10)
    (ws / "notes.md").write_text("é" * 10)  # 20 bytes of two-byte characters
    (ws / "blob.bin").write_bytes(b"\x00\x01\x02binary")
    (ws / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "secret.txt").write_text("root:x:0:0 outside the workspace\n")
    (ws / "out.md").symlink_to(tmp_path / "secret.txt")
    (ws / "outdir").symlink_to(tmp_path)
    (ws / "in.md").symlink_to(ws / "docs" / "a.md")
    return ws


def tools(root: Path) -> dict[str, Tool]:
    return {t.name: t for t in workspace_tools(root)}


async def call(root: Path, name: str, **arguments: Any) -> Any:
    return await tools(root)[name].func(arguments, CONTEXT)


@pytest.mark.anyio
async def test_read_file_returns_the_bytes_with_a_header_and_reads_in_ranges(root: Path) -> None:
    text = await call(root, "read_file", path="docs/a.md")
    assert text == "docs/a.md: bytes 0-29 of 29\nalpha line\nthe ceiling holds\n"
    first = await call(root, "read_file", path="docs/b.txt", limit=12)
    assert first == "docs/b.txt: bytes 0-12 of 50; next offset 12\nbeta\nbeta\nbe"
    rest = await call(root, "read_file", path="docs/b.txt", offset=12)
    assert rest.endswith("ta\n" + "beta\n" * 7) and rest.startswith("docs/b.txt: bytes 12-50 of 50\n")


@pytest.mark.anyio
async def test_a_range_ending_inside_a_character_stops_before_it(root: Path) -> None:
    text = await call(root, "read_file", path="notes.md", limit=5)
    assert text == "notes.md: bytes 0-4 of 20; next offset 4\néé"


@pytest.mark.anyio
async def test_binary_and_non_utf8_files_are_errors_naming_the_file(root: Path) -> None:
    with pytest.raises(ToolFailed, match=r"read_file: 'blob.bin' is a binary file \(9 bytes\); it is not shown"):
        await call(root, "read_file", path="blob.bin")
    with pytest.raises(ToolFailed, match=r"read_file: 'latin1.txt' is not UTF-8 text \(4 bytes\)"):
        await call(root, "read_file", path="latin1.txt")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../../etc/passwd", "path '../../etc/passwd' climbs out with '..'"),
        ("docs/../../secret.txt", "path 'docs/../../secret.txt' climbs out with '..'"),
        ("/etc/passwd", "path '/etc/passwd' is absolute"),
        ("C:\\Windows\\win.ini", "is absolute"),
        ("out.md", "path 'out.md' leads outside the workspace root (through a symlink)"),
        ("outdir/secret.txt", "path 'outdir/secret.txt' leads outside the workspace root"),
        ("missing.md", "path 'missing.md' does not exist in the workspace"),
    ],
)
async def test_paths_leaving_the_root_are_refused_naming_the_path(root: Path, path: str, message: str) -> None:
    with pytest.raises(WorkspacePathError) as caught:
        await call(root, "read_file", path=path)
    assert message in str(caught.value)


@pytest.mark.anyio
async def test_a_symlink_inside_the_root_is_followed(root: Path) -> None:
    assert (await call(root, "read_file", path="in.md")).startswith("docs/a.md: bytes 0-29 of 29\n")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "argument"),
    [
        ({"path": "docs/a.md", "limit": 100_000}, "limit"),
        ({"path": "docs/a.md", "limit": 0}, "limit"),
        ({"path": "docs/a.md", "offset": -1}, "offset"),
        ({"path": "x" * 1001}, "path"),
        ({"path": ""}, "path"),
        ({}, "path"),
        ({"path": "a", "size": 3}, "size"),
    ],
)
async def test_arguments_are_bounded_and_a_bad_one_is_named(root: Path, arguments: dict, argument: str) -> None:
    with pytest.raises(ToolArgumentError, match=f"read_file: argument '{argument}'"):
        await tools(root)["read_file"].func(arguments, CONTEXT)


@pytest.mark.anyio
async def test_list_files_lists_sizes_and_marks_symlinks_out_without_following_them(root: Path) -> None:
    text = await call(root, "list_files")
    lines = text.splitlines()
    assert lines[0] == "8 entries under '.' matching '*'"
    assert "docs/a.md  29 bytes" in lines
    assert "out.md  symlink leading outside the workspace (not followed)" in lines
    assert "outdir  symlink leading outside the workspace (not followed)" in lines
    assert not any("secret" in line for line in lines)
    assert (await call(root, "list_files", path="docs", pattern="*.md")).splitlines() == [
        "1 entries under 'docs' matching '*.md'",
        "docs/a.md  29 bytes",
    ]
    with pytest.raises(WorkspacePathError, match="path '..' climbs out"):
        await call(root, "list_files", path="..")


@pytest.mark.anyio
async def test_grep_finds_lines_inside_the_root_only(root: Path) -> None:
    text = await call(root, "grep", pattern="ceiling|root")
    # in.md is a symlink inside the root to docs/a.md: followed; out.md and outdir lead out: never read
    assert text.splitlines() == [
        "2 matching lines for 'ceiling|root' under '.'",
        "in.md:2: the ceiling holds",
        "docs/a.md:2: the ceiling holds",
    ]
    with pytest.raises(ToolFailed, match=r"grep: pattern '\(' is not a regular expression"):
        await call(root, "grep", pattern="(")
    with pytest.raises(WorkspacePathError, match="path '/etc' is absolute"):
        await call(root, "grep", pattern="root", path="/etc")


@pytest.mark.anyio
async def test_a_pathological_pattern_is_stopped_by_its_time_bound(root: Path) -> None:
    (root / "slow.txt").write_text("a" * 5000 + "!\n")
    with pytest.raises(ToolFailed, match="took too long on 'slow.txt'"):
        await call(root, "grep", pattern="(a|aa)+$", path="slow.txt")


def test_the_root_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="is not a directory"):
        workspace_tools(tmp_path / "nope")


def test_the_schemas_bound_every_argument(root: Path) -> None:
    import json

    schema = json.loads(tools(root)["read_file"].spec.input_schema_json)
    assert schema["required"] == ["path"]
    assert schema["properties"]["limit"]["maximum"] == 16_000 and schema["properties"]["path"]["maxLength"] == 1000
    assert schema["additionalProperties"] is False
    assert os.fspath(root) not in tools(root)["read_file"].spec.piece()  # the root never reaches the model


@pytest.mark.anyio
async def test_grep_says_which_files_it_searched_only_in_part(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from actors.tools import workspace

    monkeypatch.setattr(workspace, "MAX_GREP_FILE_BYTES", 30)
    (root / "long.txt").write_text("x" * 40 + "\nceiling at the end\n")
    text = await call(root, "grep", pattern="ceiling", path="long.txt")
    assert text.splitlines() == [
        "0 matching lines for 'ceiling' under 'long.txt'",
        "... only the first 30 bytes of long.txt were searched",
    ]
