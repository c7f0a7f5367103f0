"""What ``import runtime.runtime`` leaves out: the provider SDKs, the HTTP stack, the scenario file loader,
and what only some paths use.

A program that builds its flow in code and brings its own provider pays at
import only for the runtime (start-up figures: ``python -X importtime -c
'import runtime.runtime'``). Deferred until used: the scenario and node values
and their tables (a program building values in code imports each value's own
module), the scripted provider's steps and faults, the function-tool builder
and the workspace tools, the node engine (the branch, the operation, the send
pipeline, folding and the tool executor load with the first node a flow runs),
the packaged data readers (``importlib.resources``, ``gzip``), exact fractions
and the close-match suggester (``difflib``: only a refusal suggests a name).
The names of the lazy packages still resolve. Each check runs in a fresh
interpreter.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

NOT_IMPORTED = (
    "anthropic",
    "httpx2",
    "httpx",
    "openai",
    "sqlite3",
    "tomllib",
    "runtime.config.loader",
    "runtime.sim",
    "runtime.providers",
    "runtime.config.values",
    "runtime.config.scenario",
    "runtime.config.nodes",
    "runtime.config.tables",
    "runtime.config.mcp",
    "runtime.scripted",
    "actors.tools.functions",
    "actors.tools.workspace",
    "annotated_types",
    "importlib.resources",
    "gzip",
    "fractions",
    "difflib",
    "actors.branch",
    "actors.operations",
    "actors.pipeline",
    "actors.send",
    "actors.folding",
    "actors.inherit",
    "actors.tools.executor",
    "runtime.flows.start",
)


def _loaded_after(statement: str) -> set[str]:
    probe = f"import sys\n{statement}\nprint('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    return set(done.stdout.split())


def test_importing_the_runtime_loads_no_sdk_http_stack_or_file_loader() -> None:
    loaded = _loaded_after("import runtime.runtime")
    assert "runtime.runtime" in loaded
    assert sorted(name for name in NOT_IMPORTED if name in loaded) == []


@pytest.mark.parametrize("name", ["load_scenario", "loads_scenario", "ScenarioError", "SCHEMA"])
def test_the_loaders_names_still_resolve_from_the_config_package(name: str) -> None:
    import runtime.config
    import runtime.config.loader

    assert getattr(runtime.config, name) is getattr(runtime.config.loader, name)
    assert name in runtime.config.__all__


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_flow_built_and_run_after_the_import_loads_the_engine_then(backend: str) -> None:
    run = """
import anyio, sys
import runtime.runtime
before = "actors.operations" in sys.modules
from runtime import Flow, Node, Operation, PolicyRegistry, Runtime, ScriptedProvider, ScriptPolicy, ScriptStep
policies = PolicyRegistry({"a": ScriptPolicy("a", [ScriptStep(text="done")])})
provider = ScriptedProvider(policies, clock=lambda: 0.0)
async def main():
    async with Runtime(provider=provider) as rt:
        result = await rt.run(Flow([Node("a", Operation("bounded", ("Say done.",)))]))
    return result["a"].status, result["a"].result.answer
status, answer = anyio.run(main, backend=sys.argv[1])
print(before, "actors.operations" in sys.modules, status, answer)
"""
    done = subprocess.run([sys.executable, "-c", run, backend], capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "True", "ok", "done"]


@pytest.mark.parametrize("package", ["runtime.config", "actors.tools"])
def test_every_name_of_a_lazy_package_resolves_in_a_fresh_interpreter(package: str) -> None:
    probe = (
        f"import importlib, {package} as p\n"
        "for name in p.__all__:\n"
        "    value = getattr(p, name)\n"
        "    home = importlib.import_module(p._HOMES[name])\n"
        "    assert value is getattr(home, name), name\n"
        "print(len(p.__all__))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout) == len(__import__(package, fromlist=["__all__"]).__all__) > 0


def test_an_unknown_name_of_the_tools_package_is_an_attribute_error() -> None:
    import actors.tools

    with pytest.raises(AttributeError, match="module 'actors.tools' has no attribute 'tools'"):
        _ = actors.tools.tools  # type: ignore[attr-defined]


def test_an_unknown_name_of_the_config_package_is_an_attribute_error() -> None:
    import runtime.config

    with pytest.raises(AttributeError, match="no attribute 'load_scenarios'"):
        _ = runtime.config.load_scenarios  # type: ignore[attr-defined]


def test_the_model_tables_still_read_and_refuse_toml_with_the_parser_deferred() -> None:
    from runtime.errors import ConfigError
    from runtime.models.limits import ModelTable, default_model_table
    from runtime.models.pricing import PricingTable

    assert PricingTable.load_default() is not None
    assert default_model_table() is not None
    for table in (ModelTable, PricingTable):
        with pytest.raises(ConfigError, match="prices.toml: not valid TOML"):
            table.from_toml("schema = [", "prices.toml")
