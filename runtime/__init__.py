"""foldline's runtime: its public face, and the layers below it as subpackages.

The layers, lowest first (``tests/test_layering.py`` holds them; nothing
imports upward):

1. values: :mod:`runtime.values` (messages, ids, canonical JSON, usage, ...),
   :mod:`runtime.inputs` (input bounds), :mod:`runtime.errors`, :mod:`runtime.logs`, and :mod:`signals`;
2. model facts and the compiler: :mod:`runtime.models` (pricing, model limits),
   :mod:`runtime.request` (a branch's view to a request);
3. measuring: :mod:`runtime.measuring` (the tokenizer, the counter, calibration);
4. the ceiling: :mod:`runtime.decision` (pass, notice, fold or refuse);
5. fold and cache: :mod:`runtime.fold` (folding without loss), :mod:`runtime.cache` (prompt-cache placement);
6. configuration and the provider contract: :mod:`runtime.config`, :mod:`runtime.scripted`
   (scripted models), :mod:`runtime.contract` (what the actors ask of a provider);
7. the actors: :mod:`actors` (the branch actor, the send pipeline, tools);
8. flows and the Runtime: :mod:`runtime.flows`, :mod:`runtime.runtime`, :mod:`runtime.report`;
9. the products: :mod:`runtime.providers`, :mod:`runtime.sim` (the simulated Anthropic server),
   :mod:`runtime.store` (SQLite, resume, replay), :mod:`runtime.bench`, :mod:`runtime.display`,
   :mod:`runtime.temporal`, :mod:`runtime.scenarios` (running a scenario file), :mod:`runtime.cli`.

Layers 2 to 5 are the pure core: synchronous functions over frozen values;
no I/O, no clock, no event loop.

The names most programs need are importable from here (loaded on first use,
so ``import runtime`` stays cheap)::

    from runtime import Flow, Node, Operation, Profile, Runtime
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Runtime": "runtime.runtime",
    "Flow": "runtime.flows.flow",
    "Node": "runtime.flows.flow",
    "FlowResult": "runtime.flows.flow",
    "Operation": "runtime.config.operation",
    "OperationResult": "runtime.config.operation",
    "run_operation": "actors.operations",
    "Profile": "runtime.config",
    "ModelConfig": "runtime.config",
    "ProviderSpec": "runtime.config",
    "open_provider": "runtime.providers.factory",
    "AnthropicProvider": "runtime.providers.anthropic",
    "OpenAIProvider": "runtime.providers.openai",
    "ChatDialect": "runtime.providers.openai_wire",
    "ScriptedProvider": "runtime.providers.scripted",
    "PolicyRegistry": "runtime.scripted.policies",
    "ScriptPolicy": "runtime.scripted.policies",
    "ScriptStep": "runtime.scripted.policies",
    "load_scenario": "runtime.config.loader",
    "run_scenario": "runtime.scenarios.run",
    "Conversation": "actors.conversation",
    "tool": "actors.tools",
    "function_tool": "actors.tools",
    "Tool": "actors.tools",
    "ToolRegistry": "actors.tools",
    "BUILTIN_TOOLS": "actors.tools",
    "workspace_tools": "actors.tools",
    "DefaultModel": "runtime.scripted.default_model",
    "default_policies": "runtime.scenarios.defaults",
    "open_simulated": "runtime.scenarios.defaults",
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
