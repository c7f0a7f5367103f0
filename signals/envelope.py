"""The event envelope: the versioned, immutable record of one signal.

Every event foldline publishes is an :class:`Event`: the envelope fields of
DESIGN.md section 9 around a JSON-compatible ``data`` mapping that the typed
events of :mod:`signals.events` produce.

- ``schema_version`` is :data:`SCHEMA_VERSION`. Additive changes (a new field,
  a new event type) keep the version; readers ignore fields they do not know;
  a breaking change to one event is a new event type.
- ``id`` is ``f"{run_id}:{seq}"``: unique per event within a run, and the same
  when a run's events are read back.
- ``data`` is deep-frozen when the event is built: mappings become read-only
  mapping proxies over private dicts and lists become tuples, so nobody can
  change an event after it was published. :meth:`Event.to_json` gives back
  plain dicts and lists.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs

from runtime.errors import FoldlineError

SCHEMA_VERSION = 1
"""Version of the envelope and of the event types' data; additive changes keep it."""

ENVELOPE_FIELDS = (
    "schema_version",
    "type",
    "id",
    "time",
    "seq",
    "run_id",
    "branch_id",
    "node_id",
    "request_id",
    "data",
)


class InvalidEventError(FoldlineError, ValueError):
    """An event, or the JSON it was read from, is malformed.

    The message names the field, the value and what was expected.
    """


def event_id(run_id: str, seq: int) -> str:
    """The id of the event numbered ``seq`` in run ``run_id``."""
    return f"{run_id}:{seq}"


_SCALARS = frozenset({str, int, bool, type(None)})


class _NotJson(Exception):
    """Internal: raised by the fast freeze; the slow path then names the culprit."""


def _freeze(value: Any) -> Any:
    # The fast path of freeze_json: exact-type dispatch, no error paths built.
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict or kind is MappingProxyType:
        frozen = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotJson
            frozen[key] = item if type(item) in _SCALARS else _freeze(item)
        return MappingProxyType(frozen)
    if kind is float:
        if math.isfinite(value):
            return value
        raise _NotJson
    if kind is list or kind is tuple:
        return tuple([item if type(item) in _SCALARS else _freeze(item) for item in value])
    raise _NotJson


def freeze_json(value: Any, where: str) -> Any:
    """Return a deep-frozen copy of a JSON-compatible value.

    Mappings become :class:`types.MappingProxyType` over a fresh dict (keys
    must be strings), lists and tuples become tuples, and strings, booleans,
    integers, finite floats and ``None`` are kept. Anything else raises
    :class:`InvalidEventError` naming ``where`` (a dotted path) and the value.
    """
    try:
        return _freeze(value)
    except _NotJson:
        return _freeze_naming_culprit(value, where)
    except RecursionError:
        raise InvalidEventError(f"{where}: nested too deeply to be an event's data") from None


def _freeze_naming_culprit(value: Any, where: str) -> Any:
    # The slow path: the same result for good input (subclasses of dict, list,
    # str... included, which the fast path leaves to it) and a precise error
    # for bad input.
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        raise InvalidEventError(f"{where}: {value!r} is not a finite number (JSON has no NaN or infinity)")
    if isinstance(value, Mapping):
        frozen: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidEventError(f"{where}: key {key!r} is not a string (JSON object keys are strings)")
            frozen[key] = _freeze_naming_culprit(item, f"{where}.{key}")
        return MappingProxyType(frozen)
    if isinstance(value, (list, tuple)):
        return tuple(_freeze_naming_culprit(item, f"{where}[{index}]") for index, item in enumerate(value))
    raise InvalidEventError(
        f"{where}: {value!r} of type {type(value).__name__} is not JSON-compatible "
        "(expected a mapping, list, string, number, boolean or None)"
    )


def thaw_json(value: Any) -> Any:
    """Plain dicts and lists for a value :func:`freeze_json` produced (a fresh copy of every container)."""
    kind = type(value)
    if kind in _SCALARS or kind is float:
        return value
    if kind is MappingProxyType or isinstance(value, Mapping):
        return {key: thaw_json(item) for key, item in value.items()}
    if kind is tuple or kind is list:
        return [thaw_json(item) for item in value]
    return value


