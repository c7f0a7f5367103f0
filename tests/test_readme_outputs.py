"""README examples print what the README says they print, on asyncio and on trio.

A ```python block that is a complete program and is followed by the line
``It prints:`` and a ```text block is run verbatim (once with ``anyio.run``
on asyncio, once with it on trio) and what it prints must equal that block
exactly. Every runnable example of the flow sections (flows, results along
the graph, typed results, the signal stream) has one: those sections must
keep them.
"""

from __future__ import annotations

import contextlib
import functools
import io
import re

import anyio
import pytest
from test_readme import README, is_complete_program

NO_FENCE = r"(?:[^`]|`(?!``))*?"
EXAMPLE = re.compile(rf"```python\n(?P<code>{NO_FENCE})```\n\nIt prints:\n\n```text\n(?P<out>{NO_FENCE})```")


def examples() -> list[tuple[int, str, str]]:
    return [
        (README.count("\n", 0, m.start("code")) + 1, m["code"], m["out"])
        for m in EXAMPLE.finditer(README)
        if is_complete_program(m["code"])
    ]


EXAMPLES = examples()
FLOW_SECTION = README[README.index("Flows run graphs of nodes") : README.index("Event types: `RunStarted`")]


def test_every_runnable_example_of_the_flow_sections_states_its_output() -> None:
    runnable = [m for m in re.finditer(rf"```python\n({NO_FENCE})```", FLOW_SECTION) if is_complete_program(m[1])]
    stated = [code for _, code, _ in EXAMPLES if code in FLOW_SECTION]
    assert len(runnable) == len(stated) >= 3
    assert any("output=Brief" in code and 'depends_on=("physics", "history")' in code for code in stated)
    assert any("tg.start(watch, rt)" in code for code in stated)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize(("line", "code", "expected"), EXAMPLES, ids=[f"line{line}" for line, _, _ in EXAMPLES])
def test_an_example_prints_exactly_what_stands_under_it(
    monkeypatch: pytest.MonkeyPatch, backend: str, line: int, code: str, expected: str
) -> None:
    monkeypatch.setattr(anyio, "run", functools.partial(anyio.run, backend=backend))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"README.md:{line}", "exec"), {"__name__": "__main__"})
    assert out.getvalue() == expected
