"""What ``foldline run`` adds around a local run: MCP servers (``[mcp]``) and ``--otlp`` export.

- :func:`run_with_mcp` starts the scenario's MCP servers, loads the scenario
  with their tool names (so a profile naming a tool no server lists is refused
  with its key path, as any unknown tool is), runs it, and shuts the servers
  down with the run.
- :func:`otlp_export` exports the run's signal stream as OpenTelemetry traces
  (:mod:`signals.otlp`) and says on stderr how many spans were exported and how
  many dropped.
- :func:`extras_refusal`: what is not built yet (MCP servers or ``--otlp`` with
  ``--store`` or ``--engine temporal``) is refused before anything starts.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from runtime.config.mcp import McpServerSpec
from runtime.errors import ConfigError
from runtime.scenarios.run import ScenarioRun
from runtime.scenarios.tools import RunTools
from signals.bus import SignalBus


def extras_refusal(args: argparse.Namespace) -> str | None:
    """Why this run's ``--otlp`` URL, or its MCP servers or ``--otlp`` with its other flags, cannot be used, or None."""
    if args.otlp:
        from signals.otel import traces_endpoint

        try:
            traces_endpoint(args.otlp)
        except ValueError as exc:
            return str(exc)
    other = "--store" if args.store else "--engine temporal" if args.engine == "temporal" else None
    if other is None:
        return None
    if args.otlp:
        return f"--otlp with {other} is not built yet; export a local run without it"
    from runtime.config.loader import load_mcp_servers

    try:
        servers = load_mcp_servers(args.scenario)
    except ConfigError:
        return None  # the run itself names the problem
    if servers:
        return f"{args.scenario}: MCP servers ([mcp]) with {other} are not built yet; run without {other}"
    return None


async def run_with_mcp(path: str, tools: RunTools, servers: Mapping[str, McpServerSpec], **options: Any) -> ScenarioRun:
    """Start ``servers``, load the scenario at ``path`` with their tools, run it (``options`` as run_scenario's)."""
    from actors.tools.mcp import mcp_servers
    from runtime.config.loader import load_scenario
    from runtime.scenarios.run import run_scenario

    async with mcp_servers(servers, base_dir=Path(path).parent) as mcp:
        clash = sorted(mcp.names() & tools.names())
        if clash:
            raise ConfigError(f"{path}: mcp: the servers list tools foldline already has: {', '.join(clash)}")
        scenario = load_scenario(path, tool_names=tools.names() | mcp.names())
        registry = tools.registry(scenario).with_tools(mcp.tools)
        return await run_scenario(scenario, registry=registry, **options)


@contextmanager
def otlp_export(url: str | None, err: TextIO) -> Iterator[tuple[Callable[[SignalBus], object], ...]]:
    """The bus hooks that export the run to ``url`` (none without one); the counts go to ``err`` at the end."""
    if not url:
        yield ()
        return
    try:
        from signals.otlp import OtlpExport
    except ImportError:
        raise ConfigError("--otlp needs the otel extra: pip install 'foldline[otel]'") from None
    try:
        export = OtlpExport(url)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    try:
        yield (export.sink.attach,)
    finally:
        counts = export.finish()
        print(
            f"foldline: --otlp {export.endpoint}: {counts.exported} of {counts.ended} spans exported, "
            f"{counts.dropped} dropped"
            + (f" ({counts.failed_exports} failed exports)" if counts.failed_exports else ""),
            file=err,
        )
