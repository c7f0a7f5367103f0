"""Requests over their ceiling by the server's count (issue 11, case 12), and the count-tokens calls it costs.

Usage: ``python scripts/over_ceiling_by_server.py [--kind simulated|scripted|openai] [--model NAME] [--no-bench]``
(from the repository root). Runs every shipped scenario (``scenarios/*.toml``)
and, unless ``--no-bench``, every benchmark workload under every strategy, on
the simulated server at token factors 1.15 and 1.37, and prints per run the
responses received, how many of them the server counted (fresh + cache read +
cache write input) above the ceiling their send decided under, the decisions
refused, and the count-tokens calls made. Exits 1 when any request went over.
``--kind scripted`` answers in process (the same counting code, faster);
``--kind openai`` runs on the simulator's chat-completions face through the
official ``openai`` SDK (no count-tokens endpoint: an uncalibrated model is
measured at its family's prior from the model table); ``--model`` runs every
scenario and workload with that model instead of its own (``gpt-5-mini``: a
model OpenAI tokenizes with o200k_base, which the chat face counts exactly;
``claude-haiku-5-5`` or a model of no listed family: counted by the factor).
The default is each scenario's own provider (the simulated server over HTTP).
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import attrs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from actors.images import scenario_registry as image_tools  # noqa: E402
from runtime.bench.harness import run_workload_set, strategies_named  # noqa: E402
from runtime.bench.workloads import WORKLOADS, build  # noqa: E402
from runtime.config import Scenario  # noqa: E402
from runtime.config.loader import load_scenario  # noqa: E402
from runtime.logs import configure_logging  # noqa: E402
from runtime.scenarios.run import run_scenario  # noqa: E402
from runtime.scenarios.tools import scenario_registry, tool_names_for_loading  # noqa: E402
from signals.bus import SignalBus  # noqa: E402

FACTORS = (1.15, 1.37)


@attrs.define
class Tally:
    """What one run (or one workload's set of runs) sent, by the server's count."""

    responses: int = 0
    over: int = 0
    refused: int = 0
    count_calls: int = 0
    worst: list[str] = attrs.field(factory=list)
    _ceilings: dict[tuple[str, str | None], int | None] = attrs.field(factory=dict)

    def feed(self, event: Any) -> None:
        data = event.data
        key = (event.run_id, event.request_id)
        if event.type == "ContextDecision":
            self.count_calls += int(data.get("count_calls") or 0)
            if data["sent"]:
                self._ceilings[key] = data["ceiling"]
            elif data["action"] == "refuse":
                self.refused += 1
        elif event.type == "ResponseReceived":
            self.responses += 1
            usage = data["usage"]
            total = sum(int(usage.get(k, 0)) for k in usage if k != "output_tokens")
            ceiling = self._ceilings.get(key)
            if ceiling is not None and total > ceiling:
                self.over += 1
                self.worst.append(f"{event.request_id}: {total} > {ceiling}")


_TALLY: list[Tally] = []
_original_publish = SignalBus.publish


async def _tallying_publish(self: SignalBus, event: Any, **kwargs: Any) -> Any:
    published = await _original_publish(self, event, **kwargs)
    if _TALLY and published is not None:
        _TALLY[-1].feed(published)
    return published


async def tallied(run: Callable[[], Awaitable[object]]) -> Tally:
    """Run ``run`` and tally every event any of its runtimes publishes."""
    SignalBus.publish = _tallying_publish  # type: ignore[method-assign]
    _TALLY.append(Tally())
    try:
        await run()
        return _TALLY[-1]
    finally:
        _TALLY.pop()
        SignalBus.publish = _original_publish  # type: ignore[method-assign]


def with_factor(scenario: Scenario, factor: float, model: str | None = None) -> Scenario:
    """``scenario`` at the server's token ``factor`` (and with every profile on ``model``, when given)."""
    scenario = scenario.evolve(provider=scenario.provider.evolve(token_factor=factor))
    if model is None:
        return scenario
    profiles = {name: p.evolve(model=None) for name, p in scenario.profiles.items()}
    return scenario.evolve(provider=scenario.provider.evolve(model=model), profiles=profiles)


async def scenario_tally(path: Path, factor: float, kind: str | None, model: str | None = None) -> Tally:
    """One shipped scenario at ``factor``."""
    base = image_tools(path)
    scenario = with_factor(load_scenario(path, tool_names=tool_names_for_loading(None, base)), factor, model)
    registry = scenario_registry(scenario, None, base)
    return await tallied(lambda: run_scenario(scenario, provider_kind=kind, registry=registry))


async def workload_tally(name: str, factor: float, kind: str, model: str | None = None) -> Tally:
    """One benchmark workload under every strategy at ``factor``."""
    scenario = with_factor(build(name), factor, model)
    return await tallied(lambda: run_workload_set(scenario, strategies_named(None), provider_kind=kind))


def scenario_paths() -> list[Path]:
    """Every shipped scenario this harness can run on its own tools.

    A scenario that names MCP servers (an ``[mcp]`` table) needs those servers running, which
    ``foldline run`` starts and this harness does not: tests/test_mcp_tools.py runs those.
    """
    return sorted(p for p in (ROOT / "scenarios").glob("*.toml") if "mcp" not in tomllib.loads(p.read_text("utf-8")))


async def main(kind: str | None, bench: bool, model: str | None = None) -> int:
    over = 0
    for factor in FACTORS:
        runs: list[tuple[str, Tally]] = []
        for path in scenario_paths():
            runs.append((path.name, await scenario_tally(path, factor, kind, model)))
        if bench:
            for name in WORKLOADS:
                runs.append((f"bench/{name}", await workload_tally(name, factor, kind or "simulated", model)))
        for label, t in runs:
            over += t.over
            print(
                f"factor {factor} {label}: {t.responses} responses, {t.over} over the ceiling by the server's count, "
                f"{t.refused} refused, {t.count_calls} count_tokens calls"
            )
            for line in t.worst:
                print(f"    over: {line}")
    print(f"total over the ceiling by the server's count: {over}")
    return 1 if over else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=("simulated", "scripted", "openai"), default=None)
    parser.add_argument("--model", default=None, help="run every scenario and workload with this model")
    parser.add_argument("--no-bench", action="store_true")
    args = parser.parse_args()
    configure_logging(level="error")
    raise SystemExit(anyio.run(main, args.kind, not args.no_bench, args.model))
