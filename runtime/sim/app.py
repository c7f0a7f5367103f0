"""The simulated Messages API: routes, auth, faults, validation, caching and the model behind it.

:class:`SimApp` turns one :class:`~runtime.sim.http.HttpRequest` into a
response (or ``None``, to drop the connection). It reads time only through
the injected ``clock`` and waits only through the injected ``sleep``, so a
manual clock makes the whole server run on virtual time.

Routes: ``POST /v1/messages`` (JSON, or server-sent events with
``"stream": true``), ``POST /v1/messages/count_tokens``,
``POST /v1/chat/completions`` (the chat-completions face, :mod:`runtime.sim.chat`), ``GET /v1/models``,
``GET /v1/models/{id}``, and the admin routes under ``/_foldline/``. Every
response carries a fresh ``request-id`` (``req_`` + 24 random characters).

Who answers a ``/v1/messages`` request: the policy of the node its
``x-foldline-node`` header names (a script advances per conversation, see
:mod:`runtime.sim.conversations`); with no header, the registry's default
policy (``foldline sim`` makes it :class:`~runtime.scripted.default_model.DefaultModel`, one tool per
instruction;
a registry without one refuses such requests with a 400).

Generation limits (:mod:`runtime.sim.generation`): ``stop_sequences`` cut
every reply; ``max_tokens`` cuts every reply except a script's step, which is
answered whole (a script is its author's exact transcript; foldline's
scenario scripts are written without regard to ``max_tokens``).
"""

from __future__ import annotations

import secrets
import string
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import parse_qsl

import anyio
import anyio.to_thread
import attrs

from runtime.logs import get_logger
from runtime.scripted.default_model import DefaultModel, with_request_tool_ids
from runtime.scripted.faults import ERROR_KINDS, ERROR_MESSAGES, ERROR_TYPES, FaultRule, FaultSchedule
from runtime.scripted.policies import PolicyExhausted, PolicyRegistry, Reply, ScriptPolicy, UnknownPolicy
from runtime.sim.admin import ADMIN_PREFIX, Admin
from runtime.sim.cache_engine import CacheEngine, CacheEntry, CacheOutcome
from runtime.sim.chat.cache import ChatCacheOutcome
from runtime.sim.chat.face import CHAT_PATH, SESSION_HEADER, ChatFace, chat_error_response
from runtime.sim.compaction import CompactEdit, compact_edit, compacted, compaction_block, iteration, summary_of
from runtime.sim.config import SimConfig
from runtime.sim.context_edits import check_betas
from runtime.sim.conversations import ConversationScripts
from runtime.sim.diagnostics import FingerprintLog, cache_miss_reason, fingerprint, previous_id
from runtime.sim.errors import SimAPIError, invalid_request
from runtime.sim.generation import finish
from runtime.sim.http import HttpRequest, HttpResponse, Response, StreamingResponse
from runtime.sim.layout import Layout, build_layout
from runtime.sim.models import list_models, model_facts
from runtime.sim.prepare import Decoded, Prepared, decode_body, prepare
from runtime.sim.server_tools import refuse_server_tool_calls
from runtime.sim.streaming import encode_sse, error_event, message_events
from runtime.sim.structured import structured_reply
from runtime.sim.thinking import ThinkingSigner
from runtime.sim.tokens import SimTokenCounter
from runtime.values.canonical import canonical_bytes, sha256_hex
from runtime.values.server_edits import COMPACTION_STOP
from runtime.values.usage import Usage

MESSAGES_PATH = "/v1/messages"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
BATCHES_PATH = "/v1/messages/batches"
MODELS_PATH = "/v1/models"
NODE_HEADER = "x-foldline-node"
VERSION_HEADER = "anthropic-version"
BETA_HEADER = "anthropic-beta"
NO_USAGE: Mapping[str, Any] = {
    "input_tokens": 0,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
    "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
    "output_tokens": 0,
}
"""The top-level usage of a response paused after its compaction (a compaction's tokens are only in iterations)."""


@attrs.frozen
class Answered:
    """A response's content, stop and usage, and the request and cache outcome of its last pass."""

    content: list[dict[str, Any]]
    stop_reason: str | None
    stop_sequence: str | None
    usage: dict[str, Any]
    payload: Mapping[str, Any]
    layout: Layout
    outcome: CacheOutcome


STREAM_FAULT_MESSAGE = "Overloaded (simulated mid-stream fault)"
_ID_ALPHABET = string.ascii_letters + string.digits

log = get_logger("foldline.sim")

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]
T = TypeVar("T")


