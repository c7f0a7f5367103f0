"""Nodes: one agent operation on a branch each, validated when built (pure)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from runtime.config.checks import (
    _NAME_EXPECTED,
    CeilingValue,
    _check_unique_names,
    _defaults_of,
    _evolve,
    _table_fields,
    _tuple_if_array,
    _values_of,
    check_array,
    check_ceiling,
    check_choice,
    check_depth,
    check_int,
    check_name,
    check_text,
    join_index,
    join_key,
    wrong_type,
)
from runtime.config.output_schema import OutputSchema
from runtime.config.reads import check_reads
from runtime.config.tables import script_from_obj
from runtime.errors import ConfigError
from runtime.inputs.bounds import MAX_ARGUMENT_DEPTH, MAX_ROUNDS, MAX_SCRIPT_STEPS
from runtime.scripted.policies import ScriptStep

OPERATIONS = ("bounded", "iterative")
INHERIT_MODES = ("view", "none")


def _optional_tuple(value: Any) -> Any:
    return None if value is None else _tuple_if_array(value)


@attrs.frozen(kw_only=True)
class NodeSpec:
    """One node of a flow: an agent operation on a branch.

    - ``id``: unique in the scenario; letters, digits, ``_``, ``.``, ``-``.
    - ``profile``: the name of the profile it runs under.
    - ``operation``: ``"iterative"`` (a tool loop until the model answers) or
      ``"bounded"`` (one request, or a planned fixed sequence).
    - ``instruction``: the task; or, for a bounded planned sequence,
      ``instructions`` (one request per entry). Exactly one of the two.
    - ``depends_on``: nodes that must finish first (not on a child).
    - ``max_rounds``: the most rounds an iterative operation may take.
    - ``max_input_tokens``: the per-call ceiling value; it may only lower the
      profile's ceiling.
    - ``script``: what a scripted model answers, one step per request.
    - ``spawned_by``: makes this a child template: it does not start on its
      own but when the named node's model calls ``spawn`` with its id.
    - ``inherit``: a child's starting point: ``"view"`` (a clone of its
      emitter's view) or ``"none"`` (fresh); on a top-level node, the id of
      the dependency whose folded view it starts from.
    - ``inputs``: the dependencies whose results its first request carries
      (unset: all but the one it inherits from; ``[]``: none).
    - ``accept_failures``: run even when a dependency failed or was skipped,
      reading the reason as that dependency's result.
    - ``output``: ``{ schema = {...} }``: the answer must be a JSON value of
      that schema (validated, with one corrected retry).
    """

    id: str
    profile: str = "default"
    operation: Literal["bounded", "iterative"] = "iterative"
    instruction: str | None = None
    instructions: tuple[str, ...] = attrs.field(default=(), converter=_tuple_if_array)
    depends_on: tuple[str, ...] = attrs.field(default=(), converter=_tuple_if_array)
    max_rounds: int = 20
    max_input_tokens: CeilingValue = None
    script: tuple[ScriptStep, ...] = attrs.field(default=(), converter=_tuple_if_array)
    spawned_by: str | None = None
    inherit: str = "view"
    inputs: tuple[str, ...] | None = attrs.field(default=None, converter=_optional_tuple)
    accept_failures: bool = False
    output: OutputSchema | None = None

    def __attrs_post_init__(self) -> None:
        _check_node(_values_of(self), "NodeSpec")

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any], where: str) -> NodeSpec:
        """Build from a plain dict (a ``[[nodes]]`` table); ``where`` is its key path."""
        fields = _table_fields(obj, where, cls, required=("id",))
        if "script" in fields:
            fields["script"] = script_from_obj(fields["script"], join_key(where, "script"))
        if "output" in fields:
            fields["output"] = output_from_obj(fields["output"], join_key(where, "output"))
        given = {"inherit_given": "inherit" in fields, "instructions_set": "instructions" in fields}
        _check_node({**_defaults_of(cls), **fields}, where, **given)
        return cls(**fields)

    @property
    def is_child(self) -> bool:
        """True for a child template (it starts only when spawned)."""
        return self.spawned_by is not None

    def planned_instructions(self) -> tuple[str, ...]:
        """The instructions in order: ``(instruction,)`` or the planned sequence."""
        return (self.instruction,) if self.instruction is not None else self.instructions

    def evolve(self, **changes: Any) -> NodeSpec:
        """A copy with ``changes`` applied, validated like a new node."""
        return _evolve(self, changes)


def output_from_obj(obj: Any, where: str) -> OutputSchema:
    """A node's ``output`` table: ``{ schema = {...}, name = "..." }`` (the name is optional)."""
    if not isinstance(obj, Mapping):
        raise wrong_type(where, obj, 'a table such as { schema = { type = "object", ... } }')
    unknown = sorted(set(obj) - {"schema", "name"})
    if unknown:
        raise ConfigError(f"{join_key(where, unknown[0])}: unknown key; output takes schema and name")
    if "schema" not in obj:
        raise ConfigError(f"{join_key(where, 'schema')}: missing; output needs the JSON schema of the result")
    if not isinstance(obj["schema"], Mapping):
        raise wrong_type(join_key(where, "schema"), obj["schema"], "a JSON schema table")
    return OutputSchema.from_schema(obj["schema"], join_key(where, "schema"), name=obj.get("name", "result"))


