"""What an image costs on the chat-completions wire (pure).

OpenAI's documented rule for an image at high detail (the default): the
image is scaled down to fit within 2,048 x 2,048, then scaled down so that
its shortest side is at most 768 pixels, both keeping its aspect ratio; it
then costs 85 tokens plus 170 for each 512-pixel tile it covers. So a
1,024 x 1,024 image costs 765 tokens and a 2,048 x 4,096 one 1,105. (The
Messages API's rule, pixels / 750 after its own resize, is
:func:`runtime.values.images.image_tokens`.)
"""

from __future__ import annotations

import math

BASE_TOKENS = 85
TILE_TOKENS = 170
TILE_SIDE = 512
FIT_SIDE = 2_048
SHORT_SIDE = 768


def chat_scaled(width: int, height: int) -> tuple[float, float]:
    """The image's size after the chat-completions scaling (never scaled up)."""
    if width < 1 or height < 1:
        raise ValueError(f"chat_scaled: {width} x {height} is not an image size (both sides must be >= 1)")
    w, h = float(width), float(height)
    longest = max(w, h)
    if longest > FIT_SIDE:
        w, h = w * FIT_SIDE / longest, h * FIT_SIDE / longest
    shortest = min(w, h)
    if shortest > SHORT_SIDE:
        w, h = w * SHORT_SIDE / shortest, h * SHORT_SIDE / shortest
    return w, h


def chat_image_tokens(width: int, height: int) -> int:
    """The tokens a ``width`` x ``height`` image costs on the chat-completions wire (high detail)."""
    w, h = chat_scaled(width, height)
    return BASE_TOKENS + TILE_TOKENS * math.ceil(w / TILE_SIDE) * math.ceil(h / TILE_SIDE)
