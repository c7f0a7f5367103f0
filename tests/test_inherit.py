"""A child reads its emitter's cache: the emitter's stable segment stays, the child's setup is an instruction.

The quickstart runs through the CLI against the simulated Anthropic server (the
official SDK over HTTP); its reviewers' first requests are read from what the
lead cached (>= 0.9) by default and not at all with ``inherited_setup = "own"``.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import READER, calls, flow, iterative, node, read, runtime_for, scripted, text

from actors.branch import Branch
from actors.inherit import SETUP_HEADING, inherited_cached_ids, set_up_inherited, setup_ids, setup_text
from runtime.bench.conversations import Conversation, fold_input, measurer_for, run_planner
from runtime.cache import CacheLedger
from runtime.cli import main
from runtime.config import Profile
from runtime.config.loader import loads_scenario
from runtime.errors import ConfigError
from runtime.fold.plan_run import PlanRun
from runtime.fold.planner import FoldPlanner, SummaryResult
from runtime.fold.settings import FoldSettings
from runtime.measuring.measure import TokenCounter
from runtime.request.compiler import RequestSettings, ToolSpec, compile_request
from runtime.values.messages import Instruction, Note, ToolResult
from tests.test_fold_planner import read as planner_read

QUICKSTART = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.toml"
REVIEWERS = ("review-design", "review-tests")


def run_quickstart(tmp_path: Path, text_of_file: str) -> dict:
    path, report = tmp_path / "quickstart.toml", tmp_path / "r.json"
    path.write_text(text_of_file, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    code = main(["run", str(path), "--report", str(report), "--quiet"], out=out, err=err)
    assert code == 0, err.getvalue() + out.getvalue()
    assert "(first request " in out.getvalue()  # the report shows a child's first-request cached share
    return json.loads(report.read_text())


@pytest.mark.slow
def test_the_quickstart_reviewers_read_the_leads_cache_and_the_own_setting_reads_none(tmp_path: Path) -> None:
    shipped = QUICKSTART.read_text(encoding="utf-8")
    report = run_quickstart(tmp_path, shipped)
    for child in REVIEWERS:
        assert report["nodes"][child]["spawned"] is True
        assert report["nodes"][child]["first_request_cached_share"] >= 0.9, report["nodes"][child]
    own = shipped.replace(
        '[profiles.reviewer]\nsystem = "You review design notes for mistakes. Answer in one paragraph."\n',
        '[profiles.reviewer]\nsystem = "You review design notes for mistakes. Answer in one paragraph."\n'
        'inherited_setup = "own"\n',
    )
    assert own != shipped
    old = run_quickstart(tmp_path, own)
    for child in REVIEWERS:
        assert old["nodes"][child]["first_request_cached_share"] == 0.0, old["nodes"][child]
    assert report["cost"]["bit"] < old["cost"]["bit"]


def test_inherited_setup_is_checked_with_its_key_path() -> None:
    with pytest.raises(ConfigError, match=r'profiles\.reviewer\.inherited_setup: "replace" is not one of'):
        Profile.from_obj({"inherited_setup": "replace"}, "profiles.reviewer")
    scenario = QUICKSTART.read_text(encoding="utf-8").replace(
        'tools = ["synthetic_read"]\n', 'tools = ["synthetic_read"]\ninherited_setup = 1\n', 1
    )
    with pytest.raises(
        ConfigError, match=r"quickstart\.toml: profiles\.reviewer\.inherited_setup: 1 is an integer, not one of"
    ):
        loads_scenario(
            scenario, path_label="quickstart.toml", tool_names=("synthetic_read", "synthetic_search", "spawn")
        )


def spec(name: str) -> ToolSpec:
    return ToolSpec(name, f"The {name} tool.", '{"type": "object"}')


@given(
    emitter_tools=st.lists(st.sampled_from("abcdef"), unique=True, max_size=4),
    child_tools=st.lists(st.sampled_from("abcdefg"), unique=True, max_size=4),
    emitter_system=st.one_of(st.none(), st.sampled_from(["E.", "Same."])),
    child_system=st.one_of(st.none(), st.sampled_from(["C.", "Same."])),
)
def test_the_default_keeps_the_emitters_stable_segment_and_says_what_the_child_may_call(
    emitter_tools: list[str], child_tools: list[str], emitter_system: str | None, child_system: str | None
) -> None:
    listed = tuple(spec(n) for n in emitter_tools)
    emitter = Branch.create(system=emitter_system, tools=listed)
    clone = emitter.clone(cache=True)
    profile = Profile(system=child_system, tools=tuple(child_tools))
    set_up_inherited(clone, profile, listed=listed, system=child_system, tools=tuple(spec(n) for n in child_tools))
    assert clone.system is emitter.system
    # The emitter's tools stay first, byte for byte; a tool only the child has comes after them.
    assert clone.tools[: len(listed)] == listed
    settings = RequestSettings(model="claude-haiku-5-5")
    task = (Instruction("Go on."),)
    sent = compile_request(system=emitter.system, tools=emitter.tools, view=task, settings=settings).payload()
    child_sent = compile_request(
        system=clone.system, tools=clone.tools, view=clone.view() + task, settings=settings
    ).payload()
    assert child_sent.get("system") == sent.get("system")
    assert child_sent.get("tools", [])[: len(listed)] == sent.get("tools", [])
    assert [t.name for t in clone.tools[len(listed) :]] == [n for n in child_tools if n not in emitter_tools]
    setup = [m for m in clone.view() if isinstance(m, Instruction)]
    says_system = child_system is not None and child_system != emitter_system
    hidden = set(emitter_tools) - set(child_tools)
    if not says_system and not hidden:
        assert setup == []
        return
    (message,) = setup
    assert message.text.startswith(SETUP_HEADING)
    assert (child_system in message.text) if says_system else True
    if hidden:
        allowed = [n for n in emitter_tools + child_tools if n in child_tools]
        assert f"Tools you may call here: {', '.join(dict.fromkeys(allowed)) or 'none'};" in message.text


def test_the_own_setting_replaces_the_stable_segment_and_the_clone_starts_without_cache() -> None:
    emitter = Branch.create(system="E.", tools=(spec("a"), spec("b")))
    clone = emitter.clone()
    assert clone.ledger is None
    set_up_inherited(
        clone,
        Profile(system="C.", tools=("a",), inherited_setup="own"),
        listed=emitter.tools,
        system="C.",
        tools=(spec("a"),),
    )
    assert clone.system is not None and clone.system.text == "C." and [t.name for t in clone.tools] == ["a"]
    assert clone.view() == ()
    assert setup_text("C.", "C.", ["a"], ["a"]) is None


@pytest.mark.anyio
async def test_a_child_calling_a_tool_it_may_not_gets_an_error_naming_those_it_may() -> None:
    reviewer = READER.evolve(system="You review.", tools=("synthetic_read",))
    provider = scripted(
        {
            "lead": [calls(read("design.md", 3000)), calls(("spawn", {"node": "kid"})), text("lead done")],
            "kid": [calls(("spawn", {"node": "lead"})), text("kid done")],
        }
    )
    fl = flow(
        node("lead", iterative("lead the work")),
        node("kid", iterative("review what you read"), spawned_by="lead", profile=reviewer),
    )
    async with runtime_for(provider) as rt:
        result = await rt.run(fl)
    assert result.status == "ok"
    lead, kid = result.branches["lead"], result.branches["kid"]
    assert kid.tools == lead.tools and kid.system is lead.system
    (error,) = [m for m in kid.view() if isinstance(m, ToolResult) and m.is_error]
    assert error.output == "unknown tool 'spawn'; available: synthetic_read"


@pytest.mark.anyio
async def test_a_fork_takes_the_branchs_cache_ledger_and_a_new_profile_its_setup_as_an_instruction() -> None:
    provider = scripted({"lead": [calls(read("a.md", 2000)), text("read it")]})
    async with runtime_for(provider) as rt:
        lead = rt.branch(READER.evolve(prompt_caching=True), name="lead")
        await lead.run("Read a.md.")
        same = lead.fork()
        other = lead.fork(profile=Profile(system="You check.", tools=("synthetic_read",)))
    assert lead.branch.ledger is not None
    assert same.branch.ledger is lead.branch.ledger and same.branch.system is lead.branch.system
    assert other.branch.ledger is lead.branch.ledger and other.branch.tools == lead.branch.tools
    setup = other.branch.view()[-1]
    assert isinstance(setup, Instruction) and "You check." in setup.text
    assert "Tools you may call here: synthetic_read;" in setup.text


COUNTER = TokenCounter()


def test_a_childs_first_fold_takes_the_newest_inherited_rounds_and_keeps_the_cached_prefix() -> None:
    c = Conversation()
    c.task("Read the six parts.")
    rounds = [c.round([planner_read(f"part-{i}.md", 6000)]) for i in range(6)]
    c.deliver()
    snapshot = c.branch()
    emitter = Branch(
        system=c.system, record=c.record, view=list(c.view), state=snapshot.state, ledger=CacheLedger.empty()
    )
    child = emitter.clone(cache=True)
    assert child.ledger is emitter.ledger
    set_up_inherited(child, Profile(system="You check."), listed=(), system="You check.", tools=())
    inherited = inherited_cached_ids(child)
    assert inherited == frozenset(emitter.view_ids())
    settings = FoldSettings(ceiling=6_000, caching=True)
    child_view = c.view + list(child.view_ids()[len(c.view) :])
    measurer = measurer_for(child, counter=COUNTER)
    state_input = fold_input(child, settings, inherited=inherited, view=tuple(child.view()))
    plan, needs = run_planner(FoldPlanner(state_input, measurer))
    assert needs == [] and plan.stages[0] == "inherited" and plan.target_reached
    kept = plan.view_ids
    # The task and the oldest rounds stay as the emitter sent them; the newest inherited rounds are one note.
    notes = {m.id for m in plan.added if isinstance(m, Note)}
    first_note = next(i for i, mid in enumerate(kept) if mid in notes)
    assert first_note >= 3 and kept[:first_note] == tuple(child_view[:first_note])
    assert rounds[-1][0].id not in kept and rounds[0][0].id in kept
    assert kept[-1] == child_view[-1]  # the setup instruction stays last


def test_no_fold_takes_a_childs_setup_instruction() -> None:
    c = Conversation()
    c.task("Read the parts.")
    for i in range(4):
        c.round([planner_read(f"part-{i}.md", 6000)])
    c.deliver()
    emitter = c.branch()
    child = emitter.clone()
    set_up_inherited(child, Profile(system="You check."), listed=(), system="You check.", tools=())
    (setup,) = setup_ids(child)
    assert isinstance(child.message_at(child.fork_length), Instruction)
    # its own instruction after the setup, then a later round of its own (delivered), folded under a small ceiling
    own = Conversation(system=c.system, record=child._record, view=list(child.view_ids()), calls=100)
    own.delivered = set(child.view_ids())
    own.task("Check the parts.")
    own.round([planner_read("extra.md", 6000)])
    own.deliver()
    branch = own.branch()
    settings = FoldSettings(ceiling=2_000, caching=True)
    planner = FoldPlanner(
        fold_input(branch, settings, protected=setup_ids(child)), measurer_for(branch, counter=COUNTER)
    )
    summary = SummaryResult(text="The parts were read.")
    plan, _ = run_planner(planner, lambda need: summary)
    assert plan.stages and setup in plan.view_ids
    # Every pass skips what PlanRun.never names; with the setup protected it is named, without it is not.
    for protected, named in ((setup_ids(child), True), (frozenset(), False)):
        run = PlanRun(fold_input(branch, settings, protected=protected), measurer_for(branch, counter=COUNTER))
        units = run.units()
        (at,) = [i for i, unit in enumerate(units) if setup in unit.ids]
        assert (at in run.never(units)) is named
