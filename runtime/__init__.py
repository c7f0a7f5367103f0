"""foldline's runtime: the pure core, configuration, flows and the products.

The pure core (synchronous functions over frozen values; no I/O, no clock, no
event loop; ``tests/test_layering.py`` holds it to that):

- :mod:`runtime.compiler` (a branch's view to a request), :mod:`runtime.measure`
  (its size in tokens), :mod:`runtime.ceiling` (the decision against the
  ceiling), :mod:`runtime.calibration` (the provider's scale);
- :mod:`runtime.fold` (folding without loss) and :mod:`runtime.cache` (prompt-cache
  placement).

Values and configuration: :mod:`runtime.messages`, :mod:`runtime.usage`,
:mod:`runtime.operation`, :mod:`runtime.policies` (scripted models),
:mod:`runtime.pricing`, :mod:`runtime.config` (profiles, scenarios, the loader).

The run: :mod:`runtime.flow` (graphs of nodes and the scheduler),
:mod:`runtime.runtime` (:class:`Runtime`, one run's provider, signals and
journal), :mod:`runtime.providers` (scripted, simulated, Anthropic),
:mod:`runtime.scenario_run`. The branch actor and the send step that run the
core's decisions live in :mod:`actors`; events in :mod:`signals`.

The products: :mod:`runtime.cli` (the ``foldline`` command),
:mod:`runtime.report`, :mod:`runtime.store` (SQLite, resume, replay),
:mod:`runtime.bench` (the benchmark), :mod:`runtime.sim` (the simulated
Anthropic server).

The names most programs need are importable from here (loaded on first use,
so ``import runtime`` stays cheap)::

    from runtime import Flow, Node, Operation, Profile, Runtime
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Runtime": "runtime.runtime",
    "Flow": "runtime.flow",
    "Node": "runtime.flow",
    "FlowResult": "runtime.flow",
    "Operation": "runtime.operation",
    "OperationResult": "runtime.operation",
    "run_operation": "actors.operations",
    "Profile": "runtime.config",
    "ModelConfig": "runtime.config",
    "ProviderSpec": "runtime.config",
    "open_provider": "runtime.providers.factory",
    "AnthropicProvider": "runtime.providers.anthropic",
    "OpenAIProvider": "runtime.providers.openai",
    "ChatDialect": "runtime.providers.openai_wire",
    "ScriptedProvider": "runtime.providers.scripted",
    "PolicyRegistry": "runtime.policies",
    "ScriptPolicy": "runtime.policies",
    "ScriptStep": "runtime.policies",
    "load_scenario": "runtime.config.loader",
    "run_scenario": "runtime.scenario_run",
    "Conversation": "actors.conversation",
    "tool": "actors.tools",
    "function_tool": "actors.tools",
    "Tool": "actors.tools",
    "ToolRegistry": "actors.tools",
    "BUILTIN_TOOLS": "actors.tools",
    "workspace_tools": "actors.tools",
    "DefaultModel": "runtime.policies_default",
    "default_policies": "runtime.policies_default",
    "open_simulated": "runtime.policies_default",
    "InputCeilingExceeded": "runtime.errors",
    "ConfigError": "runtime.errors",
    "FoldlineError": "runtime.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
