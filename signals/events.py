"""The typed events of DESIGN.md section 9: one frozen class per event type.

Each class has a class-level ``TYPE`` (the envelope's ``type`` string),
validates its fields at construction (a bad value raises
:class:`signals.envelope.InvalidEventError` naming the class, the field, the
value and what was expected), and renders its ``data`` with ``to_data()`` as a
fresh JSON-compatible dict. ``from_data(data)`` reads it back, ignoring fields
it does not know (readers ignore unknown fields), and :func:`payload_of` turns a
published :class:`~signals.envelope.Event` back into its typed event.

List fields are stored as tuples and mapping fields as read-only mappings, so
a typed event cannot change after it is built.

Conventions the specification leaves open, fixed here:

- ``RequestSent.attempt`` counts from 1 (the first send of a request is 1).
- Digests are SHA-256 as 64 lowercase hex digits (``runtime.canonical``).
- ``RunFinished.nodes`` maps each node id to ``ok``, ``failed`` or ``skipped``.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

import attrs

from runtime.usage import Usage
from signals.envelope import Event, InvalidEventError, freeze_json, thaw_json

RUN_STATUSES = ("ok", "failed")
NODE_STATUSES = ("ok", "failed", "skipped")
OPERATIONS = ("bounded", "iterative")
INHERIT_MODES = ("view", "none")
CEILING_SOURCES = ("profile", "model", "call", "auto", "none", "unpriced", "window")
DECISION_ACTIONS = ("pass", "notice", "fold", "refuse")
USAGE_FIELDS = (
    "input_tokens",
    "cache_read_input_tokens",
    "cache_write_5m_tokens",
    "cache_write_1h_tokens",
    "output_tokens",
)

_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def _where(instance: Any, attribute: attrs.Attribute) -> str:
    return f"{type(instance).__name__}.{attribute.name}"


# Validators (attrs signature: instance, attribute, value).


def _text(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidEventError(f"{_where(instance, attribute)}: {value!r} is not a non-empty string")


def _any_text(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not isinstance(value, str):
        raise InvalidEventError(f"{_where(instance, attribute)}: {value!r} is not a string")


def _optional_text(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise InvalidEventError(f"{_where(instance, attribute)}: {value!r} is not a non-empty string or None")


def _count(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if type(value) is not int or value < 0:
        raise InvalidEventError(f"{_where(instance, attribute)}: {value!r} is not a non-negative integer")


def _optional_count(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is not None:
        _count(instance, attribute, value)


def _positive(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if type(value) is not int or value < 1:
        raise InvalidEventError(f"{_where(instance, attribute)}: {value!r} is not a positive integer")


def _optional_positive(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is not None:
        _positive(instance, attribute, value)


def _flag(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if type(value) is not bool:
        raise InvalidEventError(f"{_where(instance, attribute)}: {value!r} is not a boolean")


def _digest(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not isinstance(value, str) or not _SHA256_HEX.fullmatch(value):
        raise InvalidEventError(
            f"{_where(instance, attribute)}: {value!r} is not a SHA-256 digest (64 lowercase hex digits)"
        )


def _seconds(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if type(value) is not float or not math.isfinite(value) or value < 0:
        raise InvalidEventError(
            f"{_where(instance, attribute)}: {value!r} is not a finite, non-negative number of seconds"
        )


def _one_of(*choices: str) -> Any:
    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        if not isinstance(value, str) or value not in choices:
            expected = ", ".join(repr(choice) for choice in choices)
            raise InvalidEventError(f"{_where(instance, attribute)}: {value!r} is not one of {expected}")

    return check


# Converters (attrs.Converter with takes_self and takes_field, so errors can name the field).


def _to_strings(value: Any, instance: Any, field: attrs.Attribute) -> tuple[str, ...]:
    where = f"{type(instance).__name__}.{field.name}"
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise InvalidEventError(f"{where}: {value!r} is not a list of strings")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise InvalidEventError(f"{where}[{index}]: {item!r} is not a string")
    return tuple(value)


def _to_mappings(value: Any, instance: Any, field: attrs.Attribute) -> tuple[Mapping[str, Any], ...]:
    where = f"{type(instance).__name__}.{field.name}"
    if not isinstance(value, (list, tuple)):
        raise InvalidEventError(f"{where}: {value!r} is not a list of JSON objects")
    for index, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise InvalidEventError(f"{where}[{index}]: {item!r} is not a JSON object")
    return freeze_json(tuple(value), where)


def _to_optional_object(value: Any, instance: Any, field: attrs.Attribute) -> Mapping[str, Any] | None:
    if value is None:
        return None
    where = f"{type(instance).__name__}.{field.name}"
    if not isinstance(value, Mapping):
        raise InvalidEventError(f"{where}: {value!r} is not a JSON object or null")
    return freeze_json(dict(value), where)


def _to_node_statuses(value: Any, instance: Any, field: attrs.Attribute) -> Mapping[str, str]:
    where = f"{type(instance).__name__}.{field.name}"
    if not isinstance(value, Mapping):
        raise InvalidEventError(f"{where}: {value!r} is not a mapping of node id to status")
    statuses: dict[str, str] = {}
    for node_id, status in value.items():
        if not isinstance(node_id, str) or not node_id:
            raise InvalidEventError(f"{where}: node id {node_id!r} is not a non-empty string")
        if not isinstance(status, str) or status not in NODE_STATUSES:
            expected = ", ".join(repr(choice) for choice in NODE_STATUSES)
            raise InvalidEventError(f"{where}[{node_id!r}]: {status!r} is not one of {expected}")
        statuses[node_id] = status
    return MappingProxyType(statuses)


def _to_usage(value: Any, instance: Any, field: attrs.Attribute) -> Usage:
    if type(value) is Usage:
        # The hot path (every ResponseReceived): a Usage whose counts are all non-negative ints.
        for count in (
            value.input_tokens,
            value.cache_read_input_tokens,
            value.cache_write_5m_tokens,
            value.cache_write_1h_tokens,
            value.output_tokens,
        ):
            if type(count) is not int or count < 0:
                break
        else:
            return value
    where = f"{type(instance).__name__}.{field.name}"
    if isinstance(value, Usage):
        counts = {name: getattr(value, name) for name in USAGE_FIELDS}
    elif isinstance(value, Mapping):
        missing = [name for name in USAGE_FIELDS if name not in value]
        if missing:
            raise InvalidEventError(f"{where}: {dict(value)!r} is missing {', '.join(missing)}")
        counts = {name: value[name] for name in USAGE_FIELDS}
    else:
        raise InvalidEventError(f"{where}: {value!r} is not a Usage or a mapping of {', '.join(USAGE_FIELDS)}")
    for name, count in counts.items():
        if type(count) is not int or count < 0:
            raise InvalidEventError(f"{where}.{name}: {count!r} is not a non-negative integer")
    return value if isinstance(value, Usage) else Usage(**counts)


def _to_seconds(value: Any) -> Any:
    # Integers are accepted as seconds; booleans and everything else reach the validator unchanged.
    return float(value) if type(value) is int else value


# mypy's attrs plugin does not read attrs.Converter (it reports "Unsupported converter"), so
# each field using one carries `type: ignore[misc]`; its __init__ parameter is then untyped.
_strings = attrs.Converter(_to_strings, takes_self=True, takes_field=True)
_mappings = attrs.Converter(_to_mappings, takes_self=True, takes_field=True)
_node_statuses = attrs.Converter(_to_node_statuses, takes_self=True, takes_field=True)
_usage = attrs.Converter(_to_usage, takes_self=True, takes_field=True)
_optional_object = attrs.Converter(_to_optional_object, takes_self=True, takes_field=True)


class _TypedEvent:
    """Shared reading and writing of a typed event's ``data``."""

    __slots__ = ()

    TYPE: ClassVar[str]

    def to_data(self) -> dict[str, Any]:
        """The event's ``data``: a fresh JSON-compatible dict, one key per field."""
        kind: type = type(self)  # typed as a plain type: mypy cannot match type[_TypedEvent] to Hashable
        return {name: _plain(getattr(self, name)) for name in _field_names(kind)}

    def frozen_data(self) -> Mapping[str, Any]:
        """The event's ``data`` deep-frozen, without copying what is frozen already.

        Every field's converter froze its value at construction (tuples and
        mapping proxies), so only a :class:`Usage` needs a JSON form here.
        """
        values = {}
        kind: type = type(self)  # typed as a plain type: mypy cannot match type[_TypedEvent] to Hashable
        for name in _field_names(kind):
            value = getattr(self, name)
            values[name] = MappingProxyType(value.to_dict()) if isinstance(value, Usage) else value
        return MappingProxyType(values)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Any:
        """Build the event from its ``data``.

        Unknown keys are ignored. A field added to a type after it first
        shipped has a default, so data written before it existed still reads;
        any other missing field raises :class:`InvalidEventError`.
        """
        if not isinstance(data, Mapping):
            raise InvalidEventError(f"{cls.__name__}: data {data!r} is not a mapping")
        kind: type = cls  # typed as a plain type: mypy cannot match type[_TypedEvent] to Hashable
        missing = [name for name in _required_field_names(kind) if name not in data]
        if missing:
            raise InvalidEventError(f"{cls.__name__}: data is missing {', '.join(missing)}: {dict(data)!r}")
        return cls(**{name: thaw_json(data[name]) for name in _field_names(kind) if name in data})


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(field.name for field in attrs.fields(cls))


