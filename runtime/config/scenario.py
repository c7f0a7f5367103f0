"""Run settings and the scenario: a whole flow, checked as a whole when built (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePosixPath, PureWindowsPath
from types import MappingProxyType
from typing import Any

import attrs

from runtime.config.ceilings import check_call_ceiling, check_output_limit, check_window, default_pricing
from runtime.config.checks import (
    _NAME_EXPECTED,
    _defaults_of,
    _did_you_mean,
    _evolve,
    _listing,
    _table_fields,
    _tuple_if_array,
    _values_of,
    bad_value,
    check_array,
    check_int,
    check_name,
    check_text,
    join_index,
    join_key,
    render_value,
    wrong_type,
)
from runtime.config.graph import GraphNode, check_graph
from runtime.config.mcp import McpServerSpec
from runtime.config.nodes import NodeSpec
from runtime.config.output_schema import FINAL_TOOL_NAME, final_tool_offered
from runtime.config.profile import Profile
from runtime.config.provider import ProviderSpec
from runtime.errors import ConfigError, FoldlineError
from runtime.inputs.bounds import MAX_CONCURRENCY, MAX_SPAWN_LIMIT
from runtime.models.pricing import PricingTable

SPAWN_TOOL = "spawn"
"""The built-in tool a model calls with ``{"node": "<id>"}`` to start a child template."""

CONTEXT_TOOL = "context"
"""The context tool a profile with ``context_management`` (and the fold strategy) offers."""


@attrs.frozen(kw_only=True)
class RunSettings:
    """``concurrency``: nodes running at once (>= 1); ``spawn_limit``: children per run (>= 0);
    ``workspace``: the root of the workspace tools, relative to the scenario file (None: no workspace)."""

    concurrency: int = 4
    spawn_limit: int = 16
    workspace: str | None = None

    def __attrs_post_init__(self) -> None:
        _check_run(_values_of(self), "RunSettings")

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any], where: str) -> RunSettings:
        """Build from a plain dict (the ``[run]`` table); ``where`` is its key path."""
        fields = _table_fields(obj, where, cls)
        _check_run({**_defaults_of(cls), **fields}, where)
        return cls(**fields)

    def evolve(self, **changes: Any) -> RunSettings:
        return _evolve(self, changes)


def _check_run(v: Mapping[str, Any], where: str) -> None:
    check_int(
        v["concurrency"],
        join_key(where, "concurrency"),
        minimum=1,
        maximum=MAX_CONCURRENCY,
        expected="a positive integer",
    )
    check_int(
        v["spawn_limit"], join_key(where, "spawn_limit"), minimum=0, maximum=MAX_SPAWN_LIMIT, expected="an integer >= 0"
    )
    if v["workspace"] is not None:
        expected = "a directory path relative to the scenario file"
        workspace = check_text(v["workspace"], join_key(where, "workspace"), expected=expected)
        if "\x00" in workspace or PurePosixPath(workspace).is_absolute() or PureWindowsPath(workspace).anchor:
            raise bad_value(join_key(where, "workspace"), workspace, expected)


# -- the scenario ---------------------------------------------------------


class UnknownNode(FoldlineError, KeyError):
    """A scenario was asked for a node id it does not have."""

    def __str__(self) -> str:  # KeyError would show the repr of the message
        return str(self.args[0])


def _profiles_with_default(value: Any) -> Any:
    if not isinstance(value, Mapping):
        return value
    profiles = dict(value)
    if "default" not in profiles:
        profiles = {"default": Profile(), **profiles}
    return MappingProxyType(profiles)


def _read_only(value: Any) -> Any:
    return MappingProxyType(dict(value)) if isinstance(value, Mapping) else value


@attrs.frozen(kw_only=True)
class Scenario:
    """A whole flow: its name, run settings, provider, profiles and nodes.

    ``profiles`` always has ``"default"`` (an empty :class:`Profile` unless
    given). ``nodes`` keep their given order. Building one checks the graph:
    unique ids; ``depends_on`` and ``spawned_by`` name existing nodes;
    no dependency cycle and no spawn cycle; children have no ``depends_on``
    and nothing depends on a child; every node's profile exists; a per-call
    ceiling never lifts its profile's integer ceiling; a scripted ``spawn``
    names a child template of the node that calls it.
    """

    path: str | None = None
    name: str
    description: str = ""
    run: RunSettings = attrs.field(factory=RunSettings)
    provider: ProviderSpec = attrs.field(factory=ProviderSpec)
    mcp: Mapping[str, McpServerSpec] = attrs.field(factory=dict, converter=_read_only, hash=False)
    """The MCP servers whose tools the run offers (``[mcp.NAME]``); :mod:`runtime.config.mcp`."""
    profiles: Mapping[str, Profile] = attrs.field(factory=dict, converter=_profiles_with_default, hash=False)
    nodes: tuple[NodeSpec, ...] = attrs.field(converter=_tuple_if_array)
    pricing: PricingTable = attrs.field(factory=PricingTable, kw_only=True)
    """The scenario's own ``[pricing]`` entries: they add to the packaged table or replace its entries by model."""

    def prices(self) -> PricingTable:
        """The packaged pricing table with this scenario's ``[pricing]`` entries merged in."""
        return default_pricing().merged_with(self.pricing)

    def __attrs_post_init__(self) -> None:
        _check_scenario(self)

    def node(self, node_id: str) -> NodeSpec:
        """The node with this id; :class:`UnknownNode` (a KeyError) naming the known ids otherwise."""
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise UnknownNode(
            f"scenario {render_value(self.name)} has no node {render_value(node_id)}"
            f"{_did_you_mean(node_id, self._ids())}; "
            f"nodes: {', '.join(self._ids())}"
        )

    def top_level_nodes(self) -> tuple[NodeSpec, ...]:
        """Nodes that start on their own (not child templates), in order."""
        return tuple(n for n in self.nodes if n.spawned_by is None)

    def children_of(self, node_id: str) -> tuple[NodeSpec, ...]:
        """The child templates ``node_id`` may spawn, in order."""
        self.node(node_id)
        return tuple(n for n in self.nodes if n.spawned_by == node_id)

    def profile_of(self, node_id: str) -> Profile:
        """The profile the node runs under."""
        return self.profiles[self.node(node_id).profile]

    def evolve(self, **changes: Any) -> Scenario:
        """A copy with ``changes`` applied, validated like a new scenario."""
        return _evolve(self, changes)

    def _ids(self) -> list[str]:
        return [n.id for n in self.nodes]


