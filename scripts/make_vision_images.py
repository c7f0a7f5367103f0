"""Writes the three figures of scenarios/vision/ (PNG, standard library only): ``python scripts/make_vision_images.py``."""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "scenarios" / "vision"
Pixel = Callable[[int, int], tuple[int, int, int]]
BARS = [120, 200, 90, 240, 160]


def png(path: Path, w: int, h: int, pixel: Pixel) -> None:
    rows = bytearray()
    for y in range(h):
        rows.append(0)
        for x in range(w):
            rows.extend(pixel(x, y))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(bytes(rows), 9)) + chunk(b"IEND", b"")
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + body)


def chart(x: int, y: int) -> tuple[int, int, int]:
    i = (x - 20) // 72
    if 0 <= i < 5 and (x - 20) % 72 < 50 and y >= 280 - BARS[i]:
        return (40 + 40 * i, 90, 200 - 30 * i)
    return (0, 0, 0) if y == 280 or x == 18 else (255, 255, 255)


def diagram(x: int, y: int) -> tuple[int, int, int]:
    for bx in (40, 260, 480):
        if bx <= x < bx + 120 and 200 <= y < 280 and (x in (bx, bx + 119) or y in (200, 279)):
            return (20, 20, 120)
    if y == 240 and (160 <= x < 260 or 380 <= x < 480):
        return (200, 30, 30)
    return (250, 250, 245)


def photo(x: int, y: int) -> tuple[int, int, int]:
    if math.hypot(x - 600, y - 120) < 60:
        return (255, 220, 60)
    return (min(255, 60 + y // 3), min(255, 120 + y // 5), max(0, 230 - y // 3))


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    png(OUT / "chart.png", 400, 300, chart)
    png(OUT / "diagram.png", 640, 480, diagram)
    png(OUT / "photo.png", 800, 600, photo)
