"""How a model's intended reply is cut by the request's ``stop_sequences`` and ``max_tokens`` (pure).

The policy (script or default model) says what the model would write;
:func:`finish` applies the request's limits the way generation does:

1. ``stop_sequences``: the earliest occurrence of any sequence in the text
   blocks, in order, ends the reply there (the sequence itself is not
   included, an emptied text block is dropped, later blocks are not
   written): ``stop_reason = "stop_sequence"``, ``stop_sequence`` = the
   sequence that matched.
2. ``max_tokens``: when the reply's output tokens exceed it, generation stops
   at exactly ``max_tokens`` output tokens: whole blocks that fit are kept, a
   text block that does not fit keeps a prefix of its text (at least one
   token), a tool call that does not fit is not written;
   ``stop_reason = "max_tokens"``, ``output_tokens = max_tokens``.

Output tokens are the simulator's count of the content blocks
(:meth:`~runtime.sim.tokens.SimTokenCounter.content_tokens`) unless the
policy gave its own number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from runtime.measuring.tokenizer import encoding
from runtime.scripted.policies import Reply
from runtime.sim.tokens import SimTokenCounter


@attrs.frozen
class Finished:
    """The reply as generated: content, why it stopped, and its output tokens."""

    content: tuple[dict[str, Any], ...]
    stop_reason: str
    stop_sequence: str | None
    output_tokens: int


def finish(reply: Reply, payload: Mapping[str, Any], counter: SimTokenCounter, *, whole: bool = False) -> Finished:
    """Apply ``payload``'s ``stop_sequences`` and ``max_tokens`` to ``reply``.

    ``whole``: do not cut at ``max_tokens`` (a script's step is answered whole;
    ``stop_sequences`` still apply)."""
    max_tokens = payload["max_tokens"]
    if max_tokens == 0:
        return Finished((), "max_tokens", None, 0)
    content = [dict(block) for block in reply.content]
    stop_reason, stop_sequence = reply.stop_reason, None
    output_tokens = reply.output_tokens
    stopped = _stop_at_sequence(content, payload.get("stop_sequences") or ())
    if stopped is not None:
        content, stop_sequence = stopped
        stop_reason, output_tokens = "stop_sequence", None
    if output_tokens is None:
        output_tokens = counter.content_tokens(content)
    if output_tokens > max_tokens and not whole:
        return Finished(tuple(_truncate(content, max_tokens, counter)), "max_tokens", None, max_tokens)
    return Finished(tuple(content), stop_reason, stop_sequence, output_tokens)


def _stop_at_sequence(
    content: list[dict[str, Any]], sequences: Sequence[str]
) -> tuple[list[dict[str, Any]], str] | None:
    for index, block in enumerate(content):
        if block.get("type") != "text":
            continue
        text = block.get("text", "")
        found = [(text.find(seq), seq) for seq in sequences if seq and seq in text]
        if not found:
            continue
        position, sequence = min(found)
        kept = content[:index]
        if position > 0:
            kept.append(block | {"text": text[:position]})
        return kept, sequence
    return None


def _truncate(content: list[dict[str, Any]], budget: int, counter: SimTokenCounter) -> list[dict[str, Any]]:
    kept: list[dict[str, Any]] = []
    for block in content:
        cost = counter.block_tokens(block)
        if cost <= budget:
            kept.append(block)
            budget -= cost
            continue
        if block.get("type") == "text" and budget >= 1:
            tokens = encoding().encode(block.get("text", ""), disallowed_special=())
            keep = max(1, math.floor(budget / counter.token_factor))
            prefix = encoding().decode(tokens[:keep])
            if prefix:
                kept.append(block | {"text": prefix})
        break
    return kept
