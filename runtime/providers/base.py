"""What a provider is: something that sends a compiled request and returns a reply.

Providers are the I/O edge. The runtime hands a provider a compiled
:class:`~runtime.compiler.Request`; the provider sends it (retrying by its own
rules) and returns a :class:`ProviderReply` with the response content and the
usage the provider reported. Before *every* attempt, retries included, it
awaits ``before_attempt(attempt)`` so the runtime measures and records the
request again before it leaves.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import attrs

from runtime.compiler import Request
from runtime.errors import FoldlineError
from runtime.messages import AssistantResponse, TextPart, ToolCall
from runtime.usage import Usage

BeforeAttempt = Callable[[int], Awaitable[None]]


class ProviderError(FoldlineError):
    """A provider call failed for good (after its retries). Never carries an API key."""

    def __init__(self, message: str, *, status: int | None = None, error_type: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type


@attrs.frozen
class ProviderReply:
    """A completed response: content blocks (Anthropic shape), why it stopped, usage."""

    content: tuple[dict[str, Any], ...]
    stop_reason: str | None
    usage: Usage
    model: str
    attempts: int = 1
    response_id: str | None = None

    def message(self) -> AssistantResponse:
        """The response as a record message: its text blocks and tool calls, in order."""
        parts: list[TextPart | ToolCall] = []
        for block in self.content:
            kind = block.get("type")
            if kind == "text":
                parts.append(TextPart(block.get("text", "")))
            elif kind == "tool_use":
                parts.append(ToolCall.create(block["id"], block["name"], block.get("input") or {}))
        return AssistantResponse(tuple(parts), stop_reason=self.stop_reason)


class Provider(Protocol):
    """The provider interface the runtime uses."""

    name: str
    caches_by_prefix: bool
    """True when the provider caches by prompt prefix and honours cache marks."""

    async def send(self, request: Request, *, node_id: str | None, before_attempt: BeforeAttempt) -> ProviderReply: ...

    async def aclose(self) -> None: ...