def new_request_id() -> str:
    """A fresh request id: ``req_`` and 24 random base-62 characters."""
    return "req_" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(24))


def key_scope(api_key: str) -> str:
    """The cache scope of an API key (a digest: the store never holds the key itself)."""
    return sha256_hex(f"foldline-sim-key:{api_key}")


@attrs.frozen
class RequestRecord:
    """One served request, for tests and reports. Never holds the API key."""

    request_id: str
    path: str
    node: str | None
    status: int | None
    """HTTP status answered; None when the connection was dropped without a response."""
    started_at: float
    payload_digest: str | None = None
    usage: Usage | None = None
    cache: CacheOutcome | None = None
    fault: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    stream: bool = False
    chat_cache: ChatCacheOutcome | None = None
    """What a chat-completions request read (its machine, prompt and cached tokens)."""


@attrs.define(eq=False)
class SimApp:
    """The request handler behind the simulated server."""

    config: SimConfig
    policies: PolicyRegistry
    clock: Clock
    sleep: Sleep
    admin: Admin | None = None
    engine: CacheEngine = attrs.field(factory=CacheEngine)
    counter: SimTokenCounter = attrs.field(
        default=attrs.Factory(lambda self: SimTokenCounter(token_factor=self.config.token_factor), takes_self=True)
    )
    _faults: FaultSchedule = attrs.field(
        default=attrs.Factory(lambda self: FaultSchedule(self.config.faults), takes_self=True), init=False
    )
    _log: deque[RequestRecord] = attrs.field(
        default=attrs.Factory(lambda self: deque(maxlen=self.config.request_log_limit), takes_self=True), init=False
    )
    _scripts: ConversationScripts = attrs.field(factory=ConversationScripts, init=False)
    _prints: FingerprintLog = attrs.field(factory=FingerprintLog, init=False)
    """The prompt fingerprints of recent responses, for ``diagnostics.previous_message_id``."""
    thinking: ThinkingSigner = attrs.field(
        default=attrs.Factory(
            lambda self: (
                ThinkingSigner() if self.config.thinking_key is None else ThinkingSigner(self.config.thinking_key)
            ),
            takes_self=True,
        )
    )
    chat: ChatFace = attrs.field(factory=ChatFace)
    """The chat-completions face (``POST /v1/chat/completions``, :mod:`runtime.sim.chat`)."""

    @property
    def requests(self) -> tuple[RequestRecord, ...]:
        """The most recent served requests, oldest first (bounded by ``request_log_limit``)."""
        return tuple(self._log)

    def cache_entries(self, api_key: str, model: str) -> tuple[CacheEntry, ...]:
        """The cache entries of (``api_key``, ``model``)."""
        return self.engine.entries(key_scope(api_key), model)

    async def handle(self, request: HttpRequest) -> Response | None:
        """Answer one request; ``None`` means: drop the connection without a response."""
        node = request.headers.get(NODE_HEADER) or None
        record = RequestRecord(new_request_id(), request.path, node, 200, self.clock())
        response: Response | None
        try:
            response, record = await self._route(request, record)
        except SimAPIError as err:
            response = _error_response(err, record.request_id)
            record = attrs.evolve(record, status=err.status, error_type=err.error_type, error_message=err.message)
        except Exception as exc:  # the server boundary: a bug becomes a logged 500, never a hang
            log.exception("sim.handler_failed", request_id=record.request_id, path=request.path)
            bug = SimAPIError(
                500, "api_error", f"simulated server bug: {type(exc).__name__}: {exc}", {"x-should-retry": "false"}
            )
            response = _error_response(bug, record.request_id)
            record = attrs.evolve(record, status=500, error_type=bug.error_type, error_message=bug.message)
        self._log.append(record)
        log.debug(
            "sim.request",
            request_id=record.request_id,
            path=request.path,
            node=node,
            status=record.status,
            fault=record.fault,
        )
        return response

    async def _route(self, request: HttpRequest, record: RequestRecord) -> tuple[Response | None, RequestRecord]:
        path, request_id = request.path, record.request_id
        method = "GET" if request.method == "HEAD" else request.method  # HEAD: GET's status and headers, no body
        if path.startswith(ADMIN_PREFIX):
            if self.admin is None:
                raise SimAPIError(
                    404, "not_found_error", f"Not found: {method} {path} (this server has no admin routes)"
                )
            return _json_response(200, self.admin.answer(request, self.clock()), request_id), record
        if method == "GET" and (path == MODELS_PATH or path.startswith(MODELS_PATH + "/")):
            self._authenticate(request.headers)
            if path == MODELS_PATH:
                return _json_response(200, list_models(dict(parse_qsl(request.query))), request_id), record
            return _json_response(200, model_facts(path[len(MODELS_PATH) + 1 :]).info(), request_id), record
        if method == "POST" and path == CHAT_PATH:
            return await self._chat(request, record)
        if path == BATCHES_PATH or path.startswith(BATCHES_PATH + "/"):
            raise SimAPIError(
                404, "not_found_error", f"{method} {path}: message batches are not simulated by foldline's simulator"
            )
        if method != "POST" or path not in (MESSAGES_PATH, COUNT_TOKENS_PATH):
            raise SimAPIError(404, "not_found_error", f"Not found: {method} {path}")
        api_key = self._authenticate(request.headers)
        if not request.headers.get(VERSION_HEADER):
            raise invalid_request(f"{VERSION_HEADER}: header is required")
        decoded = await self._offload(len(request.body), decode_body, request.body)
        record = attrs.evolve(record, payload_digest=decoded.payload_digest)
        check_betas(decoded.body, request.headers.get(BETA_HEADER, ""))
        if path == COUNT_TOKENS_PATH:
            prepared = await self._prepare(decoded, len(request.body), count_only=True)
            model_facts(prepared.payload["model"])
            counted: dict[str, Any] = {"input_tokens": prepared.layout.total_tokens}
            if prepared.original_tokens is not None:
                counted["context_management"] = {"original_input_tokens": prepared.original_tokens}
            return _json_response(200, counted, request_id), record
        streams = isinstance(decoded.body, dict) and decoded.body.get("stream") is True
        count, rule = self._faults.next_request(record.node)
        if rule is not None:
            record = attrs.evolve(record, fault=rule.kind)
        if rule is not None and (
            rule.kind not in ("slow", "stream_error") or (rule.kind == "stream_error" and not streams)
        ):
            return _fault_response(rule, record, count)
        extra_delay = rule.delay_s if rule is not None and rule.delay_s is not None else 0.0
        broken = rule is not None and rule.kind == "stream_error"
        prepared = await self._prepare(decoded, len(request.body), count_only=False)
        return await self._create(prepared, api_key, record, extra_delay, broken)

    async def _chat(self, request: HttpRequest, record: RequestRecord) -> tuple[Response | None, RequestRecord]:
        """A chat-completions request, answered (errors too) in OpenAI's shapes (:mod:`runtime.sim.chat`)."""
        try:
            api_key = self._authenticate(request.headers)
            decoded = await self._offload(len(request.body), decode_body, request.body)
            record = attrs.evolve(record, payload_digest=decoded.payload_digest)
            chat = await self._offload(len(request.body), self.chat.read, decoded.body)
            count, rule = self._faults.next_request(record.node)
            if rule is not None:
                record = attrs.evolve(record, fault=rule.kind)
                if rule.kind not in ("slow", "stream_error") or (rule.kind == "stream_error" and not chat.stream):
                    return _chat_fault(rule, record, count)
            served = await self.chat.create(
                chat,
                scope=key_scope(api_key),
                session_header=request.headers.get(SESSION_HEADER) or None,
                node=record.node,
                request_id=record.request_id,
                answer=lambda payload, node: self._reply(payload, node, record.request_id),
                signer=self.thinking,
                counter=self.counter,
                now=record.started_at,
                delay=self.config.latency_s + (rule.delay_s if rule is not None and rule.delay_s else 0.0),
                sleep=self.sleep,
                broken=rule is not None and rule.kind == "stream_error",
            )
        except SimAPIError as err:
            evolved = attrs.evolve(record, status=err.status, error_type=err.error_type, error_message=err.message)
            return chat_error_response(err, record.request_id), evolved
        outcome = served.cache
        usage = Usage(outcome.prompt_tokens - outcome.cached_tokens, outcome.cached_tokens, 0, 0, served.output_tokens)
        return served.response, attrs.evolve(record, usage=usage, chat_cache=outcome, stream=served.stream)

    async def _offload(self, size: int, func: Callable[..., T], *args: Any) -> T:
        """Run ``func`` here for small bodies, in a worker thread for large ones."""
        if size < self.config.thread_tokenize_bytes:
            return func(*args)
        return await anyio.to_thread.run_sync(func, *args)

    async def _prepare(self, decoded: Decoded, size: int, *, count_only: bool) -> Prepared:
        def run() -> Prepared:
            return prepare(
                decoded.body,
                count_only=count_only,
                counter=self.counter,
                lookback_collapse=self.config.lookback_collapse,
            )

        return await self._offload(size, run)

    def _authenticate(self, headers: Mapping[str, str]) -> str:
        key = headers.get("x-api-key", "").strip()
        if not key:
            authorization = headers.get("authorization", "")
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() == "bearer":
                key = value.strip()
        if not key:
            raise SimAPIError(
                401, "authentication_error", "missing API key: send an x-api-key header or Authorization: Bearer"
            )
        if self.config.api_keys is not None and key not in self.config.api_keys:
            raise SimAPIError(401, "authentication_error", "invalid x-api-key")
        return key

    async def _create(
        self, prepared: Prepared, api_key: str, record: RequestRecord, extra_delay: float, broken: bool
    ) -> tuple[Response, RequestRecord]:
        payload = prepared.payload
        facts = model_facts(payload["model"])
        if prepared.layout.total_tokens > facts.context_window:
            raise invalid_request(
                f"prompt is too long: {prepared.layout.total_tokens} tokens > {facts.context_window} maximum"
            )
        self.thinking.verify(prepared.signed)
        delay = self.config.latency_s + extra_delay

        def cache(layout: Layout) -> CacheOutcome:
            return self.engine.apply(
                key_scope(api_key),
                layout,
                min_tokens=facts.min_cacheable_tokens,
                now=record.started_at,
                readable_at=record.started_at + delay,
            )

        answered = self._answer(prepared, record, cache)
        message = {
            "id": "msg_" + sha256_hex(f"message:{record.request_id}:{record.payload_digest}")[:24],
            "type": "message",
            "role": "assistant",
            "model": payload["model"],
            "content": answered.content,
            "stop_reason": answered.stop_reason,
            "stop_sequence": answered.stop_sequence,
            "stop_details": None,
            "usage": answered.usage,
        }
        asked, named = previous_id(payload)
        printed = fingerprint(answered.payload, answered.layout)
        if asked:
            previous = self._prints.get(named) if named is not None else None
            reason = cache_miss_reason(previous, printed) if named is not None else None
            message["diagnostics"] = {"cache_miss_reason": reason} if reason is not None else None
        self._prints.remember(message["id"], printed)
        if prepared.original_tokens is not None:
            message["context_management"] = {"applied_edits": list(prepared.applied_edits)}
        if delay > 0:
            await self.sleep(delay)
        streams = payload.get("stream") is True
        record = attrs.evolve(
            record, usage=Usage.from_anthropic(answered.usage), cache=answered.outcome, stream=streams
        )
        if not streams:
            return _json_response(200, message, record.request_id), record
        request_id = record.request_id
        return (
            StreamingResponse(200, lambda: _sse_chunks(message, request_id, broken), (("request-id", request_id),)),
            record,
        )

    def _answer(self, prepared: Prepared, record: RequestRecord, cache: Callable[[Layout], CacheOutcome]) -> Answered:
        """The response's content and usage: a compaction pass first when the request's edit fires
        (:mod:`runtime.sim.compaction`), then the model's reply to what it sees."""
        payload, layout = prepared.payload, prepared.layout
        edit = compact_edit(payload)
        block: dict[str, Any] | None = None
        passes: list[dict[str, Any]] = []
        if edit is not None and layout.total_tokens >= edit.trigger:
            block = compaction_block(self._summary(prepared, record, edit))
            outcome = cache(layout)
            summary_tokens = self.counter.block_tokens(block)
            passes.append(iteration("compaction", {**outcome.usage_fields(), "output_tokens": summary_tokens}))
            if edit.pause:
                usage = {**NO_USAGE, "iterations": passes, "service_tier": "standard"}
                return Answered([block], COMPACTION_STOP, None, usage, payload, layout, outcome)
            payload = compacted(payload, block)
            layout = build_layout(payload, self.counter, lookback_collapse=self.config.lookback_collapse)
        reply, scripted = self._reply(prepared.asked, record.node, record.request_id)
        finished = finish(self.thinking.sign_reply(reply, payload), payload, self.counter, whole=scripted)
        outcome = cache(layout)
        usage = {**outcome.usage_fields(), "output_tokens": finished.output_tokens, "service_tier": "standard"}
        content = list(finished.content)
        if block is not None:
            usage["iterations"] = [*passes, iteration("message", usage)]
            content = [block, *content]
        return Answered(content, finished.stop_reason, finished.stop_sequence, usage, payload, layout, outcome)

    def _summary(self, prepared: Prepared, record: RequestRecord, edit: CompactEdit) -> str:
        """The summary a compaction writes: the one the node's script gives for it, else the simulator's own."""
        try:
            policy = self.policies.policy_for(record.node)
        except UnknownPolicy:
            policy = None
        if isinstance(policy, ScriptPolicy):
            given = self._scripts.compaction_summary(policy, prepared.asked)
            if given is not None:
                return given
        return summary_of(prepared.payload, edit.instructions)

    def _reply(self, payload: Mapping[str, Any], node: str | None, request_id: str = "") -> tuple[Reply, bool]:
        """The policy's reply, and whether it is a script's step (answered whole)."""
        if payload["max_tokens"] == 0:
            # A cache pre-warm: no generation, and no scripted step is used up.
            return Reply(content=(), stop_reason="max_tokens", output_tokens=0), False
        try:
            policy = self.policies.policy_for(node)
        except UnknownPolicy as exc:
            raise invalid_request(f"{NODE_HEADER}: {exc}") from exc
        try:
            if isinstance(policy, ScriptPolicy):
                return refuse_server_tool_calls(self._scripts.respond(policy, payload), payload), True
            reply = structured_reply(policy.respond(payload), payload)
            if isinstance(policy, DefaultModel) and policy.request_unique_ids:
                # Its ids derive from the messages; two conversations with the same messages must not share them.
                reply = with_request_tool_ids(reply, request_id)
            return reply, False
        except PolicyExhausted as exc:
            raise SimAPIError(500, "api_error", str(exc), {"x-should-retry": "false"}) from exc


