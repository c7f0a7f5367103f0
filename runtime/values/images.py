"""Images as the Messages API takes them: formats, bounds, the resize rule and the token estimate (pure).

:func:`inspect_image` reads an image's format and pixel size from its header
(PNG, JPEG, GIF, WebP: the API's four formats) without decoding its pixels,
and refuses, with an error naming where the image came from, anything the API
would refuse: another format, a header that cannot be read, more than
:data:`MAX_IMAGE_BYTES` bytes, or a side longer than :data:`MAX_IMAGE_SIDE`.

The estimate is the one the API documents: an image whose long edge is over
:data:`RESIZE_LONG_EDGE` pixels, or that would cost more than
:data:`RESIZE_MAX_TOKENS` tokens, is first scaled down (aspect ratio kept)
until it fits both, and then costs about ``width * height / 750`` tokens
(:func:`image_tokens`). The runtime counts an image by that estimate, never by
the length of its base64 text.

No dependency decodes images here: reading four header layouts is a few lines
each and needs no pixels (Pillow would add a large native dependency to learn
two integers).
"""

from __future__ import annotations

import base64
import binascii
import math
import struct

import attrs

from runtime.errors import FoldlineError
from runtime.values.canonical import sha256_hex

MAX_IMAGE_BYTES = 5 * 1024 * 1024
"""The API's limit on one image's bytes."""
MAX_IMAGE_SIDE = 8000
"""The API's limit on an image's width and height, in pixels."""
RESIZE_LONG_EDGE = 1568
"""An image with a longer edge is scaled down before the model sees it."""
RESIZE_MAX_TOKENS = 1600
"""An image that would cost more is scaled down before the model sees it."""
PIXELS_PER_TOKEN = 750
"""The documented estimate: tokens ~ width x height / 750."""

MEDIA_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


class ImageError(FoldlineError, ValueError):
    """An image the API would refuse (format, header, size); the message names where it came from."""


@attrs.frozen
class ImageInfo:
    """What the header says: media type and pixel size; and the bytes' size and SHA-256."""

    media_type: str
    width: int
    height: int
    size: int
    sha256: str

    @property
    def tokens(self) -> int:
        return image_tokens(self.width, self.height)


def api_resized(width: int, height: int) -> tuple[int, int]:
    """The size the API scales an image to before the model sees it (the same size when it fits)."""
    scale = min(1.0, RESIZE_LONG_EDGE / max(width, height))
    limit = RESIZE_MAX_TOKENS * PIXELS_PER_TOKEN
    if width * height * scale * scale > limit:
        scale = min(scale, math.sqrt(limit / (width * height)))
    if scale >= 1.0:
        return width, height
    return max(1, math.floor(width * scale)), max(1, math.floor(height * scale))


def image_tokens(width: int, height: int) -> int:
    """The documented token estimate of a ``width`` x ``height`` image, after the resize rule."""
    w, h = api_resized(width, height)
    return max(1, math.ceil(w * h / PIXELS_PER_TOKEN))


def inspect_image(data: bytes, where: str) -> ImageInfo:
    """Format and size of ``data`` from its header; :class:`ImageError` naming ``where`` when the API would refuse it."""
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageError(f"{where}: {len(data):,} bytes is over the API's {MAX_IMAGE_BYTES:,}-byte limit for one image")
    media_type, size = _header(data, where)
    width, height = size
    if width < 1 or height < 1:
        raise ImageError(f"{where}: the {media_type} header gives a size of {width}x{height}; expected positive sides")
    if width > MAX_IMAGE_SIDE or height > MAX_IMAGE_SIDE:
        raise ImageError(f"{where}: {width}x{height} pixels is over the API's {MAX_IMAGE_SIDE}-pixel limit per side")
    return ImageInfo(media_type, width, height, len(data), sha256_hex(data))


def decode_base64_image(text: str, where: str) -> bytes:
    """The bytes of base64 image data; :class:`ImageError` when it is not base64."""
    if len(text) > (MAX_IMAGE_BYTES * 4) // 3 + 8:
        raise ImageError(f"{where}: {len(text):,} base64 characters is over the API's {MAX_IMAGE_BYTES:,}-byte limit")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ImageError(f"{where}: the image data is not valid base64 ({exc})") from None


def _header(data: bytes, where: str) -> tuple[str, tuple[int, int]]:
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        if len(data) < 24 or data[12:16] != b"IHDR":
            raise ImageError(f"{where}: a PNG whose IHDR header is missing or cut short")
        return "image/png", struct.unpack(">II", data[16:24])
    if data.startswith((b"GIF87a", b"GIF89a")):
        if len(data) < 10:
            raise ImageError(f"{where}: a GIF whose screen descriptor is cut short")
        return "image/gif", struct.unpack("<HH", data[6:10])
    if data.startswith(b"\xff\xd8"):
        return "image/jpeg", _jpeg_size(data, where)
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp", _webp_size(data, where)
    raise ImageError(f"{where}: not a PNG, JPEG, GIF or WebP image (starts with {data[:8]!r})")


_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(data: bytes, where: str) -> tuple[int, int]:
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            raise ImageError(f"{where}: a JPEG whose segment at byte {i} does not start with a marker")
        marker = data[i + 1]
        if marker == 0xFF:
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        length = struct.unpack(">H", data[i + 2 : i + 4])[0]
        if marker in _SOF_MARKERS:
            if i + 9 > len(data):
                break
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return width, height
        if length < 2:
            raise ImageError(f"{where}: a JPEG segment at byte {i} has length {length}")
        i += 2 + length
    raise ImageError(f"{where}: a JPEG without a frame header (SOF) giving its size")


def _webp_size(data: bytes, where: str) -> tuple[int, int]:
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(data) >= 30:
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    raise ImageError(f"{where}: a WebP whose VP8/VP8L/VP8X header is missing or cut short")