@functools.cache
def _required_field_names(cls: type) -> tuple[str, ...]:
    return tuple(field.name for field in attrs.fields(cls) if field.default is attrs.NOTHING)


def _plain(value: Any) -> Any:
    if isinstance(value, Usage):
        return value.to_dict()
    return thaw_json(value)


@attrs.frozen
class RunStarted(_TypedEvent):
    """A run began: its scenario (if any), provider and the ids of its planned nodes."""

    TYPE: ClassVar[str] = "RunStarted"
    scenario: str | None = attrs.field(validator=_optional_text)
    provider: str = attrs.field(validator=_text)
    nodes: tuple[str, ...] = attrs.field(converter=_strings)  # type: ignore[misc]


@attrs.frozen
class RunFinished(_TypedEvent):
    """A run ended: ``ok`` when every node succeeded, else ``failed``; each node's status.

    ``bytes_unrecoverable`` (additive, default 0) counts folded bytes whose
    original the run's end-of-run audit could not recover (the report's
    counter of the same name).
    """

    TYPE: ClassVar[str] = "RunFinished"
    status: str = attrs.field(validator=_one_of(*RUN_STATUSES))
    nodes: Mapping[str, str] = attrs.field(converter=_node_statuses)  # type: ignore[misc]
    bytes_unrecoverable: int = attrs.field(default=0, validator=_count)


