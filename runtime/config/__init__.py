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

from typing import TYPE_CHECKING

from runtime.values.exports import lazy_getattr

if TYPE_CHECKING:
    from runtime.config.loader import SCHEMA, ScenarioError, load_scenario, loads_scenario
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

_LOADER = frozenset({"SCHEMA", "ScenarioError", "load_scenario", "loads_scenario"})
_HOMES = {name: "runtime.config.loader" if name in _LOADER else "runtime.config.values" for name in __all__}
"""Each name's module, loaded on first use: a program that builds its values in code (``import
runtime.runtime``) imports the one module each value lives in (``runtime.config.profile``, ...) and never
pays for the TOML parser, the loader's tables, the scenario and the node values it does not build."""


__getattr__ = lazy_getattr(__name__, _HOMES)
