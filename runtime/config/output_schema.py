"""Typed results: the shape an operation's answer must have, and its validation.

An :class:`OutputSchema` is built from a pydantic model class
(``Operation(..., output=Report)``) or from a JSON schema (a scenario's
``output = { schema = {...} }``). It gives the request what asks the model for
that shape (``output_config.format``, a JSON schema in the form the Messages
API's structured outputs take: every object closed with
``additionalProperties: false``, as the ``anthropic`` SDK's own
``transform_schema`` makes it) and validates a reply: with the model class
through pydantic, with a plain schema through ``jsonschema`` (Draft 2020-12).
A reply that does not validate raises :class:`OutputInvalid` whose message
names each error by its JSON path: that text goes back to the model once for
a corrected reply (:mod:`actors.typed`).

On a model the model table marks ``structured_outputs = false`` the shape is
asked through a final-answer tool instead (:func:`final_tool_offered`,
:mod:`actors.final_tool`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from runtime.config.checks import _NAME_EXPECTED, check_name
from runtime.errors import ConfigError, FoldlineError
from runtime.models.limits import default_model_table
from runtime.values.canonical import canonical_json

if TYPE_CHECKING:
    import pydantic

MAX_SCHEMA_CHARS = 64_000
"""The largest output schema (canonical JSON characters) a node may give."""

MAX_ERRORS_SHOWN = 8
"""How many validation errors a refusal names (the rest are counted)."""


FINAL_TOOL_NAME = "final_answer"
"""The tool a typed result is asked through on a model without structured outputs (:mod:`actors.final_tool`)."""


def final_tool_offered(output: OutputSchema | None, model: str) -> bool:
    """Whether a typed operation on ``model`` is offered the final-answer tool (the model lacks structured outputs)."""
    return output is not None and not default_model_table().structured_outputs(model)


class OutputInvalid(FoldlineError):
    """A reply that is not a value of the operation's output schema (the message names each error)."""


def _json_path(path: Any) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


@attrs.frozen
class OutputSchema:
    """What an operation's answer must be: a JSON value of ``schema``; with ``model``, an instance of it."""

    schema_json: str
    name: str = "result"
    model: type[pydantic.BaseModel] | None = attrs.field(default=None, eq=False)

    @classmethod
    def of(cls, value: Any, where: str) -> OutputSchema:
        """From a pydantic model class, a JSON schema mapping, or an :class:`OutputSchema`."""
        if isinstance(value, OutputSchema):
            return value
        if isinstance(value, type) and hasattr(value, "model_json_schema"):
            import pydantic  # loaded when a typed result is asked for (import runtime stays light)
            from anthropic import transform_schema

            if not issubclass(value, pydantic.BaseModel):
                raise ConfigError(f"{where}: {value!r} is not a pydantic model class")
            schema = transform_schema(value.model_json_schema())
            return cls(canonical_json(schema), _schema_name(value.__name__), value)
        if isinstance(value, Mapping):
            return cls.from_schema(value, where)
        raise ConfigError(
            f"{where}: {value!r} is not an output shape; expected a pydantic model class or a JSON schema"
        )

    @classmethod
    def from_schema(cls, schema: Mapping[str, Any], where: str, name: str = "result") -> OutputSchema:
        """From a JSON schema, checked as a schema (a refusal names ``where``)."""
        try:
            text = canonical_json(dict(schema))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: the schema is not plain JSON ({exc})") from None
        import jsonschema

        if len(text) > MAX_SCHEMA_CHARS:
            raise ConfigError(
                f"{where}: the schema is {len(text)} characters of JSON, above the bound {MAX_SCHEMA_CHARS}"
            )
        try:
            jsonschema.Draft202012Validator.check_schema(json.loads(text))
        except jsonschema.SchemaError as exc:
            raise ConfigError(f"{where}{_json_path(exc.path)[1:]}: not a valid JSON schema: {exc.message}") from None
        check_name(name, f"{where}.name", expected=f"an output name: {_NAME_EXPECTED}")
        return cls(text, name)

    @property
    def schema(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.schema_json)
        return value

    def output_config_json(self) -> str:
        """The request's ``output_config`` (canonical JSON): a JSON-schema format."""
        return canonical_json({"format": {"type": "json_schema", "schema": self.schema}})

    def validate(self, answer: str) -> tuple[Any, str]:
        """The typed value of ``answer`` and its canonical JSON; raises :class:`OutputInvalid` naming each error."""
        try:
            data = json.loads(answer)
        except ValueError as exc:
            shown = answer if len(answer) <= 200 else answer[:200] + "..."
            raise OutputInvalid(f"the reply is not JSON ({exc}): {shown!r}") from None
        if self.model is not None:
            import pydantic

            try:
                value = self.model.model_validate(data)
            except pydantic.ValidationError as exc:
                errors = [f"{_json_path(e['loc'])}: {e['msg']}" for e in exc.errors()]
                raise OutputInvalid(_listed(errors, self.name)) from None
            return value, canonical_json(value.model_dump(mode="json"))
        import jsonschema

        validator = jsonschema.Draft202012Validator(self.schema)
        found = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
        if found:
            raise OutputInvalid(_listed([f"{_json_path(e.absolute_path)}: {e.message}" for e in found], self.name))
        return data, canonical_json(data)


def _schema_name(text: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "_-." else "_" for c in text)
    return cleaned or "result"


def _listed(errors: list[str], name: str) -> str:
    shown = "; ".join(errors[:MAX_ERRORS_SHOWN])
    more = f"; and {len(errors) - MAX_ERRORS_SHOWN} more" if len(errors) > MAX_ERRORS_SHOWN else ""
    return f"the reply does not match the output schema {name!r}: {shown}{more}"
