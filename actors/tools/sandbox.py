"""Opening paths under a workspace root without a race: one component at a time, from a held descriptor.

Checking a path (``Path.resolve``) and then opening it again by name leaves a
window: a directory component swapped for a symlink between the two (by a
build, another agent, a write-capable tool) sends the open outside the root.
Here nothing is opened by a path the kernel walks. :meth:`Sandbox.open` starts
from a descriptor of the root (its device and inode checked against the root
the tools were built on) and opens each component with ``openat`` and
``O_NOFOLLOW`` relative to the descriptor of the directory before it. A
component that is a symlink is not followed by the kernel: its target is read
(``readlinkat``) and walked the same way, ``..`` popping the walk's own stack
of held descriptors, so a target that climbs above the root, or an absolute
one outside it, is refused, and one inside it is followed (at most
:data:`MAX_LINK_HOPS` links a path; a loop is an error naming the path).
Whatever is swapped while the walk runs, every descriptor it holds is under
the root, and so is what it returns.

Every message names paths relative to the root, never the host path, and an
``OSError`` from the system becomes a :class:`SandboxError` with its
``strerror`` only (the system's message quotes the absolute path).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

from actors.tools.registry import ToolFailed

MAX_LINK_HOPS = 40
"""Symlinks one path may pass through (as the kernel's own bound); more is a loop."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO the model names must not wait for a writer (it is then refused as not a file).
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_LINK_ERRNOS = (errno.ELOOP, errno.EMLINK)  # what openat(O_NOFOLLOW) says of a symlink (EMLINK on some BSDs)


class SandboxError(ToolFailed):
    """A path cannot be opened inside the workspace (outside it, missing, a loop, not readable)."""


class OutsideRoot(SandboxError):
    """A path (through a symlink) leads outside the workspace root."""


class Missing(SandboxError):
    """A component of the path does not exist."""


class SymlinkLoop(SandboxError):
    """A path passes through more than :data:`MAX_LINK_HOPS` symlinks (a loop)."""


def os_reason(exc: OSError) -> str:
    """What the system said, without the path it quotes (a host path must not reach the model)."""
    return exc.strerror or os.strerror(exc.errno or 0) or type(exc).__name__


def shown(parts: tuple[str, ...]) -> str:
    return "/".join(parts) or "."


@attrs.define(eq=False)
class Opened:
    """A descriptor opened inside the root, its status and where it is (components relative to the root)."""

    fd: int
    parts: tuple[str, ...]
    status: os.stat_result

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.status.st_mode)

    @property
    def is_file(self) -> bool:
        return stat.S_ISREG(self.status.st_mode)

    @property
    def name(self) -> str:
        return shown(self.parts)


@attrs.define(eq=False)
class _Walk:
    """The held descriptors of a walk from the root: ``stack[i]`` is the directory of ``parts[:i]``."""

    stack: list[int]
    parts: list[str]
    hops: int = 0

    def pop(self) -> bool:
        if len(self.stack) == 1:
            return False
        os.close(self.stack.pop())
        self.parts.pop()
        return True

    def close(self) -> None:
        while self.stack:
            os.close(self.stack.pop())


