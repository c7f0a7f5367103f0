"""Images from a workspace: the loader a file-reading tool calls, and the ``read_image`` tool.

:func:`load_workspace_image` opens one file under a workspace root (a path
that is absolute, climbs out with ``..`` or leaves the root through a symlink
is refused, as is a file over the API's byte limit, checked before it is
read) and returns an :class:`~runtime.values.messages.ImagePart`: its format and size
read from the header, refused when the API would refuse it. A tool returns
images as an :class:`ImageOutput`; the tool step turns it into a result whose
blocks carry the text and then the images.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

import anyio
import attrs

from actors.tools import BUILTIN_TOOLS, Tool, ToolContext, ToolFailed, ToolRegistry
from actors.tools.sandbox import Missing, Sandbox, SandboxError
from runtime.request.compiler import ToolSpec
from runtime.values.images import MAX_IMAGE_BYTES, ImageError
from runtime.values.messages import ImagePart

MAX_PATH_CHARS = 1_000
MAX_IMAGES_PER_CALL = 8


@attrs.frozen
class ImageOutput:
    """What a tool returns when it returns images: a line of text, then the images."""

    text: str
    images: tuple[ImagePart, ...]


def _check_path(path: str) -> None:
    if not path or len(path) > MAX_PATH_CHARS or "\x00" in path:
        raise ToolFailed(f"image path {path[:80]!r}: expected 1 to {MAX_PATH_CHARS} characters, no NUL")
    if PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute() or PureWindowsPath(path).drive:
        raise ToolFailed(f"image path {path!r} is absolute; give a path relative to the workspace root")
    if ".." in PurePosixPath(path.replace("\\", "/")).parts:
        raise ToolFailed(f"image path {path!r} climbs out with '..'; give a path inside the workspace root")


def load_workspace_image(root: Path, path: str) -> ImagePart:
    """The image at ``path`` under ``root``; :class:`ToolFailed` naming the path when it cannot be sent.

    Opened relative to a held descriptor of the root, no symlink followed by the
    kernel (:mod:`actors.tools.sandbox`): a directory swapped for a symlink while
    it is opened cannot send it outside the root.
    """
    _check_path(path)
    try:
        with Sandbox.at(root).open(path) as opened:
            if not opened.is_file:
                raise ToolFailed(f"image path {path!r}: no such file in the workspace")
            size = opened.status.st_size
            if size > MAX_IMAGE_BYTES:
                raise ToolFailed(
                    f"image path {path!r}: {size:,} bytes is over the API's {MAX_IMAGE_BYTES:,}-byte limit"
                )
            data = _read_all(opened.fd, size)
    except Missing:
        raise ToolFailed(f"image path {path!r}: no such file in the workspace") from None
    except SandboxError as exc:
        raise ToolFailed(f"image {exc}") from None
    try:
        return ImagePart.from_bytes(data, f"image path {path!r}")
    except ImageError as exc:
        raise ToolFailed(str(exc)) from None


def _read_all(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    read = 0
    while read <= size:  # a file grown since its size was read is cut at that size plus one byte (then refused)
        chunk = os.read(fd, size + 1 - read)
        if not chunk:
            break
        chunks.append(chunk)
        read += len(chunk)
    return b"".join(chunks)


def read_image_tool(root: str | Path) -> Tool:
    """The ``read_image`` tool over ``root``: ``{"path": str}`` or ``{"paths": [str, ...]}``."""
    base = Path(root)

    async def read_image(arguments: Mapping[str, Any], context: ToolContext) -> ImageOutput:
        paths = arguments.get("paths", [arguments.get("path")] if "path" in arguments else None)
        if not isinstance(paths, list) or not paths or len(paths) > MAX_IMAGES_PER_CALL:
            raise ToolFailed(f"read_image needs 'path' or 1 to {MAX_IMAGES_PER_CALL} 'paths', got {arguments!r:.200}")
        if not all(isinstance(p, str) for p in paths):
            raise ToolFailed(f"read_image: every path must be a string, got {paths!r:.200}")
        images = [await anyio.to_thread.run_sync(load_workspace_image, base, p) for p in paths]
        lines = [f"{p}: {image.describe(context.image_rule)}" for p, image in zip(paths, images, strict=True)]
        return ImageOutput("\n".join(lines), tuple(images))

    spec = ToolSpec.create(
        "read_image",
        "Read image files (PNG, JPEG, GIF, WebP) of the workspace; they are shown to you after this text.",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "a path relative to the workspace root"},
                "paths": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_IMAGES_PER_CALL},
            },
        },
    )
    return Tool(spec, read_image)


def scenario_registry(scenario_path: str | Path) -> ToolRegistry:
    """The built-in tools and ``read_image`` rooted at the scenario file's directory."""
    return BUILTIN_TOOLS.with_tool(read_image_tool(Path(scenario_path).resolve().parent))
