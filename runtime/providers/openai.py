"""The OpenAI-compatible provider: the official ``openai`` SDK's chat completions over real HTTP.

One provider for OpenAI, OpenRouter, vLLM, Ollama and the simulator's
chat-completions face: the base URL, the model and the model's dialect
(:class:`~runtime.providers.openai_wire.ChatDialect`) say which. Every
request is streamed with ``stream_options={"include_usage": true}``; the
reply is assembled from the chunks (content, tool calls by index, the
reasoning field of the dialect) and its usage is the last chunk's. A stream
that ends without a finish reason or without its usage chunk is a failed
attempt (nothing of it is recorded).

Caching needs no marks (``caches_by_prefix`` is False: the placement step
stays off): the compiler keeps the prefix byte-stable, and each request
names its session (:func:`~runtime.providers.openai_wire.session_key`) as
``prompt_cache_key`` and the ``X-Session-Id`` header, the header only, or
not at all, as the dialect says; a top-level ``cache_control`` goes where
the dialect asks for it. What was read from the cache comes back as
``cached_tokens`` and is recorded as the usage's cache read.

On Temporal a worker's activity sends the Messages payload the workflow
compiled (:meth:`OpenAIProvider.send_keyed_payload`), rendered by the same
:func:`~runtime.providers.openai_wire.chat_body`, in the session the
workflow named: the key and the dialect are the worker's, never in history.

The SDK runs with ``max_retries=0`` and this provider sends exactly one
attempt per call: the send pipeline retries by the SDK's rules, which the
``openai`` SDK shares with the ``anthropic`` one (:mod:`runtime.contract.retry`:
408, 409, 429 and 5xx, ``x-should-retry``, ``retry-after-ms``/``retry-after``,
0.5 s doubling to 8 s with jitter), so every attempt is measured and recorded.
The API key is held only by the SDK client and scrubbed from every error.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs

from runtime.errors import extra_hint

try:
    import httpx2
    import openai
except ImportError as exc:  # the optional extra is missing: say which
    raise ModuleNotFoundError(
        f"the openai provider needs the openai SDK ({exc}); {extra_hint('openai')}",
        name=exc.name,
    ) from exc

from runtime.contract.progress import current_progress
from runtime.contract.provider import AttemptFailed, CountUnavailable, ProviderError, ProviderReply
from runtime.contract.retry import DEFAULT_MAX_RETRIES
from runtime.providers.key_destination import node_header_for
from runtime.providers.openai_wire import (
    SESSION_HEADER,
    STOP_REASONS,
    ChatDialect,
    chat_body,
    chat_usage,
    origin_of,
    payload_session_key,
    reasoning_block,
    session_key,
)
from runtime.request.compiler import Request
from runtime.values.image_rules import CHAT_IMAGES, ImageRule
from runtime.values.scrub import scrub_secret

NODE_HEADER = "x-foldline-node"
STREAM_ERROR_STATUS = {"rate_limit_exceeded": 429, "server_error": 500, "timeout": 504}
"""The status a mid-stream error counts as for the retry rules (its HTTP status was already 200)."""

TextProgress = Callable[[str], None]


@attrs.define(eq=False)
class _Assembly:
    """A streamed reply put back together."""

    content: list[str] = attrs.Factory(list)
    reasoning: list[str] = attrs.Factory(list)
    details: list[dict[str, Any]] = attrs.Factory(list)
    calls: dict[int, dict[str, Any]] = attrs.Factory(dict)
    finish: str | None = None
    usage: dict[str, Any] | None = None
    model: str = ""
    response_id: str | None = None
    chunks: int = 0

    def add(self, chunk: dict[str, Any], field: str) -> str:
        """Take one chunk in; returns its content text (for progress)."""
        self.chunks += 1
        self.model = chunk.get("model") or self.model
        self.response_id = chunk.get("id") or self.response_id
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        text = ""
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            text += delta.get("content") or ""
            if field in ("reasoning_content", "reasoning") and isinstance(delta.get(field), str):
                self.reasoning.append(delta[field])
            if field == "reasoning_details" and isinstance(delta.get("reasoning_details"), list):
                _merge_details(self.details, delta["reasoning_details"])
            for call in delta.get("tool_calls") or []:
                self._call(call)
            self.finish = choice.get("finish_reason") or self.finish
        self.content.append(text)
        return text

    def _call(self, delta: dict[str, Any]) -> None:
        slot = self.calls.setdefault(int(delta.get("index") or 0), {"id": None, "name": "", "arguments": ""})
        slot["id"] = delta.get("id") or slot["id"]
        function = delta.get("function") or {}
        slot["name"] += function.get("name") or ""
        slot["arguments"] += function.get("arguments") or ""


def _merge_details(details: list[dict[str, Any]], items: list[Any]) -> None:
    """Streamed ``reasoning_details`` items: an item with the index of an earlier one continues it."""
    for item in items:
        if not isinstance(item, dict):
            continue
        earlier = next((d for d in details if "index" in item and d.get("index") == item.get("index")), None)
        if earlier is None or earlier.get("type") != item.get("type"):
            details.append(dict(item))
            continue
        for key, value in item.items():
            if key in ("text", "summary", "data") and isinstance(value, str) and isinstance(earlier.get(key), str):
                earlier[key] += value
            elif value is not None:
                earlier[key] = value


@attrs.define(eq=False)
class OpenAIProvider:
    """Sends compiled requests through ``openai.AsyncOpenAI`` chat completions (see the module docstring)."""

    _client: openai.AsyncOpenAI
    _secret: str = attrs.field(repr=False)
    base_url: str
    dialect: ChatDialect = attrs.field(factory=ChatDialect)
    name: str = "openai"
    caches_by_prefix: bool = False
    max_retries: int = DEFAULT_MAX_RETRIES
    progress: TextProgress | None = attrs.field(default=None, kw_only=True)
    counts_tokens: bool = False
    """Chat completions has no count endpoint: an uncalibrated model decides on its family's prior."""
    image_rule: ImageRule = CHAT_IMAGES
    node_header: bool = attrs.field(default=False, kw_only=True)
    """Send the node id as the ``x-foldline-node`` header: only to the simulator's chat face."""
    """Images cost what chat completions says (tiles), not what the Messages API says: the measure counts them so."""

    @classmethod
    def create(
        cls,
        *,
        api_key: str,
        base_url: str,
        dialect: ChatDialect | None = None,
        name: str = "openai",
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: float = 600.0,
        node_header: bool | None = None,
    ) -> OpenAIProvider:
        """A provider for the server at ``base_url`` (the API root, e.g. ending in ``/v1``).

        Each request names its model (a profile may name another than the
        scenario's); a reply's reasoning names the server and the model that
        made it, so it goes back only to that model there.
        """
        if not api_key:
            raise ProviderError("no API key: set OPENAI_API_KEY (or the scenario's api_key_env)")
        header = node_header_for(base_url) if node_header is None else node_header  # loopback only, by default
        client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout)
        return cls(
            client,
            api_key,
            base_url,
            dialect or ChatDialect(),
            name=name,
            max_retries=max_retries,
            node_header=header,
        )

    def scrub(self, text: str) -> str:
        """``text`` without this provider's key, masked and partial forms too (:mod:`runtime.values.scrub`)."""
        return self._scrub(text)

    def _scrub(self, text: str) -> str:
        return scrub_secret(text, self._secret)

    def wire(self, request: Request) -> tuple[dict[str, Any], dict[str, str]]:
        """The body and the headers one attempt of ``request`` sends (no node header)."""
        return self.wire_payload(request.payload(), session_key(request))

    def wire_payload(self, payload: dict[str, Any], session: str | None) -> tuple[dict[str, Any], dict[str, str]]:
        """The body and the headers of a compiled request's Messages ``payload`` in session ``session``."""
        body = chat_body(payload, self.dialect, origin_of(self.base_url, str(payload["model"])))
        headers: dict[str, str] = {}
        key = session if self.dialect.cache_key != "off" else None
        if key is not None:
            headers[SESSION_HEADER] = key
            if self.dialect.cache_key == "session":
                body["prompt_cache_key"] = key
        if self.dialect.cache_control is not None:
            ask: dict[str, Any] = {"type": "ephemeral"}
            if self.dialect.cache_control == "1h":
                ask["ttl"] = "1h"
            body["cache_control"] = ask
        return body, headers

    async def count_tokens(self, request: Request) -> int:
        raise CountUnavailable(f"{self.name}: chat completions has no count-tokens endpoint")

    async def send(self, request: Request, *, node_id: str | None) -> ProviderReply:
        """Send one attempt; a failed one raises :class:`AttemptFailed` for the pipeline's retry rules."""
        return await self._send(*self.wire(request), node_id)

    async def send_payload(self, payload: dict[str, Any], *, node_id: str | None) -> ProviderReply:
        """One attempt of a compiled request's payload with no session (a Temporal activity's, without a key)."""
        return await self._send(*self.wire_payload(payload, None), node_id)

    async def send_keyed_payload(
        self, payload: dict[str, Any], *, node_id: str | None, cache_key: str
    ) -> ProviderReply:
        """One attempt of a payload in the session the Temporal workflow named (its request's :func:`session_key`)."""
        try:
            session = payload_session_key(cache_key)
        except ValueError as exc:
            raise ProviderError(f"{self.name}: {exc}", error_type="invalid_request") from None
        return await self._send(*self.wire_payload(payload, session), node_id)

    async def _send(self, body: dict[str, Any], headers: dict[str, str], node_id: str | None) -> ProviderReply:
        if node_id and self.node_header:
            headers[NODE_HEADER] = node_id
        model = body.pop("model")
        messages = body.pop("messages")
        assembly = _Assembly()
        started, pieces = False, current_progress()
        try:
            stream = await self._client.chat.completions.create(
                model=model,
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
                extra_headers=headers,
                extra_body=body,
            )
            started = True
            async with stream:
                async for chunk in stream:
                    text = assembly.add(chunk.model_dump(mode="json", exclude_unset=True), self.dialect.reasoning)
                    if text and self.progress is not None:
                        self.progress(text)
                    if text and pieces is not None:
                        pieces("text", text)
        except openai.APIStatusError as exc:
            raise self._status_failure(exc) from None
        except openai.APIConnectionError as exc:  # timeouts included
            raise self._connection_failure(exc, started) from None
        except openai.APIError as exc:  # an error event in the stream
            raise self._stream_failure(exc) from None
        except httpx2.TransportError as exc:
            raise self._connection_failure(exc, started) from None
        except (ValueError, KeyError, TypeError) as exc:
            raise ProviderError(
                self._scrub(f"malformed response stream from the provider: {type(exc).__name__}: {exc}"),
                status=200,
                error_type="malformed_response",
            ) from exc
        return self._reply(assembly, origin_of(self.base_url, model))

    def _status_failure(self, exc: openai.APIStatusError) -> AttemptFailed:
        error = exc.body if isinstance(exc.body, dict) else {}
        error_type = error.get("type") if isinstance(error.get("type"), str) else None
        message = error.get("message") if isinstance(error.get("message"), str) else exc.message
        failure = f"HTTP {exc.status_code} {error_type or ''}: {message}"
        return AttemptFailed(
            self._scrub(failure), status=exc.status_code, error_type=error_type, headers=dict(exc.response.headers)
        )

    def _stream_failure(self, exc: openai.APIError) -> AttemptFailed:
        error = exc.body if isinstance(exc.body, dict) else {}
        error_type = error.get("type") if isinstance(error.get("type"), str) else None
        status = STREAM_ERROR_STATUS.get(error_type or "", 500)
        failure = f"HTTP {status} mid-stream {error_type or ''}: {exc.message}"
        return AttemptFailed(self._scrub(failure), status=status, error_type=error_type)

    def _connection_failure(self, exc: Exception, started: bool) -> AttemptFailed:
        where = "stream cut" if started else "connection error"
        failure = f"{where}: {type(exc).__name__}: {exc}"
        return AttemptFailed(self._scrub(failure), status=None, error_type="connection_error")

    def _reply(self, assembly: _Assembly, origin: str) -> ProviderReply:
        if assembly.chunks == 0:
            raise ProviderError(
                "malformed response body from the provider: it carries no server-sent events",
                status=200,
                error_type="malformed_response",
            )
        if assembly.finish is None or assembly.usage is None:
            missing = "a finish reason" if assembly.finish is None else "its usage chunk"
            raise AttemptFailed(
                f"stream cut: it ended after {assembly.chunks} chunk(s) without {missing}",
                status=None,
                error_type="connection_error",
            )
        return ProviderReply(
            content=tuple(self._content(assembly, origin)),
            stop_reason=STOP_REASONS.get(assembly.finish, "end_turn"),
            usage=chat_usage(assembly.usage),
            model=assembly.model,
            response_id=assembly.response_id,
        )

    def _content(self, assembly: _Assembly, origin: str) -> list[dict[str, Any]]:
        content: list[dict[str, Any]] = []
        field = self.dialect.reasoning
        if field == "reasoning_details" and assembly.details:
            text = "".join(str(d.get("text") or d.get("summary") or "") for d in assembly.details)
            content.append(reasoning_block(field, origin, text, assembly.details))
        elif field in ("reasoning_content", "reasoning") and "".join(assembly.reasoning):
            content.append(reasoning_block(field, origin, "".join(assembly.reasoning), None))
        text = "".join(assembly.content)
        if text:
            content.append({"type": "text", "text": text})
        for index in sorted(assembly.calls):
            call = assembly.calls[index]
            call_id = call["id"] or f"call_{assembly.response_id}_{index}"
            content.append({"type": "tool_use", "id": call_id, "name": call["name"], "input": _arguments(call)})
        return content

    async def aclose(self) -> None:
        await self._client.close()


def _arguments(call: dict[str, Any]) -> dict[str, Any]:
    """A call's arguments; text that is not a JSON object is kept under one key, which the tool's schema check refuses."""
    try:
        value = json.loads(call["arguments"] or "{}")
    except ValueError:
        return {"arguments_not_a_json_object": call["arguments"][:2_000]}
    return value if isinstance(value, dict) else {"arguments_not_a_json_object": call["arguments"][:2_000]}
