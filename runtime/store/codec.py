"""Stored forms: messages by their canonical content, and tagged JSON for state values.

Pure functions, no I/O.

Messages are stored as the canonical JSON of ``message.content()`` (the very
bytes their SHA-256 is taken over), so a store keeps each content once however
many messages and branches share it. :func:`message_from_content` rebuilds the
exact frozen message, same id, and :func:`decode_message` checks it against the
stored digest: a stored message either comes back byte for byte or raises.

Images are kept apart, once per distinct image: a message that carries
images is stored as its content with each image's ``data`` set to null
(:func:`stored_message_content`), and each image's bytes once in the store's
``images`` table under their SHA-256. :func:`content_with_images` puts the
bytes back (each checked against its digest) before the message is decoded
and checked against its own digest, so the same image in many messages (or
twice in one) costs its bytes once and still comes back byte for byte.

Other values (a branch's :class:`~actors.branch.ContextState`, a request record)
use a small tagged JSON (:func:`encode_value` / :func:`decode_value`): tuples,
frozensets, mappings, attrs values and foldline's own errors keep their types.
Only classes of foldline's own packages (``runtime``, ``actors``, ``signals``)
are rebuilt, and only through their constructors.
"""

from __future__ import annotations

import base64
import importlib
import json
import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import attrs

from runtime.cache.ledger import CacheLedger
from runtime.errors import FoldlineError
from runtime.inputs.nesting import nested_deeper_than
from runtime.request.compiler import ToolSpec
from runtime.store.errors import StoreCorrupt, StoreEncodeError
from runtime.values.canonical import canonical_json, sha256_hex
from runtime.values.messages import (
    AssistantResponse,
    ClipInfo,
    CompactionPart,
    ImagePart,
    Instruction,
    Message,
    Note,
    Part,
    RedactedThinkingPart,
    SystemMessage,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolResult,
)

MESSAGE_KINDS = ("system", "instruction", "assistant", "tool_result", "note")
_OWN_PACKAGES = ("runtime.", "actors.", "signals.")
MAX_STORED_JSON_DEPTH = 200
"""The deepest nesting of arrays and objects a stored JSON text may have (a request body nests at most 100)."""


def loads_json(text: str) -> Any:
    """``json.loads`` of a stored text, whose nesting is bounded: a ValueError names a text nested too deep.

    A store file from elsewhere may nest a value thousands deep; Python's
    parser (and every walk over the value after it) would end in a
    RecursionError instead of a message.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {MAX_STORED_JSON_DEPTH} levels") from None
    if nested_deeper_than(value, MAX_STORED_JSON_DEPTH):
        raise ValueError(f"JSON nested deeper than {MAX_STORED_JSON_DEPTH} levels")
    return value


# -- messages -----------------------------------------------------------------------------


def message_content_json(message: Message) -> str:
    """The canonical JSON a message's SHA-256 is taken over (what the store keeps)."""
    return canonical_json(message.content())


def stored_message_content(message: Message) -> tuple[str, list[tuple[str, bytes]]]:
    """The content text a store keeps for ``message`` and the images it keeps apart: [(SHA-256, bytes)].

    Without images the text is :func:`message_content_json`; with images, each
    image's ``data`` is null in the text and its bytes are listed once per
    distinct digest.
    """
    images: tuple[ImagePart, ...] = getattr(message, "images", ())
    if not images:
        return message_content_json(message), []
    content = message.content()
    content["images"] = [{**image, "data": None} for image in content["images"]]
    distinct = {image.sha256: image for image in images}
    return canonical_json(content), [(sha, image.raw()) for sha, image in distinct.items()]


