"""Scripted model policies: what answers a request when no real model does.

A :class:`Policy` turns an Anthropic request payload into a :class:`Reply`
(response content blocks and a stop reason). The in-process scripted provider
and the simulated Anthropic server both ask a :class:`PolicyRegistry` which
policy answers a node's request, so one scenario script drives either.

This module is pure: no I/O, no clock. The only state is a
:class:`ScriptPolicy`'s cursor.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Protocol

import attrs

from runtime.errors import ConfigError, FoldlineError
from runtime.values.canonical import canonical_json, sha256_hex

STOP_REASONS = ("end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal")
"""Every stop reason the Messages API documents."""

SCRIPTED_STOP_REASONS = ("pause_turn", "refusal")
"""The stop reasons a script step may name (the others follow from the step's content and the request)."""


STEP_KEYS = ("text", "output", "tool_calls", "stop_reason", "compaction")
"""The keys of a script step (a scenario's ``script`` entries, a simulator script's steps)."""
_STEP_KEYS = frozenset(STEP_KEYS)
_CALL_KEYS = frozenset({"name", "arguments"})


class PolicyExhausted(FoldlineError):
    """A scripted policy was asked for a step it does not have."""


class UnknownPolicy(FoldlineError, LookupError):
    """No policy answers for the node a request names."""


@attrs.frozen
class ScriptCall:
    """One tool call a script step makes; ``arguments_json`` is canonical JSON of an object."""

    name: str
    arguments_json: str = "{}"

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"ScriptCall.name: {self.name!r} is not a non-empty string")
        try:
            arguments = json.loads(self.arguments_json)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"ScriptCall.arguments_json: {self.arguments_json!r} is not JSON ({exc})") from exc
        if not isinstance(arguments, dict):
            raise ValueError(f"ScriptCall.arguments_json: {self.arguments_json!r} is not a JSON object")
        if canonical_json(arguments) != self.arguments_json:
            raise ValueError(f"ScriptCall.arguments_json: {self.arguments_json!r} is not canonical JSON")

    @classmethod
    def create(cls, name: str, arguments: Mapping[str, Any] | None = None) -> ScriptCall:
        return cls(name=name, arguments_json=canonical_json(dict(arguments or {})))

    @property
    def arguments(self) -> dict[str, Any]:
        """A fresh dict of the arguments."""
        return json.loads(self.arguments_json)


# Typed converters: mypy's attrs plugin cannot type a generic ``converter=tuple``.
def _calls(calls: Iterable[ScriptCall]) -> tuple[ScriptCall, ...]:
    return tuple(calls)


