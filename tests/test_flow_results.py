"""Results along the graph: a dependent reads its dependencies' results, large ones clipped losslessly."""

from __future__ import annotations

import io
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import READER, bounded, calls, flow, iterative, node, read, runtime_for, scripted, text

from actors.tools import BUILTIN_TOOLS
from actors.tools.functions import tool
from runtime.cli.store import main as store_main
from runtime.config import Profile
from runtime.config.loader import load_scenario, loads_scenario
from runtime.errors import ConfigError
from runtime.flows.flow import Node
from runtime.flows.inputs import INPUTS_HEADER, DependencyResult, plan_inputs, result_block
from runtime.fold.formats import parse_clip_marker, parse_read_result
from runtime.fold.recovery import read_result
from runtime.measuring.measure import TokenCounter
from runtime.request.compiler import RequestSettings, compile_request
from runtime.scenarios.run import build_flow
from runtime.store.inspect import describe_branch, format_branch
from runtime.store.run import run_scenario_stored
from runtime.values.messages import Instruction

QUICKSTART = Path(__file__).resolve().parent.parent / "scenarios" / "quickstart.toml"
LEAD_ANSWER = "Both reviews are under way; the notes describe a sound design."
SURVEY_ANSWER = "Two prior approaches: summary compaction and lossless folding."


def first_instruction(branch) -> Instruction:
    return next(m for m in branch.view() if isinstance(m, Instruction))


@pytest.mark.anyio
async def test_a_dependent_reads_each_result_after_its_instruction_in_dependency_order() -> None:
    provider = scripted({"a": [text("A found x")], "b": [text("B found y")], "m": [text("merged")]})
    fl = flow(
        node("a", bounded("research a")),
        node("b", bounded("research b")),
        node("m", bounded("merge the findings"), depends_on=("b", "a")),
    )
    async with runtime_for(provider) as rt:
        result = await rt.run(fl)
    assert result.status == "ok"
    sent = first_instruction(result.branches["m"]).text
    assert sent == (
        f"merge the findings\n\n{INPUTS_HEADER}\n\n"
        '<result node="b" status="ok">\nB found y\n</result>\n\n'
        '<result node="a" status="ok">\nA found x\n</result>'
    )
    # The compiled request carries them in the user turn after the instruction.
    view = result.branches["m"].view()
    payload = compile_request(system=None, tools=(), view=view, settings=RequestSettings(model="claude-haiku-5-5"))
    user_text = payload.payload()["messages"][0]["content"][0]["text"]
    assert user_text.index("merge the findings") < user_text.index('node="b"') < user_text.index('node="a"')


@pytest.mark.anyio
async def test_inputs_choose_what_is_read_and_an_empty_list_reads_nothing() -> None:
    provider = scripted({"a": [text("A")], "b": [text("B")], "only-a": [text("1")], "none": [text("2")]})
    fl = flow(
        node("a", bounded("a")),
        node("b", bounded("b")),
        node("only-a", bounded("use a"), depends_on=("a", "b"), inputs=("a",)),
        node("none", bounded("after both"), depends_on=("a", "b"), inputs=()),
    )
    async with runtime_for(provider) as rt:
        result = await rt.run(fl)
    only_a = first_instruction(result.branches["only-a"]).text
    assert 'node="a"' in only_a and 'node="b"' not in only_a
    assert first_instruction(result.branches["none"]).text == "after both"


def test_inputs_and_inherit_name_dependencies_or_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"Node 'm'.inputs\[0\]: \"c\" is not a dependency of this node"):
        Node("m", bounded("x"), depends_on=("a",), inputs=("c",))
    with pytest.raises(ConfigError, match=r"Node 'm'.inherit: \"c\" is not a dependency of this node"):
        Node("m", bounded("x"), depends_on=("a",), inherit="c")
    with pytest.raises(ConfigError, match=r"Node 'm'.when: 3 is not callable"):
        Node("m", bounded("x"), when=3)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_failed_dependency_skips_the_dependent_unless_it_accepts_failures_then_it_reads_why() -> None:
    provider = scripted(
        {"bad": [calls(("fail", {"message": "disk on fire"}))], "ok": [text("fine")], "acc": [text("x")]}
    )
    failing = READER.evolve(tool_errors="fail")
    fl = flow(
        node("bad", iterative("break"), profile=failing),
        node("ok", bounded("work")),
        node("strict", bounded("merge"), depends_on=("bad", "ok")),
        node("acc", bounded("merge anyway"), depends_on=("bad", "ok"), accept_failures=True),
    )
    async with runtime_for(provider) as rt:
        result = await rt.run(fl)
    assert result["strict"].status == "skipped" and result["strict"].reason == "dependency 'bad' failed"
    assert result["acc"].status == "ok"
    sent = first_instruction(result.branches["acc"]).text
    assert '<result node="bad" status="failed">\nnot run: ' in sent and "disk on fire" in sent
    assert '<result node="ok" status="ok">\nfine\n</result>' in sent


