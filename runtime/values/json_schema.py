"""JSON Schema for structured outputs and tool arguments: checking a schema, a value, and building a value (pure).

The subset is the one structured outputs accept (the ``anthropic`` SDK's
``transform_schema`` reduces a pydantic schema to it): ``type`` (one or a
list), ``enum``, ``const``, ``anyOf`` / ``oneOf`` / ``allOf``, local ``$ref``
into ``$defs`` / ``definitions``, ``properties`` / ``required`` /
``additionalProperties``, ``items`` / ``minItems`` / ``maxItems``,
``minimum`` / ``maximum`` / ``exclusiveMinimum`` / ``exclusiveMaximum``,
``minLength`` / ``maxLength``, ``pattern`` and the string ``format`` values
the API lists. Other keywords (``title``, ``description``, ``default``, ...)
describe and do not constrain.

:func:`check_schema` bounds a schema a request carries (depth, size, a root
object, ``$ref`` targets that exist) with errors naming the key path;
:func:`violation` says where a value breaks a schema (None: it conforms);
:func:`example_value` builds a value deterministically from the schema (its
``default``, first ``enum`` value, ``const``, first non-null ``anyOf``
option, or a value of its type that meets the bounds, those the ``anthropic``
SDK moved into the description included).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

MAX_SCHEMA_DEPTH = 32
"""The deepest nesting of schema objects a request's schema may have."""
MAX_SCHEMA_NODES = 5_000
"""The most schema objects one schema may hold."""
_MAX_EXAMPLE_DEPTH = 8
FORMAT_EXAMPLES: Mapping[str, str] = {
    "date-time": "2026-01-01T00:00:00Z",
    "time": "00:00:00Z",
    "date": "2026-01-01",
    "duration": "P1D",
    "email": "user@example.com",
    "hostname": "example.com",
    "uri": "https://example.com/",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "text": "",
}
"""The string formats structured outputs support, each with the value the default model writes for it."""
_FORMAT_CHECKS: Mapping[str, re.Pattern[str]] = {
    "date-time": re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)"),
    "time": re.compile(r"\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?"),
    "date": re.compile(r"\d{4}-\d\d-\d\d"),
    "duration": re.compile(r"P(?=\d|T\d)(\d+Y)?(\d+M)?(\d+W)?(\d+D)?(T(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?"),
    "email": re.compile(r"[^@\s]+@[^@\s]+"),
    "hostname": re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*"),
    "uri": re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S*"),
    "ipv4": re.compile(r"(\d{1,3}\.){3}\d{1,3}"),
    "ipv6": re.compile(r"[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*"),
    "uuid": re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"),
}
_TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")


class SchemaError(ValueError):
    """A schema the simulator cannot use, or a value it cannot build; the message names the key path."""


def check_schema(schema: Any, where: str) -> None:
    """Refuse a schema that is not an object schema of bounded size with resolvable local ``$ref`` s."""
    if not isinstance(schema, Mapping):
        raise SchemaError(f"{where}: expected a JSON schema object, got {type(schema).__name__}")
    root = resolve(schema, schema)
    kind = root.get("type") if isinstance(root, Mapping) else None
    if kind != "object" and not (isinstance(root, Mapping) and ("anyOf" in root or "properties" in root)):
        raise SchemaError(f"{where}.type: the schema of a structured output must describe an object, got {kind!r}")
    stack: list[tuple[Any, str, int]] = [(schema, where, 1)]
    nodes = 0
    while stack:
        node, path, depth = stack.pop()
        if not isinstance(node, Mapping):
            continue
        nodes += 1
        if depth > MAX_SCHEMA_DEPTH or nodes > MAX_SCHEMA_NODES:
            raise SchemaError(f"{where}: schema larger than {MAX_SCHEMA_DEPTH} levels or {MAX_SCHEMA_NODES} schemas")
        _check_node(node, path, schema)
        stack.extend((child, child_path, depth + 1) for child, child_path in _children(node, path))


def _check_node(node: Mapping[str, Any], path: str, root: Mapping[str, Any]) -> None:
    kind = node.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind is not None else []
    for item in kinds:
        if item not in _TYPES:
            raise SchemaError(f"{path}.type: {item!r} is not one of {', '.join(_TYPES)}")
    ref = node.get("$ref")
    if ref is not None and resolve({"$ref": ref}, root) is None:
        raise SchemaError(f"{path}.$ref: {ref!r} does not name a definition in this schema ('#/$defs/Name')")
    form = node.get("format")
    if form is not None and "string" in kinds and form not in FORMAT_EXAMPLES:
        raise SchemaError(f"{path}.format: {form!r} is not a supported string format ({', '.join(FORMAT_EXAMPLES)})")
    pattern = node.get("pattern")
    if pattern is not None:
        try:
            re.compile(str(pattern))
        except re.error as exc:
            raise SchemaError(f"{path}.pattern: {pattern!r} is not a regular expression ({exc})") from None


