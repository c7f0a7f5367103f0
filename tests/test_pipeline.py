"""The send pipeline: one attempt per provider call, each attempt measured and decided here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from actors.operations import run_operation
from runtime.config import Profile
from runtime.contract.provider import AttemptFailed, ProviderError, ProviderReply
from runtime.providers.scripted import ScriptedProvider
from runtime.request.compiler import Request
from runtime.values.messages import AssistantResponse
from tests.support import bounded, runtime_for, scripted, text


@attrs.define(eq=False)
class Failing:
    """Fails the first ``failures`` attempts with a retryable (or not) status, then lets the inner answer."""

    inner: ScriptedProvider
    failures: int
    retry: bool = True
    max_retries: int = 2
    name: str = "scripted"
    caches_by_prefix: bool = True
    calls: int = 0

    async def send(self, request: Request, *, node_id: str | None) -> ProviderReply:
        self.calls += 1
        if self.calls <= self.failures:
            headers = {"retry-after-ms": "1", "x-should-retry": "true" if self.retry else "false"}
            raise AttemptFailed(
                "HTTP 529 overloaded_error: busy", status=529, error_type="overloaded_error", headers=headers
            )
        return await self.inner.send(request, node_id=node_id)

    @property
    def counts_tokens(self) -> bool:
        return self.inner.counts_tokens

    async def count_tokens(self, request: Request) -> int:
        return await self.inner.count_tokens(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _send_once(provider: Any, tmp_path: Path) -> tuple[Any, list[dict[str, Any]]]:
    signals = tmp_path / "s.jsonl"
    async with runtime_for(provider, signals_path=signals) as rt:
        branch = rt.new_branch(_node())
        outcome: Any
        try:
            outcome = await run_operation(branch, bounded("Say hi."), env=rt.env(), profile=Profile(), node_id="n")
        except ProviderError as exc:
            outcome = exc
        outcome = (outcome, branch)
    events = [json.loads(line) for line in signals.read_text().splitlines()]
    return outcome, events


def _node() -> Any:
    from tests.support import node

    return node("n", bounded("Say hi."), profile=Profile())


@pytest.mark.anyio
async def test_a_retried_attempt_is_measured_decided_and_announced_again(tmp_path: Path) -> None:
    provider = Failing(scripted({"n": [text("hi")]}), failures=1)
    (result, branch), events = await _send_once(provider, tmp_path)
    assert result.answer == "hi" and provider.calls == 2
    kinds = [e["type"] for e in events if e["type"] in ("ContextDecision", "RequestSent", "ResponseReceived")]
    assert kinds == ["ContextDecision", "RequestSent", "ContextDecision", "RequestSent", "ResponseReceived"]
    sent = [e["data"] for e in events if e["type"] == "RequestSent"]
    assert [s["attempt"] for s in sent] == [1, 2] and sent[0]["digest"] == sent[1]["digest"]
    decisions = [e["data"] for e in events if e["type"] == "ContextDecision"]
    assert all(d["sent"] for d in decisions)
    requests = {e["request_id"] for e in events if e["type"] in ("ContextDecision", "RequestSent", "ResponseReceived")}
    assert requests == {f"{branch.id}:1"}


@pytest.mark.anyio
async def test_an_attempt_the_rules_do_not_retry_fails_after_one_attempt(tmp_path: Path) -> None:
    provider = Failing(scripted({"n": [text("hi")]}), failures=5, retry=False)
    (error, _branch), _events = await _send_once(provider, tmp_path)
    assert isinstance(error, ProviderError) and not isinstance(error, AttemptFailed)
    assert str(error) == "HTTP 529 overloaded_error: busy (after 1 attempt)"
    assert error.status == 529 and error.error_type == "overloaded_error" and provider.calls == 1


@pytest.mark.anyio
async def test_retries_stop_at_the_providers_limit(tmp_path: Path) -> None:
    provider = Failing(scripted({"n": [text("hi")]}), failures=5, max_retries=2)
    (error, _branch), events = await _send_once(provider, tmp_path)
    assert str(error) == "HTTP 529 overloaded_error: busy (after 3 attempts)" and provider.calls == 3
    assert [e["data"]["attempt"] for e in events if e["type"] == "RequestSent"] == [1, 2, 3]


@pytest.mark.anyio
async def test_send_returns_the_one_message_it_appended(tmp_path: Path) -> None:
    from actors.pipeline import TurnProgress
    from actors.send import TurnDriver
    from runtime.decision.ceiling import resolve_ceiling

    provider = scripted({"n": [text("hi")]})
    async with runtime_for(provider) as rt:
        env = rt.env()
        branch = rt.new_branch(_node())
        ceiling = resolve_ceiling(
            model=env.model.name, profile_value=None, model_value=None, call_value=None, pricing=env.pricing
        )
        async with branch.turn() as turn:
            driver = TurnDriver(turn, env, Profile(), bounded("Say hi."), "n", None, ceiling, TurnProgress())
            await driver.append_instruction("Say hi.", "final")
            message = await driver.send("final")
    assert isinstance(message, AssistantResponse) and message.text == "hi"
    assert branch.view()[-1] is message
    assert driver.progress.completed == 1 and driver.progress.requests == 1