@attrs.frozen
class NodeStarted(_TypedEvent):
    """A node began its operation; ``parent`` is the node that spawned it, if any."""

    TYPE: ClassVar[str] = "NodeStarted"
    operation: str = attrs.field(validator=_one_of(*OPERATIONS))
    parent: str | None = attrs.field(default=None, validator=_optional_text)


@attrs.frozen
class NodeFinished(_TypedEvent):
    """A node succeeded after ``rounds`` model rounds with an answer of ``answer_chars`` characters."""

    TYPE: ClassVar[str] = "NodeFinished"
    rounds: int = attrs.field(validator=_count)
    answer_chars: int = attrs.field(validator=_count)


@attrs.frozen
class NodeFailed(_TypedEvent):
    """A node failed with an error of type ``error_type``."""

    TYPE: ClassVar[str] = "NodeFailed"
    error_type: str = attrs.field(validator=_text)
    message: str = attrs.field(validator=_any_text)


@attrs.frozen
class NodeSkipped(_TypedEvent):
    """A node never ran (e.g. a dependency failed); ``reason`` says why."""

    TYPE: ClassVar[str] = "NodeSkipped"
    reason: str = attrs.field(validator=_text)


@attrs.frozen
class ChildSpawned(_TypedEvent):
    """A running node spawned ``child``, cloning its view (``view``) or starting empty (``none``)."""

    TYPE: ClassVar[str] = "ChildSpawned"
    child: str = attrs.field(validator=_text)
    inherit: str = attrs.field(validator=_one_of(*INHERIT_MODES))
    view_length: int = attrs.field(validator=_count)


@attrs.frozen
class RequestSent(_TypedEvent):
    """A request went to the provider: its digest, size in bytes, attempt (from 1), intent and cache marks."""

    TYPE: ClassVar[str] = "RequestSent"
    digest: str = attrs.field(validator=_digest)
    bytes: int = attrs.field(validator=_count)
    attempt: int = attrs.field(validator=_positive)
    intent: str = attrs.field(validator=_text)
    marks: tuple[Mapping[str, Any], ...] = attrs.field(converter=_mappings)  # type: ignore[misc]
    model: str | None = attrs.field(default=None, validator=_optional_text)


@attrs.frozen
class ResponseReceived(_TypedEvent):
    """A response arrived: its usage, stop reason and how long the call took.

    ``cache`` (additive; null when no marks were placed) is the request's cache
    record: its marks with roles, ``g1``, the read verdict ``read`` and
    ``hit``, and ``tail_skip`` when the turn mark was skipped.
    """

    TYPE: ClassVar[str] = "ResponseReceived"
    usage: Usage = attrs.field(converter=_usage)  # type: ignore[misc]
    stop_reason: str | None = attrs.field(validator=_optional_text)
    duration_s: float = attrs.field(converter=_to_seconds, validator=_seconds)
    cache: Mapping[str, Any] | None = attrs.field(default=None, converter=_optional_object)  # type: ignore[misc]