def _check_scenario(s: Scenario) -> None:
    if s.path is not None and not isinstance(s.path, str):
        raise wrong_type("path", s.path, "a file path string")
    check_text(s.name, "name", expected="a non-empty scenario name")
    if not isinstance(s.description, str):
        raise wrong_type("description", s.description, "text")
    if not isinstance(s.run, RunSettings):
        raise wrong_type("run", s.run, "RunSettings")
    if not isinstance(s.provider, ProviderSpec):
        raise wrong_type("provider", s.provider, "a ProviderSpec")
    if not isinstance(s.mcp, Mapping):
        raise wrong_type("mcp", s.mcp, "a mapping of server names to McpServerSpec values")
    for name, server in s.mcp.items():
        check_name(name, join_key("mcp", str(name)), expected=f"a server name: {_NAME_EXPECTED}")
        if not isinstance(server, McpServerSpec):
            raise wrong_type(join_key("mcp", name), server, "an McpServerSpec")
    if not isinstance(s.profiles, Mapping):
        raise wrong_type("profiles", s.profiles, "a mapping of profile names to Profile values")
    for name, profile in s.profiles.items():
        check_name(name, join_key("profiles", str(name)), expected=f"a profile name: {_NAME_EXPECTED}")
        if not isinstance(profile, Profile):
            raise wrong_type(join_key("profiles", name), profile, "a Profile")
    nodes = check_array(s.nodes, "nodes", expected="an array of nodes")
    if not nodes:
        raise ConfigError("nodes: no nodes; a scenario needs at least one [[nodes]] entry")
    for i, node in enumerate(nodes):
        if not isinstance(node, NodeSpec):
            raise wrong_type(join_index("nodes", i), node, "a NodeSpec")
    _check_graph(s)


