"""Field checks of the typed events: validators and converters with the messages they raise.

Each validator has attrs' signature ``(instance, attribute, value)`` and raises
:class:`signals.envelope.InvalidEventError` naming the class, the field, the
value and what was expected; each converter freezes what it keeps (tuples,
read-only mappings), so an event cannot change after it is built.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs

from runtime.values.usage import Usage
from signals.envelope import InvalidEventError, freeze_json

NODE_STATUSES = ("ok", "failed", "skipped")
USAGE_FIELDS = (
    "input_tokens",
    "cache_read_input_tokens",
    "cache_write_5m_tokens",
    "cache_write_1h_tokens",
    "output_tokens",
)

SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def where(instance: Any, attribute: attrs.Attribute) -> str:
    return f"{type(instance).__name__}.{attribute.name}"


# Validators (attrs signature: instance, attribute, value).


def text(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidEventError(f"{where(instance, attribute)}: {value!r} is not a non-empty string")


def any_text(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not isinstance(value, str):
        raise InvalidEventError(f"{where(instance, attribute)}: {value!r} is not a string")


def optional_text(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise InvalidEventError(f"{where(instance, attribute)}: {value!r} is not a non-empty string or None")


def count(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if type(value) is not int or value < 0:
        raise InvalidEventError(f"{where(instance, attribute)}: {value!r} is not a non-negative integer")


def optional_count(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is not None:
        count(instance, attribute, value)


def positive(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if type(value) is not int or value < 1:
        raise InvalidEventError(f"{where(instance, attribute)}: {value!r} is not a positive integer")


def optional_positive(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is not None:
        positive(instance, attribute, value)


def flag(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if type(value) is not bool:
        raise InvalidEventError(f"{where(instance, attribute)}: {value!r} is not a boolean")


def digest(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not isinstance(value, str) or not SHA256_HEX.fullmatch(value):
        raise InvalidEventError(
            f"{where(instance, attribute)}: {value!r} is not a SHA-256 digest (64 lowercase hex digits)"
        )


def seconds(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if type(value) is not float or not math.isfinite(value) or value < 0:
        raise InvalidEventError(
            f"{where(instance, attribute)}: {value!r} is not a finite, non-negative number of seconds"
        )


def one_of(*choices: str) -> Any:
    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        if not isinstance(value, str) or value not in choices:
            expected = ", ".join(repr(choice) for choice in choices)
            raise InvalidEventError(f"{where(instance, attribute)}: {value!r} is not one of {expected}")

    return check


# Converters (attrs.Converter with takes_self and takes_field, so errors can name the field).


def to_strings(value: Any, instance: Any, field: attrs.Attribute) -> tuple[str, ...]:
    where = f"{type(instance).__name__}.{field.name}"
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise InvalidEventError(f"{where}: {value!r} is not a list of strings")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise InvalidEventError(f"{where}[{index}]: {item!r} is not a string")
    return tuple(value)


def to_mappings(value: Any, instance: Any, field: attrs.Attribute) -> tuple[Mapping[str, Any], ...]:
    where = f"{type(instance).__name__}.{field.name}"
    if not isinstance(value, (list, tuple)):
        raise InvalidEventError(f"{where}: {value!r} is not a list of JSON objects")
    for index, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise InvalidEventError(f"{where}[{index}]: {item!r} is not a JSON object")
    return freeze_json(tuple(value), where)


def to_optional_object(value: Any, instance: Any, field: attrs.Attribute) -> Mapping[str, Any] | None:
    if value is None:
        return None
    where = f"{type(instance).__name__}.{field.name}"
    if not isinstance(value, Mapping):
        raise InvalidEventError(f"{where}: {value!r} is not a JSON object or null")
    return freeze_json(dict(value), where)


def to_node_statuses(value: Any, instance: Any, field: attrs.Attribute) -> Mapping[str, str]:
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


def to_usage(value: Any, instance: Any, field: attrs.Attribute) -> Usage:
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


def to_seconds(value: Any) -> Any:
    # Integers are accepted as seconds; booleans and everything else reach the validator unchanged.
    return float(value) if type(value) is int else value


# mypy's attrs plugin does not read attrs.Converter (it reports "Unsupported converter"), so
# each field using one carries `type: ignore[misc]`; its __init__ parameter is then untyped.
strings = attrs.Converter(to_strings, takes_self=True, takes_field=True)
mappings = attrs.Converter(to_mappings, takes_self=True, takes_field=True)
node_statuses = attrs.Converter(to_node_statuses, takes_self=True, takes_field=True)
usage = attrs.Converter(to_usage, takes_self=True, takes_field=True)
optional_object = attrs.Converter(to_optional_object, takes_self=True, takes_field=True)
