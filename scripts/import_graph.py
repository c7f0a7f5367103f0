"""Print foldline's import graph: arrows, cycles, layering breaches and floor sizes.

Usage: ``python scripts/import_graph.py [--edges]``. Reads the source with
``ast`` only (nothing is imported). Module-level and function-level imports
both count as arrows. The exit code is 1 when there is an import cycle, a
core module imports a shell (or an event loop, a clock or SQLite), or a layer
imports one above it (:data:`LAYERS`), else 0.

``tests/test_layering.py`` loads this file and asserts the same rules, so the
script and the test cannot drift apart.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("runtime", "actors", "signals")
# The shells and products (ours), and what only a shell may touch: event loops, clocks, SQLite.
SHELL_PREFIXES = ("actors", "signals", "runtime.providers", "runtime.store", "runtime.sim", "runtime.cli")
IO_PREFIXES = ("anyio", "asyncio", "trio", "time", "datetime", "sqlite3")
# The pure core: synchronous functions over frozen values, no I/O, no clock (DESIGN.md).
CORE_PREFIXES = (
    "runtime.request",
    "runtime.measuring.measure",
    "runtime.measuring.measure_prefix",
    "runtime.measuring.measure_splice",
    "runtime.measuring.calibration",
    "runtime.decision",
    "runtime.fold",
    "runtime.cache",
)

# The layers, lowest first: a module may import from its own layer and the ones below, never above.
# ``tests/test_layering.py`` pins this order in its docstring and fails on any upward import.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("values", ("runtime.values", "runtime.inputs", "runtime.errors", "runtime.logs", "signals")),
    ("model facts and the compiler", ("runtime.models", "runtime.request")),
    ("measuring", ("runtime.measuring",)),
    ("the ceiling", ("runtime.decision",)),
    ("fold and cache", ("runtime.fold", "runtime.cache")),
    ("configuration and the provider contract", ("runtime.config", "runtime.scripted", "runtime.contract")),
    ("actors", ("actors",)),
    ("flows and the Runtime", ("runtime.flows", "runtime.runtime", "runtime.report")),
    (
        "products",
        (
            "runtime.providers",
            "runtime.sim",
            "runtime.store",
            "runtime.bench",
            "runtime.display",
            "runtime.temporal",
            "runtime.scenarios",
            "runtime.cli",
            "runtime.data",
        ),
    ),
)
# The public face (``runtime/__init__.py``) re-exports names of every layer, lazily: it stands above them all.
PUBLIC_FACE = "runtime"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[module_name(path)] = path
    return found


def resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that ``name`` names (a symbol import names its module)."""
    while name:
        if name in known:
            return name
        if "." not in name:
            return None
        name = name.rsplit(".", 1)[0]
    return None


def imports_of(mod: str, path: Path) -> set[str]:
    """Every name ``mod`` imports, absolute: ``import a.b`` gives ``a.b``, ``from a import b`` gives ``a.b``.

    Imports anywhere in the file count (inside functions and ``TYPE_CHECKING`` blocks
    too); a relative import is resolved against ``mod``'s package.
    """
    package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names.update(f"{base}.{a.name}" for a in node.names)
    return names


def edges(known: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for mod, path in known.items():
        for target in imports_of(mod, path):
            dest = resolve(target, known)
            # An arrow into a top-level package's lazy __init__ is not followed (it imports nothing eagerly).
            if dest and dest != mod and not mod.startswith(dest + ".") and dest not in PACKAGES:
                graph[mod].add(dest)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in list(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def within(name: str, prefixes: tuple[str, ...]) -> bool:
    """Whether ``name`` is one of ``prefixes`` or inside one of them (``a.b`` is inside ``a``)."""
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def breaches(known: dict[str, Path]) -> list[tuple[str, str]]:
    """(core module, what it imports) for every import of a shell, an event loop, a clock or SQLite."""
    out = []
    for mod, path in known.items():
        if within(mod, CORE_PREFIXES):
            out.extend((mod, t) for t in imports_of(mod, path) if within(t, SHELL_PREFIXES + IO_PREFIXES))
    return sorted(out)


def layer_of(name: str) -> int | None:
    """The index in :data:`LAYERS` of the layer ``name`` (a module) belongs to: the longest prefix that holds it."""
    if name == PUBLIC_FACE:
        return len(LAYERS)
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if within(name, (prefix,)) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return None if best is None else best[1]


def upward(known: dict[str, Path]) -> list[tuple[str, str]]:
    """(module, what it imports) for every import of a higher layer than the module's own.

    Every import form counts (function-level and ``TYPE_CHECKING`` ones too); an import of a top-level
    package's ``__init__`` counts as that package's layer, and the public face counts as above every layer.
    """
    out = []
    for mod, path in known.items():
        own = layer_of(mod)
        if mod == PUBLIC_FACE or own is None:
            continue
        for target in imports_of(mod, path):
            dest = resolve(target, known)
            if dest is None or dest == mod:
                continue
            theirs = layer_of(dest)
            if theirs is not None and theirs > own:
                out.append((mod, target))
    return sorted(out)


def floors(known: dict[str, Path]) -> dict[str, int]:
    """Modules directly inside each package (its floor), subpackages not counted."""
    sizes: dict[str, int] = defaultdict(int)
    for mod, path in known.items():
        if path.name == "__init__.py":
            continue
        sizes[mod.rsplit(".", 1)[0]] += 1
    return dict(sorted(sizes.items()))


def main(argv: list[str]) -> int:
    known = modules()
    graph = edges(known)
    arrows = sum(len(t) for t in graph.values())
    found = cycles(graph)
    bad = breaches(known)
    print(f"modules: {len(known)}  import arrows: {arrows}")
    print("floors (modules directly in each package):")
    for package, size in floors(known).items():
        print(f"  {package}: {size}")
    print(f"cycles: {len(found)}")
    for component in found:
        print("  " + " <-> ".join(component))
    print(f"core -> shell/io imports: {len(bad)}")
    for mod, target in bad:
        print(f"  {mod} -> {target}")
    up = upward(known)
    print(f"upward imports (a lower layer importing a higher one): {len(up)}")
    for mod, target in up:
        print(f"  {mod} ({LAYERS[layer_of(mod) or 0][0]}) -> {target}")
    if "--edges" in argv:
        for mod in sorted(graph):
            for target in sorted(graph[mod]):
                print(f"{mod} -> {target}")
    return 1 if found or bad or up else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
