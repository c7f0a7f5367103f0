"""What the flow's workflows parse again and again, parsed once per worker process: the scenario and the price table.

Every node workflow and the flow's parse the scenario TOML they are given, and
load the packaged price table, on their first workflow task (and again at each
replay): about half the CPU the quickstart's workflow tasks spent in workflow
code (``py-spy`` over ``scripts/temporal_overhead.py``). Both are pure functions
of their text and give frozen values, so the worker keeps the last few by text
and a replay gets an equal value; the nodes of a flow in process share one
parsed scenario the same way.
"""

from __future__ import annotations

import functools

from actors.tools import BUILTIN_TOOLS
from runtime.config.loader import loads_scenario
from runtime.config.scenario import Scenario
from runtime.models.pricing import PricingTable

KEPT_SCENARIOS = 16
"""How many scenario texts a worker keeps parsed (the flows it runs at once are usually of a few scenarios)."""


@functools.lru_cache(maxsize=KEPT_SCENARIOS)
def scenario_of(text: str, label: str) -> Scenario:
    """The scenario ``text`` (``label`` names it in errors), with the built-in tools; a bad one raises each time."""
    return loads_scenario(text, path_label=label, tool_names=BUILTIN_TOOLS.names())


@functools.cache
def default_pricing() -> PricingTable:
    """The price table packaged with foldline (read once)."""
    return PricingTable.load_default()
