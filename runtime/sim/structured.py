"""Structured outputs: ``output_config.format`` checked, and the default model's answer made to fit it (pure).

A request with ``output_config: {"format": {"type": "json_schema", "schema":
...}}`` (the chat face's ``response_format`` is read into the same field) is
answered with one text block holding JSON that is valid for the schema, as
the API's constrained decoding guarantees:

- a policy that is not a script (the default model) answers the value built
  from the schema (:func:`runtime.values.json_schema.example_value`: defaults,
  first enum values, ``<name>`` strings, minimums), as canonical JSON; a
  reply that calls tools is left as it is (the output comes on the turn that
  answers in text);
- a script step answers what its author wrote (``output = {...}`` in a
  script gives the value, ``text`` gives any text: a script is its author's
  exact transcript, so a test can give a value the schema refuses).

A model the model table marks ``structured_outputs = false`` refuses
``output_config.format`` with a 400 naming the model (the wording is the
simulator's own); foldline asks such a model through a final-answer tool.

A schema the default model cannot satisfy (a ``pattern`` its strings do not
match) is a 500 saying so and naming the fix (a script's ``output``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.models.limits import default_model_table
from runtime.scripted.policies import Reply
from runtime.sim.errors import SimAPIError, invalid_request
from runtime.values.canonical import canonical_json
from runtime.values.json_schema import SchemaError, check_schema, example_value

OUTPUT_CONFIG_KEYS = ("effort", "format")
EFFORTS = ("low", "medium", "high", "xhigh", "max")


def check_output_config(value: Any, model: str) -> None:
    """Refuse an ``output_config`` the API refuses (for ``model``), naming the field."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise invalid_request(f"output_config: expected an object, got {type(value).__name__}")
    for key in value:
        if key not in OUTPUT_CONFIG_KEYS:
            raise invalid_request(f"output_config.{key}: Extra inputs are not permitted")
    effort = value.get("effort")
    if effort is not None and effort not in EFFORTS:
        raise invalid_request(f"output_config.effort: Input should be one of {', '.join(EFFORTS)}, got {effort!r}")
    form = value.get("format")
    if form is None:
        return
    if not isinstance(form, dict) or form.get("type") != "json_schema":
        raise invalid_request(
            f"output_config.format: expected {{'type': 'json_schema', 'schema': {{...}}}}, got {form!r}"
        )
    for key in form:
        if key not in ("type", "schema"):
            raise invalid_request(f"output_config.format.{key}: Extra inputs are not permitted")
    if "schema" not in form:
        raise invalid_request("output_config.format.schema: Field required")
    if not default_model_table().structured_outputs(model):
        raise invalid_request(f"output_config.format: structured outputs are not supported by the model {model!r}")
    try:
        check_schema(form["schema"], "output_config.format.schema")
    except SchemaError as exc:
        raise invalid_request(str(exc)) from None


def output_schema(payload: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The JSON schema a (validated) request's answer must fit, or None."""
    config = payload.get("output_config")
    form = config.get("format") if isinstance(config, Mapping) else None
    schema = form.get("schema") if isinstance(form, Mapping) else None
    return schema if isinstance(schema, Mapping) else None


def structured_reply(reply: Reply, payload: Mapping[str, Any]) -> Reply:
    """``reply`` (not a script's) with its text replaced by the schema's value, when the request asks for one."""
    schema = output_schema(payload)
    if schema is None or any(block.get("type") == "tool_use" for block in reply.content):
        return reply
    try:
        value = example_value(schema, "output", root=schema)
    except SchemaError as exc:
        raise SimAPIError(500, "api_error", f"output_config.format: {exc}", {"x-should-retry": "false"}) from None
    kept = [block for block in reply.content if block.get("type") != "text"]
    text = {"type": "text", "text": canonical_json(value)}
    return Reply(content=(*kept, text), stop_reason="end_turn", output_tokens=None)
