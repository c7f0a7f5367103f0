"""The scenario file loader: TOML in, a frozen :class:`~runtime.config.Scenario` out.

A scenario file is TOML with ``schema = "foldline.scenario/v1"`` and the
top-level keys ``schema``, ``name`` (default: the file's stem),
``description`` (default: empty), ``[run]``, ``[provider]``,
``[profiles.NAME]`` and ``[[nodes]]``. Every table goes through the same
validators as values built in code (:mod:`runtime.config`); unknown keys are
refused by name at every level. There is no expression language and nothing
in a file is executed: tools are names looked up in the caller's registry.

Every refusal is a :class:`ScenarioError` whose message is
``"<file>: <key path>: <problem>"``, e.g.
``scenarios/x.toml: nodes[2].max_input_tokens: 0 is not a positive integer, "auto" or "none"``;
a TOML syntax error names the line and column instead of a key path.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from pathlib import PurePath
from typing import Any

from runtime.config.checks import (
    check_array,
    check_document_ints,
    check_name,
    check_text,
    join_index,
    join_key,
    reject_unknown_keys,
    render_value,
    require_table,
    wrong_type,
)
from runtime.config.mcp import McpServerSpec, mcp_servers_from_obj
from runtime.config.values import (
    NodeSpec,
    Profile,
    ProviderSpec,
    RunSettings,
    Scenario,
    check_known_tools,
)
from runtime.errors import ConfigError
from runtime.inputs.bounds import MAX_SCENARIO_BYTES
from runtime.inputs.files import FileTooLarge, read_bounded
from runtime.inputs.toml_text import TomlRefused, parse_toml
from runtime.models.pricing import PRICING_SCHEMA, PricingTable

SCHEMA = "foldline.scenario/v1"
TOP_LEVEL_KEYS = ("schema", "name", "description", "run", "provider", "mcp", "profiles", "nodes", "pricing")


class ScenarioError(ConfigError):
    """A scenario file was refused. ``file`` is the file as the caller named it;
    ``detail`` is ``"<key path>: <problem>"`` (or ``"line L, column C: <problem>"``).
    """

    def __init__(self, file: str, detail: str) -> None:
        super().__init__(f"{file}: {detail}")
        self.file = file
        self.detail = detail

    def __reduce__(self) -> tuple[type[ScenarioError], tuple[str, str]]:
        return type(self), (self.file, self.detail)


def load_scenario(path: str | os.PathLike[str], *, tool_names: Collection[str]) -> Scenario:
    """Read and validate the scenario file at ``path``.

    ``tool_names`` is the tool registry's set of names; a profile naming any
    other tool is refused. Raises :class:`ScenarioError` for a missing or
    unreadable file, a TOML syntax error, and every invalid value.
    """
    label = os.fspath(path)
    return _build(_read_text(path, label), label=label, path=label, tool_names=tool_names)


def load_mcp_servers(path: str | os.PathLike[str]) -> Mapping[str, McpServerSpec]:
    """The ``[mcp]`` table of the scenario file at ``path``, checked (empty when it has none).

    A run reads it before the rest of the file: the servers' tools are known only
    once they are started, and the profiles' tool names are checked against them.
    """
    label = os.fspath(path)
    text = _read_text(path, label)
    document = _parse(text, label)
    try:
        _check_schema(document)
        check_document_ints(document)
        return mcp_servers_from_obj(document.get("mcp", {}), "mcp")
    except ConfigError as exc:
        raise ScenarioError(label, str(exc)) from exc


def _read_text(path: str | os.PathLike[str], label: str) -> str:
    try:
        data = read_bounded(path, MAX_SCENARIO_BYTES, what="a scenario file")
    except FileTooLarge as exc:
        raise ScenarioError(label, str(exc)) from None
    except FileNotFoundError:
        raise ScenarioError(label, "no such file") from None
    except IsADirectoryError:
        raise ScenarioError(label, "is a directory, not a scenario file") from None
    except OSError as exc:
        raise ScenarioError(label, f"cannot be read: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(label, f"is not UTF-8 text (byte {exc.start} cannot be decoded)") from None
    return text


def loads_scenario(text: str, *, path_label: str, tool_names: Collection[str]) -> Scenario:
    """Validate scenario TOML given as a string; ``path_label`` names it in errors.

    The scenario's ``path`` is None (there is no file); its default name is
    the stem of ``path_label``.
    """
    if not isinstance(text, str):
        raise TypeError(f"loads_scenario: text must be a str, got {type(text).__name__}")
    if len(text) > MAX_SCENARIO_BYTES:
        raise ScenarioError(
            path_label, f"{len(text)} characters is above the bound of {MAX_SCENARIO_BYTES} for a scenario"
        )
    return _build(text, label=path_label, path=None, tool_names=tool_names)


def _build(text: str, *, label: str, path: str | None, tool_names: Collection[str]) -> Scenario:
    known_tools = _tool_name_set(tool_names)
    document = _parse(text, label)
    try:
        check_document_ints(document)
        return _scenario_from_document(document, label=label, path=path, tool_names=known_tools)
    except ScenarioError:
        raise
    except ConfigError as exc:
        raise ScenarioError(label, str(exc)) from exc


def _parse(text: str, label: str) -> dict[str, Any]:
    try:
        return parse_toml(text)
    except TomlRefused as exc:
        raise ScenarioError(label, str(exc)) from None


def _tool_name_set(tool_names: Collection[str]) -> frozenset[str]:
    if isinstance(tool_names, (str, bytes)) or not isinstance(tool_names, Collection):
        raise TypeError(f"tool_names must be a collection of tool names, got {tool_names!r}")
    for name in tool_names:
        if not isinstance(name, str):
            raise TypeError(f"tool_names must hold strings, got {name!r}")
    return frozenset(tool_names)


def _scenario_from_document(
    document: Mapping[str, Any], *, label: str, path: str | None, tool_names: frozenset[str]
) -> Scenario:
    _check_schema(document)
    reject_unknown_keys(document, TOP_LEVEL_KEYS, "")

    default_name = PurePath(label).stem or "scenario"
    name = check_text(document.get("name", default_name), "name", expected="a non-empty scenario name")
    description = document.get("description", "")
    if not isinstance(description, str):
        raise wrong_type("description", description, "text")

    run = RunSettings.from_obj(document["run"], "run") if "run" in document else RunSettings()
    provider = ProviderSpec.from_obj(document["provider"], "provider") if "provider" in document else ProviderSpec()
    mcp = mcp_servers_from_obj(document.get("mcp", {}), "mcp")
    profiles = _profiles(document.get("profiles", {}), tool_names)
    nodes = _nodes(document.get("nodes"))
    pricing = _pricing(document["pricing"]) if "pricing" in document else PricingTable()
    return Scenario(
        path=path,
        name=name,
        description=description,
        run=run,
        provider=provider,
        mcp=mcp,
        profiles=profiles,
        nodes=nodes,
        pricing=pricing,
    )


def _pricing(raw: Any) -> PricingTable:
    """A scenario's ``[pricing]`` table: the shape of a pricing file (``[pricing.models.NAME]``), schema optional."""
    table = require_table(raw, "pricing")
    return PricingTable.from_mapping({"schema": PRICING_SCHEMA, **table}, "pricing")


