"""Profiles: how a node's agent talks to its model, validated when built (pure)."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any, Literal

import attrs

from runtime.config.checks import (
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
    check_bool,
    check_ceiling,
    check_choice,
    check_int,
    check_model_name,
    check_number,
    check_text,
    join_index,
    join_key,
    render_value,
)
from runtime.config.server_edits import check_server_edits, edits_json
from runtime.errors import ConfigError
from runtime.inputs.bounds import MAX_OUTPUT_TOKENS, MAX_TOOL_RESULT_CHARS
from runtime.values.canonical import canonical_json

FOLD_SCHEDULINGS = ("epoch", "immediate")
CONTEXT_STRATEGIES = ("fold", "compaction")
TOOL_ERRORS = ("model", "fail")
FOLD_POLICIES = ("cost", "fixed")
FOLD_TAILS = ("cost", "verbatim", "after-read")
INHERITED_SETUPS = ("instruction", "own")


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
    - ``tools``: tool names from the registry (the loader checks they exist);
      in code, tool objects (``actors.tools.tool``) mix with names and count
      by their ``name``.
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
    - ``tool_errors``: ``"model"`` (default: a tool that raises or times out
      becomes an error result the model sees, and the loop goes on) or
      ``"fail"`` (the node fails).
    - ``thinking``: the request's ``thinking`` field, as the API names it:
      ``{type = "enabled", budget_tokens = N}`` (``1024 <= N < max_tokens``),
      ``{type = "adaptive"}`` or ``{type = "disabled"}``; held as canonical
      JSON (None: not sent).
    - ``fold_policy``: ``"cost"`` (default: before each request the cost model,
      :mod:`runtime.fold.cost`, chooses when to commit a fold and how deep from the
      branch's growth per request and the model's prices; ``context_fold_at`` and
      ``context_fold_target`` hold until the growth is known) or ``"fixed"`` (always
      fold at ``context_fold_at`` toward ``context_fold_target``).
    - ``server_context_edits``: Anthropic's server-side context management, a
      list of edit tables exactly as the API's ``context_management.edits``
      (``clear_tool_uses_20250919``, ``clear_thinking_20251015``,
      ``compact_20260112``; :mod:`runtime.config.server_edits`), sent on main
      requests with the betas they need; held as canonical JSON (None: not sent).
      Not ``context_management``, which is foldline's own context tool.
    - ``fold_tail``: how the newest tool rounds are carried: ``"verbatim"`` (kept as
      they came until the fold line), ``"after-read"`` (each round folded into a note,
      its calls and each result's salient line, at the request after the one that
      delivered it; sent once fresh, never cache-written; the originals stay readable)
      or ``"cost"`` (default: under ``fold_policy = "cost"`` the cost model chooses per
      branch before each request, :mod:`runtime.fold.after_read`; verbatim under ``"fixed"``).
    - ``inherited_setup``: how a branch that starts from another's view (a
      spawned child, a node with ``inherit``, a fork) takes this profile's
      system text and tools (:mod:`actors.inherit`): ``"instruction"`` (default:
      the emitter's tools and system text stay byte for byte, so its cached
      prefix is read; this setup arrives as an instruction) or ``"own"`` (they
      replace the emitter's; its cache is not read).
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
    tool_errors: Literal["model", "fail"] = "model"
    thinking: str | None = attrs.field(default=None, converter=_thinking_json)
    fold_policy: Literal["cost", "fixed"] = "cost"
    server_context_edits: str | None = attrs.field(default=None, converter=edits_json)
    fold_tail: Literal["cost", "verbatim", "after-read"] = "cost"
    inherited_setup: Literal["instruction", "own"] = "instruction"

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
    _check_unique_names(_tool_names(v["tools"]), at("tools"), what="tool names", check=check_text)
    check_ceiling(v["max_input_tokens"], at("max_input_tokens"))
    check_bool(v["prompt_caching"], at("prompt_caching"))
    check_bool(v["context_management"], at("context_management"))
    fold_at = check_number(
        v["context_fold_at"],
        at("context_fold_at"),
        within=lambda x: 0 < x <= 1,
        expected="a finite number with 0 < context_fold_at <= 1",
    )
    target = check_number(
        v["context_fold_target"],
        at("context_fold_target"),
        within=lambda x: 0 < x < 1,
        expected="a finite number with 0 < context_fold_target < 1",
    )
    margin = check_number(
        v["context_fold_tail_margin"],
        at("context_fold_tail_margin"),
        within=lambda x: 0 <= x < 1,
        expected="a finite number with 0 <= context_fold_tail_margin < 1",
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
        check_int(
            v["tool_result_max_chars"],
            at("tool_result_max_chars"),
            minimum=1024,
            maximum=MAX_TOOL_RESULT_CHARS,
            expected="an integer >= 1024 (omit the key for no bound)",
        )
    check_choice(v["fold_scheduling"], at("fold_scheduling"), FOLD_SCHEDULINGS)
    check_choice(v["context_strategy"], at("context_strategy"), CONTEXT_STRATEGIES)
    check_int(v["max_tokens"], at("max_tokens"), minimum=1, maximum=MAX_OUTPUT_TOKENS, expected="a positive integer")
    if v["model"] is not None:
        check_model_name(v["model"], at("model"), expected="a model name (omit the key to use the provider's)")
    check_choice(v["tool_errors"], at("tool_errors"), TOOL_ERRORS)
    if v["thinking"] is not None:
        _check_thinking(v["thinking"], v["max_tokens"], at("thinking"))
    check_choice(v["fold_policy"], at("fold_policy"), FOLD_POLICIES)
    if v["server_context_edits"] is not None:
        thinking = json.loads(v["thinking"]).get("type") if isinstance(v["thinking"], str) else None
        check_server_edits(v["server_context_edits"], thinking, at("server_context_edits"))
    check_choice(v["fold_tail"], at("fold_tail"), FOLD_TAILS)
    check_choice(v["inherited_setup"], at("inherited_setup"), INHERITED_SETUPS)


def _tool_names(tools: Any) -> Any:
    """Tool names, a tool object given in code counting by its ``name`` (anything else is checked as given)."""
    if not isinstance(tools, tuple):
        return tools
    return tuple(t if isinstance(t, str) else getattr(t, "name", t) for t in tools)


def check_known_tools(profile: Profile, tool_names: Collection[str], where: str) -> None:
    """Refuse a tool the registry does not know; ``where`` is the profile's key path."""
    for i, name in enumerate(profile.tools):
        if name not in tool_names:
            raise ConfigError(
                f"{join_index(join_key(where, 'tools'), i)}: {render_value(name)} is not a known tool"
                f"{_did_you_mean(name, tool_names)}; known tools: {_listing(tool_names)}"
            )