def _blocks(blocks: Iterable[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    return tuple(blocks)


def _steps(steps: Iterable[ScriptStep]) -> tuple[ScriptStep, ...]:
    return tuple(steps)


@attrs.frozen
class ScriptStep:
    """One scripted model turn: some text (or a structured output), some tool calls, or both (text first)."""

    text: str | None = None
    tool_calls: tuple[ScriptCall, ...] = attrs.field(default=(), converter=_calls)
    stop_reason: str | None = None
    """``"pause_turn"`` or ``"refusal"`` to end the step that way (None: from the content)."""
    output_json: str | None = None
    """A structured output's value as canonical JSON: the step answers it as its text (``output`` in a script)."""
    compaction: str | None = None
    """The summary a server-side compaction writes when the request this step answers compacts (the simulator's
    ``compact_20260112``; None: the simulator's own summary). The step's content is the reply after it."""

    def __attrs_post_init__(self) -> None:
        if self.output_json is not None and self.text is not None:
            raise ValueError("ScriptStep: a step gives 'text' or 'output', not both")
        if self.stop_reason is not None and self.stop_reason not in SCRIPTED_STOP_REASONS:
            raise ValueError(
                f"ScriptStep.stop_reason: {self.stop_reason!r} is not one of {', '.join(SCRIPTED_STOP_REASONS)}"
            )
        if self.text is not None and (not isinstance(self.text, str) or not self.text):
            raise ValueError(f"ScriptStep.text: {self.text!r} is not a non-empty string")
        if self.text is None and self.output_json is None and not self.tool_calls:
            raise ValueError("ScriptStep: a step needs text (or an output), tool calls, or both; it has neither")
        if self.compaction is not None and (not isinstance(self.compaction, str) or not self.compaction.strip()):
            raise ValueError(f"ScriptStep.compaction: {self.compaction!r} is not a non-empty string")

    @classmethod
    def from_obj(cls, obj: Any, where: str) -> ScriptStep:
        """Validate a plain ``{"text": str?, "tool_calls": [{"name", "arguments"?}]?}`` dict.

        Raises :class:`~runtime.errors.ConfigError` (a ``ValueError``) whose
        message starts with ``where``, the key path of ``obj``.
        """
        if not isinstance(obj, Mapping):
            raise ConfigError(f"{where}: {obj!r} is not a table with 'text' and/or 'tool_calls'")
        unknown = sorted(set(obj) - _STEP_KEYS)
        if unknown:
            raise ConfigError(f"{where}: unknown key {unknown[0]!r} (expected 'text' or 'output', and/or 'tool_calls')")
        text = obj.get("text")
        output_json = _output_json(obj, where)
        if text is not None and (not isinstance(text, str) or not text):
            raise ConfigError(f"{where}.text: {text!r} is not a non-empty string")
        raw_calls = obj.get("tool_calls", [])
        if not isinstance(raw_calls, (list, tuple)):
            raise ConfigError(f"{where}.tool_calls: {raw_calls!r} is not a list of tool calls")
        calls = tuple(_call_from_obj(call, f"{where}.tool_calls[{i}]") for i, call in enumerate(raw_calls))
        if text is not None and output_json is not None:
            raise ConfigError(f"{where}: a step gives 'text' or 'output', not both")
        if text is None and output_json is None and not calls:
            raise ConfigError(f"{where}: a step needs 'text' (or 'output'), 'tool_calls', or both; it has neither")
        stop_reason = obj.get("stop_reason")
        if stop_reason is not None and stop_reason not in SCRIPTED_STOP_REASONS:
            raise ConfigError(f"{where}.stop_reason: {stop_reason!r} is not one of {', '.join(SCRIPTED_STOP_REASONS)}")
        compaction = obj.get("compaction")
        if compaction is not None and (not isinstance(compaction, str) or not compaction.strip()):
            raise ConfigError(f"{where}.compaction: {compaction!r} is not a non-empty string (a compaction's summary)")
        return cls(text=text, tool_calls=calls, stop_reason=stop_reason, output_json=output_json, compaction=compaction)


def _output_json(obj: Mapping[str, Any], where: str) -> str | None:
    """A step's ``output`` (a structured output's value: any JSON value) as canonical JSON."""
    if "output" not in obj:
        return None
    try:
        return canonical_json(obj["output"])
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}.output: {obj['output']!r} is not a JSON value ({exc})") from exc


def _call_from_obj(obj: Any, where: str) -> ScriptCall:
    if not isinstance(obj, Mapping):
        raise ConfigError(f"{where}: {obj!r} is not a table with 'name' and 'arguments'")
    unknown = sorted(set(obj) - _CALL_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (expected 'name' and 'arguments')")
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}.name: {name!r} is not a non-empty string")
    arguments = obj.get("arguments", {})
    if not isinstance(arguments, Mapping):
        raise ConfigError(f"{where}.arguments: {arguments!r} is not a table")
    try:
        arguments_json = canonical_json(dict(arguments))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}.arguments: {arguments!r} is not JSON-compatible ({exc})") from exc
    return ScriptCall(name=name, arguments_json=arguments_json)


@attrs.frozen
class Reply:
    """A model's answer: Anthropic response content blocks and why it stopped.

    ``output_tokens`` is None when the caller should count the content itself.
    """

    content: tuple[dict[str, Any], ...] = attrs.field(converter=_blocks)
    stop_reason: str
    output_tokens: int | None = None

    def __attrs_post_init__(self) -> None:
        if self.stop_reason not in STOP_REASONS:
            raise ValueError(f"Reply.stop_reason: {self.stop_reason!r} is not one of {', '.join(STOP_REASONS)}")
        if self.output_tokens is not None and (
            isinstance(self.output_tokens, bool) or not isinstance(self.output_tokens, int) or self.output_tokens < 0
        ):
            raise ValueError(f"Reply.output_tokens: {self.output_tokens!r} is not a non-negative integer or None")


