"""The checks behind every configuration value: key paths, messages, type rules.

Shared by :mod:`runtime.config` (frozen values built from code or from a plain
dict) and :mod:`runtime.config.loader` (the file loader), so code and files refuse
exactly the same values with the same words. Every refusal is a
:class:`~runtime.errors.ConfigError` whose message starts with the key path.
Booleans are never numbers, strings are never numbers, an explicit null is
refused where a key would otherwise be absent, and unknown keys are refused by
name with a close match suggested. Pure: no I/O, no clock.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TypeVar, cast

import attrs

from runtime.decision.ceiling import CeilingPolicy, parse_max_input_tokens
from runtime.errors import ConfigError
from runtime.inputs.bounds import MAX_MODEL_NAME_CHARS, MAX_NAME_CHARS
from runtime.inputs.nesting import nested_deeper_than

CeilingValue = CeilingPolicy
"""A ceiling as configured (the one type, :data:`runtime.decision.ceiling.CeilingPolicy`)."""
"""A ``max_input_tokens`` value: a positive int, ``"auto"``, ``"none"``, or None (unset)."""

_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")
_BARE_KEY_RE = re.compile(r"[A-Za-z0-9_-]+")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ENV_NAME_EXPECTED = 'an environment variable name (letters, digits and "_", not starting with a digit)'
_NAME_EXPECTED = 'a name made of letters, digits, "_", "." and "-"'
_RENDER_LIMIT = 120

_T = TypeVar("_T")

MAX_CEILING = 100_000_000
"""The upper bound of any integer ``max_input_tokens`` (far above every known context window)."""


# -- key paths and messages -------------------------------------------------


def join_key(parent: str, key: str) -> str:
    """``parent.key``; a key that is not a bare TOML key is quoted as TOML quotes it."""
    segment = key if _BARE_KEY_RE.fullmatch(key) else json.dumps(key, ensure_ascii=False)
    return f"{parent}.{segment}" if parent else segment


def join_index(parent: str, index: int) -> str:
    """``parent[index]`` (indexes count from 0)."""
    return f"{parent}[{index}]"


def render_value(value: Any) -> str:
    """A short TOML-like rendering of a value for error messages (at most 120 characters)."""
    text = _render(value, _RENDER_LIMIT)
    return text if len(text) <= _RENDER_LIMIT else text[: _RENDER_LIMIT - 3] + "..."


def _render(value: Any, budget: int) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, int):
        try:
            return str(value)
        except ValueError:  # more digits than int-to-str conversion allows
            return f"an integer of about {int(value.bit_length() * 0.30103)} digits"
    if isinstance(value, (datetime.date, datetime.time)):  # datetime is a date too
        return value.isoformat()
    if isinstance(value, str):
        return json.dumps(value[:budget], ensure_ascii=False) + ("..." if len(value) > budget else "")
    if isinstance(value, (list, tuple)):
        return "[" + _render_items((_render(v, budget) for v in value), budget) + "]"
    if isinstance(value, Mapping):
        items = (f"{k} = {_render(v, budget)}" for k, v in value.items())
        return "{ " + _render_items(items, budget) + " }"
    return repr(value)


def _render_items(items: Any, budget: int) -> str:
    parts: list[str] = []
    used = 0
    for part in items:
        if used > budget:
            parts.append("...")
            break
        parts.append(part)
        used += len(part) + 2
    return ", ".join(parts)


def _kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, datetime.datetime):
        return "a date-time"
    if isinstance(value, datetime.date):
        return "a date"
    if isinstance(value, datetime.time):
        return "a time"
    return f"a {type(value).__name__}"


def wrong_type(where: str, value: Any, expected: str) -> ConfigError:
    """The error for a value of the wrong type: ``where: "0.8" is a string, not <expected>``."""
    if value is None:
        return ConfigError(f"{where}: null is not {expected}")
    return ConfigError(f"{where}: {render_value(value)} is {_kind_of(value)}, not {expected}")


def bad_value(where: str, value: Any, expected: str) -> ConfigError:
    """The error for a value of the right type outside its range: ``where: 0 is not <expected>``."""
    return ConfigError(f"{where}: {render_value(value)} is not {expected}")


def _did_you_mean(word: str, choices: Collection[str]) -> str:
    import difflib  # only a refusal suggests a name

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""


def _listing(names: Collection[str]) -> str:
    return ", ".join(sorted(names)) if names else "(none)"


# -- tables ---------------------------------------------------------------


def require_table(obj: Any, where: str) -> Mapping[str, Any]:
    """``obj`` itself if it is a mapping with string keys, else a ConfigError."""
    if not isinstance(obj, Mapping):
        raise wrong_type(where or "document", obj, "a table")
    for key in obj:
        if not isinstance(key, str):
            raise ConfigError(f"{where or 'document'}: key {render_value(key)} is {_kind_of(key)}, not a string")
    return obj


def reject_unknown_keys(obj: Mapping[str, Any], known: Collection[str], where: str) -> None:
    """Refuse the first key of ``obj`` (in order) that is not in ``known``, suggesting a close one."""
    for key in obj:
        if key not in known:
            raise ConfigError(
                f"{join_key(where, key)}: unknown key; expected one of {_listing(known)}{_did_you_mean(key, known)}"
            )


def _reject_nulls(obj: Mapping[str, Any], where: str) -> None:
    for key, value in obj.items():
        if value is None:
            raise ConfigError(f"{join_key(where, key)}: null is not allowed; omit the key to leave it unset")


def _table_fields(obj: Any, where: str, cls: type, required: Collection[str] = ()) -> dict[str, Any]:
    """The checked top-level keys of a dict describing an instance of ``cls``."""
    table = require_table(obj, where)
    reject_unknown_keys(table, _field_names(cls), where)
    _reject_nulls(table, where)
    for key in required:
        if key not in table:
            raise ConfigError(f"{join_key(where, key)}: missing; this key is required")
    # The fields' own converters (array -> tuple, int -> float), so a value is
    # checked, and named in a refusal, exactly as the constructor would see it.
    converters = {f.name: f.converter for f in attrs.fields(cls) if f.converter is not None}
    return {key: converters[key](value) if key in converters else value for key, value in table.items()}


def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in attrs.fields(cls))


def _values_of(instance: Any) -> dict[str, Any]:
    return {f.name: getattr(instance, f.name) for f in attrs.fields(type(instance))}


def _defaults_of(cls: type) -> dict[str, Any]:
    return {f.name: f.default for f in attrs.fields(cls) if f.default is not attrs.NOTHING}


def _evolve(instance: _T, changes: Mapping[str, Any]) -> _T:
    where = type(instance).__name__
    reject_unknown_keys(changes, _field_names(type(instance)), where)
    evolved: _T = attrs.evolve(cast(Any, instance), **changes)
    return evolved


# -- converters (never raise: a bad value is left for the checks to name) ---


def _tuple_if_array(value: Any) -> Any:
    return tuple(value) if isinstance(value, (list, tuple)) else value


def _float_if_int(value: Any) -> Any:
    if type(value) is int:
        try:
            return float(value)
        except OverflowError:
            return value
    return value


# -- scalar checks --------------------------------------------------------


def check_bool(value: Any, where: str) -> bool:
    """A real boolean (never 0/1 or a string such as "true")."""
    if not isinstance(value, bool):
        raise wrong_type(where, value, "a boolean (true or false)")
    return value


def check_int(value: Any, where: str, *, minimum: int, maximum: int, expected: str) -> int:
    """An int (never a bool, float or string) with ``minimum <= value <= maximum``.

    ``expected`` describes the lower bound; the upper bound is named in the
    refusal of a value above it.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise wrong_type(where, value, expected)
    if value < minimum:
        raise bad_value(where, value, expected)
    if value > maximum:
        raise ConfigError(
            f"{where}: {render_value(value)} is above the upper bound {maximum}; expected {expected} up to {maximum}"
        )
    return value


