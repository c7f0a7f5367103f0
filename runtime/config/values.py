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
- every limit has a lower and an upper bound (:mod:`runtime.inputs.bounds`);
- an explicit null in a dict is refused (omit the key to leave it unset); in
  code, ``None`` is accepted only for fields whose default is ``None``;
- unknown keys are refused by name, with a close match suggested.

The values live in one module each (:mod:`~runtime.config.profile`,
:mod:`~runtime.config.provider`, :mod:`~runtime.config.nodes`,
:mod:`~runtime.config.scenario`); this module gathers them. Pure: no I/O, no clock.
"""

from __future__ import annotations

from runtime.config.nodes import INHERIT_MODES, OPERATIONS, NodeSpec
from runtime.config.profile import (
    CONTEXT_STRATEGIES,
    FOLD_SCHEDULINGS,
    Profile,
    check_known_tools,
)
from runtime.config.provider import PROVIDER_KINDS, ModelConfig, ProviderSpec
from runtime.config.scenario import (
    SPAWN_TOOL,
    RunSettings,
    Scenario,
    UnknownNode,
    offered_tools,
)

__all__ = [
    "CONTEXT_STRATEGIES",
    "FOLD_SCHEDULINGS",
    "INHERIT_MODES",
    "OPERATIONS",
    "PROVIDER_KINDS",
    "SPAWN_TOOL",
    "ModelConfig",
    "NodeSpec",
    "Profile",
    "ProviderSpec",
    "RunSettings",
    "Scenario",
    "UnknownNode",
    "check_known_tools",
    "offered_tools",
]
