"""The Anthropic provider: the official ``anthropic`` SDK over real HTTP.

By default it talks to the built-in simulated server on loopback; pointed at
the real API (``base_url`` unset and an API key in the environment) it is the
same code. The SDK runs with ``max_retries=0`` and this provider sends exactly
one attempt per call: the send pipeline retries by the SDK's own rules
(:mod:`runtime.providers.retry`), so that each attempt is measured, decided and
recorded before it is sent.

The API key is held only by the SDK client; it never appears in logs, events,
reports or errors (error text is scrubbed of it).
"""

from __future__ import annotations

from typing import Any

import anthropic
import attrs

from runtime.compiler import Request
from runtime.providers.base import AttemptFailed, ProviderError, ProviderReply
from runtime.providers.retry import DEFAULT_MAX_RETRIES
from runtime.scrub import scrub_secret
from runtime.usage import Usage

NODE_HEADER = "x-foldline-node"


@attrs.define(eq=False)
class AnthropicProvider:
    """Sends compiled requests through ``anthropic.AsyncAnthropic``.

    Close it with :meth:`aclose` (the SDK's own cleanup assumes asyncio, so it
    is never left to a finalizer).
    """

    _client: anthropic.AsyncAnthropic
    _secret: str = attrs.field(repr=False)
    name: str = "anthropic"
    caches_by_prefix: bool = True
    max_retries: int = DEFAULT_MAX_RETRIES

    @classmethod
    def create(
        cls,
        *,
        api_key: str,
        base_url: str | None = None,
        name: str = "anthropic",
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: float = 600.0,
    ) -> AnthropicProvider:
        if not api_key:
            raise ProviderError("no API key: set ANTHROPIC_API_KEY (or the scenario's api_key_env)")
        client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout)
        return cls(client, api_key, name=name, max_retries=max_retries)

    def _scrub(self, text: str) -> str:
        return scrub_secret(text, self._secret)  # masked and partial forms too (runtime.scrub)

    async def send(self, request: Request, *, node_id: str | None) -> ProviderReply:
        """Send one attempt; a failed one raises :class:`AttemptFailed` for the pipeline's retry rules."""
        return await self.send_payload(request.payload(), node_id=node_id)

    async def send_payload(self, payload: dict[str, Any], *, node_id: str | None) -> ProviderReply:
        """Send one attempt of a compiled request's payload (a host that carries payloads, not requests)."""
        headers = {NODE_HEADER: node_id} if node_id else {}
        try:
            raw = await self._client.messages.with_raw_response.create(**payload, extra_headers=headers)
        except anthropic.APIStatusError as exc:
            error_type = _error_type(exc.body)
            failure = f"HTTP {exc.status_code} {error_type or ''}: {_error_message(exc)}".strip()
            raise AttemptFailed(
                self._scrub(failure), status=exc.status_code, error_type=error_type, headers=dict(exc.response.headers)
            ) from None
        except anthropic.APIConnectionError as exc:
            failure = f"connection error: {type(exc).__name__}: {exc}"
            raise AttemptFailed(self._scrub(failure), status=None, error_type="connection_error") from None
        return await self._reply(raw)

    async def _reply(self, raw: Any) -> ProviderReply:
        try:
            message = await raw.parse()
            body = message.model_dump(mode="json")
            content = tuple(dict(block) for block in body["content"])
            usage = Usage.from_anthropic(body["usage"])
        except Exception as exc:  # the SDK raises several types for a body it cannot read
            raise ProviderError(
                self._scrub(f"malformed response body from the provider: {type(exc).__name__}: {exc}"),
                status=raw.status_code,
                error_type="malformed_response",
            ) from exc
        return ProviderReply(
            content=content,
            stop_reason=body.get("stop_reason"),
            usage=usage,
            model=body.get("model", ""),
            response_id=body.get("id"),
        )

    async def aclose(self) -> None:
        await self._client.close()


def _error_type(body: Any) -> str | None:
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return error.get("type")
    return None


def _error_message(exc: anthropic.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("message", ""))
    return str(exc.message)
