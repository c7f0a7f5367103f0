"""Small builders shared by the runtime tests (not a test module)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runtime.config import Profile
from runtime.flow import Flow, Node
from runtime.operation import Operation
from runtime.policies import PolicyRegistry, ScriptCall, ScriptPolicy, ScriptStep
from runtime.providers.scripted import ScriptedProvider
from runtime.runtime import Runtime
from runtime.sim.clock import ManualClock


def text(answer: str) -> ScriptStep:
    return ScriptStep(text=answer)


def calls(*pairs: tuple[str, Mapping[str, Any]], say: str | None = None) -> ScriptStep:
    return ScriptStep(text=say, tool_calls=tuple(ScriptCall.create(name, args) for name, args in pairs))


def read(path: str, size: int = 2000) -> tuple[str, dict[str, Any]]:
    return ("synthetic_read", {"path": path, "size": size})


def iterative(instruction: str, **kw: Any) -> Operation:
    return Operation("iterative", (instruction,), **kw)


def bounded(*instructions: str, **kw: Any) -> Operation:
    return Operation("bounded", tuple(instructions), **kw)


READER = Profile(system="You read files and answer briefly.", tools=("synthetic_read", "spawn", "fail"))


def scripted(scripts: Mapping[str, Sequence[ScriptStep]], clock: ManualClock | None = None) -> ScriptedProvider:
    registry = PolicyRegistry({node: ScriptPolicy(node, steps) for node, steps in scripts.items()})
    return ScriptedProvider(registry, clock=clock or ManualClock(1_000.0))


def runtime_for(provider: ScriptedProvider, **kw: Any) -> Runtime:
    clock = kw.pop("clock", None) or ManualClock(1_000.0)
    return Runtime(provider=provider, clock=clock, monotonic=clock, **kw)


def node(node_id: str, operation: Operation, **kw: Any) -> Node:
    kw.setdefault("profile", READER)
    return Node(node_id, operation, **kw)


def flow(*nodes: Node, **kw: Any) -> Flow:
    return Flow(nodes, **kw)
