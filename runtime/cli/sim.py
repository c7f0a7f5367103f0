"""``foldline sim``: serve the simulated Anthropic API on loopback for any client.

Options (see ``foldline sim --help``):

- ``--host`` / ``--port`` (``--port 0`` picks a free port; the URL served is
  printed on stderr once it listens);
- who answers: with no option, the default model
  (:mod:`runtime.scripted.default_model`, calling one tool per
  instruction) answers every request; ``--scenario
  FILE`` answers as that scenario's run in process does (its nodes' scripts,
  fold summaries by the extractive summarizer, nodes without a script by the
  default model calling each offered tool once) and ``--script FILE`` scripts nodes from a script
  file; requests with an ``x-foldline-node`` header are answered by that node's
  script, the others by the default model;
- time: ``--clock wall`` (default) or ``--clock virtual``: time starts at the
  wall time of the start and moves only through ``POST
  /_foldline/clock/advance`` (see :mod:`runtime.sim.admin`); under it
  latency and slow faults cost no wall time;
- load: ``--latency S`` (each reply begins S seconds after its request
  started; entries it writes become readable then, so concurrent identical
  requests each pay the write), ``--faults FILE``,
  ``--lookback-collapse on|off``, ``--token-factor``;
- limits: ``--max-connections``, ``--header-timeout``, ``--body-timeout``,
  ``--idle-timeout``.

A script file (TOML)::

    schema = "foldline.sim-script/v1"
    [nodes.planner]
    steps = [{ text = "Plan: read the file." }, { tool_calls = [{ name = "read", arguments = { path = "a.txt" } }] }]

A faults file (TOML): ``[[faults]]`` tables with the keys of a scenario's
fault rules (``kind``, ``node``, ``on_request`` or ``every``,
``retry_after_ms``, ``should_retry``, ``delay_s``); kinds 429, 529, 500,
drop, slow, malformed, stream_error.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from typing import Any, TextIO

import anyio

from runtime.errors import ConfigError
from runtime.scripted.default_model import DefaultModel
from runtime.scripted.faults import FaultRule
from runtime.scripted.policies import PolicyRegistry, ScriptPolicy, ScriptStep
from runtime.sim.admin import ADVANCE_PATH, Admin
from runtime.sim.clock import ManualClock, frozen_sleep
from runtime.sim.config import SimConfig

EXIT_OK, EXIT_BAD_INPUT = 0, 2
SCRIPT_SCHEMA = "foldline.sim-script/v1"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``foldline sim`` options."""
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port (default 8765)")
    parser.add_argument("--token-factor", type=float, default=1.15, help="simulator tokens per o200k token")
    parser.add_argument(
        "--scenario", help="answer each node's requests (header x-foldline-node) with that node's script from this file"
    )
    parser.add_argument("--script", metavar="FILE", help=f"node scripts from a TOML file (schema {SCRIPT_SCHEMA!r})")
    parser.add_argument(
        "--clock",
        choices=("wall", "virtual"),
        default="wall",
        help=f'virtual: time moves only through POST {ADVANCE_PATH} {{"seconds": S}}',
    )
    parser.add_argument("--latency", type=float, default=0.0, metavar="S", help="seconds before each reply begins")
    parser.add_argument("--faults", metavar="FILE", help="fault rules from a TOML file ([[faults]] tables)")
    parser.add_argument(
        "--lookback-collapse",
        choices=("on", "off"),
        default="on",
        help="a run of tool_use or tool_result blocks is one lookback position (default on)",
    )
    parser.add_argument(
        "--chat-reasoning",
        choices=("none", "reasoning_content", "reasoning", "reasoning_details"),
        default="none",
        help="the field /v1/chat/completions replies carry reasoning in (default none, as OpenAI's)",
    )
    parser.add_argument("--max-connections", type=int, default=1024)
    parser.add_argument("--header-timeout", type=float, default=30.0, metavar="S")
    parser.add_argument("--body-timeout", type=float, default=120.0, metavar="S")
    parser.add_argument("--idle-timeout", type=float, default=60.0, metavar="S")


def _read_toml(path: str, what: str) -> dict[str, Any]:
    from runtime.inputs.bounds import MAX_SCENARIO_BYTES
    from runtime.inputs.files import FileTooLarge, read_bounded
    from runtime.inputs.toml_text import TomlRefused, parse_toml

    try:
        return parse_toml(read_bounded(path, MAX_SCENARIO_BYTES, what=f"a {what} file").decode("utf-8"))
    except FileTooLarge as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the {what} file ({exc.strerror or exc})") from exc
    except (UnicodeDecodeError, TomlRefused) as exc:
        raise ConfigError(f"{path}: not a TOML {what} file ({exc})") from None


def load_script_file(path: str) -> dict[str, ScriptPolicy]:
    """The node scripts of a script file; ConfigError naming the file and key path."""
    data = _read_toml(path, "script")
    if data.get("schema") != SCRIPT_SCHEMA:
        raise ConfigError(f"{path}: schema: {data.get('schema')!r} is not {SCRIPT_SCHEMA!r}")
    unknown = sorted(set(data) - {"schema", "nodes"})
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r} (expected 'schema' and 'nodes')")
    nodes = data.get("nodes")
    if not isinstance(nodes, dict) or not nodes:
        raise ConfigError(f"{path}: nodes: expected at least one [nodes.NAME] table with 'steps'")
    policies: dict[str, ScriptPolicy] = {}
    for name, table in nodes.items():
        where = f"{path}: nodes.{name}"
        if not isinstance(table, dict) or set(table) != {"steps"}:
            raise ConfigError(f"{where}: expected a table with exactly one key, 'steps'")
        steps = table["steps"]
        if not isinstance(steps, list) or not steps:
            raise ConfigError(f"{where}.steps: expected a non-empty list of steps")
        policies[name] = ScriptPolicy(
            name, [ScriptStep.from_obj(step, f"{where}.steps[{i}]") for i, step in enumerate(steps)]
        )
    return policies


