"""The in-process scripted provider: the fast provider for unit tests.

It answers from per-node scripts (a :class:`~runtime.scripted.policies.PolicyRegistry`)
and reports usage exactly as the simulated Anthropic server does (its token
count, its caching rules, the same cache engine), because it *is* the
simulator's request handler called in process: no socket, no HTTP client, no
retries. A request the simulator would refuse (a 400, an exhausted script) is
a :class:`~runtime.contract.provider.ProviderError` here.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import anyio
import anyio.lowlevel
import anyio.to_thread
import attrs

from runtime.contract.provider import ProviderError, ProviderReply, count_payload
from runtime.request.compiler import Request
from runtime.scripted.policies import PolicyRegistry
from runtime.sim.app import SimApp
from runtime.sim.config import SimConfig
from runtime.sim.errors import SimAPIError
from runtime.sim.http import HttpRequest, HttpResponse
from runtime.sim.models import model_facts
from runtime.sim.prepare import prepare
from runtime.values.server_edits import betas_for
from runtime.values.usage import Usage

_KEY = "scripted-in-process"


@attrs.define(eq=False, init=False)
class ScriptedProvider:
    """Scripts answer; the simulator's rules count and cache. See the module docstring."""

    _app: SimApp
    name: str
    caches_by_prefix: bool
    max_retries: int
    """0: no retries, every failure here is final (it would fail the same way again)."""
    counts_tokens: bool
    """True: :meth:`count_tokens` is the simulator's own count-tokens code, called in process."""

    def __init__(
        self,
        policies: PolicyRegistry,
        *,
        clock: Callable[[], float],
        token_factor: float = 1.15,
        lookback_collapse: bool = True,
        latency_s: float = 0.0,
        caches_by_prefix: bool = True,
    ) -> None:
        """``caches_by_prefix=False`` makes it a provider that does not declare prefix
        caching (placement then stays off whatever the profile says)."""
        config = SimConfig(token_factor=token_factor, lookback_collapse=lookback_collapse, latency_s=latency_s)
        self._app = SimApp(config=config, policies=policies, clock=clock, sleep=anyio.sleep)
        self.name = "scripted"
        self.caches_by_prefix = caches_by_prefix
        self.max_retries = 0
        self.counts_tokens = True

    @property
    def app(self) -> SimApp:
        """The simulator state behind this provider (cache entries, request log)."""
        return self._app

    async def send(self, request: Request, *, node_id: str | None) -> ProviderReply:
        """Answer one attempt in process (a refusal is a final :class:`ProviderError`)."""
        # A network provider always yields while its request is out; so does this one,
        # so cancellation and event delivery interleave as they would in a real run.
        await anyio.lowlevel.checkpoint()
        headers = {"x-api-key": _KEY, "content-type": "application/json", "anthropic-version": "2023-06-01"}
        if node_id:
            headers["x-foldline-node"] = node_id
        managed = request.settings.context_management_json
        if managed is not None:  # the simulator applies the edits in process, as over HTTP
            headers["anthropic-beta"] = ",".join(betas_for(json.loads(managed)["edits"]))
        response = await self._app.handle(HttpRequest("POST", "/v1/messages", headers, request.payload_bytes()))
        if response is None:
            raise ProviderError("the scripted provider dropped the request", error_type="connection_error")
        if not isinstance(response, HttpResponse):
            raise ProviderError("the scripted provider does not stream: it sends stream=false and got a stream")
        body = json.loads(response.body)
        if response.status != 200:
            error = body.get("error", {})
            raise ProviderError(
                f"HTTP {response.status} {error.get('type')}: {error.get('message')}",
                status=response.status,
                error_type=error.get("type"),
            )
        return ProviderReply(
            content=tuple(body["content"]),
            stop_reason=body.get("stop_reason"),
            usage=Usage.from_anthropic(body["usage"]),
            model=body["model"],
            attempts=1,
            response_id=body.get("id"),
            context_management=body.get("context_management"),
        )

    async def count_tokens(self, request: Request) -> int:
        """The simulator's count of ``request``, exactly what ``POST /v1/messages/count_tokens`` answers.

        The same validation and token layout the endpoint runs, in process (no
        request is logged: counting touches no cache and no script).
        """
        app = self._app
        body = count_payload(request)

        def count() -> int:
            prepared = prepare(
                body, count_only=True, counter=app.counter, lookback_collapse=app.config.lookback_collapse
            )
            model_facts(prepared.payload["model"])
            return prepared.layout.total_tokens

        try:
            if len(request.payload_bytes()) < app.config.thread_tokenize_bytes:
                await anyio.lowlevel.checkpoint()
                return count()
            return await anyio.to_thread.run_sync(count)  # as the endpoint does for a large body
        except SimAPIError as exc:
            raise ProviderError(
                f"HTTP {exc.status} {exc.error_type}: {exc.message}", status=exc.status, error_type=exc.error_type
            ) from None

    async def aclose(self) -> None:
        """Nothing to release: no connection is held."""
