"""foldline's runtime: flows, the scheduler, the request compiler, measurement,
the ceiling policy, folding, cache placement, providers, scenarios and the CLI.

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
