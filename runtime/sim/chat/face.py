"""``POST /v1/chat/completions``: the simulator's chat-completions face.

:meth:`ChatFace.create` answers one authenticated request whose body was
decoded (the server's depth and size bounds already applied): it checks and
reads it (:mod:`runtime.sim.chat.wire`), counts its prompt (exactly for a
model OpenAI tokenizes with o200k_base, by the simulator's factor for any
other: :mod:`runtime.sim.chat.tokens`), refuses a prompt over the model's context window, reads
and writes the prefix cache (:mod:`runtime.sim.chat.cache`), asks the same
policy the Messages face asks (the answer function the app passes in), signs
its reasoning when the request asks for reasoning, applies ``max_tokens``
and stop rules (:func:`runtime.sim.generation.finish`), and answers whole or
streamed (:mod:`runtime.sim.chat.reply`).

Errors use OpenAI's envelope ``{"error": {"message", "type", "param",
"code"}}`` (:func:`chat_error_response`). The fault rules apply as on the
Messages face: an error kind answers its status in this envelope,
``stream_error`` cuts a stream with an ``error`` data line.

The face's settings: ``dialect`` (how its replies carry reasoning, one of
:data:`~runtime.sim.chat.reply.REASONING_DIALECTS`; ``none`` by default, as
OpenAI's chat completions) and the cache's machine count.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

import attrs

from runtime.scripted.policies import Reply
from runtime.sim.chat.cache import ChatCacheOutcome, ChatPrefixCache, prefix_digests
from runtime.sim.chat.reply import (
    FINISH_REASONS,
    REASONING_DIALECTS,
    completion_body,
    reply_message,
    stream_chunks,
    usage_body,
)
from runtime.sim.chat.tokens import REPLY_PRIMING, ExactCounter, counts_exactly
from runtime.sim.chat.wire import ChatAPIError, ChatRequest, chat_error, read_chat_request
from runtime.sim.errors import SimAPIError
from runtime.sim.generation import finish
from runtime.sim.http import HttpResponse, Response, StreamingResponse
from runtime.sim.models import DEFAULT_CONTEXT_WINDOW, model_facts
from runtime.sim.thinking import ThinkingSigner
from runtime.sim.tokens import MESSAGE_OVERHEAD_TOKENS, SimTokenCounter
from runtime.values.canonical import canonical_bytes, sha256_hex

CHAT_PATH = "/v1/chat/completions"
SESSION_HEADER = "x-session-id"
OPENAI_ERROR_TYPES = {
    "rate_limit_error": "rate_limit_exceeded",
    "overloaded_error": "server_error",
    "api_error": "server_error",
    "authentication_error": "invalid_request_error",
    "not_found_error": "invalid_request_error",
}

Answer = Callable[[Mapping[str, Any], "str | None"], tuple[Reply, bool]]
"""The policy's reply to a Messages payload for a node, and whether it is a script's step."""
Sleep = Callable[[float], Awaitable[None]]


def chat_error_response(err: SimAPIError, request_id: str) -> HttpResponse:
    """An error in OpenAI's envelope (``type`` is OpenAI's name for the error)."""
    error_type = OPENAI_ERROR_TYPES.get(err.error_type, err.error_type)
    body = {
        "error": {
            "message": err.message,
            "type": error_type,
            "param": err.param if isinstance(err, ChatAPIError) else None,
            "code": err.code if isinstance(err, ChatAPIError) else None,
        }
    }
    headers = (("x-request-id", request_id), *err.headers.items())
    return HttpResponse(err.status, canonical_bytes(body), headers)


def _check_dialect(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value not in REASONING_DIALECTS:
        raise ValueError(f"ChatFace.dialect: {value!r} is not one of {', '.join(REASONING_DIALECTS)}")


@attrs.frozen
class ChatServed:
    """What one chat request was answered with (for the request log)."""

    response: Response
    cache: ChatCacheOutcome
    output_tokens: int
    stream: bool


@attrs.define(eq=False)
class ChatFace:
    """The chat-completions face of one simulated server."""

    dialect: str = attrs.field(default="none", validator=_check_dialect)
    cache: ChatPrefixCache = attrs.field(factory=ChatPrefixCache)
    context_window: int = DEFAULT_CONTEXT_WINDOW
    exact: ExactCounter = attrs.field(factory=ExactCounter)
    """The o200k_base counts of a model counted exactly (:mod:`runtime.sim.chat.tokens`)."""

    def read(self, body: Any) -> ChatRequest:
        return read_chat_request(body)

    def prompt_segments(self, request: ChatRequest, counter: SimTokenCounter) -> tuple[tuple[str, int], ...]:
        """Each segment's prefix digest and its tokens (a message's framing and its images included).

        A model OpenAI tokenizes with o200k_base is counted as OpenAI documents
        (:mod:`runtime.sim.chat.tokens`); any other by the simulator's factor.
        """
        digests = prefix_digests(request.segments)
        if counts_exactly(request.model):
            images = request.counted[1:] if request.tools_json is not None else request.counted
            pairs = [(message, tokens) for message, (_, tokens) in zip(request.messages, images, strict=True)]
            return tuple(zip(digests, self.exact.segments(request.tools_json, pairs), strict=True))
        return tuple(
            (digest, counter.block_tokens({"segment": text}) + images + MESSAGE_OVERHEAD_TOKENS)
            for digest, (text, images) in zip(digests, request.counted, strict=True)
        )

    def trailing_tokens(self, request: ChatRequest) -> int:
        """Tokens a request counts after its last segment: the reply's priming, for a model counted exactly."""
        return REPLY_PRIMING if counts_exactly(request.model) else 0

    async def create(
        self,
        request: ChatRequest,
        *,
        scope: str,
        session_header: str | None,
        node: str | None,
        request_id: str,
        answer: Answer,
        signer: ThinkingSigner,
        counter: SimTokenCounter,
        now: float,
        delay: float,
        sleep: Sleep,
        broken: bool,
    ) -> ChatServed:
        """Answer one checked request (see the module docstring)."""
        segments = self.prompt_segments(request, counter)
        trailing = self.trailing_tokens(request)
        total = sum(tokens for _, tokens in segments) + trailing
        window = _window(request.model, self.context_window)
        if total > window:
            raise chat_error(
                f"This model's maximum context length is {window} tokens. However, your messages "
                f"resulted in {total} tokens.",
                param="messages",
                code="context_length_exceeded",
            )
        payload = request.payload
        signer.verify(payload)
        reply, scripted = answer(payload, node)
        signed = signer.sign_reply(reply, payload) if request.reasoning else reply
        finished = finish(signed, payload, counter, whole=scripted)
        key = request.cache_key if request.cache_key is not None else session_header
        outcome = self.cache.apply(
            scope, request.model, key, segments, now=now, readable_at=now + delay, trailing=trailing
        )
        thinking = [b for b in finished.content if b.get("type") == "thinking"]
        reasoning_tokens = counter.content_tokens(thinking) if thinking else 0
        message = reply_message(finished.content, self.dialect)
        finish_reason = FINISH_REASONS.get(finished.stop_reason, "stop")
        usage = usage_body(outcome.prompt_tokens, outcome.cached_tokens, finished.output_tokens, reasoning_tokens)
        completion_id = "chatcmpl-" + sha256_hex(f"chat:{request_id}")[:24]
        body = completion_body(completion_id, request.model, int(now), message, finish_reason, usage)
        if delay > 0:
            await sleep(delay)
        headers = (("x-request-id", request_id),)
        if not request.stream:
            response: Response = HttpResponse(200, canonical_bytes(body), headers)
        else:
            cut = {"message": "The server had an error (simulated mid-stream fault)", "type": "server_error"}
            include = request.include_usage

            async def events() -> Any:
                for chunk in _events(body, include, cut if broken else None):
                    yield chunk

            response = StreamingResponse(200, events, headers)
        return ChatServed(response, outcome, finished.output_tokens, request.stream)


def _events(body: Mapping[str, Any], include_usage: bool, broken: Mapping[str, Any] | None) -> Iterator[bytes]:
    return stream_chunks(body, include_usage=include_usage, broken=broken)


def _window(model: str, default: int) -> int:
    """The context window of a model the Messages face knows, else the face's default."""
    try:
        return model_facts(model).context_window
    except SimAPIError:
        return default