class Policy(Protocol):
    """Answers one request. ``payload`` is the Anthropic Messages request payload."""

    def respond(self, payload: Mapping[str, Any]) -> Reply: ...


def tool_use_id(node_id: str, step: int, index: int) -> str:
    """The deterministic tool-use id of call ``index`` in step ``step`` of ``node_id``'s script."""
    return "toolu_" + sha256_hex(f"{node_id}:{step}:{index}")[:24]


def _check_start(instance: ScriptPolicy, attribute: attrs.Attribute, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= len(instance.steps):
        raise ValueError(
            f"ScriptPolicy.start: {value!r} is not a step index from 0 to {len(instance.steps)} "
            f"(node {instance.node_id!r} has {len(instance.steps)} step(s))"
        )


@attrs.define(eq=False)
class ScriptPolicy:
    """Answers with its steps in order, one per request; raises PolicyExhausted past the last.

    ``start`` is the first step it answers with (a resumed run starts each
    node's script after the requests its stored run completed).
    """

    node_id: str
    steps: tuple[ScriptStep, ...] = attrs.field(converter=_steps)
    start: int = attrs.field(default=0, kw_only=True, validator=_check_start)
    _cursor: int = attrs.field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        self._cursor = self.start

    @property
    def steps_taken(self) -> int:
        return self._cursor

    def respond(self, payload: Mapping[str, Any]) -> Reply:
        if self._cursor >= len(self.steps):
            raise PolicyExhausted(
                f"node {self.node_id!r}: its script had {len(self.steps)} step(s) and all were used; "
                f"request {self._cursor + 1} has no scripted answer"
            )
        index = self._cursor
        self._cursor += 1
        return reply_for_step(self.node_id, index, self.steps[index])


def reply_for_step(node_id: str, index: int, step: ScriptStep) -> Reply:
    """The reply that step ``index`` of ``node_id``'s script gives: text block first, then tool uses."""
    content: list[dict[str, Any]] = []
    text = step.text if step.text is not None else step.output_json
    if text is not None:
        content.append({"type": "text", "text": text})
    for i, call in enumerate(step.tool_calls):
        content.append(
            {"type": "tool_use", "id": tool_use_id(node_id, index, i), "name": call.name, "input": call.arguments}
        )
    stop_reason = step.stop_reason or ("tool_use" if step.tool_calls else "end_turn")
    return Reply(content=tuple(content), stop_reason=stop_reason)


def _freeze_policies(value: Mapping[str, Policy]) -> Mapping[str, Policy]:
    return MappingProxyType(dict(value))


@attrs.frozen
class PolicyRegistry:
    """Which policy answers each node's requests.

    ``default`` answers only requests that name no node; a request naming a
    node the registry does not know is an error even when a default is set
    (a misspelt node id must not be answered silently by another script),
    unless a ``fallback`` is set: it answers every node without a policy of
    its own (e.g. :class:`runtime.scripted.default_model.DefaultModel`).
    """

    policies: Mapping[str, Policy] = attrs.field(factory=dict, converter=_freeze_policies)
    default: Policy | None = None
    fallback: Policy | None = None

    @classmethod
    def from_scripts(cls, scripts: Mapping[str, Sequence[ScriptStep]], default: Policy | None = None) -> PolicyRegistry:
        """One :class:`ScriptPolicy` per node id."""
        return cls({node: ScriptPolicy(node, steps) for node, steps in scripts.items()}, default)

    def with_policy(self, node_id: str, policy: Policy) -> PolicyRegistry:
        """A new registry that also maps ``node_id`` to ``policy`` (replacing any previous one)."""
        return attrs.evolve(self, policies={**self.policies, node_id: policy})

    def policy_for(self, node_id: str | None) -> Policy:
        if node_id is None:
            if self.default is None:
                raise UnknownPolicy("the request names no node and the policy registry has no default policy")
            return self.default
        policy = self.policies.get(node_id)
        if policy is not None:
            return policy
        if self.fallback is not None:
            return self.fallback
        known = ", ".join(sorted(self.policies)) or "none"
        raise UnknownPolicy(f"no policy for node {node_id!r} (nodes with a policy: {known})")