@pytest.mark.anyio
async def test_a_condition_over_the_results_runs_or_skips_the_node_and_a_raising_one_fails_it() -> None:
    provider = scripted({"check": [text("verdict: fail")], "fix": [text("fixed")], "ship": [text("shipped")]})

    def boom(_results: object) -> bool:
        raise ValueError("no verdict")

    fl = flow(
        node("check", bounded("check")),
        node("fix", bounded("fix it"), depends_on=("check",), when=lambda r: "fail" in r["check"].result.answer),
        node("ship", bounded("ship it"), depends_on=("check",), when=lambda r: "pass" in r["check"].result.answer),
        node("odd", bounded("odd"), depends_on=("check",), when=boom),
    )
    async with runtime_for(provider) as rt:
        result = await rt.run(fl)
    assert result["fix"].status == "ok"
    assert result["ship"].status == "skipped"
    assert result["ship"].reason == "condition not met: when returned False on the results of check"
    assert result["odd"].status == "failed" and result["odd"].reason == "its condition (when) raised: no verdict"


@pytest.mark.anyio
async def test_a_top_level_node_may_start_from_a_dependencys_view_with_its_own_setup() -> None:
    provider = scripted(
        {"lead": [calls(read("design.md", 3000)), text("lead done")], "next": [text("next done")], "b": [text("B")]}
    )
    # inherited_setup="own": its system text and tools replace the lead's (the default keeps them: test_inherit.py)
    reviewer = Profile(system="You review.", tools=("synthetic_read",), inherited_setup="own")
    fl = flow(
        node("lead", iterative("read the design")),
        node("b", bounded("other")),
        node("next", bounded("go on from there"), depends_on=("lead", "b"), inherit="lead", profile=reviewer),
    )
    async with runtime_for(provider) as rt:
        result = await rt.run(fl)
    assert result.status == "ok"
    lead, nxt = result.branches["lead"], result.branches["next"]
    assert nxt.view_ids()[: len(lead.view_ids())] == lead.view_ids()
    assert nxt.system is not None and nxt.system.text == "You review."
    assert [t.name for t in nxt.tools] == ["synthetic_read"]
    # It reads the other dependency's result, not the one whose conversation it continues.
    last = nxt.view()[len(lead.view_ids())]
    assert isinstance(last, Instruction)
    assert 'node="b"' in last.text and 'node="lead"' not in last.text


@pytest.mark.anyio
async def test_a_200000_character_result_reaches_a_dependent_under_a_20000_token_ceiling_losslessly() -> None:
    big = "".join(f"line {i:06d}: the survey found detail {i * 7 % 1000:03d} worth keeping.\n" for i in range(3600))
    big = big[:200_000]
    assert len(big) == 200_000
    provider = scripted({"survey": [text(big)], "merge": [text("merged")]})
    tight = READER.evolve(max_input_tokens=20_000)
    fl = flow(node("survey", bounded("survey")), node("merge", bounded("merge"), depends_on=("survey",), profile=tight))
    async with runtime_for(provider) as rt:
        seen: list[object] = []
        rt.signals.add_handler(seen.append, name="t")
        result = await rt.run(fl)
    decisions = [e for e in seen if e.type == "ContextDecision" and e.node_id == "merge"]
    answered = [e for e in seen if e.type == "ResponseReceived" and e.node_id == "merge"]
    assert result.status == "ok", result["merge"].reason
    branch = result.branches["merge"]
    instruction = first_instruction(branch)
    assert "[... clipped:" in instruction.text and len(instruction.text) < 60_000
    merge_requests = [m for m in branch.record_messages() if isinstance(m, Instruction)]
    assert merge_requests[0].id not in branch.view_ids()  # the whole block: in the record, not the view
    assert decisions and all(d.data["estimate_after"] <= 20_000 for d in decisions)
    assert answered and all(e.data["usage"]["input_tokens"] <= 20_000 for e in answered)
    # read_result pages back the whole original block.
    index = branch.index_of(merge_requests[0].id)
    marker = parse_clip_marker(instruction.text)[0]
    assert marker.index == index
    pages: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = parse_read_result(read_result(branch, index, offset=offset).text)
        pages.append(page.text)
        offset = page.next_offset
    whole = "".join(pages)
    assert whole == result_block(DependencyResult("survey", "ok", big))
    # What the instruction keeps plus what the marker says it omits is the whole block.
    assert big in whole and whole[marker.start : marker.end] not in instruction.text


