"""Configuration values: profiles, the provider, nodes, run settings, the scenario.

Every value here is frozen and validated when it is built, whether by code
(``Profile(context_fold_at=0.7)``) or from a plain dict (``Profile.from_obj``,
which the scenario file loader uses). Both paths run the same checks, so code
and files refuse exactly the same values. A refusal is a
:class:`~runtime.errors.ConfigError` whose message is
``"<key path>: <problem>"``: the key path (``profiles.reader.context_fold_at``
from a dict, ``Profile.context_fold_at`` from code), the value, and what was
expected.

The rules every check keeps:

- booleans are never numbers (``True`` is refused where a number is expected);
- strings are never numbers (``"0.8"`` is refused);
- an explicit null in a dict is refused (omit the key to leave it unset); in
  code, ``None`` is accepted only for fields whose default is ``None``;
- unknown keys are refused by name, with a close match suggested.

This module is pure: no I/O, no clock.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from types import MappingProxyType
from typing import Any, Literal
from urllib.parse import urlsplit

import attrs

from runtime.canonical import canonical_json
from runtime.config.checks import (
    _ENV_NAME_EXPECTED,
    _ENV_NAME_RE,
    _NAME_EXPECTED,
    CeilingValue,
    _check_unique_names,
    _defaults_of,
    _did_you_mean,
    _evolve,
    _float_if_int,
    _listing,
    _table_fields,
    _tuple_if_array,
    _values_of,
    bad_value,
    check_array,
    check_bool,
    check_ceiling,
    check_choice,
    check_int,
    check_name,
    check_number,
    check_text,
    join_index,
    join_key,
    render_value,
    wrong_type,
)
from runtime.errors import ConfigError, FoldlineError
from runtime.policies import ScriptStep
from runtime.sim.faults import FaultRule

SPAWN_TOOL = "spawn"
"""The built-in tool a model calls with ``{"node": "<id>"}`` to start a child template."""

# -- Profile --------------------------------------------------------------

FOLD_SCHEDULINGS = ("epoch", "immediate")
CONTEXT_STRATEGIES = ("fold", "compaction")


def _thinking_json(value: Any) -> Any:
    """A thinking table as canonical JSON (anything else is left for the check to refuse)."""
    if isinstance(value, Mapping):
        try:
            return canonical_json(dict(value))
        except (TypeError, ValueError):
            return value
    return value


@attrs.frozen(kw_only=True)
class Profile:
    """How a node's agent talks to its model.

    - ``system``: the system text (None: no system text).
    - ``tools``: tool names from the registry (the loader checks they exist).
    - ``max_input_tokens``: the ceiling policy (positive int, ``"auto"``,
      ``"none"``; None is unset).
    - ``prompt_caching``: place prompt-cache marks (when the provider caches).
    - ``context_management``: give the model the context tool; the fold
      only runs when this is on.
    - ``context_fold_at``, ``context_fold_target``: the fold line and target as
      fractions of the ceiling; finite, ``0 < target < at <= 1``.
    - ``context_fold_tail_margin``: the tail-skip margin ``m``,
      ``0 <= m < context_fold_at`` (0 turns tail-skip off).
    - ``tool_result_max_chars``: bound on each result body (int >= 1,024),
      None for no bound.
    - ``fold_scheduling``: ``"epoch"`` (default: the model's marks and the
      host's stages commit together when the request reaches the fold line)
      or ``"immediate"`` (every decision commits as soon as it is made).
    - ``context_strategy``: ``"fold"`` (default: lossless folding with the
      context tool) or ``"compaction"`` (the common harnesses' baseline: one
      summary of the whole conversation at the fold line, originals not
      recoverable by the model, no context tool).
    - ``max_tokens``: the output cap of each request (positive int).
    - ``model``: overrides the provider's model (None: the provider's).
    - ``thinking``: the request's ``thinking`` field, as the API names it:
      ``{type = "enabled", budget_tokens = N}`` (``1024 <= N < max_tokens``),
      ``{type = "adaptive"}`` or ``{type = "disabled"}``; held as canonical
      JSON (None: not sent).
    """

    system: str | None = None
    tools: tuple[str, ...] = attrs.field(default=(), converter=_tuple_if_array)
    max_input_tokens: CeilingValue = None
    prompt_caching: bool = False
    context_management: bool = False
    context_fold_at: float = attrs.field(default=0.8, converter=_float_if_int)
    context_fold_target: float = attrs.field(default=0.6, converter=_float_if_int)
    context_fold_tail_margin: float = attrs.field(default=0.045, converter=_float_if_int)
    tool_result_max_chars: int | None = None
    fold_scheduling: Literal["epoch", "immediate"] = "epoch"
    context_strategy: Literal["fold", "compaction"] = "fold"
    max_tokens: int = 1024
    model: str | None = None
    thinking: str | None = attrs.field(default=None, converter=_thinking_json)

    def __attrs_post_init__(self) -> None:
        _check_profile(_values_of(self), "Profile")

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any], where: str) -> Profile:
        """Build from a plain dict (a ``[profiles.NAME]`` table); ``where`` is its key path."""
        fields = _table_fields(obj, where, cls)
        _check_profile({**_defaults_of(cls), **fields}, where)
        return cls(**fields)

    def evolve(self, **changes: Any) -> Profile:
        """A copy with ``changes`` applied, validated like a new profile."""
        return _evolve(self, changes)


_PROFILE_DEFAULTS = _defaults_of(Profile)


def _check_thinking(value: Any, max_tokens: Any, where: str) -> None:
    expected = '{type = "enabled", budget_tokens = N}, {type = "adaptive"} or {type = "disabled"}'
    try:
        table = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        table = None
    if not isinstance(table, dict) or table.get("type") not in ("enabled", "adaptive", "disabled"):
        raise ConfigError(f"{where}: {render_value(value)} is not a thinking table; expected {expected}")
    allowed = {"type", "budget_tokens"} if table["type"] == "enabled" else {"type"}
    extra = sorted(set(table) - allowed)
    if extra:
        raise ConfigError(f"{where}.{extra[0]}: not a key of a {table['type']!r} thinking table; expected {expected}")
    if table["type"] == "enabled":
        budget = table.get("budget_tokens")
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1024:
            raise ConfigError(f"{where}.budget_tokens: {render_value(budget)} is not an integer >= 1024")
        if isinstance(max_tokens, int) and budget >= max_tokens:
            raise ConfigError(
                f"{where}.budget_tokens: {budget} is not below max_tokens ({max_tokens}); the API requires it"
            )


def _check_profile(v: Mapping[str, Any], where: str) -> None:
    def at(key: str) -> str:
        return join_key(where, key)

    if v["system"] is not None:
        check_text(v["system"], at("system"), expected="non-empty text (omit the key for no system text)")
    _check_unique_names(v["tools"], at("tools"), what="tool names", check=check_text)
    check_ceiling(v["max_input_tokens"], at("max_input_tokens"))
    check_bool(v["prompt_caching"], at("prompt_caching"))
    check_bool(v["context_management"], at("context_management"))
    fold_at = check_number(
        v["context_fold_at"], at("context_fold_at"),
        within=lambda x: 0 < x <= 1, expected="a finite number with 0 < context_fold_at <= 1",
    )
    target = check_number(
        v["context_fold_target"], at("context_fold_target"),
        within=lambda x: 0 < x < 1, expected="a finite number with 0 < context_fold_target < 1",
    )
    margin = check_number(
        v["context_fold_tail_margin"], at("context_fold_tail_margin"),
        within=lambda x: 0 <= x < 1, expected="a finite number with 0 <= context_fold_tail_margin < 1",
    )
    # A broken pair is blamed on the key moved off its default (the target or
    # margin when both moved), so code and files word the refusal alike.
    if target >= fold_at:
        pair = "expected 0 < context_fold_target < context_fold_at <= 1"
        if target != _PROFILE_DEFAULTS["context_fold_target"]:
            raise ConfigError(
                f"{at('context_fold_target')}: {render_value(target)} is not below context_fold_at "
                f"({render_value(fold_at)}); {pair}"
            )
        raise ConfigError(
            f"{at('context_fold_at')}: {render_value(fold_at)} is not above context_fold_target "
            f"({render_value(target)}); {pair}"
        )
    if margin >= fold_at:
        rule = "expected 0 <= context_fold_tail_margin < context_fold_at"
        if margin != _PROFILE_DEFAULTS["context_fold_tail_margin"]:
            raise ConfigError(
                f"{at('context_fold_tail_margin')}: {render_value(margin)} is not below context_fold_at "
                f"({render_value(fold_at)}); {rule}"
            )
        raise ConfigError(
            f"{at('context_fold_at')}: {render_value(fold_at)} is not above context_fold_tail_margin "
            f"({render_value(margin)}); {rule}"
        )
    if v["tool_result_max_chars"] is not None:
        check_int(v["tool_result_max_chars"], at("tool_result_max_chars"), minimum=1024,
                  expected="an integer >= 1024 (omit the key for no bound)")
    check_choice(v["fold_scheduling"], at("fold_scheduling"), FOLD_SCHEDULINGS)
    check_choice(v["context_strategy"], at("context_strategy"), CONTEXT_STRATEGIES)
    check_int(v["max_tokens"], at("max_tokens"), minimum=1, expected="a positive integer")
    if v["model"] is not None:
        check_text(v["model"], at("model"), expected="a model name (omit the key to use the provider's)")
    if v["thinking"] is not None:
        _check_thinking(v["thinking"], v["max_tokens"], at("thinking"))


def check_known_tools(profile: Profile, tool_names: Collection[str], where: str) -> None:
    """Refuse a tool the registry does not know; ``where`` is the profile's key path."""
    for i, name in enumerate(profile.tools):
        if name not in tool_names:
            raise ConfigError(
                f"{join_index(join_key(where, 'tools'), i)}: {render_value(name)} is not a known tool"
                f"{_did_you_mean(name, tool_names)}; known tools: {_listing(tool_names)}"
            )


