"""Folding on the send path: the engine runs the planner, sends summaries, lands commits, publishes."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import pytest
from support import ProviderWrapper, calls, iterative, node, read, runtime_for, text

from actors.branch import Branch, RequestRecord
from actors.operations import Operation, run_operation
from runtime.config import Profile
from runtime.contract.provider import AttemptFailed
from runtime.errors import InputCeilingExceeded
from runtime.flows.flow import Flow
from runtime.fold.audit import unrecoverable_bytes
from runtime.fold.formats import parse_clip_marker
from runtime.providers.scripted import ScriptedProvider
from runtime.scripted.policies import PolicyRegistry, ScriptPolicy, ScriptStep
from runtime.sim.clock import ManualClock
from runtime.sim.summary_policy import FoldSummaryPolicy
from runtime.values.messages import Instruction, Note, ToolResult
from tests.pairing import check_pairing
from tests.payload_rewrites import first_divergence

SYSTEM = "You read files one at a time and report what they say. " * 4
FOLDING = Profile(
    system=SYSTEM,
    tools=("synthetic_read", "spawn"),
    max_input_tokens=20_000,
    context_management=True,
    fold_policy="fixed",  # these tests pin the fixed fractions' line and target; the cost policy has its own
)


@attrs.define(eq=False)
class Capture(ProviderWrapper):
    """A provider wrapper keeping every payload, with the node it named."""

    inner: ScriptedProvider
    sent: list[tuple[str | None, dict[str, Any]]] = attrs.field(factory=list)

    async def send(self, request, *, node_id):
        self.sent.append((node_id, request.payload()))
        return await self.inner.send(request, node_id=node_id)

    def main(self) -> list[dict[str, Any]]:
        return [p for n, p in self.sent if n is not None]

    def side(self) -> list[dict[str, Any]]:
        return [p for n, p in self.sent if n is None]


@attrs.define(eq=False)
class Journal:
    """A BranchJournal that keeps every batch."""

    batches: list[tuple[str, tuple]] = attrs.field(factory=list)

    def branch_created(self, branch: Branch) -> None:
        pass

    def changed(self, branch: Branch, changes: Sequence[Any]) -> None:
        self.batches.append((branch.id, tuple(changes)))

    def requests(self) -> list[RequestRecord]:
        return [c for _, batch in self.batches for c in batch if isinstance(c, RequestRecord)]


def provider(scripts: Mapping[str, Sequence[ScriptStep]], *, summaries: bool = True) -> Capture:
    registry = PolicyRegistry(
        {node_id: ScriptPolicy(node_id, steps) for node_id, steps in scripts.items()},
        default=FoldSummaryPolicy() if summaries else None,
    )
    return Capture(ScriptedProvider(registry, clock=ManualClock(1_000.0)))


async def run(capture: Capture, *nodes, journal: Journal | None = None):
    events: list = []
    async with runtime_for(capture, journal=journal) as rt:  # type: ignore[arg-type]
        rt.signals.add_handler(events.append, name="test")
        result = await rt.run(Flow(list(nodes)))
        report = rt.report()
    return result, events, report


def of(events, kind: str, node_id: str | None = None) -> list:
    return [e for e in events if e.type == kind and (node_id is None or e.node_id == node_id)]


def reading(n: int, size: int = 5000) -> list[ScriptStep]:
    return [calls(read(f"src/m{i:02d}.py", size)) for i in range(n)] + [text("done")]


@pytest.mark.anyio
async def test_a_long_reading_run_folds_at_the_line_and_every_request_stays_under_the_ceiling() -> None:
    capture = provider({"n": reading(30)})
    result, events, report = await run(capture, node("n", iterative("read", max_rounds=40), profile=FOLDING))
    assert result.status == "ok", result["n"].reason
    decisions = of(events, "ContextDecision")
    assert all(d.data["estimate_after"] <= 20_000 for d in decisions if d.data["sent"])
    folds = [d.data for d in decisions if d.data["action"] == "fold"]
    assert folds, "a 30-read run under 20,000 tokens must fold"
    for d in folds:
        assert d["estimate_before"] >= 16_000 and d["estimate_after"] <= 12_000
        assert "tool_io" in d["stages"] and d["folded_ids"] and d["sent"]
    commits = of(events, "FoldCommitted")
    assert len(commits) == len(folds)
    assert all(c.data["host_stages"] >= 1 and c.data["target_reached"] for c in commits)
    rewrites = of(events, "CacheRewrite")
    assert rewrites and all(r.data["cause"] and r.data["cause"].startswith("fold f-") for r in rewrites)
    assert report["folds"] == len(folds) and report["fold_commits"] == len(commits)
    assert report["tokens_freed"] == sum(c.data["tokens_freed"] for c in commits)
    assert report["bytes_unrecoverable"] == 0 and report["rewrites"]["unexplained"] == 0
    for payload in capture.main():
        check_pairing(payload)
        assert payload["tools"][-1]["name"] == "context"
    assert capture.side() == []  # tool_io sufficed: no summary request
    assert unrecoverable_bytes(result.branches["n"]) == 0


@pytest.mark.anyio
async def test_a_100045_character_result_is_clipped_before_the_next_request_with_its_marker() -> None:
    script = [
        calls(read("README.md", 2000)),
        calls(("synthetic_read", {"path": "dump.txt", "size": 100_045})),
        text("ok"),
    ]
    capture = provider({"n": script})
    result, events, _ = await run(
        capture, node("n", iterative("read"), profile=FOLDING.evolve(max_input_tokens=30_000))
    )
    assert result.status == "ok", result["n"].reason
    fold = next(d.data for d in of(events, "ContextDecision") if d.data["action"] == "fold")
    assert "clip" in fold["stages"] and fold["estimate_after"] <= 18_000
    assert capture.side() == []
    last = capture.main()[-1]
    (block,) = [
        b for m in last["messages"] for b in m["content"] if b.get("type") == "tool_result" and len(b["content"]) > 5000
    ]
    (marker,) = parse_clip_marker(block["content"])
    branch = result.branches["n"]
    original = branch.message_at(marker.index)
    assert isinstance(original, ToolResult) and len(original.output) == 100_045  # unchanged in the record
    assert '"action":"read_result"' in block["content"]


@pytest.mark.anyio
async def test_without_a_context_tool_there_is_no_fold_only_the_refusal() -> None:
    capture = provider({"n": reading(30)})
    profile = FOLDING.evolve(context_management=False)
    result, events, _ = await run(capture, node("n", iterative("read", max_rounds=40), profile=profile))
    assert result["n"].status == "failed" and isinstance(result["n"].error, InputCeilingExceeded)
    assert of(events, "FoldCommitted") == []
    assert of(events, "ContextDecision")[-1].data["action"] == "refuse"
    assert all(p["tools"][-1]["name"] != "context" for p in capture.main())


@pytest.mark.anyio
async def test_a_bounded_operation_is_refused_never_folded() -> None:
    branch = Branch.create(system=SYSTEM)
    async with branch.turn() as turn:
        turn.append(Instruction("brief " * 30_000))
    capture = provider({"n": [text("never")]})
    result, events, _ = await run(capture, node("n", Operation("bounded", ("review",)), profile=FOLDING, branch=branch))
    assert result["n"].status == "failed" and isinstance(result["n"].error, InputCeilingExceeded)
    assert of(events, "FoldCommitted") == [] and capture.sent == []


@pytest.mark.anyio
async def test_a_refusal_the_fold_cannot_clear_fails_the_turn_with_the_refusal() -> None:
    # One round of sixty small results no clip may cut: the newest round alone is over the ceiling.
    # (max_tokens leaves room for the sixty calls: the simulator truncates a reply at max_tokens, as the API does.)
    many = calls(*[read(f"small/{i}.txt", 1000) for i in range(60)])
    capture = provider({"n": [calls(read("a.md", 3000)), many, text("never")]})
    profile = FOLDING.evolve(max_input_tokens=12_000, max_tokens=4096)
    result, events, _ = await run(capture, node("n", iterative("read"), profile=profile))
    error = result["n"].error
    assert result["n"].status == "failed" and isinstance(error, InputCeilingExceeded)
    refused = of(events, "ContextDecision")[-1].data
    assert refused["action"] == "refuse" and refused["sent"] is False
    assert refused["estimate_after"] > 12_000 and refused["estimate_before"] >= refused["estimate_after"]
    assert result.branches["n"].refusal is error
    assert len(capture.main()) == 2  # the refused request was never sent


@pytest.mark.anyio
async def test_a_child_folds_its_own_copy_and_the_emitter_is_unchanged() -> None:
    lead_script = [calls(read(f"design/part-{i}.md", 9000)) for i in range(6)]
    lead_script += [calls(("spawn", {"node": "child"})), text("spawned")]
    capture = provider({"lead": lead_script, "child": [text("digest written")]})
    lead_profile = FOLDING.evolve(max_input_tokens=100_000, context_management=False)
    child_profile = FOLDING.evolve(max_input_tokens=12_000, tools=("synthetic_read",))
    lead = node("lead", iterative("read then spawn"), profile=lead_profile)
    child = node("child", iterative("digest it"), profile=child_profile, spawned_by="lead")
    result, events, _ = await run(capture, lead, child)
    assert result.status == "ok", {k: v.reason for k, v in result.outcomes.items()}
    (commit,) = of(events, "FoldCommitted")
    assert commit.node_id == "child" and commit.branch_id == result.branches["child"].id
    emitter, clone = result.branches["lead"], result.branches["child"]
    assert not any(isinstance(m, Note) for m in emitter.view())
    assert any(isinstance(m, Note) for m in clone.view())
    assert all(isinstance(emitter.message_at(i), type(emitter.message_at(i))) for i in range(emitter.record_length()))
    child_decision = next(d.data for d in of(events, "ContextDecision", "child"))
    assert child_decision["action"] == "fold" and child_decision["estimate_after"] <= 12_000


def _answers_then_reads(n_answers: int) -> list[ScriptStep]:
    return [text(f"Answer {i}: " + "the part says the retry policy is exponential. " * 60) for i in range(n_answers)]


async def _history_then_big_round(capture: Capture, journal: Journal | None = None):
    """Several short operations, then one whose single round returns many small results."""
    branch = Branch.create(system=SYSTEM)
    async with runtime_for(capture, journal=journal) as rt:  # type: ignore[arg-type]
        events: list = []
        rt.signals.add_handler(events.append, name="test")
        env = rt.env()
        profile = FOLDING.evolve(max_input_tokens=6_000, context_fold_target=0.5)
        if journal is not None:
            branch.attach_journal(journal)
        for i in range(4):
            await run_operation(
                branch, Operation("iterative", (f"Question {i}?",)), env=env, profile=profile, node_id="n"
            )
        outcome = await run_operation(
            branch, iterative("Now read the small files."), env=env, profile=profile, node_id="n"
        )
    return branch, events, outcome


def _big_round_script() -> list[ScriptStep]:
    return _answers_then_reads(4) + [calls(*[read(f"small/{i}.txt", 900) for i in range(36)]), text("read them")]


@pytest.mark.anyio
async def test_the_all_stage_sends_one_side_request_carrying_only_the_span_and_records_its_cost() -> None:
    capture = provider({"n": _big_round_script()})
    journal = Journal()
    branch, events, outcome = await _history_then_big_round(capture, journal)
    assert outcome.answer == "read them"
    (side,) = capture.side()
    assert "system" not in side and "tools" not in side
    assert [m["role"] for m in side["messages"]] == ["user"]
    prompt = side["messages"][0]["content"][0]["text"]
    assert prompt.startswith("You summarize a span")
    assert "Answer 0" in prompt and SYSTEM not in prompt and "small/0.txt" not in prompt
    sent = [e for e in of(events, "RequestSent") if e.data["intent"] == "side"]
    assert len(sent) == 1
    (received,) = [e for e in of(events, "ResponseReceived") if e.request_id == sent[0].request_id]
    assert received.data["usage"]["input_tokens"] + received.data["usage"]["cache_read_input_tokens"] > 0
    side_records = [r for r in journal.requests() if r.intent == "side"]
    assert len(side_records) == 1 and side_records[0].node_id is None and side_records[0].usage
    (prompt_id,) = side_records[0].view_ids
    assert branch.message_at(branch.index_of(prompt_id)).text == prompt  # replayable from the record
    assert prompt_id not in branch.view_ids() and side_records[0].system_id is None
    note = next(m for m in branch.view() if isinstance(m, Note) and m.stage == "all")
    assert note.text.split("\n")[1] == "Summary:"
    fold = next(d.data for d in of(events, "ContextDecision") if d.data["action"] == "fold")
    assert "all" in fold["stages"]
    # The commit landed as one batch: its note, then the view.
    batch = next(b for _, b in journal.batches if any(getattr(c, "message", None) is note for c in b))
    kinds = [type(c).__name__ for c in batch]
    assert kinds.index("MessageAdded") < kinds.index("ViewSet") < kinds.index("StateSet")


@pytest.mark.anyio
async def test_a_failed_summary_request_leaves_the_note_with_its_call_lists() -> None:
    capture = provider({"n": _big_round_script()}, summaries=False)  # no policy answers a side request
    branch, events, outcome = await _history_then_big_round(capture)
    assert outcome.answer == "read them"
    assert len(capture.side()) == 1
    note = next(m for m in branch.view() if isinstance(m, Note) and m.stage == "all")
    assert "No summary: the summary request failed" in note.text and "Folded calls" in note.text
    (side,) = [e for e in of(events, "RequestSent") if e.data["intent"] == "side"]
    assert not [e for e in of(events, "ResponseReceived") if e.request_id == side.request_id]
    fold = next(d.data for d in of(events, "ContextDecision") if d.data["action"] == "fold")
    assert "all" in fold["stages"]


@pytest.mark.anyio
async def test_with_caching_the_first_round_is_protected_anchored_and_the_stable_segment_unchanged() -> None:
    capture = provider({"n": reading(30)})
    profile = FOLDING.evolve(prompt_caching=True)
    journal = Journal()
    result, events, report = await run(
        capture, node("n", iterative("read", max_rounds=40), profile=profile), journal=journal
    )
    assert result.status == "ok", result["n"].reason
    branch = result.branches["n"]
    decision = branch.state.protected_round
    assert decision is not None and decision.included and decision.decided_by.endswith(":2")
    assert decision.size * 10 <= decision.ceiling
    members = set(decision.member_ids)
    assert members <= set(branch.view_ids())  # never folded
    assert branch.clone().state.protected_round == decision
    main = capture.main()
    folded_at = [i for i, p in enumerate(main) if i and first_divergence(main[i - 1], p) is not None]
    assert folded_at
    for i in folded_at:
        before, after = main[i - 1], main[i]
        assert before["tools"] == after["tools"] and before["system"] == after["system"]
        assert after["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
        roles = [
            m["role"]
            for m in next(e for e in of(events, "RequestSent") if e.data["digest"] == _digest(after)).data["marks"]
        ]
        assert roles.count("anchor") == 2  # the end of the first round and the newest note
    assert report["rewrites"]["unexplained"] == 0
    skipped = [r for r in journal.requests() if r.prompt_cache and "tail_skip" in r.prompt_cache]
    assert skipped, "a request just under the fold line skips its turn mark"
    for record in skipped:
        assert all(role != "turn" for _, _, role in record.marks)
        gap = record.prompt_cache["tail_skip"]["fold_line"] - record.prompt_cache["tail_skip"]["estimate"]
        assert 0 < gap <= 0.045 * 20_000


def _digest(payload: dict) -> str:
    from runtime.values.canonical import canonical_json, sha256_hex

    return sha256_hex(canonical_json(payload))


@pytest.mark.anyio
async def test_pending_marks_move_no_byte_and_land_at_the_next_commit() -> None:
    script = reading(4)[:-1] + [calls(("context", {"action": "fold", "start": 2, "end": 5}))] + reading(30)
    capture = provider({"n": script})
    result, events, _ = await run(capture, node("n", iterative("read", max_rounds=40), profile=FOLDING))
    assert result.status == "ok", result["n"].reason
    main = capture.main()
    commits = of(events, "FoldCommitted")
    first_commit_request = next(i for i, p in enumerate(main) if i and first_divergence(main[i - 1], p) is not None)
    for before, after in zip(main[: first_commit_request - 1], main[1:first_commit_request], strict=True):
        assert first_divergence(before, after) is None  # the mark moved nothing
    assert commits[0].data["agent_marks"] == 1 and "marks" in commits[0].data["stages"]
    assert result.branches["n"].state.pending_marks == ()
    answer = next(
        m for m in result.branches["n"].record_messages() if isinstance(m, ToolResult) and m.name == "context"
    )
    assert answer.output.startswith("fold mark recorded: #2-#5")


@pytest.mark.anyio
async def test_immediate_scheduling_commits_each_fold_once_the_line_was_reached() -> None:
    capture = provider({"n": reading(12)})
    immediate = FOLDING.evolve(fold_scheduling="immediate")
    result, events, _ = await run(capture, node("n", iterative("read"), profile=immediate))
    assert result.status == "ok", result["n"].reason
    commits = of(events, "FoldCommitted")
    assert commits and commits[0].data["estimate_before"] >= 16_000  # nothing folds before the fold line
    later = commits[1:]
    assert later and any(c.data["estimate_before"] < 16_000 for c in later)  # then every eligible unit, at once
    assert all(c.data["stages"] == ("tool_io",) for c in later)
    epoch_result, epoch_events, _ = await run(
        provider({"n": reading(12)}), node("n", iterative("read"), profile=FOLDING)
    )
    assert epoch_result.status == "ok"
    assert len(commits) > len(of(epoch_events, "FoldCommitted"))


@pytest.mark.anyio
async def test_the_compaction_baseline_offers_no_context_tool_and_its_drops_are_unrecoverable() -> None:
    capture = provider({"n": reading(30)})
    profile = FOLDING.evolve(context_strategy="compaction")
    result, events, report = await run(capture, node("n", iterative("read", max_rounds=40), profile=profile))
    assert result.status == "ok", result["n"].reason
    assert all(t["name"] != "context" for p in capture.main() for t in p["tools"])
    assert capture.side(), "compaction summarizes with a side request"
    commits = of(events, "FoldCommitted")
    assert commits and all(c.data["stages"] == ("compaction",) for c in commits)
    branch = result.branches["n"]
    view = branch.view()
    assert isinstance(view[0], Instruction) and isinstance(view[1], Note) and view[1].stage == "compaction"
    assert unrecoverable_bytes(branch) > 0


@pytest.mark.anyio
async def test_the_model_reads_and_restores_through_its_context_tool() -> None:
    steps = reading(14)[:-1]
    steps += [calls(("context", {"action": "read_result", "index": 3, "offset": 10, "limit": 200}))]
    steps += [calls(("context", {"action": "restore", "index": 3}))]
    steps += [calls(("context", {"action": "status"}))]
    steps += [calls(("context", {"action": "explode"}))]
    steps += [text("done")]
    capture = provider({"n": steps})
    result, events, _ = await run(capture, node("n", iterative("read", max_rounds=30), profile=FOLDING))
    assert result.status == "ok", result["n"].reason
    branch = result.branches["n"]
    answers = [m for m in branch.record_messages() if isinstance(m, ToolResult) and m.name == "context"]
    read_answer, restore_answer, status_answer, bad = answers
    first_read = branch.message_at(3)
    assert read_answer.output.split("\n", 1)[1] == first_read.output[10:210]
    assert restore_answer.output.startswith("restored #3") and first_read.id in branch.view_ids()
    rewrite = [r.data["cause"] for r in of(events, "CacheRewrite")]
    assert any(cause and cause.startswith("restore #3") for cause in rewrite)
    assert status_answer.output.startswith("context status:") and len(status_answer.output) <= 1500
    assert bad.is_error and "explode" in bad.output and "status, read_result, restore, fold" in bad.output


@pytest.mark.anyio
async def test_a_restore_the_ceiling_cannot_admit_is_refused_naming_read_result() -> None:
    steps = [calls(read("huge.md", 70_000))] + reading(10)[:-1]
    steps += [calls(("context", {"action": "restore", "index": 3})), text("done")]
    capture = provider({"n": steps})
    result, _, _ = await run(capture, node("n", iterative("read", max_rounds=30), profile=FOLDING))
    assert result.status == "ok", result["n"].reason
    branch = result.branches["n"]
    answer = [m for m in branch.record_messages() if isinstance(m, ToolResult) and m.name == "context"][-1]
    assert answer.output.startswith("restore of #3 refused") and '"action":"read_result","index":3' in answer.output
    assert branch.message_at(3).id not in branch.view_ids()
    json.dumps(answer.output)  # a plain text answer


@pytest.mark.anyio
async def test_the_result_bound_projects_every_result_to_the_same_bytes_on_every_request() -> None:
    steps = [calls(read(f"docs/{i}.md", 9000)) for i in range(5)]
    steps += [calls(("context", {"action": "read_result", "index": 3, "offset": 2000, "limit": 16000})), text("done")]
    capture = provider({"n": steps})
    journal = Journal()
    profile = FOLDING.evolve(max_input_tokens=100_000, tool_result_max_chars=4000)
    result, _, _ = await run(capture, node("n", iterative("read"), profile=profile), journal=journal)
    assert result.status == "ok", result["n"].reason
    seen: dict[str, str] = {}
    for payload in capture.main():
        for message in payload["messages"]:
            for block in message["content"]:
                if block.get("type") != "tool_result":
                    continue
                assert len(block["content"]) <= 4000
                assert seen.setdefault(block["tool_use_id"], block["content"]) == block["content"]
    branch = result.branches["n"]
    first = branch.message_at(3)
    assert isinstance(first, ToolResult) and len(first.output) == 9000  # the stored original is whole
    (marker,) = parse_clip_marker(seen[first.call_id])
    assert marker.index == 3 and marker.limit <= 4000
    answer = [m for m in branch.record_messages() if isinstance(m, ToolResult) and m.name == "context"][0]
    assert len(answer.output) <= 4000 and seen[answer.call_id] == answer.output  # reaches the request whole
    body = answer.output.split("\n", 1)[1]
    assert body == first.output[2000 : 2000 + len(body)] and len(body) > 3000
    assert {r.result_bound for r in journal.requests()} == {4000}


@attrs.define(eq=False)
class FlakySide(Capture):
    """Fails the first attempt of every side request with a retryable 529."""

    max_retries: int = 2  # type: ignore[misc]
    side_calls: int = 0

    async def send(self, request, *, node_id):
        if node_id is None:
            self.side_calls += 1
            if self.side_calls == 1:
                raise AttemptFailed(
                    "HTTP 529 overloaded_error: busy",
                    status=529,
                    error_type="overloaded_error",
                    headers={"retry-after-ms": "1"},
                )
        return await super().send(request, node_id=node_id)


@pytest.mark.anyio
async def test_a_summary_request_is_retried_by_the_pipeline_and_every_attempt_is_decided() -> None:
    inner = provider({"n": _big_round_script()}).inner
    capture = FlakySide(inner)
    branch, events, outcome = await _history_then_big_round(capture)
    assert outcome.answer == "read them" and capture.side_calls == 2
    sent = [e for e in of(events, "RequestSent") if e.data["intent"] == "side"]
    assert [e.data["attempt"] for e in sent] == [1, 2] and sent[0].request_id == sent[1].request_id
    decisions = [e.data for e in of(events, "ContextDecision") if e.request_id == sent[0].request_id]
    assert len(decisions) == 2 and all(
        d["sent"] and d["reason"].startswith("fold summary request: ") for d in decisions
    )
    note = next(m for m in branch.view() if isinstance(m, Note) and m.stage == "all")
    assert note.text.split("\n")[1] == "Summary:"
