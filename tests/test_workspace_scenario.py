"""scenarios/workspace.toml: real files read, listed and grepped; nothing outside the workspace read."""

from __future__ import annotations

import pathlib
from pathlib import Path
from typing import Any

import pytest

from runtime.config import load_scenario
from runtime.scenarios.run import run_scenario
from runtime.scenarios.tools import scenario_registry, tool_names_for_loading
from runtime.values.messages import ToolResult

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
WORKSPACE = SCENARIOS / "workspace"


def size(relative: str) -> int:
    return (WORKSPACE / relative).stat().st_size


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every file opened through pathlib while the run goes (the workspace tools open files this way)."""
    seen: list[Path] = []
    original = pathlib.Path.open

    def spy(self: Path, *args: Any, **kwargs: Any) -> Any:
        seen.append(Path(self).resolve())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "open", spy)
    return seen


@pytest.mark.anyio
async def test_the_workspace_scenario_reads_real_files_and_nothing_outside(opened: list[Path]) -> None:
    scenario = load_scenario(SCENARIOS / "workspace.toml", tool_names=tool_names_for_loading())
    run = await run_scenario(scenario, provider_kind="scripted", registry=scenario_registry(scenario))
    assert run.report["status"] == "ok"

    def results(node: str) -> list[ToolResult]:
        return [m for m in run.result.branches[node].view() if isinstance(m, ToolResult)]

    listing, readme, design, grep = results("survey")
    assert f"README.md  {size('README.md')} bytes" in listing.output
    assert f"notes/design.md  {size('notes/design.md')} bytes" in listing.output
    assert "escape.md  symlink leading outside the workspace (not followed)" in listing.output
    assert readme.output.startswith(f"README.md: bytes 0-{size('README.md')} of {size('README.md')}\n")
    assert readme.output.endswith((WORKSPACE / "README.md").read_text())
    assert design.output.startswith(f"notes/design.md: bytes 0-{size('notes/design.md')} of {size('notes/design.md')}")
    matching = sum(1 for line in (WORKSPACE / "src/ceiling.py").read_text().splitlines() if "ceiling" in line)
    assert grep.output.startswith(f"{matching} matching lines for 'ceiling' under 'src'\n")

    first, second = results("ranged")
    total = size("src/ceiling.py")
    assert first.output.startswith(f"src/ceiling.py: bytes 0-200 of {total}; next offset 200\n")
    assert second.output.startswith(f"src/ceiling.py: bytes 200-{total} of {total}\n")
    assert (
        first.output.split("\n", 1)[1] + second.output.split("\n", 1)[1] == (WORKSPACE / "src/ceiling.py").read_text()
    )

    refused = results("outside")
    assert all(r.is_error for r in refused)
    assert [r.output for r in refused] == [
        "path '../../etc/passwd' climbs out with '..'; give a path inside the workspace root",
        "path '/etc/passwd' is absolute; give a path relative to the workspace root",
        "path 'escape.md' leads outside the workspace root (through a symlink)",
        "path '..' climbs out with '..'; give a path inside the workspace root",
        "path '/etc' is absolute; give a path relative to the workspace root",
        "read_file: argument 'limit': input should be less than or equal to 16000, got 100000",
    ]
    assert "root:" not in " ".join(r.output for r in refused)

    # The run opens its own data (pricing, tokenizer); of the scenario's files only the workspace's,
    # and none of what the refused paths named.
    root = WORKSPACE.resolve()
    mine = [p for p in opened if p.is_relative_to(SCENARIOS.resolve())]
    assert mine and all(p.is_relative_to(root) for p in mine), mine
    assert not any(p.is_relative_to("/etc") for p in opened)


@pytest.mark.anyio
async def test_the_report_counts_each_tools_calls_errors_and_bytes() -> None:
    scenario = load_scenario(SCENARIOS / "workspace.toml", tool_names=tool_names_for_loading())
    run = await run_scenario(scenario, provider_kind="scripted", registry=scenario_registry(scenario))
    nodes = run.report["nodes"]
    survey = run.result.branches["survey"]
    read_bytes = sum(
        len(m.output.encode()) for m in survey.view() if isinstance(m, ToolResult) and m.name == "read_file"
    )
    assert nodes["survey"]["tools"]["read_file"] == {"calls": 2, "errors": 0, "result_bytes": read_bytes}
    assert nodes["outside"]["tools"]["read_file"]["errors"] == 4
    assert run.report["tools"]["errors"] == 6
