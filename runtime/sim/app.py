"""The simulated Messages API: routes, auth, faults, validation, caching and the scripted model.

:class:`SimApp` turns one :class:`~runtime.sim.http.HttpRequest` into a
response (or ``None``, to drop the connection). It reads time only through
the injected ``clock`` and waits only through the injected ``sleep``, so a
manual clock makes the whole server run on virtual time.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import structlog

from runtime.canonical import canonical_bytes, digest, sha256_hex
from runtime.policies import PolicyExhausted, PolicyRegistry, Reply, UnknownPolicy
from runtime.sim.cache_engine import CacheEngine, CacheEntry, CacheOutcome
from runtime.sim.config import SimConfig
from runtime.sim.errors import SimAPIError, invalid_request
from runtime.sim.faults import ERROR_KINDS, ERROR_MESSAGES, ERROR_TYPES, FaultRule, FaultSchedule
from runtime.sim.http import HttpRequest, HttpResponse
from runtime.sim.layout import Layout, build_layout
from runtime.sim.models import model_facts
from runtime.sim.tokens import SimTokenCounter
from runtime.sim.validation import validate_request
from runtime.usage import Usage

MESSAGES_PATH = "/v1/messages"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
NODE_HEADER = "x-foldline-node"

log = structlog.get_logger("foldline.sim")

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


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


@attrs.define(eq=False)
class SimApp:
    """The request handler behind the simulated server."""

    config: SimConfig
    policies: PolicyRegistry
    clock: Clock
    sleep: Sleep
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
    _serial: int = attrs.field(default=0, init=False)

    @property
    def requests(self) -> tuple[RequestRecord, ...]:
        """The most recent served requests, oldest first (bounded by ``request_log_limit``)."""
        return tuple(self._log)

    def cache_entries(self, api_key: str, model: str) -> tuple[CacheEntry, ...]:
        """The cache entries of (``api_key``, ``model``)."""
        return self.engine.entries(key_scope(api_key), model)

    async def handle(self, request: HttpRequest) -> HttpResponse | None:
        """Answer one request; ``None`` means: drop the connection without a response."""
        start = self.clock()
        self._serial += 1
        request_id = "req_" + sha256_hex(f"request:{self._serial}")[:24]
        node = request.headers.get(NODE_HEADER) or None
        record = RequestRecord(request_id, request.path, node, 200, start)
        response: HttpResponse | None
        try:
            if request.method != "POST" or request.path not in (MESSAGES_PATH, COUNT_TOKENS_PATH):
                raise SimAPIError(404, "not_found_error", f"Not found: {request.method} {request.path}")
            api_key = self._authenticate(request.headers)
            body = _decode_json(request.body)
            record = attrs.evolve(record, payload_digest=digest(body))
            if request.path == COUNT_TOKENS_PATH:
                response = self._count_tokens(body, request_id)
            else:
                count, rule = self._faults.next_request(node)
                if rule is not None:
                    record = attrs.evolve(record, fault=rule.kind)
                if rule is not None and rule.kind != "slow":
                    response = _fault_response(rule, request_id, node, count)
                    record = attrs.evolve(record, status=None if response is None else response.status)
                else:
                    extra_delay = rule.delay_s if rule is not None and rule.delay_s is not None else 0.0
                    response, record = await self._create(body, api_key, record, extra_delay)
        except SimAPIError as err:
            response = _error_response(err, request_id)
            record = attrs.evolve(record, status=err.status, error_type=err.error_type, error_message=err.message)
        except Exception as exc:  # the server boundary: a bug becomes a logged 500, never a hang
            log.exception("sim.handler_failed", request_id=request_id, path=request.path)
            bug = SimAPIError(
                500, "api_error", f"simulated server bug: {type(exc).__name__}: {exc}", {"x-should-retry": "false"}
            )
            response = _error_response(bug, request_id)
            record = attrs.evolve(record, status=500, error_type=bug.error_type, error_message=bug.message)
        self._log.append(record)
        log.debug(
            "sim.request", request_id=request_id, path=request.path, node=node, status=record.status, fault=record.fault
        )
        return response

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

    def _layout(self, payload: Mapping[str, Any]) -> Layout:
        return build_layout(payload, self.counter, lookback_collapse=self.config.lookback_collapse)

    def _count_tokens(self, body: Any, request_id: str) -> HttpResponse:
        payload = validate_request(body, count_only=True)
        model_facts(payload["model"])
        return _json_response(200, {"input_tokens": self._layout(payload).total_tokens}, request_id)

    async def _create(
        self, body: Any, api_key: str, record: RequestRecord, extra_delay: float
    ) -> tuple[HttpResponse, RequestRecord]:
        payload = validate_request(body)
        facts = model_facts(payload["model"])
        layout = self._layout(payload)
        if layout.total_tokens > facts.context_window:
            raise invalid_request(f"prompt is too long: {layout.total_tokens} tokens > {facts.context_window} maximum")
        reply = self._reply(payload, record.node)
        delay = self.config.latency_s + extra_delay
        outcome = self.engine.apply(
            key_scope(api_key),
            layout,
            min_tokens=facts.min_cacheable_tokens,
            now=record.started_at,
            readable_at=record.started_at + delay,
        )
        output_tokens = reply.output_tokens
        if output_tokens is None:
            output_tokens = self.counter.content_tokens(reply.content)
        usage = {**outcome.usage_fields(), "output_tokens": output_tokens, "service_tier": "standard"}
        message = {
            "id": "msg_" + sha256_hex(f"message:{record.request_id}:{record.payload_digest}")[:24],
            "type": "message",
            "role": "assistant",
            "model": payload["model"],
            "content": list(reply.content),
            "stop_reason": reply.stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }
        if delay > 0:
            await self.sleep(delay)
        record = attrs.evolve(record, usage=Usage.from_anthropic(usage), cache=outcome)
        return _json_response(200, message, record.request_id), record

    def _reply(self, payload: Mapping[str, Any], node: str | None) -> Reply:
        if payload["max_tokens"] == 0:
            # A cache pre-warm: no generation, and no scripted step is used up.
            return Reply(content=(), stop_reason="max_tokens", output_tokens=0)
        try:
            policy = self.policies.policy_for(node)
        except UnknownPolicy as exc:
            raise invalid_request(f"{NODE_HEADER}: {exc}") from exc
        try:
            return policy.respond(payload)
        except PolicyExhausted as exc:
            raise SimAPIError(500, "api_error", str(exc), {"x-should-retry": "false"}) from exc


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _decode_json(body: bytes) -> Any:
    try:
        return json.loads(body, parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise invalid_request(f"request body: not valid JSON ({exc})") from exc


def _fault_response(rule: FaultRule, request_id: str, node: str | None, count: int) -> HttpResponse | None:
    """The answer of a faulted request: an error envelope, a malformed 200, or None (drop)."""
    where = f"request {count} of node {node!r}" if node else f"request {count}"
    if rule.kind in ERROR_KINDS:
        message = f"{ERROR_MESSAGES[rule.kind]} on {where}"
        raise SimAPIError(int(rule.kind), ERROR_TYPES[rule.kind], message, rule.headers())
    if rule.kind == "malformed":
        truncated = b'{"id":"msg_malformed","type":"message","role":"assistant","content":[{"type":"text","text":"'
        return HttpResponse(200, truncated, (("request-id", request_id),))
    if rule.kind == "drop":
        return None
    raise ValueError(f"_fault_response: fault kind {rule.kind!r} answers normally and has no fault response")


def _json_response(status: int, body: Mapping[str, Any], request_id: str) -> HttpResponse:
    return HttpResponse(status, canonical_bytes(dict(body)), (("request-id", request_id),))


def _error_response(err: SimAPIError, request_id: str) -> HttpResponse:
    headers = (("request-id", request_id), *err.headers.items())
    return HttpResponse(err.status, canonical_bytes(err.envelope(request_id)), headers)


def protocol_error_response(status: int, error_type: str, message: str) -> HttpResponse:
    """The response for a request the HTTP layer could not read."""
    return _error_response(SimAPIError(status, error_type, message), "req_unreadable")