def _frozen_data(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidEventError(f"Event.data: {value!r} is not a mapping (expected a JSON object)")
    return freeze_json(value, "Event.data")


_new = object.__new__
_set = object.__setattr__
_isfinite = math.isfinite


def _invalid(name: str, value: Any, expected: str) -> InvalidEventError:
    return InvalidEventError(f"Event.{name}: {value!r} is not {expected}")


@attrs.frozen
class Event:
    """One published signal: the envelope and its frozen ``data``.

    Built by :meth:`signals.bus.SignalBus.publish` (which assigns ``seq``,
    ``time`` and ``id``) or read back with :meth:`from_json`. Every field is
    checked at construction; a bad one raises :class:`InvalidEventError`.
    Events compare by value; they are not hashable (``data`` is a mapping).
    """

    schema_version: int
    type: str
    id: str
    time: float
    seq: int
    run_id: str
    branch_id: str | None
    node_id: str | None
    request_id: str | None
    data: Mapping[str, Any] = attrs.field(converter=_frozen_data)

    def __attrs_post_init__(self) -> None:
        # One straight-line check instead of a validator per field: events are
        # built on the bus's hot path.
        version = self.schema_version
        if type(version) is not int or version < 1:
            raise _invalid("schema_version", version, "a positive integer")
        if version > SCHEMA_VERSION:
            raise InvalidEventError(
                f"Event.schema_version: {version} is newer than this reader's version {SCHEMA_VERSION}"
            )
        if type(self.type) is not str or not self.type:
            raise _invalid("type", self.type, "a non-empty string")
        if type(self.id) is not str or not self.id:
            raise _invalid("id", self.id, "a non-empty string")
        time = self.time
        if (type(time) is not float and type(time) is not int) or not math.isfinite(time):
            raise _invalid("time", time, "a finite number (seconds from the run's clock)")
        if type(self.seq) is not int or self.seq < 0:
            raise _invalid("seq", self.seq, "a non-negative integer")
        if type(self.run_id) is not str or not self.run_id:
            raise _invalid("run_id", self.run_id, "a non-empty string")
        for name, value in (("branch_id", self.branch_id), ("node_id", self.node_id), ("request_id", self.request_id)):
            if value is not None and (type(value) is not str or not value):
                raise _invalid(name, value, "a non-empty string or None")

    @classmethod
    def with_frozen_data(
        cls,
        schema_version: int,
        type: str,
        id: str,
        time: float,
        seq: int,
        run_id: str,
        branch_id: str | None,
        node_id: str | None,
        request_id: str | None,
        data: Mapping[str, Any],
    ) -> Event:
        """Build an event whose ``data`` is already deep-frozen JSON (the bus's hot path).

        The caller guarantees ``data`` is a mapping proxy over a dict nobody
        else holds, whose values are JSON scalars, tuples or mapping proxies all
        the way down (a typed event's :meth:`frozen_data`); it is not copied
        again. Every envelope field is still checked.
        """
        event = object.__new__(cls)
        for name, value in (
            ("schema_version", schema_version),
            ("type", type),
            ("id", id),
            ("time", time),
            ("seq", seq),
            ("run_id", run_id),
            ("branch_id", branch_id),
            ("node_id", node_id),
            ("request_id", request_id),
            ("data", data),
        ):
            object.__setattr__(event, name, value)
        event.__attrs_post_init__()
        return event

    @classmethod
    def stamped(
        cls,
        type: str,
        seq: int,
        time: float,
        run_id: str,
        branch_id: str | None,
        node_id: str | None,
        request_id: str | None,
        data: Mapping[str, Any],
    ) -> Event:
        """The bus's constructor: an event of this schema version numbered ``seq`` in ``run_id``.

        The bus guarantees what it makes itself (``seq`` a non-negative
        integer, ``run_id`` a non-empty string, the ``id`` it derives from
        them), so only the fields it is handed are checked here, with the same
        errors as the full constructor. ``data`` is deep-frozen already, as for
        :meth:`with_frozen_data`.
        """
        if type.__class__ is not str or not type:
            raise _invalid("type", type, "a non-empty string")
        time_class = time.__class__
        if (time_class is not float and time_class is not int) or not _isfinite(time):
            raise _invalid("time", time, "a finite number (seconds from the run's clock)")
        if branch_id is not None and (branch_id.__class__ is not str or not branch_id):
            raise _invalid("branch_id", branch_id, "a non-empty string or None")
        if node_id is not None and (node_id.__class__ is not str or not node_id):
            raise _invalid("node_id", node_id, "a non-empty string or None")
        if request_id is not None and (request_id.__class__ is not str or not request_id):
            raise _invalid("request_id", request_id, "a non-empty string or None")
        event = _new(cls)
        setters = _SLOT_SETTERS
        setters["schema_version"](event, SCHEMA_VERSION)
        setters["type"](event, type)
        setters["id"](event, f"{run_id}:{seq}")
        setters["time"](event, time)
        setters["seq"](event, seq)
        setters["run_id"](event, run_id)
        setters["branch_id"](event, branch_id)
        setters["node_id"](event, node_id)
        setters["request_id"](event, request_id)
        setters["data"](event, data)
        return event

    def to_json(self) -> dict[str, Any]:
        """All envelope fields as a fresh JSON-compatible dict (``data`` as a plain dict)."""
        return {
            "schema_version": self.schema_version,
            "type": self.type,
            "id": self.id,
            "time": self.time,
            "seq": self.seq,
            "run_id": self.run_id,
            "branch_id": self.branch_id,
            "node_id": self.node_id,
            "request_id": self.request_id,
            "data": thaw_json(self.data),
        }

    @classmethod
    def from_json(cls, obj: Any) -> Event:
        """Read an event from the dict :meth:`to_json` wrote (e.g. parsed from a JSONL line).

        Unknown fields are ignored (later versions may add some); a missing or
        malformed known field raises :class:`InvalidEventError`. ``branch_id``,
        ``node_id`` and ``request_id`` may be absent (they mean "none").
        """
        if not isinstance(obj, Mapping):
            raise InvalidEventError(f"event: {obj!r} is not a JSON object")
        required = ("schema_version", "type", "id", "time", "seq", "run_id", "data")
        missing = [name for name in required if name not in obj]
        if missing:
            raise InvalidEventError(f"event: missing field(s) {', '.join(missing)} in {dict(obj)!r}")
        return cls(
            schema_version=obj["schema_version"],
            type=obj["type"],
            id=obj["id"],
            time=obj["time"],
            seq=obj["seq"],
            run_id=obj["run_id"],
            branch_id=obj.get("branch_id"),
            node_id=obj.get("node_id"),
            request_id=obj.get("request_id"),
            data=obj["data"],
        )


def _slot_setter(name: str) -> Any:
    # An attrs-frozen class is slotted: each field is a member descriptor whose
    # __set__ writes the slot directly (what object.__setattr__ does, minus the lookup).
    descriptor = Event.__dict__.get(name)
    if descriptor is not None and hasattr(descriptor, "__set__"):
        return descriptor.__set__
    return lambda event, value: _set(event, name, value)


_SLOT_SETTERS = {name: _slot_setter(name) for name in ENVELOPE_FIELDS}