@attrs.frozen
class ContextDecision(_TypedEvent):
    """The ceiling decision for one send attempt, refusals included (DESIGN.md sections 4 and 9).

    Beyond each field's own check: a refusal never has ``sent`` true, and with
    no ceiling the only action is ``pass``.
    """

    TYPE: ClassVar[str] = "ContextDecision"
    ceiling: int | None = attrs.field(validator=_optional_positive)
    ceiling_source: str = attrs.field(validator=_one_of(*CEILING_SOURCES))
    tier: int | None = attrs.field(validator=_optional_count)
    method: str = attrs.field(validator=_text)
    estimate_before: int = attrs.field(validator=_count)
    estimate_after: int = attrs.field(validator=_count)
    action: str = attrs.field(validator=_one_of(*DECISION_ACTIONS))
    stages: tuple[str, ...] = attrs.field(converter=_strings)  # type: ignore[misc]
    folded_ids: tuple[str, ...] = attrs.field(converter=_strings)  # type: ignore[misc]
    sent: bool = attrs.field(validator=_flag)
    reason: str = attrs.field(validator=_any_text)
    provider_count: int | None = attrs.field(default=None, validator=_optional_count)
    """The provider's own count (count-tokens endpoint) the decision read; None: decided on our estimate."""
    count_calls: int = attrs.field(default=0, validator=_count)
    """Count-tokens calls made for this request since the branch's previous decision."""

    def __attrs_post_init__(self) -> None:
        if self.action == "refuse" and self.sent:
            raise InvalidEventError("ContextDecision: action 'refuse' with sent=True (a refused request is never sent)")
        if self.ceiling is None and self.action != "pass":
            raise InvalidEventError(
                f"ContextDecision: action {self.action!r} with no ceiling (without a ceiling the only action is 'pass')"
            )


@attrs.frozen
class FoldCommitted(_TypedEvent):
    """A fold was committed: its stages, the model's marks and host stages applied, and what it freed."""

    TYPE: ClassVar[str] = "FoldCommitted"
    stages: tuple[str, ...] = attrs.field(converter=_strings)  # type: ignore[misc]
    agent_marks: int = attrs.field(validator=_count)
    host_stages: int = attrs.field(validator=_count)
    tokens_freed: int = attrs.field(validator=_count)
    target_reached: bool = attrs.field(validator=_flag)
    estimate_before: int = attrs.field(validator=_count)
    estimate_after: int = attrs.field(validator=_count)


@attrs.frozen
class CacheRewrite(_TypedEvent):
    """A request rewrote the cached prefix from message ``first_changed_message`` on.

    ``cause`` names why (e.g. a fold); None means unexplained.
    """

    TYPE: ClassVar[str] = "CacheRewrite"
    cause: str | None = attrs.field(validator=_optional_text)
    first_changed_message: int = attrs.field(validator=_count)
    request_digest: str = attrs.field(validator=_digest)


@attrs.frozen
class ToolCallFinished(_TypedEvent):
    """A tool call of a node's round has its result: the tool, whether it is an error, the result's size in bytes."""

    TYPE: ClassVar[str] = "ToolCallFinished"
    call_id: str = attrs.field(validator=_text)
    name: str = attrs.field(validator=_text)
    is_error: bool = attrs.field(validator=_flag)
    output_bytes: int = attrs.field(validator=_count)


EVENT_TYPES: Mapping[str, type[_TypedEvent]] = MappingProxyType(
    {
        cls.TYPE: cls
        for cls in (
            RunStarted,
            RunFinished,
            NodeStarted,
            NodeFinished,
            NodeFailed,
            NodeSkipped,
            ChildSpawned,
            RequestSent,
            ResponseReceived,
            ContextDecision,
            FoldCommitted,
            CacheRewrite,
            ToolCallFinished,
        )
    }
)
"""Every event type foldline defines, by its ``TYPE`` string."""


def payload_of(event: Event) -> _TypedEvent:
    """The typed event an :class:`Event` carries, rebuilt from its ``data``.

    Raises :class:`InvalidEventError` for a type this version does not define
    (a reader that wants to skip those checks ``event.type in EVENT_TYPES``).
    """
    cls = EVENT_TYPES.get(event.type)
    if cls is None:
        known = ", ".join(sorted(EVENT_TYPES))
        raise InvalidEventError(f"event {event.id}: type {event.type!r} is not one of {known}")
    return cls.from_data(event.data)
