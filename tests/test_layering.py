"""The layers hold: the core is pure, nothing imports in a circle, the CLI and config are one package each.

In the spirit of trio's export tests: the rules are read from the source with
``ast`` (``scripts/import_graph.py``, the tool that prints the graph, is loaded
here so the script and the test apply one set of rules), and a breach names the
module and the import.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_graph_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("foldline_import_graph", ROOT / "scripts" / "import_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


graph_tool = _load_graph_tool()
KNOWN: dict[str, Path] = graph_tool.modules()
GRAPH: dict[str, set[str]] = graph_tool.edges(KNOWN)

# What the issue names as the pure core, and what it must never reach.
CORE = (
    "runtime.fold",
    "runtime.cache",
    "runtime.compiler",
    "runtime.measure",
    "runtime.ceiling",
    "runtime.calibration",
)
FORBIDDEN_IN_CORE = (
    "actors",
    "signals",
    "runtime.providers",
    "runtime.store",
    "runtime.sim",
    "runtime.cli",
    "anyio",
    "asyncio",
    "trio",
    "time",
    "datetime",
    "sqlite3",
)


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_the_tool_checks_what_the_issue_names() -> None:
    # The script's rule set is the one pinned here; widening the core or narrowing the bans shows up.
    assert set(graph_tool.CORE_PREFIXES) == set(CORE)
    assert set(graph_tool.SHELL_PREFIXES + graph_tool.IO_PREFIXES) == set(FORBIDDEN_IN_CORE)


def test_the_core_modules_exist() -> None:
    # A rename must not make the purity test vacuous.
    for prefix in CORE:
        assert any(_within(mod, (prefix,)) for mod in KNOWN), f"no module under {prefix}"


@pytest.mark.parametrize("module", sorted(m for m in KNOWN if _within(m, CORE)))
def test_a_core_module_imports_no_shell_event_loop_clock_or_store(module: str) -> None:
    imported = graph_tool.imports_of(module, KNOWN[module])
    bad = sorted(name for name in imported if _within(name, FORBIDDEN_IN_CORE))
    assert bad == [], f"{module} ({KNOWN[module].relative_to(ROOT)}) imports {', '.join(bad)}"


def test_breaches_are_found_through_every_import_form(tmp_path: Path) -> None:
    # The detector itself: plain, from, dotted, relative, function-level and TYPE_CHECKING imports.
    package = tmp_path / "runtime" / "fold"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    source = (
        "import time\n"
        "from datetime import datetime\n"
        "import anyio.abc\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from actors.branch import Branch\n"
        "def f():\n"
        "    from ..store import journal\n"
        "    import sqlite3\n"
    )
    path = package / "leaky.py"
    path.write_text(source)
    imported = graph_tool.imports_of("runtime.fold.leaky", path)
    bad = {name for name in imported if _within(name, FORBIDDEN_IN_CORE)}
    assert bad == {"time", "datetime.datetime", "anyio.abc", "actors.branch.Branch", "runtime.store.journal", "sqlite3"}


def test_no_import_cycle() -> None:
    assert graph_tool.cycles(GRAPH) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert graph_tool.cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_cli_is_one_package_and_nothing_below_it_imports_it() -> None:
    assert (ROOT / "runtime" / "cli" / "__init__.py").is_file()
    assert not (ROOT / "runtime" / "cli.py").exists()
    outside = sorted(
        f"{mod} -> {target}"
        for mod, targets in GRAPH.items()
        if not _within(mod, ("runtime.cli",))
        for target in targets
        if _within(target, ("runtime.cli",))
    )
    assert outside == [], "the CLI is a product on top; nothing may import it"
    parsers = sorted(m for m, p in KNOWN.items() if "argparse" in graph_tool.imports_of(m, p))
    assert parsers and all(_within(m, ("runtime.cli",)) for m in parsers), parsers


def test_the_configuration_is_one_package_below_the_shells() -> None:
    assert (ROOT / "runtime" / "config" / "__init__.py").is_file()
    for old in ("config.py", "checks.py", "scenario.py"):
        assert not (ROOT / "runtime" / old).exists(), f"runtime/{old} belongs in runtime/config/"
    above = (
        "actors",
        "signals",
        "runtime.providers",
        "runtime.store",
        "runtime.cli",
        "runtime.flow",
        "runtime.runtime",
    )
    bad = sorted(
        f"{mod} -> {name}"
        for mod, path in KNOWN.items()
        if _within(mod, ("runtime.config",))
        for name in graph_tool.imports_of(mod, path)
        if _within(name, above + ("anyio",))
    )
    assert bad == []
