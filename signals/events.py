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
- Digests are SHA-256 as 64 lowercase hex digits (``runtime.values.canonical``).
- ``RunFinished.nodes`` maps each node id to ``ok``, ``failed`` or ``skipped``.
- ``ReplyDelta`` (additive, schema version 1) is low priority (:data:`LOW_PRIORITY_TYPES`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

import attrs

from runtime.values.usage import Usage
from signals import event_checks as check
from signals.envelope import Event, InvalidEventError, thaw_json

RUN_STATUSES = ("ok", "failed")
OPERATIONS = ("bounded", "iterative")
INHERIT_MODES = ("view", "none")
CEILING_SOURCES = ("profile", "model", "call", "auto", "none", "unpriced", "window")
DECISION_ACTIONS = ("pass", "notice", "fold", "refuse")


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
    scenario: str | None = attrs.field(validator=check.optional_text)
    provider: str = attrs.field(validator=check.text)
    nodes: tuple[str, ...] = attrs.field(converter=check.strings)  # type: ignore[misc]


@attrs.frozen
class RunFinished(_TypedEvent):
    """A run ended: ``ok`` when every node succeeded, else ``failed``; each node's status.

    ``bytes_unrecoverable`` (additive, default 0) counts folded bytes whose
    original the run's end-of-run audit could not recover (the report's
    counter of the same name).
    """

    TYPE: ClassVar[str] = "RunFinished"
    status: str = attrs.field(validator=check.one_of(*RUN_STATUSES))
    nodes: Mapping[str, str] = attrs.field(converter=check.node_statuses)  # type: ignore[misc]
    bytes_unrecoverable: int = attrs.field(default=0, validator=check.count)


@attrs.frozen
class NodeStarted(_TypedEvent):
    """A node began its operation; ``parent`` is the node that spawned it, if any."""

    TYPE: ClassVar[str] = "NodeStarted"
    operation: str = attrs.field(validator=check.one_of(*OPERATIONS))
    parent: str | None = attrs.field(default=None, validator=check.optional_text)


@attrs.frozen
class NodeFinished(_TypedEvent):
    """A node succeeded after ``rounds`` model rounds with an answer of ``answer_chars`` characters."""

    TYPE: ClassVar[str] = "NodeFinished"
    rounds: int = attrs.field(validator=check.count)
    answer_chars: int = attrs.field(validator=check.count)


@attrs.frozen
class NodeFailed(_TypedEvent):
    """A node failed with an error of type ``error_type``."""

    TYPE: ClassVar[str] = "NodeFailed"
    error_type: str = attrs.field(validator=check.text)
    message: str = attrs.field(validator=check.any_text)


@attrs.frozen
class NodeSkipped(_TypedEvent):
    """A node never ran (e.g. a dependency failed); ``reason`` says why."""

    TYPE: ClassVar[str] = "NodeSkipped"
    reason: str = attrs.field(validator=check.text)


@attrs.frozen
class ChildSpawned(_TypedEvent):
    """A running node spawned ``child``, cloning its view (``view``) or starting empty (``none``)."""

    TYPE: ClassVar[str] = "ChildSpawned"
    child: str = attrs.field(validator=check.text)
    inherit: str = attrs.field(validator=check.one_of(*INHERIT_MODES))
    view_length: int = attrs.field(validator=check.count)


@attrs.frozen
class RequestSent(_TypedEvent):
    """A request went to the provider: its digest, size in bytes, attempt (from 1), intent and cache marks."""

    TYPE: ClassVar[str] = "RequestSent"
    digest: str = attrs.field(validator=check.digest)
    bytes: int = attrs.field(validator=check.count)
    attempt: int = attrs.field(validator=check.positive)
    intent: str = attrs.field(validator=check.text)
    marks: tuple[Mapping[str, Any], ...] = attrs.field(converter=check.mappings)  # type: ignore[misc]
    model: str | None = attrs.field(default=None, validator=check.optional_text)


@attrs.frozen
class ResponseReceived(_TypedEvent):
    """A response arrived: its usage, stop reason and how long the call took.

    ``cache`` (additive; null when no marks were placed) is the request's cache
    record: its marks with roles, ``g1``, the read verdict ``read`` and
    ``hit``, and ``tail_skip`` when the turn mark was skipped.
    ``context_management`` (additive; null when the request carried no
    server-side edits) is the response's own: ``applied_edits``, what
    Anthropic's server-side context management did to this request.
    """

    TYPE: ClassVar[str] = "ResponseReceived"
    usage: Usage = attrs.field(converter=check.usage)  # type: ignore[misc]
    stop_reason: str | None = attrs.field(validator=check.optional_text)
    duration_s: float = attrs.field(converter=check.to_seconds, validator=check.seconds)
    cache: Mapping[str, Any] | None = attrs.field(default=None, converter=check.optional_object)  # type: ignore[misc]
    context_management: Mapping[str, Any] | None = attrs.field(
        default=None,
        converter=check.optional_object,  # type: ignore[misc]
    )


@attrs.frozen
class ContextDecision(_TypedEvent):
    """The ceiling decision for one send attempt, refusals included (DESIGN.md sections 4 and 9).

    Beyond each field's own check: a refusal never has ``sent`` true, and with
    no ceiling the only action is ``pass``.
    """

    TYPE: ClassVar[str] = "ContextDecision"
    ceiling: int | None = attrs.field(validator=check.optional_positive)
    ceiling_source: str = attrs.field(validator=check.one_of(*CEILING_SOURCES))
    tier: int | None = attrs.field(validator=check.optional_count)
    method: str = attrs.field(validator=check.text)
    estimate_before: int = attrs.field(validator=check.count)
    estimate_after: int = attrs.field(validator=check.count)
    action: str = attrs.field(validator=check.one_of(*DECISION_ACTIONS))
    stages: tuple[str, ...] = attrs.field(converter=check.strings)  # type: ignore[misc]
    folded_ids: tuple[str, ...] = attrs.field(converter=check.strings)  # type: ignore[misc]
    sent: bool = attrs.field(validator=check.flag)
    reason: str = attrs.field(validator=check.any_text)
    provider_count: int | None = attrs.field(default=None, validator=check.optional_count)
    """The provider's own count (count-tokens endpoint) the decision read; None: decided on our estimate."""
    count_calls: int = attrs.field(default=0, validator=check.count)
    """Count-tokens calls made for this request since the branch's previous decision."""
    fold_line: int | None = attrs.field(default=None, validator=check.optional_count)
    """The fold line in force at this request, in tokens (a folding branch's; the cost model's when it chose it)."""
    fold_target: int | None = attrs.field(default=None, validator=check.optional_count)
    """The target in force at this request, in tokens (a folding branch's)."""

    def __attrs_post_init__(self) -> None:
        if self.action == "refuse" and self.sent:
            raise InvalidEventError("ContextDecision: action 'refuse' with sent=True (a refused request is never sent)")
        if self.ceiling is None and self.action != "pass":
            raise InvalidEventError(
                f"ContextDecision: action {self.action!r} with no ceiling (without a ceiling the only action is 'pass')"
            )


def _optional_amount(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise InvalidEventError(
            f"{check.where(instance, attribute)}: {value!r} is not a finite, non-negative number or None"
        )


@attrs.frozen
class FoldCommitted(_TypedEvent):
    """A fold was committed: its stages, the model's marks and host stages applied, and what it freed.

    Additive (issue 19, each defaulting to None so earlier data still reads): ``policy``
    (``cost`` when the cost model chose this commit, else ``fixed``), ``target_tokens``
    (the target the planner folded toward), ``growth_tokens`` (the growth per request
    the model used), ``predicted_bit`` and ``predicted_requests`` (the cycle this commit
    starts, as the model predicted it: the commit, then each request's carrying and new
    tokens at the write price, in base-input-token units, and its length in requests),
    and ``realised_bit`` and ``realised_requests`` (what the cycle the previous commit
    of the same turn started really cost, every reply priced, output included, and its
    main requests; None for a turn's first commit).
    """

    TYPE: ClassVar[str] = "FoldCommitted"
    stages: tuple[str, ...] = attrs.field(converter=check.strings)  # type: ignore[misc]
    agent_marks: int = attrs.field(validator=check.count)
    host_stages: int = attrs.field(validator=check.count)
    tokens_freed: int = attrs.field(validator=check.count)
    target_reached: bool = attrs.field(validator=check.flag)
    estimate_before: int = attrs.field(validator=check.count)
    estimate_after: int = attrs.field(validator=check.count)
    policy: str | None = attrs.field(default=None, validator=attrs.validators.optional(check.one_of("cost", "fixed")))
    target_tokens: int | None = attrs.field(default=None, validator=check.optional_count)
    growth_tokens: float | None = attrs.field(default=None, validator=_optional_amount)
    predicted_bit: float | None = attrs.field(default=None, validator=_optional_amount)
    predicted_requests: float | None = attrs.field(default=None, validator=_optional_amount)
    realised_bit: float | None = attrs.field(default=None, validator=_optional_amount)
    realised_requests: int | None = attrs.field(default=None, validator=check.optional_count)
    fold_line_tokens: int | None = attrs.field(default=None, validator=check.optional_count)
    """The fold line in force when the commit was chosen (the cost model's, else the profile's fraction)."""
    stopped: str | None = attrs.field(default=None, validator=attrs.validators.optional(check.any_text))
    """Why the fold stopped above its target, in words (None: it reached it)."""


@attrs.frozen
class CacheRewrite(_TypedEvent):
    """A request rewrote the cached prefix from message ``first_changed_message`` on.

    ``cause`` names why (e.g. a fold); None means unexplained.
    """

    TYPE: ClassVar[str] = "CacheRewrite"
    cause: str | None = attrs.field(validator=check.optional_text)
    first_changed_message: int = attrs.field(validator=check.count)
    request_digest: str = attrs.field(validator=check.digest)


@attrs.frozen
class ToolCallFinished(_TypedEvent):
    """A tool call of a node's round has its result: the tool, whether it is an error, the result's size in bytes."""

    TYPE: ClassVar[str] = "ToolCallFinished"
    call_id: str = attrs.field(validator=check.text)
    name: str = attrs.field(validator=check.text)
    is_error: bool = attrs.field(validator=check.flag)
    output_bytes: int = attrs.field(validator=check.count)


DELTA_KINDS = ("text", "thinking")


@attrs.frozen
class ReplyDelta(_TypedEvent):
    """A piece of a reply as it streams in: ``text`` of a text or thinking block (``kind``); progress only.

    Low priority (:meth:`signals.bus.SignalBus.publish_progress`): built only for ``drop_oldest``
    subscriptions naming the type, never waited for, never seen by sinks or reports. ``index``
    numbers the pieces of send attempt ``attempt`` from 0 (a retried attempt streams anew).
    """

    TYPE: ClassVar[str] = "ReplyDelta"
    kind: str = attrs.field(validator=check.one_of(*DELTA_KINDS))
    text: str = attrs.field(validator=check.any_text)
    attempt: int = attrs.field(validator=check.positive)
    index: int = attrs.field(validator=check.count)


LOW_PRIORITY_TYPES: frozenset[str] = frozenset({ReplyDelta.TYPE})
"""Event types published only to subscriptions that name them, never waited for."""

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
            ReplyDelta,
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
