"""The README stays true: its code runs and CI runs its test command."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def test_the_flow_example_runs(capsys) -> None:
    example = code_blocks("python")[2]
    exec(compile(example, "README.md", "exec"), {"__name__": "readme_example"})
    out = capsys.readouterr().out
    assert "ok The notes describe a sound design." in out
    assert "cache_read_input_tokens" in out


def test_the_signal_example_compiles() -> None:
    compile(code_blocks("python")[3], "README.md", "exec")


def test_ci_runs_exactly_the_readme_test_command() -> None:
    commands = code_blocks("sh")
    test_command = commands[1].strip()
    assert "pytest" in test_command
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_command in ci.splitlines()
    assert "scenarios/quickstart.toml" in commands[0]