def load_faults_file(path: str) -> tuple[FaultRule, ...]:
    """The fault rules of a faults file; ConfigError naming the file and key path."""
    data = _read_toml(path, "faults")
    unknown = sorted(set(data) - {"faults"})
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r} (expected [[faults]] tables)")
    rules = data.get("faults")
    if not isinstance(rules, list) or not rules:
        raise ConfigError(f"{path}: faults: expected at least one [[faults]] table")
    return tuple(FaultRule.from_obj(rule, f"{path}: faults[{i}]") for i, rule in enumerate(rules))


def _policies(args: argparse.Namespace) -> PolicyRegistry:
    """Who answers: with ``--scenario``, exactly as that scenario's run in process (``build_policies``).

    That is its nodes' scripts, fold summary requests by the extractive summarizer, a node without a
    script by the default model calling each offered tool once. ``--script`` nodes are added on top.
    Without a scenario, every request that a script does not answer goes to the default model calling one
    tool per instruction (a client such as Claude Code offers dozens).
    """
    scripts = load_script_file(args.script) if args.script else {}
    if args.scenario:
        import attrs

        from runtime.config.loader import load_scenario
        from runtime.scenarios.run import build_policies
        from runtime.scenarios.tools import tool_names_for_loading

        registry = build_policies(load_scenario(args.scenario, tool_names=tool_names_for_loading()))
        return attrs.evolve(registry, policies={**registry.policies, **scripts})
    return PolicyRegistry(scripts, default=DefaultModel(calls="one"))


def build_config(args: argparse.Namespace) -> SimConfig:
    """The server configuration the options describe (ConfigError names the bad option)."""
    faults = load_faults_file(args.faults) if args.faults else ()
    try:
        return SimConfig(
            token_factor=args.token_factor,
            latency_s=args.latency,
            lookback_collapse=args.lookback_collapse == "on",
            faults=faults,
            host=args.host,
            port=args.port,
            max_connections=args.max_connections,
            header_timeout_s=args.header_timeout,
            body_timeout_s=args.body_timeout,
            idle_timeout_s=args.idle_timeout,
        )
    except ConfigError as exc:
        field, _, problem = str(exc).partition(": ")
        option = _OPTIONS.get(field.removeprefix("SimConfig."), field)
        raise ConfigError(f"{option}: {problem}") from exc


_OPTIONS = {
    "token_factor": "--token-factor",
    "latency_s": "--latency",
    "host": "--host",
    "port": "--port",
    "max_connections": "--max-connections",
    "header_timeout_s": "--header-timeout",
    "body_timeout_s": "--body-timeout",
    "idle_timeout_s": "--idle-timeout",
}


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Serve until interrupted. Exit 2 on bad options or files."""
    from runtime.sim.server import serve_forever  # the server (and the SDK's model list) only when serving

    try:
        config = build_config(args)
        policies = _policies(args)
    except ConfigError as exc:
        print(f"foldline: {exc}", file=err)
        return EXIT_BAD_INPUT
    virtual = ManualClock(now=time.time()) if args.clock == "virtual" else None
    clock = virtual if virtual is not None else time.time
    sleep = frozen_sleep if virtual is not None else anyio.sleep
    nodes = ", ".join(sorted(policies.policies)) or "none"

    refused: list[BaseException] = []

    async def serve() -> None:
        try:
            await serve_until_stopped()
        except* OSError as group:  # the address cannot be listened on (in use, not this host's, no such host)
            refused.extend(group.exceptions)

    async def serve_until_stopped() -> None:
        async with anyio.create_task_group() as tg:
            server = await tg.start(
                lambda task_status: serve_forever(
                    config.host,
                    config.port,
                    config,
                    policies,
                    clock,
                    sleep=sleep,
                    admin=Admin(virtual),
                    task_status=task_status,
                )
            )
            server.app.chat.dialect = args.chat_reasoning
            print(f"foldline sim: serving the simulated Anthropic API on {server.base_url}", file=err, flush=True)
            print(
                f"foldline sim: and chat completions on {server.base_url}/v1/chat/completions "
                f"(reasoning: {args.chat_reasoning})",
                file=err,
                flush=True,
            )
            print(f"foldline sim: scripted nodes: {nodes}; other requests: the default model", file=err, flush=True)
            print(f"foldline sim: clock: {args.clock}", file=err, flush=True)

    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(serve)
    if refused:
        reason = refused[0]
        while isinstance(reason, BaseExceptionGroup):
            reason = reason.exceptions[0]
        detail = reason.strerror if isinstance(reason, OSError) and reason.strerror else str(reason)
        print(f"foldline: --host {args.host} --port {args.port}: cannot listen there ({detail})", file=err)
        return EXIT_BAD_INPUT
    return EXIT_OK
