"""Write every compiled request digest of the shipped scenarios and bench workloads, in order per node.

Usage: ``python scripts/request_digests.py OUT.json`` then compare two such
files (``cmp`` or ``diff``). Runs each ``scenarios/*.toml`` on the in-process
scripted provider and each benchmark workload under every benchmark
strategy; records the digest of every RequestSent event, grouped by
scenario (and strategy) and node. A refactor that changes no behaviour leaves
the file byte-identical.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from actors.images import scenario_registry as image_tools  # noqa: E402
from runtime.bench.harness import run_workload_set, strategies_named  # noqa: E402
from runtime.bench.workloads import WORKLOADS, build  # noqa: E402
from runtime.config.loader import load_scenario  # noqa: E402
from runtime.logs import configure_logging  # noqa: E402
from runtime.scenarios.run import run_scenario  # noqa: E402
from runtime.scenarios.tools import scenario_registry, tool_names_for_loading  # noqa: E402
from signals.bus import SignalBus  # noqa: E402

CAPTURED: list[tuple[str | None, str]] = []
_original_publish = SignalBus.publish


async def _capturing_publish(self: SignalBus, event: Any, **kwargs: Any) -> Any:
    if getattr(event, "TYPE", None) == "RequestSent":
        CAPTURED.append((kwargs.get("node_id"), event.to_data()["digest"]))
    return await _original_publish(self, event, **kwargs)


def _group() -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = defaultdict(list)
    for node, digest in CAPTURED:
        grouped[str(node)].append(digest)
    CAPTURED.clear()
    return dict(sorted(grouped.items()))


async def collect() -> dict[str, Any]:
    SignalBus.publish = _capturing_publish  # type: ignore[method-assign]
    out: dict[str, Any] = {}
    for path in sorted((ROOT / "scenarios").glob("*.toml")):
        base = image_tools(path)  # the built-in tools and read_image (next to the file)
        scenario = load_scenario(path, tool_names=tool_names_for_loading(None, base))
        await run_scenario(
            scenario,
            provider_kind="scripted",
            clock=lambda: 1_000_000.0,
            registry=scenario_registry(scenario, None, base),
        )
        out[path.name] = _group()
    for name in WORKLOADS:
        await run_workload_set(build(name), strategies_named(None), provider_kind="scripted")
        out[f"bench/{name}"] = _group()
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    configure_logging(level="error")
    result = anyio.run(collect)
    Path(argv[0]).write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    total = sum(len(d) for nodes in result.values() for d in nodes.values())
    print(f"{total} request digests from {len(result)} runs written to {argv[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
