"""Configuration: frozen, validated values and the scenario file loader.

- :mod:`runtime.config.checks`: the key-path checks that code and files share
  (types, bounds, names, the messages they raise).
- :mod:`runtime.config.values`: profiles, the provider, nodes, run settings and
  the scenario, validated when built, by code or from a dict.
- :mod:`runtime.config.loader`: TOML in, a frozen :class:`Scenario` out.

Code and files refuse exactly the same values with the same message; a file's
message also names the file.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from runtime.config.values import (
    ModelConfig,
    NodeSpec,
    Profile,
    ProviderSpec,
    RunSettings,
    Scenario,
    UnknownNode,
    check_known_tools,
)

if TYPE_CHECKING:
    from runtime.config.loader import SCHEMA, ScenarioError, load_scenario, loads_scenario

_LOADER = frozenset({"SCHEMA", "ScenarioError", "load_scenario", "loads_scenario"})
"""The file loader's names, loaded on first use: a program that builds its values in code (``import
runtime.runtime``) never pays for the TOML parser and the loader's tables."""

__all__ = [
    "SCHEMA",
    "ModelConfig",
    "NodeSpec",
    "Profile",
    "ProviderSpec",
    "RunSettings",
    "Scenario",
    "ScenarioError",
    "UnknownNode",
    "check_known_tools",
    "load_scenario",
    "loads_scenario",
]


def __getattr__(name: str) -> Any:
    if name not in _LOADER:
        raise AttributeError(f"module 'runtime.config' has no attribute {name!r}")
    value = getattr(importlib.import_module("runtime.config.loader"), name)
    globals()[name] = value
    return value