def _check_graph(s: Scenario) -> None:
    check_graph([GraphNode(n.id, n.depends_on, n.spawned_by) for n in s.nodes])
    for i, node in enumerate(s.nodes):
        if node.profile not in s.profiles:
            raise ConfigError(
                f"{join_index('nodes', i)}.profile: {render_value(node.profile)} names no profile"
                f"{_did_you_mean(node.profile, s.profiles)}; profiles: {_listing(s.profiles)}"
            )
    _check_model_bounds(s)
    for i, node in enumerate(s.nodes):
        where = join_index("nodes", i)
        profile = s.profiles[node.profile]
        _check_call_ceiling(node, profile, where)
        check_call_ceiling(
            where=f"{where}.max_input_tokens",
            model=profile.model or s.provider.model,
            profile_value=profile.max_input_tokens,
            model_value=s.provider.max_input_tokens,
            call_value=node.max_input_tokens,
        )
        _check_scripted_spawns(s, node, where)
        _check_scripted_tools(node, profile, profile.model or s.provider.model, where)


def _check_model_bounds(s: Scenario) -> None:
    """Integer ceilings within the model's window, ``max_tokens`` within its output limit."""
    check_window(s.provider.max_input_tokens, where="provider.max_input_tokens", model=s.provider.model)
    for name, profile in s.profiles.items():
        where = join_key("profiles", name)
        model = profile.model or s.provider.model
        check_window(profile.max_input_tokens, where=join_key(where, "max_input_tokens"), model=model)
        check_output_limit(profile.max_tokens, where=join_key(where, "max_tokens"), model=model)
    for i, node in enumerate(s.nodes):
        model = s.profiles[node.profile].model or s.provider.model
        check_window(node.max_input_tokens, where=f"{join_index('nodes', i)}.max_input_tokens", model=model)


def offered_tools(profile: Profile) -> tuple[str, ...]:
    """The tool names a node under ``profile`` offers its model."""
    extra = (CONTEXT_TOOL,) if profile.context_management and profile.context_strategy == "fold" else ()
    return profile.tools + tuple(t for t in extra if t not in profile.tools)


def _check_scripted_tools(node: NodeSpec, profile: Profile, model: str, where: str) -> None:
    """A script may call only the tools its profile offers (as a scripted spawn must name a child),
    and a typed node on a model without structured outputs its final-answer tool."""
    offered = offered_tools(profile)
    if final_tool_offered(node.output, model):
        offered += (FINAL_TOOL_NAME,)
    for i, step in enumerate(node.script):
        for j, call in enumerate(step.tool_calls):
            if call.name not in offered:
                raise ConfigError(
                    f"{where}.script[{i}].tool_calls[{j}].name: {render_value(call.name)} is not a tool "
                    f"profile {render_value(node.profile)} offers{_did_you_mean(call.name, offered)}; "
                    f"it offers: {_listing(offered)}"
                )


def _check_call_ceiling(node: NodeSpec, profile: Profile, where: str) -> None:
    """The statically decidable half of "a per-call value may only lower the ceiling"."""
    limit, call = profile.max_input_tokens, node.max_input_tokens
    if not isinstance(limit, int) or call is None:
        return
    if call == "none":
        raise ConfigError(
            f'{where}.max_input_tokens: "none" would lift profile "{node.profile}"\'s ceiling of {limit}; '
            f"a per-call value may only lower it"
        )
    if isinstance(call, int) and call > limit:
        raise ConfigError(
            f'{where}.max_input_tokens: {call} is above profile "{node.profile}"\'s ceiling of {limit}; '
            f"a per-call value may only lower it"
        )


def _check_scripted_spawns(s: Scenario, node: NodeSpec, where: str) -> None:
    children = [n.id for n in s.nodes if n.spawned_by == node.id]
    for i, step in enumerate(node.script):
        for j, call in enumerate(step.tool_calls):
            if call.name != SPAWN_TOOL:
                continue
            target = call.arguments.get("node")
            call_where = f"{where}.script[{i}].tool_calls[{j}].arguments.node"
            if target not in children:
                raise ConfigError(
                    f"{call_where}: {render_value(target)} is not a child template of {render_value(node.id)}; "
                    f"its children (nodes with spawned_by = {render_value(node.id)}): {_listing(children)}"
                )
