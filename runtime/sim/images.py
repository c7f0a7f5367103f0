"""Images in the simulator: counted by the API's documented estimate, refused when unreadable (pure).

An ``image`` block (base64 source), alone or inside a ``tool_result``'s
content, costs :func:`runtime.values.images.image_tokens` of its header's size after
the resize rule, not the count of its base64 text; the rest of the block is
counted as any block is. An image whose data is not base64, or whose header
is not a PNG, JPEG, GIF or WebP the API would take, is the API's 400.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.sim.errors import invalid_request
from runtime.values.images import ImageError, decode_base64_image, inspect_image


def _image_tokens(block: Mapping[str, Any]) -> int:
    source = block.get("source")
    if not isinstance(source, Mapping) or source.get("type") != "base64":
        raise invalid_request("image.source: the simulator takes base64 image sources only")
    try:
        info = inspect_image(decode_base64_image(str(source.get("data", "")), "image.source.data"), "image.source.data")
    except ImageError as exc:
        raise invalid_request(f"Could not process image: {exc}") from None
    if source.get("media_type") != info.media_type:
        raise invalid_request(
            f"image.source.media_type: {source.get('media_type')!r} does not match the image's data ({info.media_type})"
        )
    return info.tokens


def _emptied(block: Mapping[str, Any]) -> dict[str, Any]:
    return dict(block) | {"source": dict(block["source"]) | {"data": ""}}


def split_images(block: Mapping[str, Any]) -> tuple[dict[str, Any], int] | None:
    """``(block with image data emptied, image tokens)``; None when the block carries no image."""
    if block.get("type") == "image":
        return _emptied(block), _image_tokens(block)
    content = block.get("content")
    if block.get("type") != "tool_result" or not isinstance(content, list):
        return None
    if not any(isinstance(b, Mapping) and b.get("type") == "image" for b in content):
        return None
    tokens = 0
    inner = []
    for b in content:
        if isinstance(b, Mapping) and b.get("type") == "image":
            tokens += _image_tokens(b)
            inner.append(_emptied(b))
        else:
            inner.append(b)
    return dict(block) | {"content": inner}, tokens
