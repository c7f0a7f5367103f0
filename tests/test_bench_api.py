"""Anthropic's context management as bench strategies: edits sent, bytes lost, probes re-run (issue 31 item 5)."""

from __future__ import annotations

import pytest

from runtime.bench import workloads
from runtime.bench.harness import run_workload_set, strategies_named
from runtime.bench.server_view import ServerView
from runtime.bench.strategies import (
    API_COMPACTION,
    CLEAR_VARIANTS,
    STRATEGIES,
    ServerEdit,
    Strategy,
    StrategyNotBuilt,
    profile_ceiling,
)
from runtime.bench.table import evaluate_targets
from runtime.sim.context_edits import CLEARED_RESULT
from runtime.values.server_edits import CLEAR_TOOL_USES, COMPACT


def test_edits_resolve_against_the_profiles_ceiling() -> None:
    edit = ServerEdit(CLEAR_TOOL_USES, trigger=1.0, keep=1, clear_at_least=0.25)
    assert edit.resolve(20_000) == {
        "type": CLEAR_TOOL_USES,
        "trigger": {"type": "input_tokens", "value": 20_000},
        "keep": {"type": "tool_uses", "value": 1},
        "clear_at_least": {"type": "input_tokens", "value": 5_000},
    }
    # no numeric ceiling: the share is left out, so the API's default applies
    assert edit.resolve(None) == {"type": CLEAR_TOOL_USES, "keep": {"type": "tool_uses", "value": 1}}
    # the defaults strategy sends the bare edit: the API's documented defaults
    assert ServerEdit(CLEAR_TOOL_USES).resolve(20_000) == {"type": CLEAR_TOOL_USES}
    # compaction's trigger is never below the API's minimum
    assert ServerEdit(COMPACT, trigger=1.0, floor=50_000).resolve(20_000)["trigger"]["value"] == 50_000


def test_each_api_strategy_sends_its_edits_and_nothing_of_foldlines_own() -> None:
    scenario = workloads.build("reading-20k", workloads.SMALL)
    ceiling = profile_ceiling(scenario, "default")
    assert isinstance(ceiling, int)
    applied = STRATEGIES["api-clear-tool-uses/ceiling-keep1"].apply(scenario).profiles["default"]
    assert applied.prompt_caching and not applied.context_management and applied.max_input_tokens == "none"
    assert applied.server_context_edits is not None
    assert f'"value":{ceiling}' in applied.server_context_edits and '"keep"' in applied.server_context_edits
    assert len(CLEAR_VARIANTS) == 6


def test_compaction_is_sent_at_its_default_and_at_the_ceiling_never_below_the_minimum() -> None:
    scenario = workloads.build("reading-20k", workloads.SMALL)
    default = STRATEGIES[API_COMPACTION].apply(scenario).profiles["default"].server_context_edits
    assert default == '[{"type":"compact_20260112"}]'
    at_ceiling = STRATEGIES[f"{API_COMPACTION}/ceiling"].apply(scenario).profiles["default"].server_context_edits
    assert at_ceiling == '[{"trigger":{"type":"input_tokens","value":50000},"type":"compact_20260112"}]'


def test_a_strategy_this_build_cannot_run_says_so() -> None:
    missing = Strategy("later", "not here", {"prompt_caching": True}, not_built="its server feature is not simulated")
    with pytest.raises(StrategyNotBuilt, match=r"strategy 'later' is not built yet: its server feature"):
        missing.apply(workloads.build("fits", workloads.SMALL))


def test_the_server_view_counts_a_cleared_or_dropped_result_once() -> None:
    def request(*results: tuple[str, str]) -> dict[str, object]:
        blocks = [{"type": "tool_result", "tool_use_id": i, "content": text} for i, text in results]
        return {"messages": [{"role": "user", "content": "task"}, {"role": "user", "content": blocks}]}

    view = ServerView()
    view.see("n", request(("a", "one"), ("b", "two")))
    assert view.cleared == set()
    view.see("n", request(("a", CLEARED_RESULT), ("b", "two"), ("c", "three")))
    view.see("n", request(("a", CLEARED_RESULT), ("c", "three")))  # b dropped, as a compaction would
    view.see("other", request(("c", "three")))  # another node never saw a or b
    assert view.cleared == {"a", "b"}
    assert view.bytes_lost({"a": 100, "b": 20, "c": 7}) == 120


