"""How the chat face counts a prompt: exactly for a model OpenAI tokenizes with o200k_base, by a factor otherwise.

OpenAI's gpt-4o, gpt-4.1, gpt-4.5, gpt-5 and o-series models use
o200k_base, the tokenizer foldline counts with (tiktoken's own model table,
``tiktoken.model.encoding_name_for_model``, says which). For such a model the
simulator counts as OpenAI documents it (the OpenAI Cookbook, "How to count
tokens with tiktoken", section 6, verified there against the API's
``usage.prompt_tokens`` for gpt-4o and gpt-4o-mini):

- each message costs :data:`TOKENS_PER_MESSAGE` (3) plus the o200k_base
  tokens of each of its values, and :data:`TOKENS_PER_NAME` (1) more when it
  carries a ``name``; a value that is not a string (a content array, tool
  calls) counts as its string leaves, an image as its chat-completions tiles
  (:mod:`runtime.values.chat_images`), never as its data URL;
- every reply is primed with ``<|start|>assistant<|message|>``:
  :data:`REPLY_PRIMING` (3) tokens once per request;
- the tools (whose rendering OpenAI does not document beyond an estimate for
  flat parameter lists) count as the o200k_base tokens of their JSON.

Any other model (one the simulator does not know, or a Claude model routed
through a chat-completions gateway) keeps the simulator's token factor
(:class:`~runtime.sim.tokens.SimTokenCounter`): its tokenizer is not ours.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from runtime.measuring.tokenizer import count_tokens
from runtime.values.canonical import sha256_hex

TOKENS_PER_MESSAGE = 3
"""Tokens each message adds (``<|start|>{role}<|message|>...<|end|>``), per the cookbook."""
TOKENS_PER_NAME = 1
"""Tokens a message's ``name`` adds, per the cookbook."""
REPLY_PRIMING = 3
"""Tokens that prime the reply (``<|start|>assistant<|message|>``), once per request, per the cookbook."""
EXACT_ENCODING = "o200k_base"
DEFAULT_CACHE_SIZE = 65_536


def counts_exactly(model: str) -> bool:
    """Whether OpenAI tokenizes ``model`` with o200k_base (tiktoken's model table; no download)."""
    from tiktoken.model import encoding_name_for_model

    try:
        return encoding_name_for_model(model) == EXACT_ENCODING
    except KeyError:  # a model tiktoken does not know
        return False


def string_leaves(value: Any) -> Iterator[str]:
    """The strings of a decoded JSON value, depth first; an ``image_url`` part yields nothing (its tiles count)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        if value.get("type") == "image_url":
            return
        for item in value.values():
            yield from string_leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from string_leaves(item)


@attrs.define(eq=False)
class ExactCounter:
    """o200k_base counts of strings, cached by content digest (LRU, bounded); thread-safe."""

    cache_size: int = DEFAULT_CACHE_SIZE
    count_text: Callable[[str], int] = count_tokens
    _counts: OrderedDict[str, int] = attrs.field(factory=OrderedDict, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)

    def text_tokens(self, text: str) -> int:
        key = sha256_hex(text)
        with self._lock:
            cached = self._counts.get(key)
            if cached is not None:
                self._counts.move_to_end(key)
                return cached
        count = self.count_text(text)
        with self._lock:
            self._counts[key] = count
            if len(self._counts) > self.cache_size:
                self._counts.popitem(last=False)
        return count

    def message_tokens(self, message: Any, image_tokens: int) -> int:
        """One message as OpenAI counts it: the per-message overhead, its values, a name's token, its images."""
        values = sum(self.text_tokens(leaf) for leaf in string_leaves(message))
        named = isinstance(message, Mapping) and message.get("name") is not None
        return TOKENS_PER_MESSAGE + values + (TOKENS_PER_NAME if named else 0) + image_tokens

    def tools_tokens(self, tools_json: str) -> int:
        return self.text_tokens(tools_json)

    def segments(self, tools_json: str | None, messages: Sequence[tuple[Any, int]]) -> tuple[int, ...]:
        """Each segment's tokens: the tools' JSON (when there are tools), then each message with its images."""
        head = (self.tools_tokens(tools_json),) if tools_json is not None else ()
        return head + tuple(self.message_tokens(message, images) for message, images in messages)
