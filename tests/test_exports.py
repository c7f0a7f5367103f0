"""The packages' public names: pinned, importable, public, and cheap to import.

In the spirit of trio's export tests: the public surface of ``runtime``,
``actors`` and ``signals`` is listed here, so adding or dropping a name is a
visible change to this file; every listed name resolves to the object its
module defines; no private name is exported.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PUBLIC = {
    "runtime": {
        "AnthropicProvider",
        "BUILTIN_TOOLS",
        "ChatDialect",
        "ConfigError",
        "Conversation",
        "DefaultModel",
        "Flow",
        "FlowResult",
        "FoldlineError",
        "InputCeilingExceeded",
        "ModelConfig",
        "Node",
        "Operation",
        "OperationResult",
        "OpenAIProvider",
        "PolicyRegistry",
        "Profile",
        "ProviderSpec",
        "Runtime",
        "ScriptPolicy",
        "ScriptStep",
        "ScriptedProvider",
        "Tool",
        "ToolRegistry",
        "default_policies",
        "function_tool",
        "load_scenario",
        "open_provider",
        "open_simulated",
        "run_operation",
        "run_scenario",
        "tool",
        "workspace_tools",
    },
    "actors": {
        "BUILTIN_TOOLS",
        "Branch",
        "BranchBusy",
        "BranchJournal",
        "ContextState",
        "Conversation",
        "Record",
        "RequestRecord",
        "RunEnv",
        "Tool",
        "ToolContext",
        "ToolFailed",
        "ToolRegistry",
        "Turn",
        "run_operation",
    },
    "signals": {
        "BLOCK",
        "BusClosedError",
        "CacheRewrite",
        "ChildSpawned",
        "ContextDecision",
        "DROP_OLDEST",
        "EVENT_TYPES",
        "Event",
        "FoldCommitted",
        "Gap",
        "InvalidEventError",
        "JsonlSink",
        "LOW_PRIORITY_TYPES",
        "NodeFailed",
        "NodeFinished",
        "NodeSkipped",
        "NodeStarted",
        "ReplyDelta",
        "RequestSent",
        "ResponseReceived",
        "RunFinished",
        "RunStarted",
        "SCHEMA_VERSION",
        "SignalBus",
        "Subscription",
        "SubscriptionStatistics",
        "ToolCallFinished",
        "measure_bus_throughput",
        "payload_of",
        "read_jsonl",
    },
}


def _packages_with_all() -> list[str]:
    found = []
    for top in ("runtime", "actors", "signals"):
        package = importlib.import_module(top)
        found.append(top)
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{top}."):
            if info.ispkg and "__all__" in (ROOT / Path(*info.name.split(".")) / "__init__.py").read_text():
                found.append(info.name)
    return found


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_the_public_names_are_the_pinned_ones(name: str) -> None:
    package = importlib.import_module(name)
    assert set(package.__all__) == PUBLIC[name]
    assert list(package.__all__) == sorted(package.__all__), "__all__ is kept sorted, one name once"


OPTIONAL_SDKS = {"openai": "openai", "httpx2": "openai"}
"""SDKs an export may need that only an extra installs (module name -> the extra)."""


def test_an_export_whose_sdk_is_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the openai extra, the provider's import and a scenario asking for it both say how to install it."""
    from runtime.errors import ConfigError
    from runtime.providers.openai_factory import _provider_class

    monkeypatch.setitem(sys.modules, "openai", None)  # what an environment without the SDK gives an import
    monkeypatch.delitem(sys.modules, "runtime.providers.openai", raising=False)
    with pytest.raises(ModuleNotFoundError, match=re.escape("pip install -e '.[openai]'")) as missing:
        importlib.import_module("runtime.providers.openai")
    assert missing.value.name == "openai"
    with pytest.raises(
        ConfigError, match=re.escape('provider.kind: "openai": the openai provider needs the openai SDK')
    ):
        _provider_class()


@pytest.mark.parametrize("name", _packages_with_all())
def test_every_exported_name_is_public_and_importable(name: str) -> None:
    package = importlib.import_module(name)
    assert package.__all__, f"{name}.__all__ is empty"
    for public in package.__all__:
        assert not public.startswith("_"), f"{name} exports the private name {public}"
        try:
            value = getattr(package, public)  # raises if the name does not resolve
        except ModuleNotFoundError as missing:  # an export of an optional extra that is not installed
            assert missing.name in OPTIONAL_SDKS and f"pip install -e '.[{OPTIONAL_SDKS[missing.name]}]'" in str(
                missing
            )
            continue
        exec(f"from {name} import {public}", {})  # and the from-import form works too
        defined_in = getattr(value, "__module__", None)
        if defined_in is not None and defined_in.split(".")[0] in ("runtime", "actors", "signals"):
            # A class or function is exported as the very object its module defines.
            assert getattr(importlib.import_module(defined_in), getattr(value, "__name__", public), None) is value
    assert set(package.__all__) <= set(dir(package))


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_an_unexported_name_is_an_attribute_error(name: str) -> None:
    package = importlib.import_module(name)
    with pytest.raises(AttributeError, match="no_such_name"):
        package.no_such_name  # noqa: B018 - the attribute access is the test


def test_the_lazy_exports_point_at_the_defining_modules() -> None:
    # Each lazy table names the module that defines (or re-exports) the name, so a move is one edit.
    for name in sorted(PUBLIC):
        package = importlib.import_module(name)
        table = package._EXPORTS
        assert set(table) == PUBLIC[name]
        for public, module in table.items():
            try:
                defining = importlib.import_module(module)
            except ModuleNotFoundError as missing:  # its optional extra is not installed (named in the error)
                assert missing.name in OPTIONAL_SDKS and f"pip install -e '.[{OPTIONAL_SDKS[missing.name]}]'" in str(
                    missing
                )
                continue
            assert hasattr(defining, public), f"{module} has no {public}"


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_importing_a_package_imports_none_of_its_modules(name: str) -> None:
    code = (
        f"import sys, {name}\n"
        f"loaded = sorted(m for m in sys.modules if m.startswith('{name}.'))\n"
        "print(','.join(loaded))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""
