"""The request compiler: the one place a request is assembled (pure).

:func:`compile_request` turns a branch's system text, tool set and view into a
:class:`Request`: the stable segment (tools, then system) and then the
messages, with every tool call followed by its result. It reads no clock, does
no I/O and keeps no state beyond a bounded memo of rendered blocks, so the same
inputs always give the same bytes.

The layout is already the cache-stable one:

- tools render once, from the branch's tool set, in the ``tools`` field;
- the system text is its own block in the ``system`` field, never folded into a
  user message;
- an instruction renders the same bytes whether it is the current turn or
  history; a round's tool results open the user message that follows the
  assistant message carrying their calls.

A request is held as canonical JSON *pieces* whose concatenation is exactly the
payload sent (:meth:`Request.payload_text`); measurement counts the pieces one
by one (each cached by content), so a request costs O(what is new).
"""

from __future__ import annotations

import functools
import json
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, Literal, Protocol

import attrs

from runtime.canonical import canonical_json, sha256_hex
from runtime.errors import FoldlineError
from runtime.messages import (
    AssistantResponse,
    ImagePart,
    Instruction,
    Message,
    Note,
    RedactedThinkingPart,
    SystemMessage,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolResult,
)
from runtime.thinking import CONTEXT_SEED, context_digest, extend_context

RECIPE_VERSION = 1
"""Version of the rendering rules; recorded with every request (for replay)."""

EMPTY_RESPONSE_TEXT = "(empty response)"
"""What an assistant response with no calls and only blank text renders as."""

Intent = Literal["continuing", "final", "side"]
Location = tuple[Any, ...]


class CompileError(FoldlineError):
    """The view cannot be rendered as a valid request (e.g. an orphaned call or result)."""


class ResultProjection(Protocol):
    """How a request renders tool results (the result bound, :mod:`runtime.fold.projection`).

    ``output_of`` gives the ``content`` a result's block carries;
    ``memo_key`` names everything besides the message that the output depends
    on (the same key must always give the same output).
    """

    def memo_key(self, result: ToolResult) -> Hashable: ...

    def output_of(self, result: ToolResult) -> str: ...


class MarkLike(Protocol):
    """A cache mark: where it goes and its lifetime ("5m" or "1h")."""

    @property
    def location(self) -> Location: ...

    @property
    def ttl(self) -> str: ...


@attrs.frozen
class ToolSpec:
    """A tool as the model sees it: name, description, JSON schema of its input."""

    name: str
    description: str
    input_schema_json: str = attrs.field(default='{"properties":{},"type":"object"}')
    _piece: str = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        # Rendered once: the same string object every request, so counting it is a cache hit.
        object.__setattr__(self, "_piece", canonical_json(self.render()))

    @classmethod
    def create(cls, name: str, description: str, input_schema: Mapping[str, Any]) -> ToolSpec:
        return cls(name, description, canonical_json(dict(input_schema)))

    def render(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": json.loads(self.input_schema_json),
        }

    def piece(self) -> str:
        return self._piece


@attrs.frozen
class RequestSettings:
    """What an operation decides about a request besides its content."""

    model: str
    max_tokens: int = 1024
    intent: Intent = "continuing"
    tool_choice_json: str | None = None
    thinking_json: str | None = None
    """The request's ``thinking`` field as canonical JSON (None: not sent)."""


@attrs.frozen
class Block:
    """One rendered content block: its canonical JSON and the message it came from.

    With images: ``count_json`` (their base64 left empty) and ``image_tokens`` (their estimate) are what is counted.
    """

    json: str
    kind: str
    source_id: str | None
    count_json: str | None = None
    image_tokens: int = 0


@attrs.frozen
class RenderedMessage:
    role: Literal["user", "assistant"]
    blocks: tuple[Block, ...]
    source_ids: tuple[str, ...]


