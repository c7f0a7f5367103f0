"""The README stays true: its code runs and CI runs its test command.

Every ```python block is compiled. Every block that is a complete program (its
top level does something besides importing and defining) is run verbatim, in
this process, with ``ANTHROPIC_BASE_URL`` pointing at the simulated Anthropic
server and a test key in ``ANTHROPIC_API_KEY``: an example that talks to the API
through the SDK reaches the simulator, never the network. (The simulator answers
requests that name no node with a scripted text; a README program that sends
through ``AnthropicProvider`` names its nodes, and needs their scripts added to
``README_POLICIES`` below.)
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.from_thread
import pytest

from runtime.scripted.policies import PolicyRegistry, ScriptPolicy, ScriptStep
from runtime.sim.server import SimConfig, SimServer, serve_simulator

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DEFINITIONS = (
    ast.Import,
    ast.ImportFrom,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Assign,
    ast.AnnAssign,
)


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.DOTALL)


def python_blocks() -> list[tuple[int, str]]:
    """Each ```python block with the README line its code starts on."""
    return [
        (README.count("\n", 0, match.start(1)) + 1, match.group(1))
        for match in re.finditer(r"```python\n(.*?)```", README, flags=re.DOTALL)
    ]


def is_complete_program(source: str) -> bool:
    """True when the block's top level runs something (a call, a loop...), not only imports and definitions."""
    body = ast.parse(source).body
    return any(
        not isinstance(statement, DEFINITIONS)
        and not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant))
        for statement in body
    )


README_POLICIES = PolicyRegistry(default=ScriptPolicy("default", [ScriptStep(text="Hello from the simulator.")] * 8))
SIM_URL = "http://127.0.0.1:8765"
"""The address the "Point your own client" snippets name: tests/test_clients_readme.py runs them against a
``foldline sim`` it starts (with their framework extras), so they are compiled here, not run twice."""
PROGRAMS = [(line, source) for line, source in python_blocks() if is_complete_program(source) and SIM_URL not in source]


def test_the_complete_program_test_tells_programs_from_fragments() -> None:
    assert is_complete_program("import anyio\n\nasync def main() -> None: ...\n\nanyio.run(main)\n")
    assert is_complete_program("for x in range(2):\n    print(x)\n")
    assert not is_complete_program('"""doc"""\nimport anyio\nX = 1\n\nasync def main() -> None: ...\n')


def test_the_readme_holds_a_complete_program() -> None:
    assert PROGRAMS, "the README has no ```python block that is a complete program"


@pytest.mark.parametrize(("line", "source"), python_blocks(), ids=[f"line{line}" for line, _ in python_blocks()])
def test_every_python_block_compiles(line: int, source: str) -> None:
    compile(source, f"README.md:{line}", "exec")


@pytest.fixture
def simulated_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimServer]:
    """The simulated server on a free port in a thread of its own; the SDK's environment points at it."""
    serving = serve_simulator(SimConfig(), README_POLICIES, clock=lambda: 0.0)
    with anyio.from_thread.start_blocking_portal() as portal, portal.wrap_async_context_manager(serving) as sim:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", sim.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-readme-example")
        yield sim


@pytest.mark.parametrize(("line", "source"), PROGRAMS, ids=[f"line{line}" for line, _ in PROGRAMS])
def test_every_complete_program_runs_verbatim(simulated_api: SimServer, line: int, source: str) -> None:
    if "actors.tools.mcp" in source:  # starts mcp-server-time: the mcp extra
        pytest.importorskip("mcp_server_time", reason="the README's MCP example needs the mcp extra")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, f"README.md:{line}", "exec"), {"__name__": "__main__"})
    printed = out.getvalue()
    assert printed.strip(), f"the README program at line {line} printed nothing"
    assert "Traceback" not in printed


def test_a_scripted_flow_program_prints_its_final_answer_and_usage(simulated_api: SimServer) -> None:
    # Whatever the flow example becomes: a program that scripts its model's final answer and prints
    # each node's status and answer must print "ok" and that answer; one that prints the report's
    # usage must print the cache fields.
    flows = [(line, source) for line, source in PROGRAMS if "Flow(" in source]
    assert flows, "the README has no runnable flow example"
    for line, source in flows:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(source, f"README.md:{line}", "exec"), {"__name__": "__main__"})
        answers = re.findall(r'\{"text": "([^"]+)"\}', source)
        if answers:
            assert f"ok {answers[-1]}" in out.getvalue(), (line, out.getvalue())
        if 'report()["usage"]' in source:
            assert "cache_read_input_tokens" in out.getvalue()


def test_ci_runs_exactly_the_readme_two_commands() -> None:
    commands = code_blocks("sh")
    assert "pytest" in commands[1] and "scenarios/quickstart.toml" in commands[0]
    ci = (ROOT / ".ci" / "run").read_text()
    # .ci/run reads both commands from the README with its own readme_block function: run that function here.
    function = re.search(r"^readme_block\(\) \{.*?^\}$", ci, re.MULTILINE | re.DOTALL)
    assert function is not None
    for n in (1, 2):
        read = subprocess.run(
            ["bash", "-c", f"{function.group(0)}\nreadme_block {n}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        assert read.stdout.strip() == commands[n - 1].strip()
    assert 'bash -euo pipefail -c "$first_command"' in ci and 'bash -euo pipefail -c "$second_command"' in ci
    assert ci.index("pytest --collect-only -q") < ci.index("pins.txt") < ci.index('-c "$second_command"')


def test_the_sdk_a_program_creates_talks_to_the_simulator(simulated_api: SimServer) -> None:
    import anthropic

    async def ask() -> list[str]:
        # What AnthropicProvider.create(api_key=...) builds when no base_url is given.
        client = anthropic.AsyncAnthropic(max_retries=0)
        assert str(client.base_url).rstrip("/") == simulated_api.base_url
        reply = await client.messages.create(
            model="claude-haiku-5-5", max_tokens=16, messages=[{"role": "user", "content": "Hello."}]
        )
        return [block.text for block in reply.content if block.type == "text"]

    assert anyio.run(ask) == ["Hello from the simulator."]
    assert len(simulated_api.requests) == 1
