"""Where one request stops being a prefix of the next, read from the payloads (a test oracle).

The send path detects rewrites from digests (:mod:`runtime.cache.rewrites`);
this payload comparison is the independent check the tests hold it to.
Comparison is on what the provider's cache sees: canonical JSON with each
block's own ``cache_control`` removed, and string content read as the one text
block the API reads it as (so adding or moving marks, or the string/list form
of the same text, is not a rewrite).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.cache.blocks import (
    as_payload,
    content_blocks,
    messages_of,
    system_blocks,
    tools_of,
    without_cache_control,
)
from runtime.values.canonical import canonical_bytes


def _message_form(message: Mapping[str, Any], m: int) -> bytes:
    envelope = {k: v for k, v in message.items() if k != "content"}
    blocks = [without_cache_control(b) for b in content_blocks(message["content"], f"messages[{m}].content")]
    return canonical_bytes([envelope, blocks])


def first_divergence(prev_payload: Mapping[str, Any], next_payload: Mapping[str, Any]) -> int | None:
    """The index of the first message of ``prev`` that differs from ``next``'s at that index.

    None when ``prev``'s messages are a prefix of (or equal to) ``next``'s.
    When ``next`` has fewer messages and they all match, the answer is the
    first of ``prev``'s messages that ``next`` lacks.
    """
    prev_messages = messages_of(as_payload(prev_payload))
    next_messages = messages_of(as_payload(next_payload))
    for m, prev_message in enumerate(prev_messages):
        if m >= len(next_messages):
            return m
        if _message_form(prev_message, m) != _message_form(next_messages[m], m):
            return m
    return None


def _stable_form(payload: Mapping[str, Any]) -> bytes:
    payload = as_payload(payload)
    return canonical_bytes(
        {
            "tools": [without_cache_control(t) for t in tools_of(payload)],
            "system": [without_cache_control(b) for b in system_blocks(payload)],
            "tool_choice": payload.get("tool_choice"),
        }
    )


def stable_changed(prev_payload: Mapping[str, Any], next_payload: Mapping[str, Any]) -> bool:
    """Whether tools, system or tool_choice differ between the two requests."""
    return _stable_form(prev_payload) != _stable_form(next_payload)


def _settings_form(payload: Mapping[str, Any]) -> bytes:
    payload = as_payload(payload)
    output_config = payload.get("output_config")
    effort = output_config.get("effort") if isinstance(output_config, Mapping) else None
    return canonical_bytes(
        {
            "model": payload.get("model"),
            "thinking": payload.get("thinking"),
            "effort": effort,
            "speed": payload.get("speed"),
        }
    )


def settings_changed(prev_payload: Mapping[str, Any], next_payload: Mapping[str, Any]) -> bool:
    """Whether a setting that seeds the certificates changed: model, thinking, effort or speed.

    Such a change invalidates cached prefixes even when tools, system and
    messages are byte-identical.
    """
    return _settings_form(prev_payload) != _settings_form(next_payload)
