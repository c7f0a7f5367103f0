"""Real workspace tools: ``read_file``, ``list_files`` and ``grep`` over one root.

::

    registry = BUILTIN_TOOLS.with_tools(workspace_tools("path/to/project"))

Every path the model names is relative to the workspace root. A path that is
absolute, that climbs out with ``..``, or that reaches outside through a
symlink is refused with an error naming the path; nothing outside the root is
opened, even while the tree changes under the tools: every open is relative to
a held descriptor of the root, one component at a time, no symlink followed by
the kernel (:mod:`actors.tools.sandbox`), and walks go by descriptors too
(:mod:`actors.tools.tree`: a symlink loop or an unreadable entry is skipped and
named, relative to the root; no message shows the host path). Every loop checks
the call's stop flag (:mod:`actors.tools.stopping`), so a call that times out
stops its work. Every argument is bounded (the model chooses them): ``read_file``
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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Annotated

from annotated_types import Ge, Le, MaxLen, MinLen

from actors.tools.functions import function_tool
from actors.tools.registry import Tool, ToolFailed
from actors.tools.sandbox import Opened, Sandbox, SandboxError, os_reason
from actors.tools.stopping import check_stop
from actors.tools.tree import MAX_WALK_ENTRIES, Entry, walk

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


class WorkspacePathError(SandboxError):
    """A path the model named is outside the workspace root (or not there)."""


def check_relative(path: str) -> None:
    """Refuse a path that is not a plain relative path (NUL, absolute, ``..``), naming it."""
    if "\x00" in path:
        raise WorkspacePathError(f"path {path!r} contains a NUL character")
    if PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute() or PureWindowsPath(path).drive:
        raise WorkspacePathError(f"path {path!r} is absolute; give a path relative to the workspace root")
    if ".." in PurePosixPath(path.replace("\\", "/")).parts:
        raise WorkspacePathError(f"path {path!r} climbs out with '..'; give a path inside the workspace root")


@contextmanager
def _opened(box: Sandbox, path: str) -> Iterator[Opened]:
    """``path`` opened inside the root (see :mod:`actors.tools.sandbox`); refusals name the path."""
    check_relative(path)
    try:
        with box.open(path) as opened:
            yield opened
    except SandboxError as exc:
        if isinstance(exc, WorkspacePathError):
            raise
        raise WorkspacePathError(str(exc)) from None


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


def _pread(fd: int, size: int, offset: int, name: str) -> bytes:
    try:
        return os.pread(fd, size, offset)
    except OSError as exc:
        raise ToolFailed(f"{name} cannot be read ({os_reason(exc)})") from None


def _read(box: Sandbox, path: str, offset: int, limit: int) -> str:
    with _opened(box, path) as opened:
        if not opened.is_file:
            raise WorkspacePathError(f"path {path!r} is not a file in the workspace")
        size = opened.status.st_size
        if offset > size:
            raise ToolFailed(f"read_file: offset {offset} is past the end of {path!r} ({size} bytes)")
        if _is_binary(_pread(opened.fd, BINARY_SNIFF, 0, f"read_file: {path!r}")):
            raise ToolFailed(f"read_file: {path!r} is a binary file ({size} bytes); it is not shown")
        data = _pread(opened.fd, limit, offset, f"read_file: {path!r}")
        name = opened.name
    end = offset + len(data)
    try:
        text = _decode_range(data, at_end=end >= size)
    except UnicodeDecodeError:
        raise ToolFailed(f"read_file: {path!r} is not UTF-8 text ({size} bytes); it is not shown") from None
    end = offset + len(text.encode("utf-8"))
    more = f"; next offset {end}" if end < size else ""
    return f"{name}: bytes {offset}-{end} of {size}{more}\n{text}"


def _described(entry: Entry) -> str:
    return f"{entry.size} bytes" if entry.size is not None else entry.note


def _list(box: Sandbox, path: str, pattern: str) -> str:
    with _opened(box, path) as start:
        walked = walk(box, start, "list_files")
        where = start.name
    entries = [e for e in walked.entries if fnmatch.fnmatchcase(e.name, pattern)]
    lines = [f"{e.name}  {_described(e)}" for e in entries[:MAX_LISTED]]
    if len(entries) > MAX_LISTED:
        lines.append(f"... {len(entries) - MAX_LISTED} more entries not shown (narrow path or pattern)")
    if walked.truncated:
        lines.append(f"... the walk stopped after {MAX_WALK_ENTRIES:,} entries (narrow the path)")
    head = f"{len(entries)} entries under {where!r} matching {pattern!r}"
    return "\n".join([head, *lines])


def _file_text(box: Sandbox, entry: Entry, cut: list[str]) -> str | None:
    """The searched text of a walked file (None: no longer a readable text file inside the root)."""
    try:
        with box.open(entry.parts) as opened:
            if not opened.is_file:
                return None
            data = _pread(opened.fd, MAX_GREP_FILE_BYTES + 1, 0, f"grep: {entry.name!r}")
    except SandboxError:
        return None  # changed since it was walked (or a symlink that leads out now): not searched
    if len(data) > MAX_GREP_FILE_BYTES:
        data = data[:MAX_GREP_FILE_BYTES]
        cut.append(entry.name)
    if _is_binary(data):
        return None
    return data.decode("utf-8", errors="replace")


def _grep_file(box: Sandbox, entry: Entry, compiled: regex.Pattern[str], out: list[str], cut: list[str]) -> int:
    text = _file_text(box, entry, cut)
    if text is None:
        return 0
    found = 0
    for number, line in enumerate(text.splitlines(), 1):
        check_stop("grep")
        try:
            hit = compiled.search(line, timeout=GREP_TIMEOUT_S)
        except TimeoutError:
            raise ToolFailed(f"grep: pattern {compiled.pattern!r} took too long on {entry.name!r}") from None
        if hit:
            found += 1
            if len(out) < MAX_MATCHES:
                shown = line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " [line cut]"
                out.append(f"{entry.name}:{number}: {shown}")
    return found


def _grep(box: Sandbox | Path, pattern: str, path: str) -> str:
    import regex

    box = box if isinstance(box, Sandbox) else Sandbox.at(box)
    try:
        compiled = regex.compile(pattern)
    except regex.error as exc:
        raise ToolFailed(f"grep: pattern {pattern!r} is not a regular expression ({exc})") from None
    with _opened(box, path) as start:
        walked = walk(box, start, "grep")
        where = start.name
    files = [e for e in walked.entries if e.size is not None]
    skipped = [e.name for e in walked.entries if e.skipped]
    out: list[str] = []
    cut: list[str] = []
    total = sum(_grep_file(box, f, compiled, out, cut) for f in files[:MAX_GREP_FILES])
    lines = [f"{total} matching lines for {pattern!r} under {where!r}", *out]
    if total > len(out):
        lines.append(f"... {total - len(out)} more matching lines not shown")
    if cut:
        lines.append(f"... only the first {MAX_GREP_FILE_BYTES:,} bytes of {', '.join(cut[:10])} were searched")
    if len(files) > MAX_GREP_FILES:
        lines.append(f"... {len(files) - MAX_GREP_FILES} files not searched (narrow the path)")
    if skipped:
        more = f" and {len(skipped) - 10} more" if len(skipped) > 10 else ""
        lines.append(f"... skipped (a symlink loop or unreadable): {', '.join(skipped[:10])}{more}")
    if walked.truncated:
        lines.append(f"... the walk stopped after {MAX_WALK_ENTRIES:,} entries (narrow the path)")
    return "\n".join(lines)


def workspace_tools(root: str | os.PathLike[str]) -> tuple[Tool, ...]:
    """``read_file``, ``list_files`` and ``grep`` over ``root`` (which must be a directory)."""
    base = Sandbox.at(root)

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
