"""The Anthropic provider: the official ``anthropic`` SDK over real HTTP.

By default it talks to the built-in simulated server on loopback; pointed at
the real API (``base_url`` unset and an API key in the environment) it is the
same code. The SDK runs with ``max_retries=0``: this provider retries by the
SDK's own rules (:mod:`runtime.providers.retry`) so that each attempt is
measured and recorded (``before_attempt``) before it is sent.

The API key is held only by the SDK client; it never appears in logs, events,
reports or errors (error text is scrubbed of it).
"""

from __future__ import annotations

import random
import time
from typing import Any

import anthropic
import anyio
import attrs
import structlog

from runtime.compiler import Request
from runtime.providers.base import BeforeAttempt, ProviderError, ProviderReply
from runtime.providers.retry import DEFAULT_MAX_RETRIES, retry_delay, should_retry
from runtime.scrub import scrub_secret
from runtime.usage import Usage

log = structlog.get_logger("foldline.provider")

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

    async def send(self, request: Request, *, node_id: str | None, before_attempt: BeforeAttempt) -> ProviderReply:
        payload = request.payload()
        headers = {NODE_HEADER: node_id} if node_id else {}
        retries = 0
        while True:
            await before_attempt(retries + 1)
            try:
                raw = await self._client.messages.with_raw_response.create(**payload, extra_headers=headers)
            except anthropic.APIStatusError as exc:
                status, response_headers = exc.status_code, dict(exc.response.headers)
                error_type = _error_type(exc.body)
                failure = f"HTTP {status} {error_type or ''}: {_error_message(exc)}".strip()
            except anthropic.APIConnectionError as exc:
                status, response_headers, error_type = None, {}, "connection_error"
                failure = f"connection error: {type(exc).__name__}: {exc}"
            else:
                return await self._reply(raw, retries + 1)
            if retries >= self.max_retries or not should_retry(status, response_headers):
                raise ProviderError(
                    self._scrub(f"{failure} (after {retries + 1} attempt{'s' if retries else ''})"),
                    status=status,
                    error_type=error_type,
                )
            delay = retry_delay(retries, response_headers, jitter=random.random(), now=time.time())
            log.info("retrying request", node=node_id, status=status, attempt=retries + 1, delay_s=round(delay, 3))
            retries += 1
            await anyio.sleep(delay)

    async def _reply(self, raw: Any, attempts: int) -> ProviderReply:
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
            attempts=attempts,
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
