"""The Anthropic provider: the official ``anthropic`` SDK over real HTTP.

By default it talks to the built-in simulated server on loopback; pointed at
the real API (``base_url`` unset and an API key in the environment) it is the
same code. Every request is streamed (the SDK refuses non-streaming calls whose
``max_tokens`` could outlast its time limit): the SDK builds and sends it
(``with_streaming_response``) and this provider reads the server-sent events
itself (:mod:`runtime.providers.sse_reply`, the SDK's message model built once
at the end rather than one per event); the final message's usage is what
``message_start`` and ``message_delta`` reported, as the non-streaming body
would. Each text and thinking piece goes, as it arrives, to the progress hook
of the send (:mod:`runtime.contract.progress`; the pipeline publishes them
as low-priority ``ReplyDelta`` events). A stream cut mid-way (an ``error`` event, or the connection lost) is a
failed attempt: nothing of it is recorded. The SDK runs with ``max_retries=0``
and this provider sends exactly one attempt per call: the send pipeline retries by the SDK's own rules
(:mod:`runtime.contract.retry`), so that each attempt is measured, decided and
recorded before it is sent.

The SDK's HTTP client is chosen by :func:`http_client`: on asyncio with the
``aiohttp`` extra installed, the SDK's own ``DefaultAioHttpClient`` (aiohttp's
connection pool and compiled parser under the SDK's httpx interface: about 15% less
CPU a request over loopback at ``scripts/scale.py``'s 1,000-2,000 nodes); otherwise,
and always on trio (aiohttp runs on asyncio only), its ``DefaultAsyncHttpxClient``.

The API key is held only by the SDK client; it never appears in logs, events,
reports or errors (error text is scrubbed of it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anthropic
import attrs
import httpx2
import sniffio

from runtime.contract.in_flight import COUNTS_IN_FLIGHT, DEFAULT_MAX_IN_FLIGHT, InFlight
from runtime.contract.progress import current_progress
from runtime.contract.provider import AttemptFailed, ProviderError, ProviderReply, count_body, count_payload
from runtime.contract.retry import DEFAULT_MAX_RETRIES
from runtime.providers.key_destination import node_header_for
from runtime.providers.sse_reply import ErrorEvent, ReplyAssembler, SseDecoder, stream_events
from runtime.request.compiler import Request
from runtime.values.image_rules import MESSAGES_IMAGES, ImageRule
from runtime.values.scrub import scrub_secret
from runtime.values.server_edits import betas_for
from runtime.values.usage import Usage

NODE_HEADER = "x-foldline-node"

STREAM_ERROR_STATUS = {
    "overloaded_error": 529,
    "api_error": 500,
    "rate_limit_error": 429,
    "timeout_error": 504,
}
"""The status a mid-stream ``error`` event counts as for the retry rules (its HTTP status was already 200)."""

HTTP_CLIENTS = ("auto", "httpx", "aiohttp")
"""The SDK HTTP clients :func:`http_client` can give: ``auto`` is aiohttp on asyncio when installed, else httpx."""

TextProgress = Callable[[str], None]
"""Receives each text delta of a streamed reply as it arrives (progress only; never recorded)."""


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
    progress: TextProgress | None = attrs.field(default=None, kw_only=True)
    counts_tokens: bool = True
    """The Messages API's free ``messages/count_tokens`` endpoint (the simulator serves it too)."""
    image_rule: ImageRule = MESSAGES_IMAGES
    """Images cost what the Messages API says (pixels / 750 after its resize)."""
    node_header: bool = attrs.field(default=False, kw_only=True)
    """Send the node id as the ``x-foldline-node`` header: only to the simulator (it picks the node's
    script by it); a real API, or any other server, never learns the flow's node names."""
    in_flight: InFlight = attrs.field(factory=lambda: InFlight(DEFAULT_MAX_IN_FLIGHT), kw_only=True)
    """Messages out at once, shared by every sender through this provider (:mod:`runtime.contract.in_flight`)."""
    counting: InFlight = attrs.field(factory=lambda: InFlight(COUNTS_IN_FLIGHT), kw_only=True)
    """Count-tokens calls out at once: slots of their own, never behind a long generation."""

    @classmethod
    def create(
        cls,
        *,
        api_key: str,
        base_url: str | None = None,
        name: str = "anthropic",
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: float = 600.0,
        node_header: bool | None = None,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        http: str = "auto",
    ) -> AnthropicProvider:
        """A provider for ``base_url`` with at most ``max_in_flight`` messages out (and a few counts), over a pool
        of that size; ``node_header`` None: only to a loopback ``base_url`` (a simulator,
        :func:`~runtime.providers.key_destination.node_header_for`), never to the API; ``http``: one of
        :data:`HTTP_CLIENTS` (:func:`http_client`)."""
        if not api_key:
            raise ProviderError("no API key: set ANTHROPIC_API_KEY (or the scenario's api_key_env)")
        header = node_header_for(base_url) if node_header is None else node_header
        in_flight = InFlight(max_in_flight)
        # The SDK's own pool holds up to 1,000 connections and scans them all at every request's
        # start and end; sized to the requests that can be out, it never holds one it cannot use.
        client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            timeout=timeout,
            http_client=http_client(http, connections=max_in_flight + COUNTS_IN_FLIGHT, timeout=timeout),
        )
        return cls(client, api_key, name=name, max_retries=max_retries, node_header=header, in_flight=in_flight)

    def scrub(self, text: str) -> str:
        """``text`` without this provider's key, masked and partial forms too (:mod:`runtime.values.scrub`)."""
        return self._scrub(text)

    def _scrub(self, text: str) -> str:
        return scrub_secret(text, self._secret)  # masked and partial forms too (runtime.values.scrub)

    async def count_tokens(self, request: Request) -> int:
        """The provider's input-token count of ``request`` (``client.messages.count_tokens``), one attempt.

        Any failure is a :class:`ProviderError` (scrubbed of the key); the
        caller falls back to a conservative figure rather than retrying.
        """
        return await self.count_payload_tokens(count_payload(request))

    async def count_payload_tokens(self, payload: Mapping[str, Any]) -> int:
        """:meth:`count_tokens` of a create payload (a host that carries payloads: a Temporal worker)."""
        try:
            body = count_body(payload)
            async with self.counting:
                if "context_management" in body:  # the beta endpoint, naming the betas its edits need
                    betas = list(betas_for(body["context_management"].get("edits") or ()))
                    tokens = (await self._client.beta.messages.count_tokens(**body, betas=betas)).input_tokens
                else:
                    tokens = (await self._client.messages.count_tokens(**body)).input_tokens
        except anthropic.APIStatusError as exc:
            error_type = _error_type(exc.body)
            failure = f"count_tokens: HTTP {exc.status_code} {error_type or ''}: {_error_message(exc)}"
            raise ProviderError(self._scrub(failure), status=exc.status_code, error_type=error_type) from None
        except (anthropic.AnthropicError, httpx2.TransportError, ValueError, TypeError, AttributeError) as exc:
            failure = f"count_tokens: {type(exc).__name__}: {exc}"
            raise ProviderError(self._scrub(failure), error_type="connection_error") from None
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise ProviderError(
                f"count_tokens: input_tokens {tokens!r} is not a count", error_type="malformed_response"
            )
        return tokens

    async def send(self, request: Request, *, node_id: str | None) -> ProviderReply:
        """Send one attempt; a failed one raises :class:`AttemptFailed` for the pipeline's retry rules."""
        return await self.send_payload(request.payload(), node_id=node_id)

    async def send_payload(self, payload: dict[str, Any], *, node_id: str | None) -> ProviderReply:
        """Send one attempt of a compiled request's payload (a host that carries payloads, not requests)."""
        async with self.in_flight:  # the slot is held until the stream is read to its end
            return await self._stream(payload, node_id)

    async def _stream(self, payload: dict[str, Any], node_id: str | None) -> ProviderReply:
        headers = {NODE_HEADER: node_id} if node_id and self.node_header else {}
        assembler = ReplyAssembler(beta=payload.get("context_management") is not None)
        response: Any = None
        try:
            async with self._open(payload, headers) as response:
                await self._read(response.http_response, assembler)
            if assembler.events and not assembler.stopped:
                raise AttemptFailed(
                    f"stream cut: it ended after {len(assembler.events)} event(s) without message_stop",
                    status=None,
                    error_type="connection_error",
                )
            if not assembler.events:
                raise ProviderError(
                    "malformed response body from the provider: it carries no server-sent events",
                    status=200,
                    error_type="malformed_response",
                )
            message = assembler.final()
        except ErrorEvent as event:  # the HTTP status was already 200: the error's type says which it counts as
            error_type = _error_type(event.body)
            status = STREAM_ERROR_STATUS.get(error_type or "", 500)
            failure = f"HTTP {status} mid-stream {error_type or ''}: {_body_message(event.body, event.message)}"
            headers_in = dict(response.http_response.headers) if response is not None else {}
            raise AttemptFailed(
                self._scrub(failure.strip()), status=status, error_type=error_type, headers=headers_in
            ) from None
        except anthropic.APIStatusError as exc:
            error_type = _error_type(exc.body)
            failure = f"HTTP {exc.status_code} {error_type or ''}: {_error_message(exc)}".strip()
            raise AttemptFailed(
                self._scrub(failure), status=exc.status_code, error_type=error_type, headers=dict(exc.response.headers)
            ) from None
        except (anthropic.APIConnectionError, httpx2.TransportError) as exc:
            where = "stream cut" if response is not None else "connection error"
            failure = f"{where}: {type(exc).__name__}: {exc}"
            raise AttemptFailed(self._scrub(failure), status=None, error_type="connection_error") from None
        except (ValueError, KeyError, TypeError, anthropic.AnthropicError) as exc:
            raise ProviderError(
                self._scrub(f"malformed response stream from the provider: {type(exc).__name__}: {exc}"),
                status=200,
                error_type="malformed_response",
            ) from exc
        return self._reply(message)

    async def _read(self, http: httpx2.Response, assembler: ReplyAssembler) -> None:
        """Fold the response's events into ``assembler`` as they arrive, each text and thinking piece to
        the progress hooks; an ``error`` event raises :class:`ErrorEvent`."""
        text_progress, pieces = self.progress, current_progress()
        decoder = SseDecoder()

        def fold(decoded: list[tuple[str | None, str]]) -> None:
            for event in stream_events(decoded):
                piece = assembler.add(event)
                if piece is None:
                    continue
                if piece[0] == "text" and text_progress is not None:
                    text_progress(piece[1])
                if pieces is not None:
                    pieces(*piece)

        async for chunk in http.aiter_bytes():
            fold(decoder.feed(chunk))
        fold(decoder.end())

    def _open(self, payload: dict[str, Any], headers: dict[str, str]) -> Any:
        """The SDK's raw streamed response to ``payload`` (its events are read here, not by the SDK's models):
        the beta endpoint, naming the betas, when the payload carries server-side ``context_management``
        (the stable Messages API has no such field)."""
        managed = payload.get("context_management")
        if managed is None:
            return self._client.messages.with_streaming_response.create(**payload, stream=True, extra_headers=headers)
        betas = list(betas_for(managed.get("edits") or ()))
        return self._client.beta.messages.with_streaming_response.create(
            **payload, betas=betas, stream=True, extra_headers=headers
        )

    def _reply(self, message: Any) -> ProviderReply:
        try:
            body = message.model_dump(mode="json")
            content = tuple(_as_sent(block, raw) for block, raw in zip(body["content"], message.content, strict=True))
            usage = Usage.from_anthropic(body["usage"])
        except Exception as exc:  # a message the SDK assembled but that lacks what a reply needs
            raise ProviderError(
                self._scrub(f"malformed response body from the provider: {type(exc).__name__}: {exc}"),
                status=200,
                error_type="malformed_response",
            ) from exc
        return ProviderReply(
            content=content,
            stop_reason=body.get("stop_reason"),
            usage=usage,
            model=body.get("model", ""),
            response_id=body.get("id"),
            context_management=body.get("context_management"),
        )

    async def aclose(self) -> None:
        await self._client.close()


