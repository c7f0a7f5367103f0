"""The layers hold: nothing imports upward, the core is pure, nothing imports in a circle.

The layers, lowest first (a module imports from its own layer and those below,
never from one above; there is no list of exceptions):

1. values: ``runtime.values``, ``runtime.inputs``, ``runtime.errors``, ``runtime.logs``, ``signals``
2. model facts and the compiler: ``runtime.models``, ``runtime.request``
3. measuring: ``runtime.measuring``
4. the ceiling: ``runtime.decision``
5. fold and cache: ``runtime.fold``, ``runtime.cache``
6. configuration and the provider contract: ``runtime.config``, ``runtime.scripted``, ``runtime.contract``
7. actors: ``actors``
8. flows and the Runtime: ``runtime.flows``, ``runtime.runtime``, ``runtime.report``
9. products: ``runtime.providers``, ``runtime.sim``, ``runtime.store``, ``runtime.bench``,
   ``runtime.display``, ``runtime.temporal``, ``runtime.scenarios``, ``runtime.cli``, ``runtime.data``

``runtime/__init__.py``, the public face, re-exports names of every layer
(lazily) and so stands above them all.

In the spirit of trio's export tests: the rules are read from the source with
``ast`` (``scripts/import_graph.py``, the tool that prints the graph, is loaded
here so the script and the test apply one set of rules: its ``LAYERS`` is the
list above, which a test compares with this docstring), and a breach names the
module and the import.
"""

from __future__ import annotations

import importlib.util
import re
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
    "runtime.request",
    "runtime.measuring.measure",
    "runtime.measuring.measure_prefix",
    "runtime.measuring.measure_splice",
    "runtime.measuring.calibration",
    "runtime.decision",
    "runtime.fold",
    "runtime.cache",
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


def test_the_docstring_lists_the_layers_the_tool_checks() -> None:
    # The order is written once; the docstring above is its reading copy, and may not drift from it.
    doc = __doc__ or ""
    body = doc[doc.index("The layers, lowest first") : doc.index("``runtime/__init__.py``")]
    joined = re.sub(r"\n\s+", " ", body)
    listed = re.findall(r"\d+\. ([^:]+): ((?:``[\w.]+``(?:, )?)+)", joined)
    assert [(name, tuple(re.findall(r"``([\w.]+)``", mods))) for name, mods in listed] == [
        (name, prefixes) for name, prefixes in graph_tool.LAYERS
    ]


def test_every_module_belongs_to_one_layer() -> None:
    homeless = sorted(m for m in KNOWN if m != graph_tool.PUBLIC_FACE and graph_tool.layer_of(m) is None)
    assert homeless == []


def test_no_layer_imports_one_above_it() -> None:
    breaches = [
        f"{mod} ({graph_tool.LAYERS[graph_tool.layer_of(mod)][0]}) imports {target}"
        for mod, target in graph_tool.upward(KNOWN)
    ]
    assert breaches == []


def test_an_upward_import_is_found_in_every_form(tmp_path: Path) -> None:
    # The detector itself, on a copy of the module table with one leaky module added to the values layer.
    leaky = tmp_path / "leaky.py"
    leaky.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from actors import Branch\n"
        "def f():\n"
        "    from runtime.fold.planner import plan\n"
        "    import runtime.store.journal\n"
        "    from runtime import Runtime\n"
        "    from runtime.values import canonical\n"
    )
    known = {**KNOWN, "runtime.values.leaky": leaky}
    found = [target for mod, target in graph_tool.upward(known) if mod == "runtime.values.leaky"]
    assert sorted(found) == ["actors.Branch", "runtime.Runtime", "runtime.fold.planner.plan", "runtime.store.journal"]


def test_a_layer_may_import_its_own_and_lower_layers() -> None:
    assert graph_tool.layer_of("runtime.values.messages") < graph_tool.layer_of("runtime.request.compiler")
    assert graph_tool.layer_of("signals.bus") == graph_tool.layer_of("runtime.values.usage")
    assert graph_tool.layer_of("runtime.cli.main") == len(graph_tool.LAYERS) - 1
    assert graph_tool.layer_of("runtime") == len(graph_tool.LAYERS)


def test_runtime_shows_its_public_face_and_subpackages_only() -> None:
    loose = sorted(p.name for p in (ROOT / "runtime").glob("*.py"))
    assert loose == ["__init__.py", "errors.py", "logs.py", "report.py", "runtime.py"]


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
        "runtime.flows.flow",
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
