"""The README's "Point your own client at the simulator" snippets run, as written, against ``foldline sim``."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sim_process import SimProcess, foldline_sim

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
SECTION = README.split("## Point your own client at the simulator\n", 1)[1].split("\n## ", 1)[0]
SNIPPETS = re.findall(r"```python\n(.*?)```", SECTION, flags=re.DOTALL)
README_URL = "http://127.0.0.1:8765"


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    with foldline_sim() as process:
        yield process


def run_snippet(code: str, sim: SimProcess, capsys: pytest.CaptureFixture[str]) -> str:
    assert README_URL in code
    exec(compile(code.replace(README_URL, sim.url), "README.md", "exec"), {"__name__": "readme_snippet"})
    return capsys.readouterr().out


def test_the_section_has_sdk_and_framework_snippets() -> None:
    assert len(SNIPPETS) == 4
    assert "anthropic.Anthropic(" in SNIPPETS[0] and "AsyncAnthropic" in SNIPPETS[1]
    assert "langchain_anthropic" in SNIPPETS[2] and "pydantic_ai" in SNIPPETS[3]
    assert "foldline sim --port 8765" in SECTION and "/_foldline/clock/advance" in SECTION


def test_the_sync_and_streaming_sdk_snippet(sim: SimProcess, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_snippet(SNIPPETS[0], sim, capsys)
    written, read = out.splitlines()[0].split()
    assert int(written) > 0 and read == written
    assert "Simulated answer to: Stream, please" in out


def test_the_async_sdk_snippet(sim: SimProcess, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_snippet(SNIPPETS[1], sim, capsys).splitlines() == ["Simulated answer to: Hello"] * 2


@pytest.mark.parametrize(("index", "module"), [(2, "langchain_anthropic"), (3, "pydantic_ai")])
def test_the_framework_snippets(index: int, module: str, sim: SimProcess, capsys: pytest.CaptureFixture[str]) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"the 'clients' extra is not installed (pip install -e '.[clients]'): no {module}")
    out = run_snippet(SNIPPETS[index], sim, capsys)
    assert "Simulated answer" in out