def _with_cache_control(block_json: str, ttl: str) -> str:
    value = json.loads(block_json)
    value["cache_control"] = {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": "1h"}
    return canonical_json(value)


@functools.lru_cache(maxsize=64)
def _system_piece(system: str) -> str:
    return canonical_json({"type": "text", "text": system})


_CONTENT_OPEN = '{"content":['
_ROLE_CLOSE = {"user": '],"role":"user"}', "assistant": '],"role":"assistant"}'}


@attrs.frozen
class Request:
    """A compiled request: stable segment, messages, settings and cache marks.

    ``marks`` are placed by the cache placement step (empty when caching is
    off); they change only the ``cache_control`` fields of the marked blocks.
    """

    settings: RequestSettings
    tools: tuple[ToolSpec, ...]
    system: str | None
    messages: tuple[RenderedMessage, ...]
    marks: tuple[Any, ...] = ()
    recipe_version: int = RECIPE_VERSION
    # The payload text and digest, rendered once on first use: a send reads them
    # several times (the digest for events and records, the body for the provider).
    _text: str | None = attrs.field(default=None, init=False, eq=False, repr=False)
    _digest: str | None = attrs.field(default=None, init=False, eq=False, repr=False)

    def with_marks(self, marks: Sequence[MarkLike]) -> Request:
        return attrs.evolve(self, marks=tuple(marks))

    # -- pieces ---------------------------------------------------------------

    def _mark_map(self) -> dict[Location, str]:
        return {tuple(m.location): m.ttl for m in self.marks}

    def image_tokens(self) -> dict[str, int]:
        """The image estimate each message label carries (empty when the request has no images)."""
        out: dict[str, int] = {}
        for msg in self.messages:
            for block in msg.blocks:
                if block.image_tokens:
                    label = block.source_id or "envelope"
                    out[label] = out.get(label, 0) + block.image_tokens
        return out

    def pieces(self, *, counting: bool = False) -> tuple[tuple[str, str], ...]:
        """The payload as labelled canonical JSON pieces, in order.

        Labels are message ids for message blocks, ``"tools"``, ``"system"``
        or ``"envelope"`` otherwise. ``"".join`` of the texts is exactly
        :meth:`payload_text`. With ``counting``, image data is left empty (see :mod:`runtime.image_count`).
        """
        marks = self._mark_map()
        out: list[tuple[str, str]] = []
        s = self.settings
        out.append(("envelope", '{"max_tokens":' + str(s.max_tokens) + ',"messages":['))
        for mi, msg in enumerate(self.messages):
            out.append(("envelope", _CONTENT_OPEN if mi == 0 else "," + _CONTENT_OPEN))
            for bi, block in enumerate(msg.blocks):
                text = block.count_json if counting and block.count_json is not None else block.json
                ttl = marks.get(("messages", mi, bi))
                if ttl is not None:
                    text = _with_cache_control(text, ttl)
                if bi:
                    out.append(("envelope", ","))
                out.append((block.source_id or "envelope", text))
            out.append(("envelope", _ROLE_CLOSE[msg.role]))
        out.append(("envelope", '],"model":' + canonical_json(s.model)))
        if self.system is not None:
            text = _system_piece(self.system)
            ttl = marks.get(("system", 0))
            if ttl is not None:
                text = _with_cache_control(text, ttl)
            out.append(("envelope", ',"system":['))
            out.append(("system", text))
            out.append(("envelope", "]"))
        if s.thinking_json is not None:
            out.append(("envelope", ',"thinking":' + s.thinking_json))
        if s.tool_choice_json is not None:
            out.append(("envelope", ',"tool_choice":' + s.tool_choice_json))
        if self.tools:
            out.append(("envelope", ',"tools":['))
            for ti, tool in enumerate(self.tools):
                text = tool.piece()
                ttl = marks.get(("tools", ti))
                if ttl is not None:
                    text = _with_cache_control(text, ttl)
                if ti:
                    out.append(("envelope", ","))
                out.append(("tools", text))
            out.append(("envelope", "]"))
        out.append(("envelope", "}"))
        return tuple(out)

    def payload_text(self) -> str:
        """The canonical JSON text of the Anthropic payload (sorted keys, no whitespace)."""
        if self._text is None:
            object.__setattr__(self, "_text", "".join(text for _, text in self.pieces()))
        assert self._text is not None
        return self._text

    def payload_bytes(self) -> bytes:
        return self.payload_text().encode("utf-8")

    def payload(self) -> dict[str, Any]:
        """The Anthropic Messages payload as a fresh dict."""
        return json.loads(self.payload_text())

    @property
    def digest(self) -> str:
        """SHA-256 of the payload as sent (marks included)."""
        if self._digest is None:
            object.__setattr__(self, "_digest", sha256_hex(self.payload_bytes()))
        assert self._digest is not None
        return self._digest

    def context_digest(self) -> str:
        """The digest of the conversation this request carries; a reply records it (:mod:`runtime.thinking`)."""
        return context_digest((m.role, tuple(b.json for b in m.blocks)) for m in self.messages)

    def message_digests(self) -> tuple[str, ...]:
        """SHA-256 of each rendered message without marks (for prefix checks)."""
        return tuple(
            sha256_hex(msg.role + "\x00" + "\x1e".join(b.json for b in msg.blocks)) for msg in self.messages
        )


# -- rendering ------------------------------------------------------------------


class _BlockMemo:
    """A bounded memo of rendered blocks by message identity, content and projection key."""

    def __init__(self, max_entries: int = 200_000) -> None:
        self._max = max_entries
        self._entries: OrderedDict[tuple[str, str, Hashable], tuple[Block, ...]] = OrderedDict()

    def get(self, message: Message, variant: Hashable = None) -> tuple[Block, ...] | None:
        key = (message.id, message.sha256, variant)
        blocks = self._entries.get(key)
        if blocks is not None:
            self._entries.move_to_end(key)
        return blocks

    def put(self, message: Message, blocks: tuple[Block, ...], variant: Hashable = None) -> None:
        self._entries[(message.id, message.sha256, variant)] = blocks
        if len(self._entries) > self._max:
            self._entries.popitem(last=False)


_memo = _BlockMemo()


def _text_block(text: str, source_id: str) -> Block:
    return Block(canonical_json({"type": "text", "text": text}), "text", source_id)


def _tool_use_block(call: ToolCall, source_id: str) -> Block:
    text = (
        '{"id":' + canonical_json(call.call_id) + ',"input":' + call.arguments_json
        + ',"name":' + canonical_json(call.name) + ',"type":"tool_use"}'
    )
    return Block(text, "tool_use", source_id)


def _image_value(image: ImagePart, data: str) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": image.media_type, "data": data}}


def _image_block(image: ImagePart, source_id: str) -> Block:
    return Block(
        canonical_json(_image_value(image, image.data)),
        "image",
        source_id,
        count_json=canonical_json(_image_value(image, "")),
        image_tokens=image.tokens,
    )


def _tool_result_block(result: ToolResult, output: str) -> Block:
    value: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.call_id, "content": output}
    if result.is_error:
        value["is_error"] = True
    if not result.images:
        return Block(canonical_json(value), "tool_result", result.id)
    text = [{"type": "text", "text": output}] if output else []
    counted = value | {"content": text + [_image_value(image, "") for image in result.images]}
    value["content"] = text + [_image_value(image, image.data) for image in result.images]
    tokens = sum(image.tokens for image in result.images)
    return Block(canonical_json(value), "tool_result", result.id, canonical_json(counted), tokens)


