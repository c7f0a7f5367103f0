"""Frozen message values: what a branch's record holds.

Every message is immutable, carries an ``id`` (unique, assigned once, never
rendered to a provider) and a ``sha256`` of its canonical JSON content (the
content without the id, so equal content has equal digests and a store can keep
it once). Clones share message objects; nothing here is ever copied to be
changed.

Kinds:

- :class:`SystemMessage`: the system text; the compiler lifts it into the
  stable segment.
- :class:`Instruction`: a user turn (the task, or a later message). It renders
  the same bytes whether it is current or history.
- :class:`AssistantResponse`: one model response: text blocks and tool calls in
  the order the model produced them.
- :class:`ToolResult`: the output of one tool call (call id, function,
  arguments, output). A clipped copy is a ``ToolResult`` whose ``clipped_from``
  names the original.
- :class:`Note`: a fold note standing in the view for messages it replaced.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import attrs

from runtime.values.canonical import canonical_json, sha256_hex
from runtime.values.ids import current_ids
from runtime.values.image_rules import MESSAGES_IMAGES, ImageRule
from runtime.values.images import image_tokens, inspect_image


def new_message_id() -> str:
    """A fresh message id from the id source in force (:mod:`runtime.values.ids`; random: 16 hex digits).

    Ids carry no content.
    """
    return current_ids().message_id()


def _set_digest(instance: Any) -> None:
    object.__setattr__(instance, "sha256", sha256_hex(canonical_json(instance.content())))


@attrs.frozen
class ToolCall:
    """One tool call the model made: provider call id, function, arguments.

    ``arguments_json`` is the canonical JSON of the argument mapping, so the
    call renders the same bytes however the arguments were ordered.
    """

    call_id: str
    name: str
    arguments_json: str = "{}"

    @classmethod
    def create(cls, call_id: str, name: str, arguments: Mapping[str, Any] | None = None) -> ToolCall:
        return cls(call_id=call_id, name=name, arguments_json=canonical_json(dict(arguments or {})))

    @property
    def arguments(self) -> dict[str, Any]:
        """A fresh dict of the arguments (mutating it changes nothing here)."""
        arguments: dict[str, Any] = json.loads(self.arguments_json)
        return arguments

    def content(self) -> dict[str, Any]:
        return {"type": "tool_call", "call_id": self.call_id, "name": self.name, "arguments": self.arguments_json}


@attrs.frozen
class TextPart:
    """A text block of an assistant response."""

    text: str

    def content(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}


@attrs.frozen
class ImagePart:
    """An image an instruction or a tool result carries: its bytes (base64) and what its header says.

    Built with :meth:`from_bytes`, which refuses what the API would refuse
    (:func:`runtime.values.images.inspect_image`). ``sha256`` is the digest of the
    bytes; ``tokens`` the documented estimate the runtime counts it by.
    """

    media_type: str
    data: str = attrs.field(repr=False)
    sha256: str
    width: int
    height: int
    size: int

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> ImagePart:
        info = inspect_image(data, where)
        encoded = base64.b64encode(data).decode("ascii")
        return cls(info.media_type, encoded, info.sha256, info.width, info.height, info.size)

    @property
    def tokens(self) -> int:
        return image_tokens(self.width, self.height)

    def raw(self) -> bytes:
        return base64.b64decode(self.data)

    def content(self) -> dict[str, Any]:
        return {
            "type": "image",
            "media_type": self.media_type,
            "sha256": self.sha256,
            "width": self.width,
            "height": self.height,
            "size": self.size,
            "data": self.data,
        }

    def describe(self, rule: ImageRule = MESSAGES_IMAGES) -> str:
        """One line naming the image: digest, format, pixel size, bytes and its tokens by the wire's ``rule``."""
        kind = self.media_type.removeprefix("image/").upper()
        tokens = rule.tokens(self.width, self.height)
        return (
            f"image sha256:{self.sha256[:16]} {kind} {self.width}x{self.height}, {self.size:,} bytes, ~{tokens} tokens"
        )


def _images(value: Iterable[ImagePart]) -> tuple[ImagePart, ...]:
    return tuple(value)


@attrs.frozen
class ThinkingPart:
    """A ``thinking`` block of a reply, exactly as the provider gave it (signature included)."""

    thinking: str
    signature: str

    def content(self) -> dict[str, Any]:
        return {"type": "thinking", "thinking": self.thinking, "signature": self.signature}