# -- the provider ---------------------------------------------------------


@attrs.frozen(kw_only=True)
class ModelConfig:
    """A model and its model-level ceiling value (None: unset)."""

    name: str
    max_input_tokens: CeilingValue = None

    def __attrs_post_init__(self) -> None:
        check_text(self.name, "ModelConfig.name", expected="a model name")
        check_ceiling(self.max_input_tokens, "ModelConfig.max_input_tokens")


PROVIDER_KINDS = ("scripted", "simulated", "anthropic")


@attrs.frozen(kw_only=True)
class ProviderSpec:
    """Which provider answers, and its settings.

    - ``kind``: ``"scripted"`` (in process), ``"simulated"`` (the loopback
      Anthropic server) or ``"anthropic"`` (the real API).
    - ``model``, ``max_input_tokens``: the model and its model-level ceiling.
    - ``base_url``: the API's base URL (anthropic only; None: the SDK's).
    - ``api_key_env``: the environment variable holding the API key.
    - ``token_factor``: how the simulated server's token counts relate to ours.
    - ``latency_s``: the simulated server's reply delay in (virtual) seconds.
    - ``lookback_collapse``: whether the simulated server counts a run of
      tool_use (or tool_result) blocks as one lookback position.
    - ``faults``: fault rules of the simulated server (simulated only).
    - ``max_retries``: retries of a failed call (0: none).
    """

    kind: Literal["scripted", "simulated", "anthropic"] = "simulated"
    model: str = "claude-haiku-5-5"
    max_input_tokens: CeilingValue = None
    base_url: str | None = None
    api_key_env: str = "ANTHROPIC_API_KEY"
    token_factor: float = attrs.field(default=1.15, converter=_float_if_int)
    latency_s: float = attrs.field(default=0.0, converter=_float_if_int)
    lookback_collapse: bool = True
    faults: tuple[FaultRule, ...] = attrs.field(default=(), converter=_tuple_if_array)
    max_retries: int = 2

    def __attrs_post_init__(self) -> None:
        _check_provider(_values_of(self), "ProviderSpec")

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any], where: str) -> ProviderSpec:
        """Build from a plain dict (the ``[provider]`` table); ``where`` is its key path."""
        fields = _table_fields(obj, where, cls)
        if "faults" in fields:
            faults_where = join_key(where, "faults")
            raw = check_array(fields["faults"], faults_where, expected="an array of fault rules")
            kind = fields.get("kind", "simulated")
            if raw and kind in PROVIDER_KINDS and kind != "simulated":
                raise _faults_kind_error(faults_where, kind)
            fields["faults"] = tuple(
                FaultRule.from_obj(item, join_index(faults_where, i)) for i, item in enumerate(raw)
            )
        _check_provider({**_defaults_of(cls), **fields}, where)
        return cls(**fields)

    @property
    def model_config(self) -> ModelConfig:
        """The provider's model with its model-level ceiling value."""
        return ModelConfig(name=self.model, max_input_tokens=self.max_input_tokens)

    def evolve(self, **changes: Any) -> ProviderSpec:
        """A copy with ``changes`` applied, validated like a new provider spec."""
        return _evolve(self, changes)

    def with_kind(self, kind: str) -> ProviderSpec:
        """This spec for another provider kind (a command-line override).

        Settings that apply only to another kind are dropped rather than
        refused: ``faults`` unless the new kind is ``"simulated"``,
        ``base_url`` unless it is ``"anthropic"``.
        """
        check_choice(kind, "provider kind", PROVIDER_KINDS)
        return _evolve(
            self,
            {
                "kind": kind,
                "faults": self.faults if kind == "simulated" else (),
                "base_url": self.base_url if kind == "anthropic" else None,
            },
        )


