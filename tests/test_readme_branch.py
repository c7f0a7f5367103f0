"""The README's branch examples, copied here verbatim, run against the simulated server.

Each example defines its tools with the decorator and talks to branches over the
real SDK and real HTTP to the simulated Anthropic server, answered by the
default model. The copies must stay equal to the README's blocks.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import anyio
import pytest

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")

TOOL_EXAMPLE = '''\
import anyio

from runtime import Profile, Runtime, open_simulated, tool


@tool
def word_count(text: str) -> int:
    """Count the words in a text.

    Args:
        text: the text to count
    """
    return len(text.split())


async def main() -> None:
    profile = Profile(system="You count words with your tool.", tools=[word_count])
    async with open_simulated() as provider, Runtime(provider=provider) as rt:
        branch = rt.branch(profile)
        answer = await branch.run("How many words are in 'to be or not to be'?")
        print(answer)
        report = rt.report()
        print(report["requests"], report["tools"], report["usage"]["output_tokens"])


anyio.run(main)
'''

FORK_EXAMPLE = '''\
import anyio

from runtime import Profile, Runtime, open_simulated, tool


@tool
async def lookup(term: str) -> dict:
    """Look a term up in the glossary.

    Args:
        term: the term to look up
    """
    return {"term": term, "meaning": "a conversation that goes on from a copy of another"}


async def main() -> None:
    async with open_simulated() as provider, Runtime(provider=provider) as rt:
        lead = rt.branch(Profile(system="You explain terms.", tools=[lookup]), name="lead")
        print(await lead.run("What is a fork?"))
        short, long = lead.fork(name="short"), lead.fork(name="long")
        answers = {}

        async def ask(branch, question: str) -> None:
            answers[branch.name] = await branch.run(question, max_rounds=4)

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, short, "Say it in five words.")
            tg.start_soon(ask, long, "Say it in a paragraph.")
        print(sorted(answers))
        print({name: node["requests"] for name, node in sorted(rt.report()["nodes"].items())})


anyio.run(main)
'''


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)


def test_the_copies_are_the_readmes_first_two_examples_verbatim() -> None:
    assert python_blocks()[:2] == [TOOL_EXAMPLE, FORK_EXAMPLE]


def run_example(example: str, backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(anyio, "run", functools.partial(anyio.run, backend=backend))
    exec(compile(example, "README.md", "exec"), {"__name__": "readme_example"})


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_tool_example_prints_the_answer_and_the_report(
    backend: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_example(TOOL_EXAMPLE, backend, monkeypatch)
    lines = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("20")]
    assert lines[0] == "Simulated answer after 1 tool result(s): 1"
    assert lines[1].startswith("2 {'calls': 1, 'errors': 0, 'result_bytes': 1} ")  # requests, tools, output tokens
    assert int(lines[1].rsplit(" ", 1)[1]) > 0


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_fork_example_runs_two_children_concurrently(
    backend: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_example(FORK_EXAMPLE, backend, monkeypatch)
    lines = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("20")]
    assert lines[0].startswith("Simulated answer after 1 tool result(s): {")
    assert '"term":"<term>"' in lines[0]
    assert lines[1] == "['long', 'short']"
    assert lines[2] == "{'lead': 2, 'long': 2, 'short': 2}"