@attrs.frozen
class Sandbox:
    """A workspace root pinned by device and inode; see the module doc."""

    root: Path
    device: int
    inode: int

    @classmethod
    def at(cls, root: str | os.PathLike[str]) -> Sandbox:
        """The sandbox of directory ``root`` (resolved now; later opens check it is still that directory)."""
        base = Path(root).resolve()
        if not base.is_dir():
            raise FileNotFoundError(f"workspace root {os.fspath(root)!r} is not a directory")
        status = base.stat()
        return cls(base, status.st_dev, status.st_ino)

    def open_root(self) -> int:
        """A descriptor of the root, checked to be the directory the tools were built on."""
        try:
            fd = os.open(self.root, _DIR_FLAGS)
        except OSError as exc:
            raise SandboxError(f"the workspace root cannot be opened ({os_reason(exc)})") from None
        status = os.fstat(fd)
        if (status.st_dev, status.st_ino) != (self.device, self.inode):
            os.close(fd)
            raise SandboxError("the workspace root was replaced since the tools were built; nothing is read")
        return fd

    @contextmanager
    def open(self, path: str | tuple[str, ...], *, label: str | None = None) -> Iterator[Opened]:
        """``path`` (relative, ``/``-separated, or components) opened inside the root; closed on exit.

        ``label`` is how errors name the path (default: ``path`` as given).
        Raises :class:`OutsideRoot` for a symlink leading out, and
        :class:`SandboxError` for a missing path, a loop or a system error.
        """
        parts = tuple(p for p in path.split("/") if p not in ("", ".")) if isinstance(path, str) else path
        name = label if label is not None else repr(path if isinstance(path, str) else shown(path))
        walk = _Walk([self.open_root()], [])
        try:
            opened = self._resolve(walk, list(parts), name)
            try:
                yield opened
            finally:
                os.close(opened.fd)
        finally:
            walk.close()

    def _resolve(self, walk: _Walk, pending: list[str], name: str) -> Opened:
        """Walk ``pending`` from the root; the last component's descriptor (the stack keeps the directories)."""
        pending.reverse()  # popped from the end
        while pending:
            part = pending.pop()
            if part == "..":
                if not walk.pop():
                    raise OutsideRoot(f"path {name} leads outside the workspace root (through a symlink)")
                continue
            fd = self._open_component(walk, part, pending, name)
            if fd is None:
                continue
            status = os.fstat(fd)
            if not pending:
                return Opened(fd, (*walk.parts, part), status)
            if not stat.S_ISDIR(status.st_mode):
                os.close(fd)
                raise SandboxError(f"path {name}: {shown((*walk.parts, part))!r} is not a directory")
            walk.stack.append(fd)
            walk.parts.append(part)
        # The path named the root itself (or climbed back to a directory of the walk): a fresh descriptor of it.
        fd = os.dup(walk.stack[-1])
        return Opened(fd, tuple(walk.parts), os.fstat(fd))

    def _open_component(self, walk: _Walk, part: str, pending: list[str], name: str) -> int | None:
        """The descriptor of ``part`` in the walk's directory, or None when it was a symlink (its target queued)."""
        where = walk.stack[-1]
        try:
            return os.open(part, _OPEN_FLAGS, dir_fd=where)
        except OSError as exc:
            if exc.errno not in _LINK_ERRNOS:
                raise self._failure(exc, walk, part, name) from None
        try:
            target = os.readlink(part, dir_fd=where)
        except OSError as exc:  # swapped back to a file or directory meanwhile: open it again, afresh
            if exc.errno == errno.EINVAL:
                walk.hops += 1  # counted: a writer flipping it forever cannot keep the walk going
                if walk.hops > MAX_LINK_HOPS:
                    raise SandboxError(f"path {name}: {shown((*walk.parts, part))!r} keeps changing") from None
                pending.append(part)
                return None
            raise self._failure(exc, walk, part, name) from None
        walk.hops += 1
        if walk.hops > MAX_LINK_HOPS:
            raise SymlinkLoop(f"path {name} passes through more than {MAX_LINK_HOPS} symlinks (a symlink loop)")
        pending.extend(reversed(self._target_parts(walk, target, name)))
        return None

    def _target_parts(self, walk: _Walk, target: str, name: str) -> list[str]:
        """A symlink's target as components to walk from the walk's position (absolute: from the root)."""
        if os.path.isabs(target):
            inside = Path(os.path.normpath(target))
            if inside != self.root and not inside.is_relative_to(self.root):
                raise OutsideRoot(f"path {name} leads outside the workspace root (through a symlink)")
            while walk.pop():
                pass
            target = inside.relative_to(self.root).as_posix()
        return [p for p in target.split("/") if p not in ("", ".")]

    @staticmethod
    def _failure(exc: OSError, walk: _Walk, part: str, name: str) -> SandboxError:
        at = shown((*walk.parts, part))
        if exc.errno == errno.ENOENT:
            return Missing(f"path {name} does not exist in the workspace ({at!r} is missing)")
        if exc.errno == errno.ENOTDIR:
            return SandboxError(f"path {name}: a component before {at!r} is not a directory")
        return SandboxError(f"path {name}: {at!r} cannot be opened ({os_reason(exc)})")
