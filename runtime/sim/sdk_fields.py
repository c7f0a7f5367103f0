"""What a request may carry, read from the installed ``anthropic`` SDK's own request types (not a hand list).

- :func:`create_keys` / :func:`count_keys`: the body fields of the beta
  ``messages.create`` / ``messages.count_tokens`` params (the beta types are a
  superset of the stable ones), less ``betas``, which the SDK sends as the
  ``anthropic-beta`` header.
- :func:`message_keys`: the fields of each message role (a ``system`` message
  may carry more than ``role`` and ``content``).
- :func:`block_types`: every content block ``type`` the SDK's block param
  union names (server tool blocks, compaction blocks, ... included).

Each is computed once per process from the SDK's ``TypedDict`` s and
pydantic models, and only when a request carries something outside the
common core (:data:`CORE_CREATE_KEYS` and the rest, which a test holds to
be a subset of what the installed SDK names): a request foldline itself
compiles never makes the simulator import the SDK, so the scripted provider
(the simulator in process) never pays for it.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Mapping
from typing import Any

HEADER_ONLY = frozenset({"betas"})
"""Params the SDK sends as headers, never in the body."""

CORE_COUNT_KEYS = frozenset({"model", "messages", "system", "tools", "tool_choice", "thinking"})
CORE_CREATE_KEYS = CORE_COUNT_KEYS | frozenset({"max_tokens", "stream", "metadata", "stop_sequences", "output_config"})
CORE_MESSAGE_KEYS = frozenset({"role", "content"})
CORE_BLOCK_TYPES = frozenset({"text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking"})
"""The common core of each set below, known without importing the SDK (a subset of the SDK's, tested)."""


def create_key_allowed(key: str) -> bool:
    return key in CORE_CREATE_KEYS or key in create_keys()


def count_key_allowed(key: str) -> bool:
    return key in CORE_COUNT_KEYS or key in count_keys()


def message_key_allowed(role: str, key: str) -> bool:
    return (key in CORE_MESSAGE_KEYS and role in ("user", "assistant")) or key in message_keys()[role]


def block_type_allowed(kind: str) -> bool:
    return kind in CORE_BLOCK_TYPES or kind in block_types()


def _keys(params: Any) -> frozenset[str]:
    return frozenset(params.__required_keys__ | params.__optional_keys__) - HEADER_ONLY


@functools.cache
def create_keys() -> frozenset[str]:
    """The body fields ``client.beta.messages.create`` can send (``stream`` included)."""
    from anthropic.types.beta import message_create_params

    return _keys(message_create_params.MessageCreateParamsStreaming)


@functools.cache
def count_keys() -> frozenset[str]:
    """The body fields ``client.beta.messages.count_tokens`` can send."""
    from anthropic.types.beta import message_count_tokens_params

    return _keys(message_count_tokens_params.MessageCountTokensParams)


@functools.cache
def message_keys() -> Mapping[str, frozenset[str]]:
    """Per role, the fields a message may carry."""
    from anthropic.types.beta import beta_message_param

    out: dict[str, frozenset[str]] = {}
    for param in typing.get_args(beta_message_param.BetaMessageParam):
        for role in typing.get_args(typing.get_type_hints(param)["role"]):
            out[role] = _keys(param)
    return out


def _members(union: Any) -> list[Any]:
    origin = typing.get_origin(union)
    if origin is typing.Annotated:
        return _members(typing.get_args(union)[0])
    if origin is typing.Union:
        return [member for arg in typing.get_args(union) for member in _members(arg)]
    return [union]


def _literal_values(annotation: Any) -> tuple[Any, ...]:
    while typing.get_origin(annotation) is not typing.Literal and typing.get_args(annotation):
        annotation = typing.get_args(annotation)[0]
    return typing.get_args(annotation)


@functools.cache
def block_types() -> frozenset[str]:
    """Every content block ``type`` a message may hold, by the SDK's block param union."""
    from anthropic.types.beta import beta_content_block_param

    found: set[str] = set()
    for member in _members(beta_content_block_param.BetaContentBlockParam):
        fields = getattr(member, "model_fields", None)
        annotation = fields["type"].annotation if fields is not None else typing.get_type_hints(member).get("type")
        found.update(str(value) for value in _literal_values(annotation))
    return frozenset(found)