@pytest.mark.anyio
async def test_clearing_at_the_ceiling_loses_bytes_and_probes_need_a_rerun() -> None:
    scenario = workloads.build("reading-20k", workloads.SMALL)
    names = ["naive", "foldline", "api-clear-tool-uses", "api-clear-tool-uses/ceiling", API_COMPACTION]
    result = await run_workload_set(scenario, strategies_named(names), provider_kind="scripted")
    assert API_COMPACTION in result.runs and not result.not_run
    ours, defaults, cleared = (
        result.runs[n] for n in ("foldline", "api-clear-tool-uses", "api-clear-tool-uses/ceiling")
    )
    # the small workload never reaches the default 100,000-token trigger: nothing is cleared
    assert defaults.bytes_lost == 0 and defaults.probes.without_rerun == 1.0
    # at the ceiling results are cleared: their bytes are lost and each probe of a cleared fact is a re-run
    assert cleared.bytes_cleared_by_server > 0 and cleared.bytes_lost == cleared.bytes_cleared_by_server
    assert cleared.probes.rerun > 0 and cleared.probes.wrong == 0
    assert cleared.probes.without_rerun is not None and cleared.probes.without_rerun < 1
    assert ours.bytes_lost == 0 and ours.probes.without_rerun == 1.0
    targets = {t.name: t for t in evaluate_targets([result])}
    api = targets["reading-20k: foldline cheaper than every api-clear-tool-uses variant, 0 bytes lost"]
    assert "api-clear-tool-uses/ceiling " in api.detail and f"{cleared.bytes_lost:,} B lost" in api.detail
    assert api.met is (None if ours.cost_bit < min(defaults.cost_bit, cleared.cost_bit) else False)
    compaction = targets["reading-20k: foldline cheaper than every api-compaction variant, 0 bytes lost"]
    assert "api-compaction/ceiling not run" in compaction.detail
    assert compaction.met is (None if ours.cost_bit < result.runs[API_COMPACTION].cost_bit else False)
    recall = targets["recall probes answered without re-running a tool: foldline 100% on every workload"]
    assert recall.met is True
    assert f"api-clear-tool-uses/ceiling {100 * cleared.probes.without_rerun:.0f}%" in recall.detail


def test_after_a_compaction_the_reader_sees_only_the_summary_on_and_reruns_the_call() -> None:
    from runtime.bench.facts import fact_line
    from runtime.bench.reader import ReaderPolicy
    from runtime.scripted.policies import ScriptCall, ScriptStep

    steps = (
        ScriptStep(text="read"),
        ScriptStep(tool_calls=(ScriptCall("answer", '{"value":{"recall":"F1"}}'),)),
    )
    view = ServerView()
    tap = view.tap(ReaderPolicy("n", steps))
    history = [
        {"role": "user", "content": [{"type": "text", "text": "task"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c1", "name": "read_doc", "input": {"facts": ["F1"]}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": fact_line("F1")}]},
    ]
    assert tap.respond({"messages": history}).stop_reason == "end_turn"  # step 0, F1 in view
    summary = {"type": "compaction", "content": "the user asked for a document; it was read", "encrypted_content": None}
    later = [*history, {"role": "assistant", "content": [summary, {"type": "text", "text": "read"}]}]
    later.append({"role": "user", "content": [{"type": "text", "text": "go on"}]})
    reply = tap.respond({"messages": later})
    # the model reads from the compaction block on: F1 is gone, so it runs read_doc again
    (call,) = [b for b in reply.content if b["type"] == "tool_use"]
    assert (call["name"], call["input"]) == ("read_doc", {"facts": ["F1"]})
    assert view.cleared == {"c1"}


@pytest.mark.anyio
async def test_the_chat_completions_face_does_not_run_the_api_strategies() -> None:
    pytest.importorskip("openai")
    scenario = workloads.build("reading-20k", workloads.SMALL)
    result = await run_workload_set(
        scenario, strategies_named(["naive", "api-clear-tool-uses"]), provider_kind="openai"
    )
    assert "api-clear-tool-uses" not in result.runs
    assert "server-side context management is not on the openai face" in result.not_run["api-clear-tool-uses"]