def _check_node(
    v: Mapping[str, Any], where: str, *, inherit_given: bool = False, instructions_set: bool = False
) -> None:
    """``inherit_given``: ``inherit`` was written (in a table); ``instructions_set``: ``instructions`` was given."""

    def at(key: str) -> str:
        return join_key(where, key)

    check_name(v["id"], at("id"), expected=f"a node id: {_NAME_EXPECTED}")
    check_name(v["profile"], at("profile"), expected=f"a profile name: {_NAME_EXPECTED}")
    operation = check_choice(v["operation"], at("operation"), OPERATIONS)
    _check_instructions(v, where, operation, given=instructions_set)
    _check_unique_names(v["depends_on"], at("depends_on"), what="node ids", check=check_name)
    check_int(v["max_rounds"], at("max_rounds"), minimum=1, maximum=MAX_ROUNDS, expected="a positive integer")
    check_ceiling(v["max_input_tokens"], at("max_input_tokens"))
    script = check_array(v["script"], at("script"), expected="an array of script steps")
    if len(script) > MAX_SCRIPT_STEPS:
        raise ConfigError(f"{at('script')}: {len(script)} steps is above the upper bound {MAX_SCRIPT_STEPS}")
    for i, step in enumerate(script):
        if not isinstance(step, ScriptStep):
            raise wrong_type(join_index(at("script"), i), step, "a ScriptStep")
        for j, call in enumerate(step.tool_calls):
            where_args = join_key(join_index(join_key(join_index(at("script"), i), "tool_calls"), j), "arguments")
            check_depth(json.loads(call.arguments_json), where_args, MAX_ARGUMENT_DEPTH)
    if v["spawned_by"] is not None:
        check_name(v["spawned_by"], at("spawned_by"), expected=f"a node id: {_NAME_EXPECTED}")
    check_reads(
        where,
        depends_on=v["depends_on"],
        child=v["spawned_by"] is not None,
        inherit=v["inherit"],
        inputs=v["inputs"],
        accept_failures=v["accept_failures"],
        inherit_given=inherit_given,
    )
    if v["output"] is not None and not isinstance(v["output"], OutputSchema):
        raise wrong_type(at("output"), v["output"], "an OutputSchema")


def _check_instructions(v: Mapping[str, Any], where: str, operation: str, *, given: bool) -> None:
    single, planned = v["instruction"], v["instructions"]
    if single is not None:
        check_text(single, join_key(where, "instruction"), expected="non-empty instruction text")
    planned = check_array(planned, join_key(where, "instructions"), expected="an array of instruction texts")
    if single is not None and planned:
        raise ConfigError(
            f"{join_key(where, 'instructions')}: set together with instruction; give exactly one of the two"
        )
    if single is None and not planned and given:
        raise ConfigError(
            f"{join_key(where, 'instructions')}: an empty array; a planned sequence needs at least one "
            'instruction text (or give instruction = "..." instead)'
        )
    if single is None and not planned:
        raise ConfigError(
            f'{join_key(where, "instruction")}: missing; a node needs instruction = "..." '
            f"(or instructions = [...] for a bounded planned sequence)"
        )
    if planned and operation != "bounded":
        raise ConfigError(
            f"{join_key(where, 'instructions')}: a planned sequence is a bounded operation, "
            f'but operation is "{operation}"; set operation = "bounded" or use instruction'
        )
    for i, text in enumerate(planned):
        check_text(text, join_index(join_key(where, "instructions"), i), expected="non-empty instruction text")