def check_number(value: Any, where: str, *, within: Callable[[float], bool], expected: str) -> float:
    """A finite int or float (never a bool or string) for which ``within`` holds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise wrong_type(where, value, expected)
    try:
        number = float(value)
    except OverflowError:
        raise bad_value(where, value, expected) from None
    if not math.isfinite(number) or not within(number):
        raise bad_value(where, value, expected)
    return number


def check_length(value: str, where: str, limit: int) -> str:
    """``value`` when it is at most ``limit`` characters long (the refusal shows its length and head, not all of it)."""
    if len(value) > limit:
        raise ConfigError(
            f"{where}: {render_value(value[:40])}... is {len(value)} characters long, above the upper bound {limit}"
        )
    return value


def check_model_name(value: Any, where: str, *, expected: str = "a model name") -> str:
    """A model name: non-empty text of at most :data:`MAX_MODEL_NAME_CHARS` characters."""
    return check_length(check_text(value, where, expected=expected), where, MAX_MODEL_NAME_CHARS)


def check_depth(value: Any, where: str, limit: int) -> None:
    """Refuse a JSON-like value (dicts and lists) nested deeper than ``limit`` levels, naming ``where``."""
    if nested_deeper_than(value, limit):
        raise ConfigError(f"{where}: nested deeper than the upper bound of {limit} levels of objects and arrays")


def check_text(value: Any, where: str, *, expected: str = "non-empty text") -> str:
    """A string with at least one non-space character."""
    if not isinstance(value, str):
        raise wrong_type(where, value, expected)
    if not value.strip():
        raise bad_value(where, value, expected)
    return value


def check_name(value: Any, where: str, *, expected: str = _NAME_EXPECTED) -> str:
    """A non-empty string of letters, digits, ``_``, ``.`` and ``-``, at most :data:`MAX_NAME_CHARS` long."""
    if not isinstance(value, str):
        raise wrong_type(where, value, expected)
    check_length(value, where, MAX_NAME_CHARS)
    if not _NAME_RE.fullmatch(value):
        raise bad_value(where, value, expected)
    return value


def check_choice(value: Any, where: str, choices: Sequence[str]) -> str:
    """One of ``choices``; a near miss is named in the refusal."""
    expected = "one of " + ", ".join(f'"{c}"' for c in choices)
    if not isinstance(value, str):
        raise wrong_type(where, value, expected)
    if value not in choices:
        raise ConfigError(f"{where}: {render_value(value)} is not {expected}{_did_you_mean(value, choices)}")
    return value


def check_array(value: Any, where: str, *, expected: str) -> Sequence[Any]:
    """A list or tuple (its items are checked by the caller)."""
    if not isinstance(value, (list, tuple)):
        raise wrong_type(where, value, expected)
    return value


def _check_unique_names(value: Any, where: str, *, what: str, check: Callable[[Any, str], str]) -> None:
    seen: set[str] = set()
    for i, item in enumerate(check_array(value, where, expected=f"an array of {what}")):
        name = check(item, join_index(where, i))
        if name in seen:
            raise ConfigError(f"{join_index(where, i)}: {render_value(name)} is listed twice")
        seen.add(name)


def check_ceiling(value: Any, where: str) -> CeilingValue:
    """A ``max_input_tokens`` value, checked by the ceiling policy's own parser; None is unset.

    An integer ceiling is also bounded above by :data:`MAX_CEILING` (no model's
    window comes near it); the model's own window is checked where the model is
    known (:mod:`runtime.config.ceilings`).
    """
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value > MAX_CEILING:
        raise ConfigError(
            f"{where}: {render_value(value)} is above the upper bound {MAX_CEILING}; "
            f'expected a positive integer <= {MAX_CEILING}, "auto" or "none"'
        )
    try:
        parsed: CeilingValue = parse_max_input_tokens(value, where)
    except ConfigError:  # the same refusal, the value rendered as every other check renders it
        raise ConfigError(f'{where}: {render_value(value)} is not a positive integer, "auto" or "none"') from None
    return parsed


# -- integers beyond 64 bits --------------------------------------------------

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def check_document_ints(obj: Any, where: str = "") -> None:
    """Refuse any integer in a parsed document beyond TOML's signed 64-bit range.

    TOML forbids such integers, but ``tomllib`` accepts them; this walk (an
    explicit stack, so a deeply nested document cannot exhaust the recursion
    limit) names the first one by its key path.
    """
    stack: list[tuple[str, Any]] = [(where, obj)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            if not INT64_MIN <= value <= INT64_MAX:
                raise ConfigError(
                    f"{path or 'document'}: {render_value(value)} is beyond 64 bits; "
                    f"TOML integers are signed 64-bit ({INT64_MIN} to {INT64_MAX})"
                )
        elif isinstance(value, Mapping):
            stack.extend((join_key(path, str(k)), v) for k, v in reversed(list(value.items())))
        elif isinstance(value, (list, tuple)):
            stack.extend((join_index(path, i), v) for i, v in reversed(list(enumerate(value))))
