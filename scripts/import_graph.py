"""Print foldline's import graph: arrows, cycles, layering breaches and floor sizes.

Usage: ``python scripts/import_graph.py [--edges]``. Reads the source with
``ast`` only (nothing is imported). Module-level and function-level imports
both count as arrows. The exit code is 1 when there is an import cycle or a
core module imports a shell, else 0.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("runtime", "actors", "signals")
SHELL_PREFIXES = ("actors", "signals", "runtime.providers", "runtime.store", "runtime.sim", "runtime.cli", "anyio")
CORE_PREFIXES = (
    "runtime.fold",
    "runtime.cache",
    "runtime.compiler",
    "runtime.measure",
    "runtime.ceiling",
)


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


def edges(known: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for mod, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" for a in node.names] or [node.module]
            for target in targets:
                dest = resolve(target, known)
                if dest and dest != mod and not mod.startswith(dest + ".") and dest not in ("runtime", "actors", "signals"):
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


def breaches(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    out = []
    for mod, targets in graph.items():
        if any(mod == p or mod.startswith(p + ".") for p in CORE_PREFIXES):
            out.extend((mod, t) for t in sorted(targets) if any(t == p or t.startswith(p + ".") for p in SHELL_PREFIXES))
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
    bad = breaches(graph)
    print(f"modules: {len(known)}  import arrows: {arrows}")
    print("floors (modules directly in each package):")
    for package, size in floors(known).items():
        print(f"  {package}: {size}")
    print(f"cycles: {len(found)}")
    for component in found:
        print("  " + " <-> ".join(component))
    print(f"core -> shell arrows: {len(bad)}")
    for mod, target in bad:
        print(f"  {mod} -> {target}")
    if "--edges" in argv:
        for mod in sorted(graph):
            for target in sorted(graph[mod]):
                print(f"{mod} -> {target}")
    return 1 if found or bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