def content_with_images(stored: str, image_bytes: Callable[[str], bytes | None], message_id: str) -> str:
    """The canonical content text of a stored message: ``stored`` with each image's bytes put back.

    ``image_bytes(sha256)`` gives an image's stored bytes (None: not stored).
    A missing image, or bytes whose SHA-256 is not the image's, is
    :class:`StoreCorrupt` naming the message and the image. A text without
    images kept apart is returned as it is.
    """
    if '"data":null' not in stored:
        return stored
    try:
        content = loads_json(stored)
        images = content.get("images") if isinstance(content, dict) else None
    except ValueError:
        return stored  # decode_message names what is wrong with it
    if not isinstance(images, list):
        return stored
    for i, image in enumerate(images):
        if not isinstance(image, dict) or image.get("data", "") is not None:
            continue
        sha = image.get("sha256")
        data = image_bytes(sha) if isinstance(sha, str) else None
        if data is None:
            raise StoreCorrupt(f"stored message {message_id}: image {i} ({sha!r:.80}) is not in the store's images")
        if sha256_hex(data) != sha:
            raise StoreCorrupt(
                f"stored message {message_id}: image {i}'s stored bytes do not match its SHA-256 {sha} "
                "(the stored image was changed)"
            )
        image["data"] = base64.b64encode(data).decode("ascii")
    return canonical_json(content)


def _keys(content: Mapping[str, Any], expected: set[str], kind: str) -> None:
    if set(content) != expected:
        missing = sorted(expected - set(content))
        extra = sorted(set(content) - expected)
        raise StoreCorrupt(
            f"a stored {kind} message has keys {sorted(content)}; expected {sorted(expected)}"
            + (f" (missing {missing})" if missing else "")
            + (f" (unknown {extra})" if extra else "")
        )


def thinking_block_digests(message: AssistantResponse) -> list[tuple[int, str]]:
    """(part index, SHA-256 of the part's canonical JSON) of each thinking or redacted_thinking part of a reply."""
    return [
        (i, sha256_hex(canonical_json(part.content())))
        for i, part in enumerate(message.parts)
        if isinstance(part, (ThinkingPart, RedactedThinkingPart))
    ]


def _part_from_content(part: Any) -> Part:
    if isinstance(part, Mapping) and part.get("type") == "thinking" and set(part) == {"type", "thinking", "signature"}:
        return ThinkingPart(part["thinking"], part["signature"])
    if isinstance(part, Mapping) and part.get("type") == "redacted_thinking" and set(part) == {"type", "data"}:
        return RedactedThinkingPart(part["data"])
    if isinstance(part, Mapping) and part.get("type") == "text" and set(part) == {"type", "text"}:
        return TextPart(part["text"])
    if isinstance(part, Mapping) and part.get("type") == "compaction":
        return CompactionPart(canonical_json(dict(part)))
    if (
        isinstance(part, Mapping)
        and part.get("type") == "tool_call"
        and set(part)
        == {
            "type",
            "call_id",
            "name",
            "arguments",
        }
    ):
        return ToolCall(call_id=part["call_id"], name=part["name"], arguments_json=part["arguments"])
    raise StoreCorrupt(
        f"a stored assistant part {part!r:.200} is not a text, tool call, thinking or redacted_thinking part"
    )


_IMAGE_KEYS = {"type", "media_type", "sha256", "width", "height", "size", "data"}


def _images_from_content(images: Any, id: str) -> tuple[ImagePart, ...]:
    """Stored images, each checked against its SHA-256 (a changed byte is a corrupt store, not a new image)."""
    if not isinstance(images, list):
        raise StoreCorrupt(f"stored message {id}: images {images!r:.200} is not a list")
    out = []
    for i, image in enumerate(images):
        if not isinstance(image, Mapping) or set(image) != _IMAGE_KEYS or image.get("type") != "image":
            raise StoreCorrupt(f"stored message {id}: image {i} {image!r:.200} is not a stored image")
        part = ImagePart(
            image["media_type"], image["data"], image["sha256"], image["width"], image["height"], image["size"]
        )
        if sha256_hex(part.raw()) != part.sha256:
            raise StoreCorrupt(f"stored message {id}: image {i}'s bytes do not match its SHA-256 {part.sha256}")
        out.append(part)
    return tuple(out)