def http_client(choice: str, *, connections: int, timeout: float) -> httpx2.AsyncClient:
    """The SDK's HTTP client for ``choice`` (one of :data:`HTTP_CLIENTS`), its pool sized to ``connections``.

    ``aiohttp`` (the SDK's ``DefaultAioHttpClient``, extra ``aiohttp``) runs on asyncio only; ``auto`` takes it
    when this runs on asyncio and it is installed, and httpx (``DefaultAsyncHttpxClient``) otherwise. Both keep
    the SDK's request building, headers, errors and retries-off; a transport error of either is an httpx one.
    """
    if choice not in HTTP_CLIENTS:
        raise ProviderError(f"http_client: {choice!r} is not one of {', '.join(HTTP_CLIENTS)}")
    pool = httpx2.Limits(max_connections=connections, max_keepalive_connections=connections)
    if choice != "httpx":
        try:
            library = sniffio.current_async_library()
        except sniffio.AsyncLibraryNotFoundError:
            library = None
        if library == "asyncio":
            try:
                return anthropic.DefaultAioHttpClient(limits=pool, timeout=timeout)
            except RuntimeError as exc:  # the SDK's word for "the aiohttp extra is not installed"
                if choice == "aiohttp":
                    raise ProviderError(f"http_client 'aiohttp': {exc} (pip install 'foldline[aiohttp]')") from None
        elif choice == "aiohttp":
            raise ProviderError(
                f"http_client 'aiohttp' runs on asyncio only; this runs on {library or 'no event loop'}"
            )
    return anthropic.DefaultAsyncHttpxClient(limits=pool, timeout=timeout)


def _as_sent(block: dict[str, Any], raw: Any) -> dict[str, Any]:
    """A block as the API sent it: the stream helper adds ``parsed_output`` to text blocks, and a ``compaction``
    block keeps exactly the fields the server sent (it goes back unchanged), not the SDK's defaults."""
    if block.get("type") == "compaction":
        return dict(raw.model_dump(mode="json", exclude_unset=True))
    block = dict(block)
    block.pop("parsed_output", None)
    return block


def _error_type(body: Any) -> str | None:
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return error.get("type")
    return None


def _error_message(exc: anthropic.APIStatusError) -> str:
    return _body_message(exc.body, str(exc.message))


def _body_message(body: Any, otherwise: str) -> str:
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("message", ""))
    return otherwise