def _check_provider(v: Mapping[str, Any], where: str) -> None:
    def at(key: str) -> str:
        return join_key(where, key)

    kind = check_choice(v["kind"], at("kind"), PROVIDER_KINDS)
    check_text(v["model"], at("model"), expected="a model name")
    check_ceiling(v["max_input_tokens"], at("max_input_tokens"))
    if v["base_url"] is not None:
        if kind != "anthropic":
            raise ConfigError(
                f'{at("base_url")}: set for provider kind "{kind}"; base_url applies only to kind "anthropic"'
            )
        _check_base_url(v["base_url"], at("base_url"))
    env = v["api_key_env"]
    if not isinstance(env, str):
        raise wrong_type(at("api_key_env"), env, _ENV_NAME_EXPECTED)
    if not _ENV_NAME_RE.fullmatch(env):
        raise bad_value(at("api_key_env"), env, _ENV_NAME_EXPECTED)
    check_number(v["token_factor"], at("token_factor"), within=lambda x: x > 0, expected="a finite number > 0")
    check_number(v["latency_s"], at("latency_s"), within=lambda x: x >= 0, expected="a finite number of seconds >= 0")
    check_bool(v["lookback_collapse"], at("lookback_collapse"))
    faults = check_array(v["faults"], at("faults"), expected="an array of fault rules")
    if faults:
        if kind != "simulated":
            raise _faults_kind_error(at("faults"), kind)
        for i, rule in enumerate(faults):
            if not isinstance(rule, FaultRule):
                raise wrong_type(join_index(at("faults"), i), rule, "a FaultRule")
    check_int(v["max_retries"], at("max_retries"), minimum=0, expected="an integer >= 0")