def _thinking_block(part: ThinkingPart | RedactedThinkingPart, source_id: str) -> Block:
    value = part.content()
    return Block(canonical_json(value), value["type"], source_id)


def _assistant_blocks(message: AssistantResponse, keep_thinking: bool) -> tuple[Block, ...]:
    parts: list[Block] = []
    spoken = False
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text.strip():
                parts.append(_text_block(part.text, message.id))
                spoken = True
        elif isinstance(part, ToolCall):
            parts.append(_tool_use_block(part, message.id))
            spoken = True
        elif keep_thinking:
            parts.append(_thinking_block(part, message.id))
    if not spoken:
        # The API refuses blank text blocks, and a response rendering to
        # nothing would let the next user turn merge into the previous
        # user message (rewriting a prefix); it keeps its place instead.
        parts.append(_text_block(EMPTY_RESPONSE_TEXT, message.id))
    return tuple(parts)


def render_blocks(
    message: Message, projection: ResultProjection | None = None, *, keep_thinking: bool = False
) -> tuple[Block, ...]:
    """The content blocks one message renders to (memoized; same message and projection, same blocks).

    ``projection`` decides what a tool result's block carries (None: its stored output);
    ``keep_thinking`` whether a reply's thinking blocks go back with it (in their place).
    """
    variant: Hashable = None
    if projection is not None and isinstance(message, ToolResult):
        variant = projection.memo_key(message)
    elif keep_thinking and isinstance(message, AssistantResponse) and message.thinking_parts:
        variant = "thinking"
    cached = _memo.get(message, variant)
    if cached is not None:
        return cached
    if isinstance(message, Instruction):
        images = tuple(_image_block(image, message.id) for image in message.images)
        blocks: tuple[Block, ...] = (_text_block(message.rendered_text(), message.id), *images)
    elif isinstance(message, Note):
        blocks = (_text_block(message.text, message.id),)
    elif isinstance(message, AssistantResponse):
        blocks = _assistant_blocks(message, variant == "thinking")
    elif isinstance(message, ToolResult):
        output = projection.output_of(message) if projection is not None else message.output
        blocks = (_tool_result_block(message, output),)
    else:
        raise CompileError(f"a {type(message).__name__} cannot be rendered as a conversation message")
    _memo.put(message, blocks, variant)
    return blocks


