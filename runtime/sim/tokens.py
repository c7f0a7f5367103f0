"""The simulated server's own token count.

Anthropic's tokenizer is not o200k, so the simulator counts differently from
foldline on purpose (exercising calibration), but consistently: a block's
count is ``ceil(o200k(canonical JSON of the block without cache_control) x
token_factor)``, and the first block of each message carries a fixed
:data:`MESSAGE_OVERHEAD_TOKENS`. Counts are cached by the block's content
digest, so a long conversation is tokenized once, not on every request.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from runtime.measuring.tokenizer import count_tokens
from runtime.sim.images import split_images
from runtime.values.canonical import canonical_bytes, sha256_hex

MESSAGE_OVERHEAD_TOKENS = 3
"""Tokens the simulator adds for each message (role and turn framing)."""

DEFAULT_CACHE_SIZE = 65_536


def strip_cache_control(block: Mapping[str, Any]) -> dict[str, Any]:
    """The block without its ``cache_control`` (marks are not content)."""
    return {key: value for key, value in block.items() if key != "cache_control"}


def block_digest(block: Mapping[str, Any]) -> str:
    """SHA-256 of the block's canonical JSON, ``cache_control`` excluded."""
    return sha256_hex(canonical_bytes(strip_cache_control(block)))


def _check_factor(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"SimTokenCounter.token_factor: {value!r} is not a finite number > 0")


@attrs.define(eq=False)
class SimTokenCounter:
    """Counts blocks the simulator's way; caches counts by content digest (LRU, bounded). Thread-safe.

    ``encoded_blocks`` counts how many blocks were actually tokenized (cache
    misses), so a caller can check that repeated content is not re-tokenized.
    """

    token_factor: float = attrs.field(default=1.15, validator=_check_factor)
    cache_size: int = DEFAULT_CACHE_SIZE
    count_text: Callable[[str], int] = count_tokens
    encoded_blocks: int = attrs.field(default=0, init=False)
    _counts: OrderedDict[str, int] = attrs.field(factory=OrderedDict, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)

    def block_tokens(self, block: Mapping[str, Any], digest: str | None = None) -> int:
        """Tokens of one content block (no per-message overhead). ``digest`` saves rehashing."""
        key = digest if digest is not None else block_digest(block)
        with self._lock:
            cached = self._counts.get(key)
            if cached is not None:
                self._counts.move_to_end(key)
                return cached
        # Tokenized outside the lock: a huge block in one thread never holds up the others.
        images = split_images(block)  # an image counts by the documented estimate, not its base64
        counted, image_tokens = (block, 0) if images is None else images
        text = canonical_bytes(strip_cache_control(counted)).decode("utf-8")
        count = math.ceil(self.count_text(text) * self.token_factor) + image_tokens
        with self._lock:
            self.encoded_blocks += 1
            self._counts[key] = count
            if len(self._counts) > self.cache_size:
                self._counts.popitem(last=False)
        return count

    def content_tokens(self, blocks: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of response content blocks (output tokens): the sum of the block counts."""
        return sum(self.block_tokens(block) for block in blocks)