def _faults_kind_error(where: str, kind: str) -> ConfigError:
    return ConfigError(f'{where}: set for provider kind "{kind}"; fault injection applies only to kind "simulated"')


def _check_base_url(value: Any, where: str) -> None:
    expected = "an http:// or https:// URL with a host"
    if not isinstance(value, str):
        raise wrong_type(where, value, expected)
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - parsing the port is the check
    except ValueError:
        raise bad_value(where, value, expected) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise bad_value(where, value, expected)


# -- nodes ----------------------------------------------------------------


OPERATIONS = ("bounded", "iterative")
INHERIT_MODES = ("view", "none")


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
      emitter's view) or ``"none"`` (fresh). Only for children.
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
    inherit: Literal["view", "none"] = "view"

    def __attrs_post_init__(self) -> None:
        _check_node(_values_of(self), "NodeSpec", inherit_set=self.inherit != "view")

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any], where: str) -> NodeSpec:
        """Build from a plain dict (a ``[[nodes]]`` table); ``where`` is its key path."""
        fields = _table_fields(obj, where, cls, required=("id",))
        if "script" in fields:
            fields["script"] = _script_from_obj(fields["script"], join_key(where, "script"))
        _check_node({**_defaults_of(cls), **fields}, where, inherit_set="inherit" in fields)
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


