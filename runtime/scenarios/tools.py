"""The tools a scenario run offers: the built-ins, the workspace, and the user's registry.

A scenario file stays inert: it only names tools. The code behind them is
foldline's own (the built-ins and the workspace tools) or code the user names
on the command line (``foldline run SCENARIO --tools package.module:registry``),
never anything the file says.

- :func:`load_user_tools` imports ``package.module`` (the working directory
  first on the import path, as ``python -m`` would) and takes its attribute: a
  :class:`~actors.tools.ToolRegistry`, one :class:`~actors.tools.Tool`, or a
  list of tools.
- :func:`tool_names_for_loading` is every name a scenario may use with them.
- :func:`scenario_registry` builds the run's registry: the workspace tools
  over ``[run] workspace`` (relative to the scenario file) when it is set, and
  the user's tools on top; a profile naming a workspace tool without a
  workspace is refused with its key path.
- :class:`RunTools` is all of it for one scenario file: the built-ins,
  ``read_image`` beside the file, the benchmark's own tools (``read_doc``,
  ``stage``, ``answer``: foldline's deterministic code, so the shipped
  ``scenarios/bench/*.toml`` run as they are), and the user's ``--tools`` registry. A run
  with a store keeps the ``--tools`` spec and the names it gave in the store's
  meta (:func:`tools_meta`), so ``foldline resume`` loads the same tools again
  (:func:`stored_run_tools`) and readers of a store load its scenario without
  importing user code (:func:`stored_tool_names`).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from collections.abc import Iterable, Mapping
from pathlib import Path

import attrs

from actors.tools import BUILTIN_TOOLS, WORKSPACE_TOOL_NAMES, Tool, ToolRegistry, workspace_tools
from runtime.config import Scenario
from runtime.errors import ConfigError

_SPEC_FORM = "package.module:attribute"


def load_user_tools(spec: str) -> ToolRegistry:
    """The registry named by ``spec`` (``package.module:attribute``); a ConfigError says what is wrong."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigError(f"--tools: {spec!r} is not of the form {_SPEC_FORM}")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    if module_name.startswith("."):
        raise ConfigError(f"--tools: {spec!r} is not of the form {_SPEC_FORM} (a relative module name)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"--tools: cannot import {module_name!r} ({exc})") from None
    except Exception as exc:  # the user's module raised while it was imported: say what and where, no traceback
        raise ConfigError(f"--tools: importing {module_name!r} raised {_raised_at(exc)}") from None
    try:
        value = getattr(module, attribute)
    except AttributeError:
        raise ConfigError(f"--tools: module {module_name!r} has no attribute {attribute!r}") from None
    return _as_registry(value, spec)


def _as_registry(value: object, spec: str) -> ToolRegistry:
    if isinstance(value, ToolRegistry):
        return value
    if isinstance(value, Tool):
        return ToolRegistry({value.name: value})
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
        items = list(value)
        if all(isinstance(t, Tool) for t in items):
            return ToolRegistry({t.name: t for t in items})
        i, item = next((i, t) for i, t in enumerate(items) if not isinstance(t, Tool))
        raise ConfigError(
            f"--tools: {spec!r} is a {type(value).__name__} whose item {i} is a {type(item).__name__}, not a Tool"
        )
    raise ConfigError(f"--tools: {spec!r} is a {type(value).__name__}, not a ToolRegistry, a Tool or a list of tools")


def _raised_at(exc: BaseException) -> str:
    """``Type: message`` and where it was raised (the file and line; a SyntaxError's message names its own)."""
    where = ""
    if not isinstance(exc, SyntaxError) and exc.__traceback__ is not None:
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        where = f" ({frame.filename}, line {frame.lineno})"
    return f"{type(exc).__name__}: {exc}{where}"


def tool_names_for_loading(user: ToolRegistry | None = None, base: ToolRegistry = BUILTIN_TOOLS) -> frozenset[str]:
    """Every tool name a scenario may name: the base registry's, the workspace tools', the user's."""
    names = base.names() | frozenset(WORKSPACE_TOOL_NAMES)
    return names | user.names() if user is not None else names


def workspace_root(scenario: Scenario) -> Path | None:
    """The directory ``[run] workspace`` names, resolved against the scenario file's directory."""
    if scenario.run.workspace is None:
        return None
    base = Path(scenario.path).parent if scenario.path is not None else Path.cwd()
    root = base / scenario.run.workspace
    if not root.is_dir():
        raise ConfigError(f"run.workspace: {scenario.run.workspace!r} is not a directory beside the scenario file")
    return root


def scenario_registry(
    scenario: Scenario, user: ToolRegistry | None = None, base: ToolRegistry = BUILTIN_TOOLS
) -> ToolRegistry:
    """The registry a run of ``scenario`` uses (see the module doc)."""
    registry = base
    root = workspace_root(scenario)
    if root is not None:
        registry = registry.with_tools(workspace_tools(root))
    if user is not None:
        registry = registry.with_tools(user)
    for name, profile in scenario.profiles.items():
        for i, tool in enumerate(profile.tools):
            if isinstance(tool, str) and tool not in registry.tools and tool in WORKSPACE_TOOL_NAMES:
                raise ConfigError(
                    f"profiles.{name}.tools[{i}]: {tool!r} is a workspace tool; set [run] workspace to the directory "
                    f"it may read (relative to the scenario file)"
                )
    return registry


TOOLS_SPEC_KEY = "tools_spec"
"""The store meta key holding the run's ``--tools`` spec (absent: none)."""
TOOL_NAMES_KEY = "tool_names"
"""The store meta key holding the names the ``--tools`` registry gave (a JSON list)."""


@attrs.frozen
class RunTools:
    """The tools a run of one scenario file may use: ``base`` (built-ins and ``read_image``) and the user's."""

    base: ToolRegistry
    user: ToolRegistry | None = None
    spec: str | None = None
    """The ``--tools`` spec the user registry was loaded from."""

    def names(self) -> frozenset[str]:
        """Every name the scenario may use (to load it)."""
        return tool_names_for_loading(self.user, self.base)

    def registry(self, scenario: Scenario) -> ToolRegistry:
        """The registry the run uses (the workspace tools added when ``[run] workspace`` is set)."""
        return scenario_registry(scenario, self.user, self.base)


def run_tools(scenario_path: str | os.PathLike[str], tools_spec: str | None = None) -> RunTools:
    """The tools of a run of the scenario file at ``scenario_path``, ``--tools`` ``tools_spec`` included."""
    from actors.images import scenario_registry as image_tools  # read_image beside the file
    from runtime.bench.tools import bench_registry  # read_doc, stage, answer: the bench workloads' tools

    user = load_user_tools(tools_spec) if tools_spec else None
    return RunTools(bench_registry(image_tools(os.fspath(scenario_path))), user, tools_spec)


def tools_meta(tools: RunTools) -> dict[str, str]:
    """What a store keeps of ``tools`` to load them again (nothing when there are no user tools)."""
    if tools.spec is None or tools.user is None:
        return {}
    return {TOOLS_SPEC_KEY: tools.spec, TOOL_NAMES_KEY: json.dumps(sorted(tools.user.names()))}


def stored_run_tools(meta: Mapping[str, str]) -> RunTools:
    """The tools of a stored run, loaded again from its meta (the ``--tools`` module is imported again)."""
    return run_tools(meta["scenario_path"], meta.get(TOOLS_SPEC_KEY))


def stored_tool_names(meta: Mapping[str, str]) -> frozenset[str]:
    """Every tool name a stored run's scenario may use, without importing the user's code."""
    names = tool_names_for_loading()
    stored = meta.get(TOOL_NAMES_KEY)
    if stored is not None:
        try:
            user = json.loads(stored)
        except ValueError:
            user = None
        if not isinstance(user, list) or not all(isinstance(name, str) for name in user):
            raise ConfigError(f"store meta {TOOL_NAMES_KEY}: {stored[:120]!r} is not a JSON list of tool names")
        names |= frozenset(user)
    from runtime.bench.tools import bench_registry

    return names | {"read_image"} | bench_registry(ToolRegistry({})).names()
