"""Real workspace tools: ``read_file``, ``list_files`` and ``grep`` over one root.

::

    registry = BUILTIN_TOOLS.with_tools(workspace_tools("path/to/project"))

Every path the model names is relative to the workspace root. A path that is
absolute, that climbs out with ``..``, or that reaches outside through a
symlink is refused with an error naming the path; nothing outside the root is
opened. Every argument is bounded (the model chooses them): ``read_file``
returns at most :data:`MAX_READ` bytes per call as a ranged read (a file of any
size can be read in ranges; the header says where the next range starts), a
binary file (a NUL byte in its first 8 KiB, or bytes that are not UTF-8) is an
error naming the file, ``list_files`` lists at most :data:`MAX_LISTED` entries,
and ``grep`` returns at most :data:`MAX_MATCHES` lines, scans at most
:data:`MAX_GREP_FILE_BYTES` of each file, and gives its regular expression (the
``regex`` package, a tiktoken dependency) :data:`GREP_TIMEOUT_S` per file.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Annotated

from annotated_types import Ge, Le, MaxLen, MinLen

from actors.tools.functions import function_tool
from actors.tools.registry import Tool, ToolFailed

if TYPE_CHECKING:
    import regex

MAX_READ = 16_000
"""Bytes one ``read_file`` call returns at most."""
MAX_OFFSET = 1 << 40
MAX_PATH_CHARS = 1_000
MAX_PATTERN_CHARS = 200
MAX_LISTED = 500
MAX_MATCHES = 200
MAX_LINE_CHARS = 300
"""A matching line longer than this is shown cut, with a marker."""
MAX_GREP_FILE_BYTES = 2_000_000
MAX_GREP_FILES = 2_000
GREP_TIMEOUT_S = 0.5
BINARY_SNIFF = 8192

# The argument bounds as annotated-types constraints, which pydantic reads as it reads Field(min_length=...) and
# the rest (the same schema, the same errors), so that importing the tools does not import pydantic (or regex):
# both are imported when a tool is built or a grep runs.
PathArg = Annotated[str, MinLen(1), MaxLen(MAX_PATH_CHARS)]
PatternArg = Annotated[str, MinLen(1), MaxLen(MAX_PATTERN_CHARS)]


class WorkspacePathError(ToolFailed):
    """A path the model named is outside the workspace root (or not there)."""


def resolve_inside(root: Path, path: str) -> Path:
    """``path`` resolved under ``root`` (symlinks followed); refused when it leaves the root."""
    if "\x00" in path:
        raise WorkspacePathError(f"path {path!r} contains a NUL character")
    if PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute() or PureWindowsPath(path).drive:
        raise WorkspacePathError(f"path {path!r} is absolute; give a path relative to the workspace root")
    if ".." in PurePosixPath(path.replace("\\", "/")).parts:
        raise WorkspacePathError(f"path {path!r} climbs out with '..'; give a path inside the workspace root")
    resolved = (root / path).resolve()
    if resolved != root and not resolved.is_relative_to(root):
        raise WorkspacePathError(f"path {path!r} leads outside the workspace root (through a symlink)")
    return resolved


def _shown(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix() or "."


def _is_binary(head: bytes) -> bool:
    return b"\x00" in head[:BINARY_SNIFF]


def _decode_range(data: bytes, at_end: bool) -> str:
    """UTF-8 text of a byte range; a character cut by the range's end is left for the next range."""
    for cut in range(4):
        try:
            return data[: len(data) - cut].decode("utf-8") if cut else data.decode("utf-8")
        except UnicodeDecodeError:
            if at_end:
                break
    raise UnicodeDecodeError("utf-8", data, 0, len(data), "not UTF-8 text")


def _read(root: Path, path: str, offset: int, limit: int) -> str:
    target = resolve_inside(root, path)
    if not target.is_file():
        raise WorkspacePathError(f"path {path!r} is not a file in the workspace")
    size = target.stat().st_size
    if offset > size:
        raise ToolFailed(f"read_file: offset {offset} is past the end of {path!r} ({size} bytes)")
    with target.open("rb") as file:
        if _is_binary(file.read(BINARY_SNIFF)):
            raise ToolFailed(f"read_file: {path!r} is a binary file ({size} bytes); it is not shown")
        file.seek(offset)
        data = file.read(limit)
    end = offset + len(data)
    try:
        text = _decode_range(data, at_end=end >= size)
    except UnicodeDecodeError:
        raise ToolFailed(f"read_file: {path!r} is not UTF-8 text ({size} bytes); it is not shown") from None
    end = offset + len(text.encode("utf-8"))
    more = f"; next offset {end}" if end < size else ""
    return f"{_shown(root, target)}: bytes {offset}-{end} of {size}{more}\n{text}"


def _walk(root: Path, start: Path) -> list[Path]:
    """Files under ``start``, and symlinks to directories (sorted; those are not followed)."""
    if start.is_file():
        return [start]
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(start, followlinks=False):
        dirnames.sort()
        linked = [name for name in dirnames if (Path(dirpath) / name).is_symlink()]
        found.extend(Path(dirpath) / name for name in sorted([*filenames, *linked]))
    return found