@given(
    st.lists(st.integers(min_value=0, max_value=30_000), min_size=1, max_size=5),
    st.integers(min_value=500, max_value=20_000),
)
def test_the_rendering_is_stable_and_each_clipped_block_keeps_its_whole_text_in_its_original(
    sizes: list[int], budget: int
) -> None:
    results = [DependencyResult(f"n{i}", "ok", ("word " * size)[:size] or "-") for i, size in enumerate(sizes)]

    def count(s: str) -> int:
        return len(s) // 4 + 1

    plan = plan_inputs("do it", results, count=count, budget_tokens=budget, first_index=3)
    again = plan_inputs("do it", results, count=count, budget_tokens=budget, first_index=3)
    assert plan == again
    assert plan.instruction.startswith(f"do it\n\n{INPUTS_HEADER}\n\n")
    positions = [plan.instruction.index(f'<result node="{r.node_id}"') for r in results]
    assert positions == sorted(positions)
    clipped = {r.node_id: r for r in results if r.node_id in plan.clipped}
    assert [result_block(clipped[n]) for n in plan.clipped] == list(plan.originals)
    for i, node_id in enumerate(plan.clipped):
        assert f'"index":{3 + i},' in plan.instruction
        assert node_id in plan.clipped
    for r in results:
        if r.node_id not in clipped:
            assert result_block(r) in plan.instruction
    # Each clipped block keeps a head and a tail of its text around one marker naming the omitted span exactly.
    markers = parse_clip_marker(plan.instruction)
    assert len(markers) == len(plan.clipped)
    for marker, original in zip(markers, plan.originals, strict=True):
        kept_head, kept_tail = original[: marker.start], original[marker.end :]
        assert kept_head in plan.instruction and kept_tail in plan.instruction
        assert marker.total == len(original) and marker.end > marker.start


def test_a_profiles_result_bound_clips_a_block_to_about_that_many_characters() -> None:
    result = DependencyResult("a", "ok", "z" * 10_000)
    plan = plan_inputs("go", [result], count=len, budget_tokens=None, char_bound=3_000, first_index=1)
    assert plan.clipped == ("a",)
    block = plan.instruction.split(f"{INPUTS_HEADER}\n\n", 1)[1]
    assert len(block) <= 3_000


def test_quickstarts_summary_sees_the_leads_and_the_surveys_answers_and_inspect_shows_them(tmp_path: Path) -> None:
    scenario = load_scenario(QUICKSTART, tool_names=BUILTIN_TOOLS.names())
    run = anyio.run(lambda: run_scenario_stored(scenario, store_path=tmp_path / "run.db"))
    assert run.result.status == "ok"
    summary = run.result.branches["summary"]
    view = summary.view()
    request = compile_request(
        system=summary.system.text if summary.system else None,
        tools=summary.tools,
        view=view,
        settings=RequestSettings(model="claude-haiku-5-5"),
    )
    user = request.payload()["messages"][0]["content"][0]["text"]
    assert user.startswith("Write a two-line summary of the lead's and the survey's findings.")
    assert f'<result node="lead" status="ok">\n{LEAD_ANSWER}\n</result>' in user
    assert f'<result node="survey" status="ok">\n{SURVEY_ANSWER}\n</result>' in user
    out, err = io.StringIO(), io.StringIO()
    code = store_main(["inspect", str(tmp_path / "run.db"), "--branch", "summary"], out=out, err=err)
    assert code == 0, err.getvalue()
    assert LEAD_ANSWER in out.getvalue() and SURVEY_ANSWER in out.getvalue()


def test_inspect_accounts_for_a_clipped_results_original_and_shows_what_the_instruction_carries() -> None:
    big = "x" * 50_000
    provider = scripted({"a": [text(big)], "m": [text("merged")]})
    tight = READER.evolve(max_input_tokens=8_000)
    fl = flow(node("a", bounded("a")), node("m", bounded("merge"), depends_on=("a",), profile=tight))

    async def go():
        async with runtime_for(provider) as rt:
            return await rt.run(fl)

    result = anyio.run(go)
    branch = result.branches["m"]
    picture = describe_branch(branch, count_tokens=TokenCounter().count, node_id="m")
    text_out = format_branch(picture)
    assert "carries the results of a (ok):" in text_out
    assert "- #1 result block, " in text_out and '"action":"read_result","index":1' in text_out
    assert "NOT reachable" not in text_out


