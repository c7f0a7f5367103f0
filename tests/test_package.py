"""The import packages are ours, and the package imports no network-bound code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import actors
import runtime
import signals

ROOT = Path(__file__).resolve().parents[1]


def test_runtime_actors_signals_are_foldlines_own_packages() -> None:
    # The PyPI names runtime, actors and signals belong to unrelated old projects;
    # these must be the ones in this repository.
    for module, name in ((runtime, "runtime"), (actors, "actors"), (signals, "signals")):
        path = Path(module.__file__).resolve()
        assert path == ROOT / name / "__init__.py", f"{name} imported from {path}"


def test_distribution_metadata_names_the_three_packages_and_the_console_script() -> None:
    import tomllib
    from importlib.metadata import distribution

    dist = distribution("foldline")
    entry = [ep for ep in dist.entry_points if ep.group == "console_scripts" and ep.name == "foldline"]
    assert entry and entry[0].value == "runtime.cli:main"
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assert {"runtime", "actors", "signals"} <= set(packages)
    # every package directory in the tree is listed, so none is left out of a wheel
    on_disk = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for top in ("runtime", "actors", "signals")
        for p in (ROOT / top).rglob("__init__.py")
    }
    assert on_disk == set(packages)


def test_tokenizer_never_calls_get_encoding() -> None:
    code = (
        "import tiktoken\n"
        "def boom(*a, **k): raise AssertionError('tiktoken.get_encoding must not be called')\n"
        "tiktoken.get_encoding = boom\n"
        "from runtime.measuring.tokenizer import count_tokens\n"
        "assert count_tokens('hello world') == 2\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