def message_from_content(kind: str, content: Mapping[str, Any], id: str) -> Message:
    """Rebuild the frozen message of ``kind`` with ``id`` from its ``content()`` mapping.

    The inverse of ``message.content()``: ``message_from_content(m.kind,
    m.content(), m.id) == m``. Raises :class:`StoreCorrupt` naming the kind
    and the keys when ``content`` is not the content of such a message.
    """
    if not isinstance(content, Mapping):
        raise StoreCorrupt(f"stored message {id}: content {content!r:.200} is not a JSON object")
    if content.get("kind") != kind:
        raise StoreCorrupt(
            f"stored message {id}: content kind {content.get('kind')!r} does not match its row's kind {kind!r}"
        )
    try:
        if kind == "system":
            _keys(content, {"kind", "text"}, kind)
            return SystemMessage(content["text"], id=id)
        if kind == "instruction":
            _keys(content, {"kind", "text", "notice"} | ({"images"} if "images" in content else set()), kind)
            images = _images_from_content(content.get("images", []), id)
            return Instruction(content["text"], content["notice"], images=images, id=id)
        if kind == "assistant":
            has_context = "context" in content
            _keys(content, {"kind", "parts", "stop_reason"} | ({"context"} if has_context else set()), kind)
            parts = content["parts"]
            if not isinstance(parts, list):
                raise StoreCorrupt(f"stored message {id}: assistant parts {parts!r:.200} is not a list")
            return AssistantResponse(
                tuple(_part_from_content(p) for p in parts),
                content["stop_reason"],
                content.get("context"),
                id=id,
            )
        if kind == "tool_result":
            _keys(
                content,
                {"kind", "call_id", "name", "arguments", "output", "output_format", "is_error", "clipped_from", "clip"}
                | ({"images"} if "images" in content else set()),
                kind,
            )
            clip = content["clip"]
            return ToolResult(
                call_id=content["call_id"],
                name=content["name"],
                arguments_json=content["arguments"],
                output=content["output"],
                is_error=content["is_error"],
                output_format=content["output_format"],
                clipped_from=content["clipped_from"],
                clip=ClipInfo(**clip) if clip is not None else None,
                images=_images_from_content(content.get("images", []), id),
                id=id,
            )
        if kind == "note":
            _keys(content, {"kind", "text", "replaced", "first_index", "stage"}, kind)
            return Note(content["text"], tuple(content["replaced"]), content["first_index"], content["stage"], id=id)
    except StoreCorrupt:
        raise
    except (TypeError, ValueError) as exc:
        raise StoreCorrupt(f"stored message {id}: its {kind} content cannot be rebuilt ({exc})") from exc
    raise StoreCorrupt(f"stored message {id}: kind {kind!r} is not one of {', '.join(MESSAGE_KINDS)}")


def decode_message(message_id: str, kind: str, content_json: str, sha256: str) -> Message:
    """Rebuild a stored message and prove it is the one that was stored.

    The stored text must hash to ``sha256`` and the rebuilt message must
    render the same canonical bytes; anything else is :class:`StoreCorrupt`
    naming the message.
    """
    if sha256_hex(content_json) != sha256:
        raise StoreCorrupt(
            f"stored message {message_id}: its content does not match its SHA-256 {sha256} "
            "(the stored bytes were changed)"
        )
    try:
        content = loads_json(content_json)
    except ValueError as exc:
        raise StoreCorrupt(f"stored message {message_id}: its content is not JSON ({exc})") from exc
    message = message_from_content(kind, content, message_id)
    if message.sha256 != sha256 or message_content_json(message) != content_json:
        raise StoreCorrupt(
            f"stored message {message_id}: rebuilt content differs from the stored bytes (SHA-256 {sha256})"
        )
    return message


# -- tools ------------------------------------------------------------------------------------