@attrs.frozen
class RedactedThinkingPart:
    """A ``redacted_thinking`` block of a reply, exactly as given (its opaque ``data``)."""

    data: str

    def content(self) -> dict[str, Any]:
        return {"type": "redacted_thinking", "data": self.data}


@attrs.frozen
class CompactionPart:
    """A ``compaction`` block of a reply (Anthropic's server-side compaction), exactly as the provider sent it.

    ``block_json`` is the block's canonical JSON (its summary, opaque metadata and any field a later API adds),
    sent back unchanged on later requests: the server reads the conversation from its latest such block on.
    """

    block_json: str

    def __attrs_post_init__(self) -> None:
        try:
            block = json.loads(self.block_json)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"CompactionPart.block_json: {self.block_json!r:.80} is not JSON ({exc})") from exc
        if not isinstance(block, dict) or block.get("type") != "compaction":
            raise ValueError(f"CompactionPart.block_json: {self.block_json!r:.80} is not a compaction block")

    @property
    def summary(self) -> str | None:
        """The block's summary (None: a failed compaction, which the server treats as a no-op)."""
        content = json.loads(self.block_json).get("content")
        return content if isinstance(content, str) else None

    def content(self) -> dict[str, Any]:
        return json.loads(self.block_json)


Part = TextPart | ToolCall | ThinkingPart | RedactedThinkingPart | CompactionPart
"""One block of an assistant response, in the order the model produced them."""

ThinkingBlock = ThinkingPart | RedactedThinkingPart


@attrs.frozen
class SystemMessage:
    text: str
    id: str = attrs.field(factory=new_message_id, kw_only=True)
    sha256: str = attrs.field(init=False, eq=False, repr=False)
    kind: Literal["system"] = attrs.field(default="system", init=False)

    def __attrs_post_init__(self) -> None:
        _set_digest(self)

    def content(self) -> dict[str, Any]:
        return {"kind": "system", "text": self.text}


@attrs.frozen
class Instruction:
    """A user turn. ``notice`` is the one-line size notice appended at 80%.

    The notice is decided when the turn is appended and then frozen with it:
    it is never rewritten on a later request.
    """

    text: str
    notice: str | None = None
    images: tuple[ImagePart, ...] = attrs.field(default=(), kw_only=True, converter=_images)
    id: str = attrs.field(factory=new_message_id, kw_only=True)
    sha256: str = attrs.field(init=False, eq=False, repr=False)
    kind: Literal["instruction"] = attrs.field(default="instruction", init=False)

    def __attrs_post_init__(self) -> None:
        _set_digest(self)

    def content(self) -> dict[str, Any]:
        value: dict[str, Any] = {"kind": "instruction", "text": self.text, "notice": self.notice}
        if self.images:
            value["images"] = [image.content() for image in self.images]
        return value

    def rendered_text(self) -> str:
        """The exact text sent for this turn, current or history alike."""
        if self.notice is None:
            return self.text
        return f"{self.text}\n\n{self.notice}"


@attrs.frozen
class AssistantResponse:
    """One model response: its blocks in order, and why it stopped.

    ``context`` is set when the reply carries thinking blocks: the digest of
    the conversation that came before it in the request that produced it
    (:func:`runtime.values.thinking.context_digest`). A later request gives the
    thinking blocks back only while what comes before the reply still has
    that digest (the API verifies each block against what preceded it).
    """

    parts: tuple[Part, ...]
    stop_reason: str | None = None
    context: str | None = None
    id: str = attrs.field(factory=new_message_id, kw_only=True)
    sha256: str = attrs.field(init=False, eq=False, repr=False)
    kind: Literal["assistant"] = attrs.field(default="assistant", init=False)

    def __attrs_post_init__(self) -> None:
        _set_digest(self)

    def content(self) -> dict[str, Any]:
        value: dict[str, Any] = {
            "kind": "assistant",
            "parts": [p.content() for p in self.parts],
            "stop_reason": self.stop_reason,
        }
        if self.context is not None:
            # Only replies with thinking and fold summaries' replies carry it: every other reply keeps its digest.
            value["context"] = self.context
        return value

    @property
    def thinking_parts(self) -> tuple[ThinkingBlock, ...]:
        return tuple(p for p in self.parts if isinstance(p, (ThinkingPart, RedactedThinkingPart)))

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolCall))

    @property
    def text(self) -> str:
        """All text blocks joined by blank lines (the answer, when no calls)."""
        return "\n\n".join(p.text for p in self.parts if isinstance(p, TextPart))


