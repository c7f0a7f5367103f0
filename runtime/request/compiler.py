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
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

import attrs

from runtime.request.layout import layout_view
from runtime.request.prepared import ABSENT, PreparedBlock, PreparedPayload, prepare_block
from runtime.request.rendering import (
    EMPTY_RESPONSE_TEXT,
    Block,
    CompileError,
    RenderedMessage,
    ResultProjection,
    render_blocks,
)
from runtime.values.canonical import canonical_json, sha256_hex
from runtime.values.image_rules import ImageRule
from runtime.values.messages import Message, SystemMessage
from runtime.values.pieces import SegmentedPieces
from runtime.values.thinking import context_digest

__all__ = [
    "EMPTY_RESPONSE_TEXT",
    "RECIPE_VERSION",
    "Block",
    "CompileError",
    "MarkLike",
    "RenderedMessage",
    "Request",
    "RequestSettings",
    "ResultProjection",
    "ToolSpec",
    "compile_request",
    "render_blocks",
]

RECIPE_VERSION = 1
"""Version of the rendering rules; recorded with every request (for replay)."""

Intent = Literal["continuing", "final", "side"]
Location = tuple[Any, ...]


class MarkLike(Protocol):
    """A cache mark: where it goes and its lifetime ("5m" or "1h"); read-only, so frozen values fit."""

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
    output_config_json: str | None = None
    """The request's ``output_config`` field as canonical JSON (a typed result's format; None: not sent)."""
    context_management_json: str | None = None
    """The request's ``context_management`` field (Anthropic's server-side edits) as canonical JSON; None: not sent."""


def _with_cache_control(block_json: str, ttl: str) -> str:
    value = json.loads(block_json)
    value["cache_control"] = {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": "1h"}
    return canonical_json(value)


@functools.lru_cache(maxsize=256)
def _prepared_tool(tool: ToolSpec) -> PreparedBlock:
    return prepare_block(tool.piece(), "tool")


@functools.lru_cache(maxsize=64)
def _system_piece(system: str) -> str:
    return canonical_json({"type": "text", "text": system})


_CONTENT_OPEN = '{"content":['
_NEXT_OPEN = "," + _CONTENT_OPEN
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

    def image_tokens(self, rule: ImageRule) -> dict[str, int]:
        """The tokens of the images each message label carries, by ``rule`` (empty when the request has none)."""
        out: dict[str, int] = {}
        for msg in self.messages:
            for block in msg.blocks:
                if block.image_sizes:
                    label = block.source_id or "envelope"
                    out[label] = out.get(label, 0) + rule.total(block.image_sizes)
        return out

    def pieces(self, *, counting: bool = False) -> SegmentedPieces:
        """The payload as labelled canonical JSON pieces, in order.

        Labels are message ids for message blocks, ``"tools"``, ``"system"``
        or ``"envelope"`` otherwise. ``"".join`` of the texts is exactly
        :meth:`payload_text`. The result is a :class:`SegmentedPieces`: one
        segment per message, keyed by the rendered message, so a measurer can
        reuse what it counted for an unchanged leading run of messages.
        With ``counting``, image data is left empty (see :mod:`runtime.measuring.image_count`);
        a message carrying an image is then keyed apart, so its counted segment
        is never reused for its sent one or the other way round.
        """
        marks = self._mark_map()
        s = self.settings
        marked = [loc[1] for loc in marks if loc[0] == "messages"]
        managed = "" if s.context_management_json is None else '"context_management":' + s.context_management_json + ","
        head = (("envelope", "{" + managed + '"max_tokens":' + str(s.max_tokens) + ',"messages":['),)

        def segment(mi: int) -> tuple[tuple[str, str], ...]:
            msg = self.messages[mi]
            out: list[tuple[str, str]] = [("envelope", _NEXT_OPEN if mi else _CONTENT_OPEN)]
            for bi, block in enumerate(msg.blocks):
                text = block.count_json if counting and block.count_json is not None else block.json
                ttl = marks.get(("messages", mi, bi)) if marks else None
                if ttl is not None:
                    text = _with_cache_control(text, ttl)
                if bi:
                    out.append(("envelope", ","))
                out.append((block.source_id or "envelope", text))
            out.append(("envelope", _ROLE_CLOSE[msg.role]))
            return tuple(out)

        keys: tuple[Any, ...] = self.messages
        if counting:
            keys = tuple(("counting", m) if any(b.count_json is not None for b in m.blocks) else m for m in keys)
        return SegmentedPieces(head, keys, min(marked, default=len(self.messages)), segment, self._foot(marks))

    def _foot(self, marks: Mapping[Location, str]) -> tuple[tuple[str, str], ...]:
        s = self.settings
        out: list[tuple[str, str]] = [("envelope", '],"model":' + canonical_json(s.model))]
        if s.output_config_json is not None:
            out.append(("envelope", ',"output_config":' + s.output_config_json))
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

    def prepared(self) -> PreparedPayload:
        """The request without marks as certification reads it (see :mod:`runtime.request.prepared`).

        Certifying it gives the certificates of :meth:`payload` without parsing
        or re-serialising anything, and compares messages by identity first.
        """
        tool_choice = ABSENT if self.settings.tool_choice_json is None else json.loads(self.settings.tool_choice_json)
        thinking = None if self.settings.thinking_json is None else json.loads(self.settings.thinking_json)
        system = () if self.system is None else (prepare_block(_system_piece(self.system), "text"),)
        return PreparedPayload(
            model=self.settings.model,
            tools=tuple(_prepared_tool(tool) for tool in self.tools),
            system=system,
            keys=self.messages,
            message=RenderedMessage.prepared,
            thinking=thinking,
            tool_choice=tool_choice,
        )

    def payload_text(self) -> str:
        """The canonical JSON text of the Anthropic payload (sorted keys, no whitespace)."""
        if self._text is None:
            object.__setattr__(self, "_text", "".join(text for _, text in self.pieces().flat()))
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
        """The digest of the conversation this request carries; a reply records it (:mod:`runtime.values.thinking`)."""
        return context_digest((m.role, tuple(b.json for b in m.blocks)) for m in self.messages)

    def message_digests(self) -> tuple[str, ...]:
        """SHA-256 of each rendered message without marks (for prefix checks)."""
        return tuple(sha256_hex(msg.role + "\x00" + "\x1e".join(b.json for b in msg.blocks)) for msg in self.messages)


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
    messages = layout_view(view, projection)
    return Request(settings=settings, tools=tuple(tools), system=system_text, messages=messages)
