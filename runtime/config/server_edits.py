"""A profile's ``server_context_edits``: Anthropic's ``context_management.edits``, checked at load (pure).

The key is a list of edit tables exactly as the API takes them, for example
``server_context_edits = [{type = "clear_tool_uses_20250919", trigger = {type = "input_tokens", value = 30000}}]``.
Each table is checked as the API checks it (types, keys, amounts), and every
refusal names its key path, the value and what was expected. The names and
documented defaults live in :mod:`runtime.values.server_edits`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from runtime.config.checks import (
    bad_value,
    check_array,
    check_bool,
    check_choice,
    check_int,
    check_text,
    join_index,
    join_key,
    render_value,
    wrong_type,
)
from runtime.errors import ConfigError
from runtime.values.canonical import canonical_json
from runtime.values.server_edits import (
    CLEAR_THINKING,
    CLEAR_TOOL_USES,
    COMPACT,
    EDIT_TYPES,
    MAX_EDITS,
    MIN_COMPACT_TRIGGER,
)

MAX_COUNT = 10_000_000
"""The largest token or tool-use amount an edit may name."""
MAX_INSTRUCTIONS_CHARS = 20_000
"""The longest ``instructions`` text of a compaction edit."""

_KEYS = {
    CLEAR_TOOL_USES: ("type", "trigger", "keep", "clear_at_least", "exclude_tools", "clear_tool_inputs"),
    CLEAR_THINKING: ("type", "keep"),
    COMPACT: ("type", "trigger", "pause_after_compaction", "instructions"),
}


def edits_json(value: Any) -> Any:
    """A list of edit tables as canonical JSON (anything else is left for the check to refuse)."""
    if isinstance(value, (list, tuple)):
        try:
            return canonical_json([dict(v) if isinstance(v, Mapping) else v for v in value])
        except (TypeError, ValueError):
            return value
    return value


def check_server_edits(value: Any, thinking_type: str | None, where: str) -> None:
    """Refuse a ``server_context_edits`` value the API would refuse; ``thinking_type`` is the profile's."""
    edits = _parsed(value, where)
    if not edits:
        raise bad_value(where, [], "a non-empty array of edit tables (omit the key for none)")
    if len(edits) > MAX_EDITS:
        raise ConfigError(f"{where}: {len(edits)} edits, above the upper bound {MAX_EDITS}")
    seen: set[str] = set()
    for i, edit in enumerate(edits):
        at = join_index(where, i)
        if not isinstance(edit, Mapping):
            raise wrong_type(at, edit, "an edit table with a type")
        kind = check_choice(edit.get("type"), join_key(at, "type"), EDIT_TYPES)
        if kind in seen:
            raise ConfigError(f"{join_key(at, 'type')}: {render_value(kind)} is listed twice")
        seen.add(kind)
        for key in edit:
            if key not in _KEYS[kind]:
                allowed = ", ".join(_KEYS[kind])
                raise ConfigError(f"{join_key(at, str(key))}: not a key of a {kind} edit; expected one of {allowed}")
        if kind == CLEAR_TOOL_USES:
            _check_clear_tool_uses(edit, at)
        elif kind == CLEAR_THINKING:
            _check_clear_thinking(edit, at, first=i == 0, thinking_type=thinking_type)
        else:
            _check_compact(edit, at)


def _parsed(value: Any, where: str) -> list[Any]:

    try:
        parsed = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, list):
        raise wrong_type(where, value, 'an array of edit tables such as [{type = "clear_tool_uses_20250919"}]')
    return parsed


def _amount(value: Any, where: str, kinds: tuple[str, ...], minimum: int) -> None:
    expected = f"{{type = {' or '.join(repr(k) for k in kinds)}, value = N}}"
    if not isinstance(value, Mapping):
        raise wrong_type(where, value, expected)
    extra = sorted(set(value) - {"type", "value"})
    if extra:
        raise ConfigError(f"{join_key(where, str(extra[0]))}: not a key of this table; expected {expected}")
    check_choice(value.get("type"), join_key(where, "type"), kinds)
    check_int(
        value.get("value"),
        join_key(where, "value"),
        minimum=minimum,
        maximum=MAX_COUNT,
        expected=f"an integer >= {minimum}",
    )


def _tool_names(value: Any, where: str) -> None:
    for i, name in enumerate(check_array(value, where, expected="an array of tool names")):
        check_text(name, join_index(where, i), expected="a tool name")


def _check_clear_tool_uses(edit: Mapping[str, Any], at: str) -> None:
    if "trigger" in edit:
        _amount(edit["trigger"], join_key(at, "trigger"), ("input_tokens", "tool_uses"), 1)
    if "keep" in edit:
        _amount(edit["keep"], join_key(at, "keep"), ("tool_uses",), 0)
    if "clear_at_least" in edit:
        _amount(edit["clear_at_least"], join_key(at, "clear_at_least"), ("input_tokens",), 0)
    if "exclude_tools" in edit:
        _tool_names(edit["exclude_tools"], join_key(at, "exclude_tools"))
    inputs = edit.get("clear_tool_inputs")
    if inputs is not None and not isinstance(inputs, bool):
        _tool_names(inputs, join_key(at, "clear_tool_inputs"))


def _check_clear_thinking(edit: Mapping[str, Any], at: str, *, first: bool, thinking_type: str | None) -> None:
    if not first:
        raise ConfigError(f"{join_key(at, 'type')}: {CLEAR_THINKING} must be the first edit (the API requires it)")
    if thinking_type not in ("enabled", "adaptive"):
        raise ConfigError(
            f"{join_key(at, 'type')}: {CLEAR_THINKING} needs the profile's thinking enabled or adaptive "
            f"(it is {render_value(thinking_type)})"
        )
    keep = edit.get("keep")
    if keep is None or keep == "all" or (isinstance(keep, Mapping) and dict(keep) == {"type": "all"}):
        return
    _amount(keep, join_key(at, "keep"), ("thinking_turns",), 1)


def _check_compact(edit: Mapping[str, Any], at: str) -> None:
    if "trigger" in edit:
        _amount(edit["trigger"], join_key(at, "trigger"), ("input_tokens",), MIN_COMPACT_TRIGGER)
    if "pause_after_compaction" in edit:
        check_bool(edit["pause_after_compaction"], join_key(at, "pause_after_compaction"))
    if "instructions" in edit:
        text = check_text(edit["instructions"], join_key(at, "instructions"), expected="non-empty text")
        if len(text) > MAX_INSTRUCTIONS_CHARS:
            raise ConfigError(
                f"{join_key(at, 'instructions')}: {len(text)} characters, above the upper bound {MAX_INSTRUCTIONS_CHARS}"
            )


__all__ = ["check_server_edits", "edits_json"]