def _script_from_obj(raw: Any, where: str) -> tuple[ScriptStep, ...]:
    steps = check_array(raw, where, expected="an array of script steps")
    built = []
    for i, item in enumerate(steps):
        step_where = join_index(where, i)
        try:
            built.append(ScriptStep.from_obj(item, step_where))
        except ConfigError:
            raise
        except ValueError as exc:
            message = str(exc)
            raise ConfigError(message if message.startswith(step_where) else f"{step_where}: {message}") from exc
    return tuple(built)


def _check_node(v: Mapping[str, Any], where: str, *, inherit_set: bool) -> None:
    """``inherit_set``: the key was given (from a dict) or differs from its default (in code)."""
    def at(key: str) -> str:
        return join_key(where, key)

    check_name(v["id"], at("id"), expected=f"a node id: {_NAME_EXPECTED}")
    check_name(v["profile"], at("profile"), expected=f"a profile name: {_NAME_EXPECTED}")
    operation = check_choice(v["operation"], at("operation"), OPERATIONS)
    _check_instructions(v, where, operation)
    _check_unique_names(v["depends_on"], at("depends_on"), what="node ids", check=check_name)
    check_int(v["max_rounds"], at("max_rounds"), minimum=1, expected="a positive integer")
    check_ceiling(v["max_input_tokens"], at("max_input_tokens"))
    script = check_array(v["script"], at("script"), expected="an array of script steps")
    for i, step in enumerate(script):
        if not isinstance(step, ScriptStep):
            raise wrong_type(join_index(at("script"), i), step, "a ScriptStep")
    if v["spawned_by"] is not None:
        check_name(v["spawned_by"], at("spawned_by"), expected=f"a node id: {_NAME_EXPECTED}")
    check_choice(v["inherit"], at("inherit"), INHERIT_MODES)
    if v["spawned_by"] is None and inherit_set:
        raise ConfigError(
            f"{at('inherit')}: set on a node that is not a child; inherit applies only with spawned_by"
        )


def _check_instructions(v: Mapping[str, Any], where: str, operation: str) -> None:
    single, planned = v["instruction"], v["instructions"]
    if single is not None:
        check_text(single, join_key(where, "instruction"), expected="non-empty instruction text")
    planned = check_array(planned, join_key(where, "instructions"), expected="an array of instruction texts")
    if single is not None and planned:
        raise ConfigError(
            f"{join_key(where, 'instructions')}: set together with instruction; give exactly one of the two"
        )
    if single is None and not planned:
        raise ConfigError(
            f"{join_key(where, 'instruction')}: missing; a node needs instruction = \"...\" "
            f"(or instructions = [...] for a bounded planned sequence)"
        )
    if planned and operation != "bounded":
        raise ConfigError(
            f'{join_key(where, "instructions")}: a planned sequence is a bounded operation, '
            f'but operation is "{operation}"; set operation = "bounded" or use instruction'
        )
    for i, text in enumerate(planned):
        check_text(text, join_index(join_key(where, "instructions"), i), expected="non-empty instruction text")


# -- run settings ---------------------------------------------------------