def _children(node: Mapping[str, Any], path: str) -> list[tuple[Any, str]]:
    out: list[tuple[Any, str]] = []
    for key in ("properties", "$defs", "definitions"):
        table = node.get(key)
        if isinstance(table, Mapping):
            out.extend((value, f"{path}.{key}.{name}") for name, value in table.items())
    for key in ("anyOf", "oneOf", "allOf"):
        options = node.get(key)
        if isinstance(options, list):
            out.extend((value, f"{path}.{key}.{i}") for i, value in enumerate(options))
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), Mapping):
            out.append((node[key], f"{path}.{key}"))
    return out


def resolve(schema: Mapping[str, Any], root: Any) -> Any:
    """``schema`` with a local ``$ref`` (``#/$defs/Name``) followed into ``root``; None when it names nothing."""
    ref = schema.get("$ref")
    if not isinstance(ref, str):
        return schema
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    target: Any = root
    for part in ref[2:].split("/"):
        target = target.get(part) if isinstance(target, Mapping) else None
    return target if isinstance(target, Mapping) else None


def violation(value: Any, schema: Any, root: Any = None, where: str = "$", depth: int = 0) -> str | None:
    """Where ``value`` breaks ``schema`` (a path like ``$.items.0`` and why), or None when it conforms."""
    root = schema if root is None else root
    if not isinstance(schema, Mapping) or depth > MAX_SCHEMA_DEPTH * 4:
        return None
    target = resolve(schema, root)
    if target is None:
        return f"{where}: the schema's $ref {schema.get('$ref')!r} names nothing"
    schema = target
    if "enum" in schema and value not in schema["enum"]:
        return f"{where}: {value!r} is not one of {schema['enum']!r}"
    if "const" in schema and value != schema["const"]:
        return f"{where}: {value!r} is not {schema['const']!r}"
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and all(violation(value, o, root, where, depth + 1) for o in options):
            return f"{where}: {value!r} matches none of the {key} options"
    for option in schema.get("allOf") or []:
        found = violation(value, option, root, where, depth + 1)
        if found:
            return found
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_is_type(value, k) for k in kinds):
            return f"{where}: {value!r} is not of type {' or '.join(map(str, kinds))}"
    return _bounds_violation(value, schema, root, where, depth)


def _is_type(value: Any, kind: Any) -> bool:
    if kind == "integer":
        return (
            isinstance(value, int) and not isinstance(value, bool) or (isinstance(value, float) and value.is_integer())
        )
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    checks = {"object": dict, "array": list, "string": str, "boolean": bool}
    if kind in checks:
        return isinstance(value, checks[kind])
    return value is None if kind == "null" else False


def _bounds_violation(value: Any, schema: Mapping[str, Any], root: Any, where: str, depth: int) -> str | None:
    if isinstance(value, dict):
        return _object_violation(value, schema, root, where, depth)
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", math.inf):
            return f"{where}: {len(value)} items is outside minItems/maxItems"
        items = schema.get("items")
        for i, item in enumerate(value):
            found = violation(item, items, root, f"{where}.{i}", depth + 1)
            if found:
                return found
        return None
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0) or len(value) > schema.get("maxLength", math.inf):
            return f"{where}: a string of {len(value)} characters is outside minLength/maxLength"
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and re.search(pattern, value) is None:
            return f"{where}: {value!r} does not match the pattern {pattern!r}"
        check = _FORMAT_CHECKS.get(str(schema.get("format")))
        if check is not None and check.fullmatch(value) is None:
            return f"{where}: {value!r} is not a {schema['format']}"
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _number_violation(value, schema, where)
    return None


def _number_violation(value: float, schema: Mapping[str, Any], where: str) -> str | None:
    low, high = schema.get("minimum", -math.inf), schema.get("maximum", math.inf)
    above, below = schema.get("exclusiveMinimum", -math.inf), schema.get("exclusiveMaximum", math.inf)
    if value < low or value > high or value <= above or value >= below:
        return f"{where}: {value!r} is outside the schema's minimum/maximum"
    return None