async def _sse_chunks(message: Mapping[str, Any], request_id: str, broken: bool) -> AsyncIterator[bytes]:
    """The message as server-sent events; ``broken`` ends it with an ``error`` event after the first delta."""
    for event, data in message_events(message):
        if broken and event == "message_delta":
            yield encode_sse(*error_event("overloaded_error", STREAM_FAULT_MESSAGE, request_id))
            return
        yield encode_sse(event, data)
        if broken and event == "content_block_delta":
            yield encode_sse(*error_event("overloaded_error", STREAM_FAULT_MESSAGE, request_id))
            return


def _fault_response(rule: FaultRule, record: RequestRecord, count: int) -> tuple[Response | None, RequestRecord]:
    """The answer of a faulted request: an error envelope, a malformed 200, or None (drop)."""
    where = f"request {count} of node {record.node!r}" if record.node else f"request {count}"
    kind = "529" if rule.kind == "stream_error" else rule.kind
    if kind in ERROR_KINDS:
        err = SimAPIError(int(kind), ERROR_TYPES[kind], f"{ERROR_MESSAGES[kind]} on {where}", rule.headers())
        evolved = attrs.evolve(record, status=err.status, error_type=err.error_type, error_message=err.message)
        return _error_response(err, record.request_id), evolved
    if kind == "malformed":
        truncated = b'{"id":"msg_malformed","type":"message","role":"assistant","content":[{"type":"text","text":"'
        return HttpResponse(200, truncated, (("request-id", record.request_id),)), record
    if kind == "drop":
        return None, attrs.evolve(record, status=None)
    raise ValueError(f"_fault_response: fault kind {rule.kind!r} answers normally and has no fault response")