def _entry(root: Path, file: Path) -> tuple[str, str]:
    shown = file.relative_to(root).as_posix()
    target = file.resolve()
    if not target.is_relative_to(root):
        return shown, "symlink leading outside the workspace (not followed)"
    if file.is_symlink() and target.is_dir():
        return shown, "symlink to a directory (not followed)"
    if not target.is_file():
        return shown, "not a regular file"
    return shown, f"{target.stat().st_size} bytes"


def _list(root: Path, path: str, pattern: str) -> str:
    start = resolve_inside(root, path)
    if not start.exists():
        raise WorkspacePathError(f"path {path!r} does not exist in the workspace")
    entries = [_entry(root, f) for f in _walk(root, start)]
    entries = [(name, what) for name, what in entries if fnmatch.fnmatchcase(name, pattern)]
    lines = [f"{name}  {what}" for name, what in entries[:MAX_LISTED]]
    if len(entries) > MAX_LISTED:
        lines.append(f"... {len(entries) - MAX_LISTED} more entries not shown (narrow path or pattern)")
    head = f"{len(entries)} entries under {_shown(root, start)!r} matching {pattern!r}"
    return "\n".join([head, *lines])


def _grep_file(root: Path, file: Path, compiled: regex.Pattern[str], out: list[str], cut: list[str]) -> int:
    target = file.resolve()
    if not target.is_relative_to(root) or not target.is_file():
        return 0
    with target.open("rb") as handle:
        data = handle.read(MAX_GREP_FILE_BYTES + 1)
    if len(data) > MAX_GREP_FILE_BYTES:
        data = data[:MAX_GREP_FILE_BYTES]
        cut.append(_shown(root, file))
    if _is_binary(data):
        return 0
    text = data.decode("utf-8", errors="replace")
    found = 0
    for number, line in enumerate(text.splitlines(), 1):
        try:
            hit = compiled.search(line, timeout=GREP_TIMEOUT_S)
        except TimeoutError:
            raise ToolFailed(f"grep: pattern {compiled.pattern!r} took too long on {_shown(root, file)!r}") from None
        if hit:
            found += 1
            if len(out) < MAX_MATCHES:
                shown = line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " [line cut]"
                out.append(f"{_shown(root, file)}:{number}: {shown}")
    return found


def _grep(root: Path, pattern: str, path: str) -> str:
    import regex

    try:
        compiled = regex.compile(pattern)
    except regex.error as exc:
        raise ToolFailed(f"grep: pattern {pattern!r} is not a regular expression ({exc})") from None
    start = resolve_inside(root, path)
    if not start.exists():
        raise WorkspacePathError(f"path {path!r} does not exist in the workspace")
    files = _walk(root, start)
    out: list[str] = []
    cut: list[str] = []
    total = sum(_grep_file(root, f, compiled, out, cut) for f in files[:MAX_GREP_FILES])
    lines = [f"{total} matching lines for {pattern!r} under {_shown(root, start)!r}", *out]
    if total > len(out):
        lines.append(f"... {total - len(out)} more matching lines not shown")
    if cut:
        lines.append(f"... only the first {MAX_GREP_FILE_BYTES:,} bytes of {', '.join(cut[:10])} were searched")
    if len(files) > MAX_GREP_FILES:
        lines.append(f"... {len(files) - MAX_GREP_FILES} files not searched (narrow the path)")
    return "\n".join(lines)


def workspace_tools(root: str | os.PathLike[str]) -> tuple[Tool, ...]:
    """``read_file``, ``list_files`` and ``grep`` over ``root`` (which must be a directory)."""
    base = Path(root).resolve()
    if not base.is_dir():
        raise FileNotFoundError(f"workspace root {os.fspath(root)!r} is not a directory")

    def read_file(
        path: PathArg,
        offset: Annotated[int, Ge(0), Le(MAX_OFFSET)] = 0,
        limit: Annotated[int, Ge(1), Le(MAX_READ)] = MAX_READ,
    ) -> str:
        """Read a text file of the workspace, a range of bytes at a time.

        The first line says which bytes were returned, of how many, and the next offset when more remain.

        Args:
            path: the file, relative to the workspace root
            offset: the first byte to return (default 0)
            limit: how many bytes to return at most (1 to 16000, default 16000)
        """
        return _read(base, path, offset, limit)

    def list_files(path: PathArg = ".", pattern: PatternArg = "*") -> str:
        """List the files under a directory of the workspace, with their sizes in bytes.

        Args:
            path: a directory (or file), relative to the workspace root (default: the root)
            pattern: a glob the file's path relative to the root must match, e.g. "*.md" (default "*")
        """
        return _list(base, path, pattern)

    def grep(pattern: PatternArg, path: PathArg = ".") -> str:
        """Find the lines of workspace files that match a regular expression.

        Args:
            pattern: a regular expression (Python syntax)
            path: a directory or file to search, relative to the workspace root (default: the root)
        """
        return _grep(base, pattern, path)

    return tuple(function_tool(f) for f in (read_file, list_files, grep))


WORKSPACE_TOOL_NAMES = ("read_file", "list_files", "grep")