def _object_violation(
    value: dict[str, Any], schema: Mapping[str, Any], root: Any, where: str, depth: int
) -> str | None:
    properties = schema.get("properties") or {}
    for key in schema.get("required") or []:
        if key not in value:
            return f"{where}: the required property {key!r} is missing"
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in properties:
            found = violation(item, properties[key], root, f"{where}.{key}", depth + 1)
        elif extra is False:
            found = f"{where}: the property {key!r} is not allowed (additionalProperties is false)"
        else:
            found = violation(item, extra, root, f"{where}.{key}", depth + 1) if isinstance(extra, Mapping) else None
        if found:
            return found
    return None


def example_value(schema: Any, name: str, depth: int = 0, root: Any = None) -> Any:
    """A value that fits ``schema`` (local ``$ref`` resolved in ``root``), built by the module's rules."""
    root = schema if root is None else root
    if not isinstance(schema, Mapping) or depth > _MAX_EXAMPLE_DEPTH:
        return f"<{name}>"
    schema = resolve(schema, root) or schema
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            usable = [
                option for option in options if not (isinstance(option, Mapping) and option.get("type") == "null")
            ]
            return example_value((usable or options)[0], name, depth + 1, root)
    merged = {**_description_hints(schema), **_merge_all_of(schema, root)}
    kind = merged.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in merged):
        return _example_object(merged, depth, root)
    if kind == "array":
        count = max(1, int(merged.get("minItems", 1))) if merged.get("maxItems", 1) >= 1 else 0
        return [example_value(merged.get("items", {"type": "string"}), name, depth + 1, root) for _ in range(count)]
    if kind in ("integer", "number"):
        return _example_number(merged, kind)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return _example_string(merged, name)


_HINT = re.compile(r"\{([^{}]*)\}\s*$")
_HINT_KEYS = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems", "maxItems"}
)


def _description_hints(schema: Mapping[str, Any]) -> dict[str, float]:
    """Numeric bounds the ``anthropic`` SDK moved into the description (``...{minimum: 3, maxLength: 9}``).

    The SDK's ``transform_schema`` appends keywords the API does not enforce to
    the description so that the model reads them; the default model reads them too.
    """
    found = _HINT.search(str(schema.get("description") or ""))
    hints: dict[str, float] = {}
    for item in found.group(1).split(",") if found else ():
        key, _, value = item.partition(":")
        try:
            number = float(value)
        except ValueError:
            continue
        if key.strip() in _HINT_KEYS and math.isfinite(number):
            hints[key.strip()] = int(number) if number.is_integer() else number
    return hints


def _merge_all_of(schema: Mapping[str, Any], root: Any) -> Mapping[str, Any]:
    parts = schema.get("allOf")
    if not isinstance(parts, list):
        return schema
    merged: dict[str, Any] = {key: value for key, value in schema.items() if key != "allOf"}
    for part in parts:
        part = resolve(part, root) if isinstance(part, Mapping) else None
        if isinstance(part, Mapping):
            properties = {**merged.get("properties", {}), **part.get("properties", {})}
            required = [*merged.get("required", []), *part.get("required", [])]
            merged = {**part, **merged, "properties": properties, "required": required}
    return merged


def _example_number(schema: Mapping[str, Any], kind: str) -> int | float:
    value: float = 1
    if "minimum" in schema:
        value = schema["minimum"]
    elif "exclusiveMinimum" in schema:
        value = math.floor(schema["exclusiveMinimum"]) + 1
    elif "maximum" in schema:
        value = min(1, schema["maximum"])
    if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
        value = math.ceil(schema["exclusiveMaximum"]) - 1
    return int(math.ceil(value)) if kind == "integer" else float(value)


def _example_string(schema: Mapping[str, Any], name: str) -> str:
    form = schema.get("format")
    text = FORMAT_EXAMPLES.get(str(form)) if form != "text" else None
    if text is None:
        text = f"<{name}>"
    low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
    if len(text) < low:
        text += "x" * (low - len(text))
    if isinstance(high, int) and len(text) > high:
        text = text[:high]
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and re.search(pattern, text) is None:
        raise SchemaError(
            f"the default model cannot build a string for the pattern {pattern!r} (property {name!r}); "
            "give the value in a script step's 'output'"
        )
    return text


def _example_object(schema: Mapping[str, Any], depth: int, root: Any) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    if not isinstance(properties, Mapping):
        return {}
    required = [key for key in schema.get("required") or [] if key in properties]
    chosen = required or list(properties)
    return {key: example_value(properties[key], key, depth + 1, root) for key in chosen}