def _chat_fault(rule: FaultRule, record: RequestRecord, count: int) -> tuple[Response | None, RequestRecord]:
    """A faulted chat request: an error kind raises its error (answered in OpenAI's envelope), or as on /v1/messages."""
    kind = "529" if rule.kind == "stream_error" else rule.kind
    if kind in ERROR_KINDS:
        where = f"request {count} of node {record.node!r}" if record.node else f"request {count}"
        raise SimAPIError(int(kind), ERROR_TYPES[kind], f"{ERROR_MESSAGES[kind]} on {where}", rule.headers())
    if kind == "malformed":
        truncated = b'{"id":"chatcmpl-malformed","object":"chat.completion","choices":[{"message":{"content":"'
        return HttpResponse(200, truncated, (("x-request-id", record.request_id),)), record
    return _fault_response(rule, record, count)


def _json_response(status: int, body: Mapping[str, Any], request_id: str) -> HttpResponse:
    return HttpResponse(status, canonical_bytes(dict(body)), (("request-id", request_id),))


def _error_response(err: SimAPIError, request_id: str) -> HttpResponse:
    headers = (("request-id", request_id), *err.headers.items())
    return HttpResponse(err.status, canonical_bytes(err.envelope(request_id)), headers)


def protocol_error_response(status: int, error_type: str, message: str) -> HttpResponse:
    """The response for a request the HTTP layer could not read (a fresh request id, like every response)."""
    return _error_response(SimAPIError(status, error_type, message), new_request_id())
