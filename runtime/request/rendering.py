"""Rendering one message to its content blocks (pure, memoized).

The compiler (:mod:`runtime.request.compiler`) assembles requests from these blocks;
:mod:`runtime.request.layout` lays them out into messages. A message renders to
the same :class:`Block` objects every time it is seen with the same
projection, so later steps can compare blocks by identity.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, Literal, Protocol

import attrs

from runtime.errors import FoldlineError
from runtime.request.prepared import PreparedBlock, PreparedMessage, prepare_block
from runtime.values.canonical import canonical_json
from runtime.values.image_rules import MESSAGES_IMAGES
from runtime.values.messages import (
    AssistantResponse,
    CompactionPart,
    ImagePart,
    Instruction,
    Message,
    Note,
    RedactedThinkingPart,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolResult,
)

EMPTY_RESPONSE_TEXT = "(empty response)"
"""What an assistant response with no calls and only blank text renders as."""


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


_ENVELOPES = {"user": b'{"role":"user"}', "assistant": b'{"role":"assistant"}'}


@attrs.frozen
class Block:
    """One rendered content block: its canonical JSON and the message it came from.

    With images: ``count_json`` (their base64 left empty) is what is counted as text, and each
    of ``image_sizes`` (width, height) by the wire's rule (:mod:`runtime.values.image_rules`).
    """

    json: str
    kind: str
    source_id: str | None
    count_json: str | None = None
    image_sizes: tuple[tuple[int, int], ...] = ()
    _prepared: PreparedBlock | None = attrs.field(default=None, init=False, eq=False, repr=False)

    @property
    def image_tokens(self) -> int:
        """The block's images by the Messages API's rule (a request is measured by its wire's: :mod:`runtime.measuring.image_count`)."""
        return MESSAGES_IMAGES.total(self.image_sizes)

    def prepared(self) -> PreparedBlock:
        """The block as certification reads it (built once per block)."""
        if self._prepared is None:
            object.__setattr__(self, "_prepared", prepare_block(self.json, self.kind))
        assert self._prepared is not None
        return self._prepared


@attrs.frozen
class RenderedMessage:
    role: Literal["user", "assistant"]
    blocks: tuple[Block, ...]
    source_ids: tuple[str, ...]

    def prepared(self) -> PreparedMessage:
        """The message as certification reads it."""
        return PreparedMessage(_ENVELOPES[self.role], tuple(block.prepared() for block in self.blocks))


MEMO_ENTRIES = 32_768
"""Rendered messages the memo keeps, least recently used dropped first. A branch re-renders its whole view
at every request, so what pays is the live branches' messages: about 9 each at the flow's 1,024 nodes at
once in ``scripts/scale.py``. A settled node's entries are never read again; at 200,000 a 10,000-node run
kept every one (about 4 KB a node, the wire text beside the record's own)."""


class _BlockMemo:
    """A bounded memo of rendered blocks by message identity, content and projection key."""

    def __init__(self, max_entries: int = MEMO_ENTRIES) -> None:
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
    # canonical_json({"type": "text", "text": text}), written out: the string is escaped without a dict's encoding.
    return Block(f'{{"text":{canonical_json(text)},"type":"text"}}', "text", source_id)


def _tool_use_block(call: ToolCall, source_id: str) -> Block:
    text = (
        '{"id":'
        + canonical_json(call.call_id)
        + ',"input":'
        + call.arguments_json
        + ',"name":'
        + canonical_json(call.name)
        + ',"type":"tool_use"}'
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
        image_sizes=((image.width, image.height),),
    )


def _tool_result_block(result: ToolResult, output: str) -> Block:
    if not result.images:
        # canonical_json of the block's value, written out: the stored output's JSON was escaped when the result was made.
        content = result.output_json if output == result.output else canonical_json(output)
        error = ',"is_error":true' if result.is_error else ""
        wire = f'{{"content":{content}{error},"tool_use_id":{canonical_json(result.call_id)},"type":"tool_result"}}'
        return Block(wire, "tool_result", result.id)
    value: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.call_id, "content": output}
    if result.is_error:
        value["is_error"] = True
    text = [{"type": "text", "text": output}] if output else []
    counted = value | {"content": text + [_image_value(image, "") for image in result.images]}
    value["content"] = text + [_image_value(image, image.data) for image in result.images]
    sizes = tuple((image.width, image.height) for image in result.images)
    return Block(canonical_json(value), "tool_result", result.id, canonical_json(counted), sizes)


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
        elif isinstance(part, CompactionPart):
            # Sent back whole, always: the server reads the conversation from its latest one on.
            parts.append(Block(part.block_json, "compaction", message.id))
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
