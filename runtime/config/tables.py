"""Script steps, their tool calls and fault rules from plain dicts, with full key paths (pure).

The value types live beside what runs them (:class:`~runtime.scripted.policies.ScriptStep`,
:class:`~runtime.scripted.faults.FaultRule`); their own ``from_obj`` checks the
values. This module runs the configuration's checks first, so a refusal reads
like every other one: ``nodes[1].script[0].txt: unknown key; expected one of
text, tool_calls (did you mean "text"?)``, and integers carry upper bounds.
"""

from __future__ import annotations

from typing import Any

from runtime.config.checks import (
    check_array,
    join_index,
    join_key,
    reject_unknown_keys,
    render_value,
    require_table,
    wrong_type,
)
from runtime.errors import ConfigError
from runtime.inputs.bounds import MAX_FAULT_REQUEST, MAX_LATENCY_S, MAX_RETRY_AFTER_MS
from runtime.scripted.faults import FaultRule
from runtime.scripted.policies import STEP_KEYS, ScriptStep

CALL_KEYS = ("name", "arguments")
FAULT_KEYS = ("kind", "node", "on_request", "every", "retry_after_ms", "should_retry", "delay_s")
_FAULT_INT_BOUNDS = {"on_request": MAX_FAULT_REQUEST, "every": MAX_FAULT_REQUEST, "retry_after_ms": MAX_RETRY_AFTER_MS}


def _reraise(exc: ValueError, where: str) -> ConfigError:
    message = str(exc)
    return ConfigError(message if message.startswith(where) else f"{where}: {message}")


def script_from_obj(raw: Any, where: str) -> tuple[ScriptStep, ...]:
    """A node's ``script`` array; every refusal names the step's (or call's) full key path."""
    steps = check_array(raw, where, expected="an array of script steps")
    built = []
    for i, item in enumerate(steps):
        step_where = join_index(where, i)
        table = require_table(item, step_where)
        reject_unknown_keys(table, STEP_KEYS, step_where)
        if "tool_calls" in table:
            calls_where = join_key(step_where, "tool_calls")
            calls = check_array(table["tool_calls"], calls_where, expected="an array of tool calls")
            for j, call in enumerate(calls):
                call_where = join_index(calls_where, j)
                reject_unknown_keys(require_table(call, call_where), CALL_KEYS, call_where)
        try:
            built.append(ScriptStep.from_obj(table, step_where))
        except ValueError as exc:
            raise _reraise(exc, step_where) from exc
    return tuple(built)


def fault_rule_from_obj(raw: Any, where: str) -> FaultRule:
    """One ``[[provider.faults]]`` rule, with key-path refusals and upper bounds on its numbers."""
    table = require_table(raw, where)
    reject_unknown_keys(table, FAULT_KEYS, where)
    for key, limit in _FAULT_INT_BOUNDS.items():
        value = table.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > limit:
            raise ConfigError(f"{join_key(where, key)}: {render_value(value)} is above the upper bound {limit}")
    delay = table.get("delay_s")
    if isinstance(delay, (int, float)) and not isinstance(delay, bool) and delay > MAX_LATENCY_S:
        raise ConfigError(
            f"{join_key(where, 'delay_s')}: {render_value(delay)} is above the upper bound {MAX_LATENCY_S:g} seconds"
        )
    if isinstance(delay, int) and not isinstance(delay, bool) and abs(delay) > 2**53:
        raise wrong_type(join_key(where, "delay_s"), delay, "a number of seconds > 0")
    try:
        return FaultRule.from_obj(table, where)
    except ValueError as exc:
        raise _reraise(exc, where) from exc