@tool
def flaky(query: str) -> str:
    """Search, and fail.

    Args:
        query: what to search for
    """
    raise RuntimeError(f"the index for {query!r} is offline")


@pytest.mark.anyio
async def test_an_unknown_tool_and_a_raising_tool_fail_their_own_nodes_and_the_flow_returns_every_result(
    capsys: pytest.CaptureFixture[str],
) -> None:
    provider = scripted(
        {
            "raises": [calls(("flaky", {"query": "folding"}))],
            "fine": [calls(read("a.md")), text("fine done")],
            "after-fine": [text("after done")],
        }
    )
    fl = flow(
        node("typo", iterative("use the tool"), profile=Profile(tools=("synthetic_raed",))),
        node("raises", iterative("search"), profile=Profile(tools=[flaky], tool_errors="fail")),
        node("fine", iterative("read")),
        node("after-typo", bounded("next"), depends_on=("typo",)),
        node("after-fine", bounded("next"), depends_on=("fine",)),
    )
    async with runtime_for(provider) as rt:
        result = await rt.run(fl)
        report = rt.report()
    assert set(result.outcomes) == {"typo", "raises", "fine", "after-typo", "after-fine"}
    assert result["typo"].status == "failed"
    assert result["typo"].reason == (
        "node 'typo': profile.tools[0]: 'synthetic_raed' names no tool in the registry "
        '(did you mean "synthetic_read"?); tools available: ' + ", ".join(sorted(BUILTIN_TOOLS.names()))
    )
    assert result["raises"].status == "failed" and "the index for 'folding' is offline" in result["raises"].reason
    assert result["fine"].status == "ok" and result["after-fine"].status == "ok"
    assert result["after-typo"].status == "skipped" and result["after-typo"].reason == "dependency 'typo' failed"
    assert report["nodes"]["typo"]["status"] == "failed"
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err


@pytest.mark.anyio
async def test_a_child_naming_an_unknown_tool_fails_alone_and_its_emitter_is_told() -> None:
    provider = scripted({"lead": [calls(("spawn", {"node": "kid"})), text("lead done")]})
    fl = flow(
        node("lead", iterative("delegate")),
        node("kid", bounded("work"), spawned_by="lead", profile=Profile(tools=("nope",))),
    )
    async with runtime_for(provider) as rt:
        result = await rt.run(fl)
    assert result["lead"].status == "ok"
    assert result["kid"].status == "failed" and "'nope' names no tool in the registry" in result["kid"].reason
    told = [m for m in result.branches["lead"].view() if getattr(m, "name", None) == "spawn"]
    assert told and "child node 'kid' failed before it started" in told[0].output


READS_SCENARIO = """
schema = "foldline.scenario/v1"
[provider]
kind = "scripted"
[[nodes]]
id = "a"
instruction = "A."
[[nodes]]
id = "b"
instruction = "B."
[[nodes]]
id = "m"
depends_on = ["a", "b"]
inputs = ["b"]
inherit = "a"
accept_failures = true
instruction = "M."
"""


def test_a_scenario_node_says_what_it_reads_and_the_names_are_checked_at_load() -> None:
    scenario = loads_scenario(READS_SCENARIO, path_label="r.toml", tool_names=BUILTIN_TOOLS.names())
    merged = {n.id: n for n in build_flow(scenario).nodes}["m"]
    assert merged.inputs == ("b",) and merged.inherits_from == "a" and merged.accept_failures is True
    assert merged.reads == ("b",)
    with pytest.raises(ConfigError, match=r'^r.toml: nodes\[2\]\.inputs\[0\]: "c" is not a dependency of this node'):
        loads_scenario(
            READS_SCENARIO.replace('inputs = ["b"]', 'inputs = ["c"]'), path_label="r.toml", tool_names={"spawn"}
        )
    with pytest.raises(ConfigError, match=r'^r.toml: nodes\[2\]\.inherit: "z" is not a dependency of this node'):
        loads_scenario(READS_SCENARIO.replace('inherit = "a"', 'inherit = "z"'), path_label="r.toml", tool_names={"x"})