def _check_schema(document: Mapping[str, Any]) -> None:
    if "schema" not in document:
        raise ConfigError(f'schema: missing; a scenario file starts with schema = "{SCHEMA}"')
    schema = document["schema"]
    if schema != SCHEMA:
        raise ConfigError(f'schema: {render_value(schema)} is not a schema this loader reads; expected "{SCHEMA}"')


def _profiles(raw: Any, tool_names: frozenset[str]) -> dict[str, Profile]:
    table = require_table(raw, "profiles")
    profiles: dict[str, Profile] = {}
    for name, obj in table.items():
        where = join_key("profiles", name)
        check_name(name, where, expected='a profile name made of letters, digits, "_", "." and "-"')
        profile = Profile.from_obj(obj, where)
        check_known_tools(profile, tool_names, where)
        profiles[name] = profile
    return profiles


def _nodes(raw: Any) -> tuple[NodeSpec, ...]:
    if raw is None:
        raise ConfigError("nodes: missing; a scenario needs at least one [[nodes]] entry with id and instruction")
    if isinstance(raw, Mapping):
        raise ConfigError("nodes: a single table; write each node as an [[nodes]] entry (an array of tables)")
    entries = check_array(raw, "nodes", expected="an array of tables ([[nodes]])")
    return tuple(NodeSpec.from_obj(obj, join_index("nodes", i)) for i, obj in enumerate(entries))
