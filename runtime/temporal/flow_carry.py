"""What a flow workflow carries into its next run when it continues as new.

The flow's report is rebuilt from its events; a run that continues as new
hands its :class:`~runtime.report.ReportBuilder`'s counters to the next run
(:func:`report_state`, :func:`restore_report`), so the final report equals
the one a single run would have built. Every field of the builder is carried
(a field added later is carried too): plain values as they are, usages
(:class:`~runtime.values.usage.Usage`) as their field values. The carried input,
like every payload over the codec's threshold, crosses Temporal as a digest
of the body store (:mod:`runtime.temporal.bodies`).

Pure: no I/O, no clock; safe inside a workflow.
"""

from __future__ import annotations

from typing import Any

import attrs

from runtime.report import ReportBuilder
from runtime.values.usage import Usage

USAGE_KEY = "__usage__"
NOT_CARRIED = frozenset({"pricing", "default_model"})
"""The builder's settings: the next run builds them from the scenario, as the first did."""


def _encode(value: Any) -> Any:
    if isinstance(value, Usage):
        return {USAGE_KEY: list(attrs.astuple(value))}
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"the report's counters hold a {type(value).__name__}, which a continued flow cannot carry")


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {USAGE_KEY}:
            return Usage(*value[USAGE_KEY])
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def report_state(builder: ReportBuilder) -> dict[str, Any]:
    """The builder's counters as JSON-ready values (see the module docstring)."""
    return {
        field.name: _encode(getattr(builder, field.name))
        for field in attrs.fields(ReportBuilder)
        if field.name not in NOT_CARRIED
    }


def restore_report(builder: ReportBuilder, state: dict[str, Any]) -> ReportBuilder:
    """Set ``builder``'s counters to a carried state (what :func:`report_state` gave)."""
    for field in attrs.fields(ReportBuilder):
        if field.name in state:
            setattr(builder, field.name, _decode(state[field.name]))
    return builder