def tool_from_piece(piece: str) -> ToolSpec:
    """Rebuild a :class:`ToolSpec` from its rendered piece (the canonical JSON a request carries)."""
    try:
        obj = loads_json(piece)
        if not isinstance(obj, Mapping) or set(obj) != {"name", "description", "input_schema"}:
            raise ValueError(f"keys {sorted(obj) if isinstance(obj, Mapping) else obj!r}")
        spec = ToolSpec(obj["name"], obj["description"], canonical_json(obj["input_schema"]))
    except (TypeError, ValueError) as exc:
        raise StoreCorrupt(f"stored tool definition {piece[:120]!r} is not a rendered tool ({exc})") from exc
    if spec.piece() != piece:
        raise StoreCorrupt(f"stored tool definition {piece[:120]!r} does not render back to the same bytes")
    return spec


# -- ledgers ------------------------------------------------------------------------------------


def ledger_rows_of(ledger: Any) -> tuple[float | None, int, list[tuple[str, str]]] | None:
    """(watermark, max_rows, [(certificate, row JSON)]) of a cache ledger; None for no ledger."""
    if ledger is None:
        return None
    if not isinstance(ledger, CacheLedger):
        raise StoreEncodeError(
            f"a branch ledger of type {type(ledger).__name__} has no stored form; expected a CacheLedger"
        )
    records = ledger.to_records()
    rows = [(row["certificate"], canonical_json(row)) for row in records["rows"]]
    return records["watermark"], records["max_rows"], rows


def ledger_from_rows(watermark: float | None, max_rows: int, rows: list[str]) -> CacheLedger:
    """A stored ledger, restored with no evidence (seed 001 Amendment 3)."""
    try:
        parsed = [loads_json(row) for row in rows]
    except ValueError as exc:
        raise StoreCorrupt(f"a stored cache ledger row is not JSON ({exc})") from exc
    return CacheLedger.from_records({"rows": parsed, "watermark": watermark, "max_rows": max_rows})


# -- tagged values ------------------------------------------------------------------------------


class RestoredError(FoldlineError):
    """An error read back from a store whose own type could not be rebuilt.

    ``type_name`` is the original's ``module:QualName``; the message is the original's.
    """

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{message} (restored {type_name})")
        self.type_name = type_name
        self.original_message = message