@attrs.define
class _ThinkingContext:
    """The thinking-context digest of the messages compiled so far (extended only when a reply asks)."""

    digest: str = CONTEXT_SEED
    done: int = 0

    def matches(self, out: Sequence[RenderedMessage], context: str | None) -> bool:
        for msg in out[self.done :]:
            self.digest = extend_context(self.digest, msg.role, tuple(b.json for b in msg.blocks))
        self.done = len(out)
        return self.digest == context


def compile_request(
    *,
    system: str | SystemMessage | None,
    tools: Sequence[ToolSpec],
    view: Sequence[Message],
    settings: RequestSettings,
    projection: ResultProjection | None = None,
) -> Request:
    """Compile a view into a request. Pure and deterministic.

    Every assistant tool call is followed, at the head of the next user
    message, by its result (in call order); a call without a result in the
    view, a result without its call before it, or two results for one call
    raise :class:`CompileError`: no request ever carries an orphan.
    ``projection`` renders tool results (the result bound); None sends each
    result's stored output.
    """
    system_text = system.text if isinstance(system, SystemMessage) else system
    results: dict[str, ToolResult] = {}
    for message in view:
        if isinstance(message, ToolResult):
            if message.call_id in results:
                raise CompileError(f"two results for tool call {message.call_id!r} in the view")
            results[message.call_id] = message

    out: list[RenderedMessage] = []
    blocks: list[Block] = []
    sources: list[str] = []
    role: str | None = None
    placed: set[str] = set()
    chain = _ThinkingContext()

    def flush() -> None:
        nonlocal blocks, sources, role
        if blocks and role is not None:
            out.append(RenderedMessage(role, tuple(blocks), tuple(sources)))  # type: ignore[arg-type]
        blocks, sources, role = [], [], None

    def add(to_role: str, new_blocks: Sequence[Block], source: str) -> None:
        nonlocal role
        if not new_blocks:
            return
        if role != to_role:
            flush()
            role = to_role
        blocks.extend(new_blocks)
        sources.append(source)

    for message in view:
        if isinstance(message, SystemMessage):
            raise CompileError("a system message belongs in the stable segment, not in the view")
        if isinstance(message, ToolResult):
            if message.call_id not in placed:
                raise CompileError(
                    f"orphaned tool result {message.call_id!r} ({message.name}): its call is not in the view before it"
                )
            continue
        if isinstance(message, AssistantResponse):
            keep = message.context is not None and role != "assistant"
            if keep:
                flush()
                keep = chain.matches(out, message.context)
            add("assistant", render_blocks(message, projection, keep_thinking=keep), message.id)
            calls = message.tool_calls
            if calls:
                flush()
                for call in calls:
                    result = results.get(call.call_id)
                    if result is None:
                        raise CompileError(
                            f"orphaned tool call {call.call_id!r} ({call.name}): no result in the view"
                        )
                    placed.add(call.call_id)
                    add("user", render_blocks(result, projection), result.id)
            continue
        add("user", render_blocks(message, projection), message.id)
    flush()
    return Request(settings=settings, tools=tuple(tools), system=system_text, messages=tuple(out))
