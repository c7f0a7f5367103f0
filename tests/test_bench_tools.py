"""The bench's facts and tools: deterministic values, exact sizes, facts where promised, loud failures."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.tools import BUILTIN_TOOLS, ToolContext, ToolFailed
from runtime.bench.facts import (
    check_fact_id,
    fact_line,
    fact_value,
    facts_in,
    find_fact,
)
from runtime.bench.tools import (
    BENCH_TOOLS,
    document_text,
    facts_printed,
    stage_fact,
    stage_text,
)

CONTEXT = ToolContext(node_id="n", branch_id="b")
fact_ids = st.from_regex(r"[A-Za-z0-9_-]{1,12}", fullmatch=True)


def call(name: str, **arguments: object) -> str:
    return anyio.run(BENCH_TOOLS.get(name).func, arguments, CONTEXT)


def test_fact_values_are_sixteen_hex_digits_and_stable() -> None:
    value = fact_value("F12")
    assert len(value) == 16 and int(value, 16) >= 0
    assert fact_value("F12") == value != fact_value("F13")
    assert fact_line("F12") == f"fact F12: {value}\n"


@pytest.mark.parametrize("bad", ["", "F 1", "a" * 41, 7, None, "F1:"])
def test_bad_fact_ids_are_refused_naming_the_value(bad: object) -> None:
    with pytest.raises(ValueError, match="is not 1 to 40 letters"):
        check_fact_id(bad)


@given(st.dictionaries(fact_ids, st.just(None), min_size=1, max_size=6), st.integers(0, 200))
def test_facts_in_reads_back_every_planted_line(ids: dict[str, None], filler: int) -> None:
    text = ("x" * filler + "\n").join(fact_line(f) for f in ids)
    assert facts_in(text) == {f: fact_value(f) for f in ids}
    for fact in ids:
        assert find_fact(text, fact) == fact_value(fact)


def test_a_fact_is_not_found_in_a_longer_id() -> None:
    assert find_fact(fact_line("F12"), "F1") is None


@given(st.integers(200, 40_000), st.lists(fact_ids, max_size=4, unique=True))
def test_documents_have_exactly_their_size_and_carry_their_facts(size: int, facts: list[str]) -> None:
    text = document_text("docs/a.md", size, tuple(facts))
    assert len(text) == size
    assert facts_in(text) == {f: fact_value(f) for f in facts}
    assert document_text("docs/a.md", size, tuple(facts)) == text


def test_facts_sit_inside_the_document_at_line_starts() -> None:
    text = document_text("docs/b.md", 30_000, ("F1", "F2"))
    first, second = text.index(fact_line("F1")), text.index(fact_line("F2"))
    assert 8_000 < first < 12_000 and 18_000 < second < 22_000
    assert text[first - 1] == "\n" and text[second - 1] == "\n"


def test_read_doc_tool_checks_its_arguments() -> None:
    assert call("read_doc", path="d.md", size=500, facts=["K"]) == document_text("d.md", 500, ("K",))
    with pytest.raises(ToolFailed, match="read_doc: path '' is not a non-empty string"):
        call("read_doc", path="", size=10)
    with pytest.raises(ToolFailed, match="read_doc: size -1 is not an integer from 0 to 1000000"):
        call("read_doc", path="d", size=-1)
    with pytest.raises(ToolFailed, match="read_doc: fact 'K' is listed twice"):
        call("read_doc", path="d", size=500, facts=["K", "K"])
    with pytest.raises(ToolFailed, match="read_doc d: size 5 is too small for 1 fact line"):
        call("read_doc", path="d", size=5, facts=["K"])


def test_stages_need_the_previous_key_and_print_their_own() -> None:
    first = call("stage", n=1, size=300)
    assert first == stage_text(1, 300)
    assert find_fact(first, stage_fact(1)) == fact_value("S1")
    second = call("stage", n=2, size=100, key=fact_value("S1"))
    assert find_fact(second, "S2") == fact_value("S2")
    with pytest.raises(ToolFailed, match=r"stage 2: key 'unknown' is not the key stage 1 printed \(fact S1\)"):
        call("stage", n=2, size=100, key="unknown")
    with pytest.raises(ToolFailed, match="stage: n 0 is not a positive integer"):
        call("stage", n=0, size=100)


def test_answer_acknowledges_without_judging() -> None:
    assert call("answer", fact="F1", value="0123456789abcdef") == "noted: fact F1 answered"
    assert call("answer", fact="F1", value="wrong") == "noted: fact F1 answered"
    with pytest.raises(ToolFailed, match="answer: value None for fact F1"):
        call("answer", fact="F1")
    with pytest.raises(ToolFailed, match="answer: fact id"):
        call("answer", fact="", value="x")


def test_the_bench_registry_extends_the_builtins() -> None:
    assert BENCH_TOOLS.names() == BUILTIN_TOOLS.names() | {"read_doc", "stage", "answer"}


def test_the_reader_knows_which_call_prints_which_fact() -> None:
    assert facts_printed("read_doc", {"path": "d", "size": 9, "facts": ["F1", "F2"]}) == ("F1", "F2")
    assert facts_printed("read_doc", {"path": "d", "size": 9}) == ()
    assert facts_printed("stage", {"n": 7, "size": 9, "key": "k"}) == ("S7",)
    assert facts_printed("stage", {"n": True, "size": 9}) == ()
    assert facts_printed("answer", {"fact": "F1", "value": "v"}) == ()