@attrs.frozen(kw_only=True)
class RunSettings:
    """``concurrency``: nodes running at once (>= 1); ``spawn_limit``: children per run (>= 0)."""

    concurrency: int = 4
    spawn_limit: int = 16

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
    check_int(v["concurrency"], join_key(where, "concurrency"), minimum=1, expected="a positive integer")
    check_int(v["spawn_limit"], join_key(where, "spawn_limit"), minimum=0, expected="an integer >= 0")


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
    profiles: Mapping[str, Profile] = attrs.field(factory=dict, converter=_profiles_with_default, hash=False)
    nodes: tuple[NodeSpec, ...] = attrs.field(converter=_tuple_if_array)

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
    index: dict[str, int] = {}
    for i, node in enumerate(s.nodes):
        if node.id in index:
            raise ConfigError(
                f"{join_index('nodes', i)}.id: {render_value(node.id)} is already the id of nodes[{index[node.id]}]"
            )
        index[node.id] = i
    ids = list(index)

    for i, node in enumerate(s.nodes):
        where = join_index("nodes", i)
        if node.profile not in s.profiles:
            raise ConfigError(
                f"{where}.profile: {render_value(node.profile)} names no profile"
                f"{_did_you_mean(node.profile, s.profiles)}; profiles: {_listing(s.profiles)}"
            )
        if node.spawned_by is not None:
            if node.spawned_by not in index:
                raise ConfigError(
                    f"{where}.spawned_by: {render_value(node.spawned_by)} names no node"
                    f"{_did_you_mean(node.spawned_by, ids)}; nodes: {', '.join(ids)}"
                )
            if node.depends_on:
                raise ConfigError(
                    f"{where}.depends_on: set on a child of {render_value(node.spawned_by)}; "
                    f"a child starts when it is spawned, so it cannot depend on other nodes"
                )
        for j, dep in enumerate(node.depends_on):
            dep_where = join_index(f"{where}.depends_on", j)
            if dep not in index:
                raise ConfigError(
                    f"{dep_where}: {render_value(dep)} names no node{_did_you_mean(dep, ids)}; nodes: {', '.join(ids)}"
                )
            emitter = s.nodes[index[dep]].spawned_by
            if emitter is not None:
                raise ConfigError(
                    f"{dep_where}: {render_value(dep)} is a child of {render_value(emitter)} and runs only "
                    f"if spawned; depend on {render_value(emitter)} instead"
                )

    _check_dependency_cycles(s, index)
    _check_spawn_cycles(s, index)
    for i, node in enumerate(s.nodes):
        _check_call_ceiling(node, s.profiles[node.profile], join_index("nodes", i))
        _check_scripted_spawns(s, node, join_index("nodes", i))


def _check_dependency_cycles(s: Scenario, index: Mapping[str, int]) -> None:
    done: set[str] = set()
    for start in s.nodes:
        if start.id in done:
            continue
        # Iterative depth-first search; ``path`` is the current chain of dependencies.
        path: list[str] = [start.id]
        on_path = {start.id}
        pending = [iter(start.depends_on)]
        while pending:
            dep = next(pending[-1], None)
            if dep is None:
                pending.pop()
                finished = path.pop()
                on_path.discard(finished)
                done.add(finished)
                continue
            if dep in on_path:
                cycle = path[path.index(dep):] + [dep]
                first = cycle[0]
                raise ConfigError(
                    f"{join_index('nodes', index[first])}.depends_on: dependency cycle {' -> '.join(cycle)}"
                )
            if dep in done:
                continue
            path.append(dep)
            on_path.add(dep)
            pending.append(iter(s.nodes[index[dep]].depends_on))


def _check_spawn_cycles(s: Scenario, index: Mapping[str, int]) -> None:
    reaches_top: set[str] = set()
    for node in s.nodes:
        chain = [node.id]
        current = node
        while current.spawned_by is not None and current.id not in reaches_top:
            if current.spawned_by in chain:
                cycle = chain[chain.index(current.spawned_by):] + [current.spawned_by]
                raise ConfigError(
                    f"{join_index('nodes', index[cycle[0]])}.spawned_by: spawn cycle {' -> '.join(cycle)} "
                    f"(each spawned by the next); none of them can ever start"
                )
            current = s.nodes[index[current.spawned_by]]
            chain.append(current.id)
        reaches_top.update(chain)


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
