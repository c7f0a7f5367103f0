"""Small builders shared by the runtime tests (not a test module)."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from runtime.config import Profile
from runtime.config.operation import Operation
from runtime.contract.provider import Provider, image_rule_of
from runtime.flows.flow import Flow, Node
from runtime.providers.scripted import ScriptedProvider
from runtime.runtime import Runtime
from runtime.scripted.policies import PolicyRegistry, ScriptCall, ScriptPolicy, ScriptStep
from runtime.sim.clock import ManualClock
from runtime.values.image_rules import ImageRule


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


@attrs.define(eq=False)
class ProviderWrapper:
    """A provider that hands every attempt to ``inner`` and says what ``inner`` says of itself.

    Test wrappers (recording payloads, tampering with them) subclass it and override ``send``.
    """

    inner: Provider

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def caches_by_prefix(self) -> bool:
        return self.inner.caches_by_prefix

    @property
    def max_retries(self) -> int:
        return self.inner.max_retries

    @property
    def counts_tokens(self) -> bool:
        return self.inner.counts_tokens

    @property
    def image_rule(self) -> ImageRule:
        return image_rule_of(self.inner)

    async def count_tokens(self, request: Any) -> int:
        return await self.inner.count_tokens(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def tamper_first_tool_result(store: Path) -> str:
    """Change one byte of the first stored tool result's content (its digest no longer matches); its message id."""
    connection = sqlite3.connect(store)
    message_id, sha = connection.execute(
        "SELECT m.id, m.sha256 FROM messages m JOIN contents c ON c.sha256 = m.sha256 WHERE c.kind = 'tool_result' "
        "ORDER BY m.rowid LIMIT 1"
    ).fetchone()
    content = connection.execute("SELECT content FROM contents WHERE sha256 = ?", (sha,)).fetchone()[0]
    with connection:
        connection.execute(
            "UPDATE contents SET content = ? WHERE sha256 = ?", (content.replace("a.md", "A.md", 1), sha)
        )
    connection.close()
    return str(message_id)


def copy_store(store: Path, tmp_path: Path) -> Path:
    """A copy of a SQLite store (through its backup API) to change without touching the original."""
    target = tmp_path / "copy.db"
    source, dest = sqlite3.connect(store), sqlite3.connect(target)
    source.backup(dest)
    source.close()
    dest.close()
    return target


SCENARIO_NEEDS = {"mcp_time": "mcp_server_time"}
"""Shipped scenarios that need an optional extra, by file stem: the module whose absence skips them."""


def skip_unless_extra_for(scenario: Path) -> None:
    """Skip, saying which extra, when a shipped scenario needs one that is not installed."""
    import pytest

    if scenario.stem in SCENARIO_NEEDS:
        pytest.importorskip(SCENARIO_NEEDS[scenario.stem], reason=f"{scenario.name} needs the mcp extra")
