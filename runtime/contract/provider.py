"""What a provider is: something that sends one attempt of a compiled request and returns a reply.

Providers are the I/O edge. The send pipeline (:mod:`actors.pipeline`) hands
a provider a compiled :class:`~runtime.request.compiler.Request`; the provider sends
exactly one attempt and returns a :class:`ProviderReply` with the response
content and the usage the provider reported. An attempt that failed in a way
the provider's retry rules may retry raises :class:`AttemptFailed` (with the
status and response headers the rules read); the pipeline decides whether and
when to retry (:mod:`runtime.contract.retry`), measuring and deciding the
request again before every attempt. Any other :class:`ProviderError` is final.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import attrs

from runtime.errors import FoldlineError
from runtime.request.compiler import Request
from runtime.values.canonical import canonical_json
from runtime.values.image_rules import MESSAGES_IMAGES, ImageRule
from runtime.values.messages import (
    AssistantResponse,
    CompactionPart,
    Part,
    RedactedThinkingPart,
    TextPart,
    ThinkingPart,
    ToolCall,
)
from runtime.values.usage import Usage


class ProviderError(FoldlineError):
    """A provider call failed for good (after its retries). Never carries an API key."""

    def __init__(self, message: str, *, status: int | None = None, error_type: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type


class AttemptFailed(ProviderError):
    """One attempt failed; the retry rules decide from ``status`` (None: no response) and ``headers``.

    The message says what failed (an HTTP status and the error, or the
    connection error), scrubbed of any key; the pipeline adds how many
    attempts were made when it gives up.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None,
        error_type: str | None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message, status=status, error_type=error_type)
        self.headers: Mapping[str, str] = dict(headers or {})


class CountUnavailable(ProviderError):
    """The provider has no count-tokens endpoint (its ``counts_tokens`` is False)."""


COUNT_KEYS = ("messages", "model", "output_config", "system", "thinking", "tool_choice", "tools")
"""The payload keys a count-tokens request carries (the endpoint refuses create-only keys such as max_tokens)."""


def count_payload(request: Request) -> dict[str, Any]:
    """The count-tokens body of ``request``: its payload without the keys only a create takes."""
    return count_body(request.payload())


def count_body(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The count-tokens body of a create payload (a host that carries payloads, not requests)."""
    return {key: value for key, value in payload.items() if key in COUNT_KEYS}


@attrs.frozen
class ProviderReply:
    """A completed response: content blocks (Anthropic shape), why it stopped, usage."""

    content: tuple[dict[str, Any], ...]
    stop_reason: str | None
    usage: Usage
    model: str
    attempts: int = 1
    response_id: str | None = None
    context_management: Mapping[str, Any] | None = None
    """The response's ``context_management`` as the provider sent it (``applied_edits``: what its server-side
    edits did to this request); None when the request carried none."""

    @property
    def server_edited(self) -> bool:
        """The provider's server changed the request before the model saw it (an applied edit or a compaction):
        its usage then counts another request than the one measured, so it calibrates nothing."""
        applied = (self.context_management or {}).get("applied_edits")
        return bool(applied) or any(block.get("type") == "compaction" for block in self.content)

    @property
    def has_thinking(self) -> bool:
        return any(block.get("type") in ("thinking", "redacted_thinking") for block in self.content)

    def message(self, context: str | None = None, *, answers: bool = False) -> AssistantResponse:
        """The response as a new record message: its blocks in order.

        Text, tool calls, ``thinking`` / ``redacted_thinking`` blocks
        exactly as given (signature or data included), and ``compaction``
        blocks whole (a server-side compaction's, sent back as they came). ``context`` is the
        digest of the conversation the request carried
        (:meth:`~runtime.request.compiler.Request.context_digest`); a reply with
        thinking keeps it, so a later request knows whether its blocks may go
        back; so does every reply when ``answers`` is set (a fold summary's
        reply: :mod:`actors.side_answers` finds it by what it answered).
        Each call makes a new message with a new id: the pipeline makes it once.
        """
        parts: list[Part] = []
        for block in self.content:
            kind = block.get("type")
            if kind == "text":
                parts.append(TextPart(block.get("text", "")))
            elif kind == "tool_use":
                parts.append(ToolCall.create(block["id"], block["name"], block.get("input") or {}))
            elif kind == "thinking":
                parts.append(ThinkingPart(str(block.get("thinking", "")), str(block.get("signature", ""))))
            elif kind == "redacted_thinking":
                parts.append(RedactedThinkingPart(str(block.get("data", ""))))
            elif kind == "compaction":
                parts.append(CompactionPart(canonical_json(dict(block))))
        thinking = any(isinstance(p, (ThinkingPart, RedactedThinkingPart)) for p in parts)
        kept = context if thinking or answers else None
        return AssistantResponse(tuple(parts), stop_reason=self.stop_reason, context=kept)


class Provider(Protocol):
    """The provider interface the runtime uses."""

    name: str
    caches_by_prefix: bool
    """True when the provider caches by prompt prefix and honours cache marks."""
    max_retries: int
    """How many times the pipeline may retry a failed attempt (by the provider's retry rules)."""

    async def send(self, request: Request, *, node_id: str | None) -> ProviderReply:
        """Send exactly one attempt; raise :class:`AttemptFailed` (may be retried) or :class:`ProviderError`."""
        ...

    counts_tokens: bool
    """True when :meth:`count_tokens` asks the provider's own count-tokens endpoint."""

    async def count_tokens(self, request: Request) -> int:
        """The provider's input-token count of ``request`` as it would be sent (marks do not count).

        Raises :class:`CountUnavailable` when ``counts_tokens`` is False and
        :class:`ProviderError` when the count fails; the caller bounds its wait.
        """
        ...

    async def aclose(self) -> None: ...


def scrubber_of(provider: object) -> Callable[[str], str] | None:
    """What removes ``provider``'s API key (and its masked and partial forms) from a text, or None.

    A provider holding a key offers ``scrub`` (the same :func:`runtime.values.scrub.scrub_secret`
    its own error messages pass through); text a tool returns or raises goes through it
    before it reaches the model, the record, the store and the reports.
    """
    scrub = getattr(provider, "scrub", None)
    return scrub if callable(scrub) else None


def image_rule_of(provider: object) -> ImageRule:
    """The rule ``provider``'s wire counts images by: its ``image_rule``, else the Messages API's.

    A provider that speaks another wire than the Messages API's declares
    ``image_rule`` (the OpenAI-compatible one: :data:`~runtime.values.image_rules.CHAT_IMAGES`);
    one that does not speaks the Messages wire (the protocol's own shape, whose
    replies and usage are Anthropic's), so its images cost what that wire says.
    A wrapper passes its inner provider's on. The send path measures every
    request by this rule (:class:`actors.shape.RequestShape`).
    """
    rule = getattr(provider, "image_rule", MESSAGES_IMAGES)
    if not isinstance(rule, ImageRule):
        raise TypeError(
            f"provider {getattr(provider, 'name', type(provider).__name__)!r}: image_rule is {rule!r}, "
            "expected a runtime.values.image_rules.ImageRule"
        )
    return rule