def _qualified(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def encode_value(value: Any, where: str) -> Any:
    """A JSON-ready tagged form of ``value``; :class:`StoreEncodeError` naming ``where`` if it has none."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise StoreEncodeError(f"{where}: {value!r} is not a finite number")
        return value
    if isinstance(value, list):
        return [encode_value(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return {"$tuple": [encode_value(item, f"{where}[{i}]") for i, item in enumerate(value)]}
    if isinstance(value, frozenset):
        items = [encode_value(item, f"{where}{{}}") for item in value]
        return {"$frozenset": sorted(items, key=canonical_json)}
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise StoreEncodeError(f"{where}: key {key!r} is not a string")
            out[key] = encode_value(item, f"{where}.{key}")
        return {"$dict": out}
    if attrs.has(type(value)):
        cls = type(value)
        fields = {
            field.alias: encode_value(getattr(value, field.name), f"{where}.{field.name}")
            for field in attrs.fields(cls)
            if field.init
        }
        return {"$attrs": _qualified(cls), "fields": fields}
    if isinstance(value, FoldlineError):
        to_dict = getattr(value, "to_dict", None)
        if callable(to_dict):
            return {"$error": _qualified(type(value)), "data": encode_value(to_dict(), f"{where}.data")}
        return {"$error": _qualified(type(value)), "message": str(value)}
    raise StoreEncodeError(
        f"{where}: a value of type {type(value).__name__} ({value!r:.80}) has no stored form "
        "(expected JSON values, tuples, frozensets, mappings, attrs values or a foldline error)"
    )


def _own_class(name: Any, where: str) -> type:
    if not isinstance(name, str) or ":" not in name:
        raise StoreCorrupt(f"{where}: {name!r} is not a stored type name (module:QualName)")
    module_name, _, qualname = name.partition(":")
    if not module_name.startswith(_OWN_PACKAGES) or any(part.startswith("_") for part in module_name.split(".")):
        # A private module, ``runtime.cli.__main__`` above all, runs code when imported: never one of a stored type.
        raise StoreCorrupt(f"{where}: type {name} is not one of foldline's own (runtime, actors, signals)")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise StoreCorrupt(f"{where}: stored type {name} does not exist in this build ({exc})") from exc
    if not isinstance(obj, type):
        raise StoreCorrupt(f"{where}: stored type {name} is not a class")
    return obj


def decode_value(obj: Any, where: str) -> Any:
    """The value :func:`encode_value` encoded; :class:`StoreCorrupt` naming ``where`` if it is malformed."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, list):
        return [decode_value(item, f"{where}[{i}]") for i, item in enumerate(obj)]
    if not isinstance(obj, dict) or len(obj) == 0:
        raise StoreCorrupt(f"{where}: {obj!r:.120} is not a stored value")
    if "$tuple" in obj:
        return tuple(decode_value(item, f"{where}[{i}]") for i, item in enumerate(_list(obj["$tuple"], where)))
    if "$frozenset" in obj:
        try:
            return frozenset(decode_value(item, f"{where}{{}}") for item in _list(obj["$frozenset"], where))
        except TypeError as exc:  # an unhashable member (a list, a mapping)
            raise StoreCorrupt(f"{where}: {obj!r:.120} is not a stored set ({exc})") from exc
    if "$dict" in obj:
        inner = obj["$dict"]
        if not isinstance(inner, dict):
            raise StoreCorrupt(f"{where}: {inner!r:.120} is not a stored mapping")
        return MappingProxyType({key: decode_value(item, f"{where}.{key}") for key, item in inner.items()})
    if "$attrs" in obj:
        cls = _own_class(obj["$attrs"], where)
        if not attrs.has(cls):
            raise StoreCorrupt(f"{where}: stored type {obj['$attrs']} is not an attrs class")
        fields = obj.get("fields")
        if not isinstance(fields, dict):
            raise StoreCorrupt(f"{where}: stored {obj['$attrs']} has no fields object")
        known = {field.alias for field in attrs.fields(cls) if field.init}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise StoreCorrupt(f"{where}: stored {obj['$attrs']} has fields {unknown} this build does not know")
        kwargs = {key: decode_value(item, f"{where}.{key}") for key, item in fields.items()}
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as exc:
            raise StoreCorrupt(f"{where}: stored {obj['$attrs']} cannot be rebuilt ({exc})") from exc
    if "$error" in obj:
        name = obj["$error"]
        cls = _own_class(name, where)
        if not issubclass(cls, FoldlineError):
            raise StoreCorrupt(f"{where}: stored error type {name} is not a foldline error")
        if "data" in obj:
            data = decode_value(obj["data"], f"{where}.data")
            try:
                return cls(**dict(data))
            except (TypeError, ValueError) as exc:
                raise StoreCorrupt(f"{where}: stored {name} cannot be rebuilt from its data ({exc})") from exc
        message = obj.get("message")
        if not isinstance(message, str):
            raise StoreCorrupt(f"{where}: stored error {name} has no message")
        try:
            return cls(message)
        except TypeError:
            return RestoredError(name, message)
    raise StoreCorrupt(f"{where}: {obj!r:.120} has no known tag")


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise StoreCorrupt(f"{where}: {value!r:.120} is not a list")
    return value


def dumps_value(value: Any, where: str) -> str:
    """Canonical JSON text of :func:`encode_value`."""
    return canonical_json(encode_value(value, where))


def loads_value(text: str, where: str) -> Any:
    """The value :func:`dumps_value` wrote."""
    try:
        obj = loads_json(text)
    except (TypeError, ValueError) as exc:
        raise StoreCorrupt(f"{where}: stored text is not JSON ({exc})") from exc
    return decode_value(obj, where)