@attrs.frozen
class ClipInfo:
    """Provenance of a clipped copy: what of the original it keeps.

    ``head`` and ``tail`` are counts of the original's characters kept at each
    end; the characters ``[head, total - tail)`` are omitted and returned by
    ``read_result``.
    """

    original_index: int
    total: int
    head: int
    tail: int


@attrs.frozen
class ToolResult:
    """The output of one tool call.

    ``output_format`` is ``"text"`` for a string output and ``"json"`` when
    the tool returned a structured value (then ``output`` is its canonical JSON).
    A clipped copy sets ``clipped_from`` to the original's id (always the
    original, never another copy) and ``clip`` to what it keeps.
    """

    call_id: str
    name: str
    arguments_json: str
    output: str
    is_error: bool = False
    output_format: Literal["text", "json"] = "text"
    clipped_from: str | None = None
    clip: ClipInfo | None = None
    images: tuple[ImagePart, ...] = attrs.field(default=(), kw_only=True, converter=_images)
    id: str = attrs.field(factory=new_message_id, kw_only=True)
    sha256: str = attrs.field(init=False, eq=False, repr=False)
    kind: Literal["tool_result"] = attrs.field(default="tool_result", init=False)

    @property
    def output_json(self) -> str:
        """The canonical JSON of ``output`` (a JSON string): its digest and its rendered block
        (:mod:`runtime.request.rendering`) splice it in. Not kept: a run keeps every result, and a second
        copy of each output cost more memory than escaping it again where a block is rendered (once a
        message while the rendering memo holds it)."""
        return canonical_json(self.output)

    def __attrs_post_init__(self) -> None:
        output_json = canonical_json(self.output)
        rest = self.content()
        del rest["output"]
        output_format = rest.pop("output_format")
        # Every other key sorts before "output", and "output_format" right after it: this is canonical_json(content()).
        text = f'{canonical_json(rest)[:-1]},"output":{output_json},"output_format":{canonical_json(output_format)}}}'
        object.__setattr__(self, "sha256", sha256_hex(text))

    @classmethod
    def for_call(
        cls, call: ToolCall, output: Any, *, is_error: bool = False, images: tuple[ImagePart, ...] = ()
    ) -> ToolResult:
        """Build the result of ``call`` from a tool's return value (and the images it returned)."""
        if isinstance(output, str):
            return cls(call.call_id, call.name, call.arguments_json, output, is_error, images=images)
        return cls(
            call.call_id, call.name, call.arguments_json, canonical_json(output), is_error, "json", images=images
        )

    def content(self) -> dict[str, Any]:
        return {
            "kind": "tool_result",
            "call_id": self.call_id,
            "name": self.name,
            "arguments": self.arguments_json,
            "output": self.output,
            "output_format": self.output_format,
            "is_error": self.is_error,
            "clipped_from": self.clipped_from,
            "clip": attrs.asdict(self.clip) if self.clip else None,
        } | ({"images": [image.content() for image in self.images]} if self.images else {})


@attrs.frozen
class Note:
    """A fold note: text standing in the view for the messages it replaced.

    ``replaced`` lists the ids it stands for, ``first_index`` the full-record
    index of the first of them (where a restore puts them back), ``stage`` the
    fold stage that wrote it.
    """

    text: str
    replaced: tuple[str, ...]
    first_index: int
    stage: str
    id: str = attrs.field(factory=new_message_id, kw_only=True)
    sha256: str = attrs.field(init=False, eq=False, repr=False)
    kind: Literal["note"] = attrs.field(default="note", init=False)

    def __attrs_post_init__(self) -> None:
        _set_digest(self)

    def content(self) -> dict[str, Any]:
        return {
            "kind": "note",
            "text": self.text,
            "replaced": list(self.replaced),
            "first_index": self.first_index,
            "stage": self.stage,
        }


Message = SystemMessage | Instruction | AssistantResponse | ToolResult | Note

ROLE_OF_KIND: Mapping[str, str] = {
    "instruction": "user",
    "tool_result": "user",
    "note": "user",
    "assistant": "assistant",
}
