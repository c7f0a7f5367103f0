"""The run the report draws, rebuilt from events: requests in order, retries, folds attached to the request
that sent them, trailing folds, rewrites; and a page built from hostile strings stays inert."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from display_support import Page, outside_references

from runtime.display.model import picture_events
from runtime.display.page import run_page
from runtime.display.sources import RunSource, load_source
from runtime.display.svg import axis_ticks, nice_ceiling
from runtime.models.pricing import PricingTable
from runtime.values.canonical import canonical_json
from runtime.values.usage import Usage
from signals.envelope import Event

DIGEST = "a" * 64


class Events:
    def __init__(self) -> None:
        self.items: list[Event] = []

    def add(self, kind: str, node: str | None, data: dict[str, Any], request: str | None = None) -> None:
        seq = len(self.items) + 1
        self.items.append(
            Event.from_json(
                {
                    "schema_version": 1,
                    "type": kind,
                    "id": f"run-t:{seq}",
                    "time": 100.0 + seq,
                    "seq": seq,
                    "run_id": "run-t",
                    "branch_id": "br-1" if node else None,
                    "node_id": node,
                    "request_id": request,
                    "data": data,
                }
            )
        )


def _decision(action: str, estimate: int, ceiling: int = 1000, reason: str = "r") -> dict[str, Any]:
    return {
        "action": action,
        "ceiling": ceiling,
        "ceiling_source": "profile",
        "estimate_after": estimate,
        "estimate_before": estimate,
        "folded_ids": [],
        "method": "m",
        "reason": reason,
        "sent": action != "refuse",
        "stages": [],
        "tier": None,
    }


def _sent(attempt: int) -> dict[str, Any]:
    return {
        "attempt": attempt,
        "bytes": 10,
        "digest": DIGEST,
        "intent": "continuing",
        "marks": [],
        "model": "claude-haiku-5-5",
    }


def _response(read: int, fresh: int, out: int = 5) -> dict[str, Any]:
    usage = {
        "cache_read_input_tokens": read,
        "cache_write_1h_tokens": 0,
        "cache_write_5m_tokens": 0,
        "input_tokens": fresh,
        "output_tokens": out,
    }
    return {"usage": usage, "stop_reason": "tool_use", "duration_s": 0.1, "cache": None}


def _fold(freed: int) -> dict[str, Any]:
    return {
        "stages": ["tool_io"],
        "agent_marks": 0,
        "host_stages": 1,
        "tokens_freed": freed,
        "target_reached": True,
        "estimate_before": 900,
        "estimate_after": 900 - freed,
    }


def a_run(node: str = "a", reason: str = "r") -> Events:
    e = Events()
    e.add("RunStarted", None, {"scenario": "t", "provider": "scripted", "nodes": [node, "never"]})
    e.add("NodeStarted", node, {"operation": "iterative", "parent": None})
    e.add("ContextDecision", node, _decision("pass", 500), "br-1:1")
    e.add("RequestSent", node, _sent(1), "br-1:1")
    e.add("RequestSent", node, _sent(2), "br-1:1")  # a retry: one request, two attempts
    e.add("ResponseReceived", node, _response(0, 520), "br-1:1")
    e.add("FoldCommitted", node, _fold(400))
    e.add("ContextDecision", node, _decision("fold", 500), "br-1:2")
    e.add("RequestSent", node, _sent(1), "br-1:2")
    e.add("ResponseReceived", node, _response(100, 410), "br-1:2")
    e.add(
        "CacheRewrite",
        node,
        {"cause": "fold f-1 (tool_io)", "first_changed_message": 2, "request_digest": DIGEST},
        "br-1:2",
    )
    e.add("ContextDecision", node, _decision("refuse", 1200, reason=reason), "br-1:3")
    e.add("FoldCommitted", node, _fold(100))
    e.add("NodeFailed", node, {"error_type": "InputCeilingExceeded", "message": reason})
    e.add("RunFinished", None, {"status": "failed", "nodes": {node: "failed", "never": "pending"}})
    return e


def test_requests_retries_folds_and_rewrites_land_where_they_happened() -> None:
    run = picture_events(a_run().items, pricing=PricingTable.load_default(), default_model=None)
    node = run.nodes["a"]
    assert [r.request_id for r in node.requests] == ["br-1:1", "br-1:2", "br-1:3"]
    first, second, third = node.requests
    assert first.attempts == 2 and first.usage == Usage(520, 0, 0, 0, 5) and first.cost_bit is not None
    assert first.folds == [] and [f.tokens_freed for f in second.folds] == [400]
    assert second.action == "fold" and second.rewrites[0].cause == "fold f-1 (tool_io)"
    assert third.refused and not third.sent and third.usage is None and third.estimate_after == 1200
    assert [f.tokens_freed for f in node.trailing_folds] == [100]
    assert node.status == "failed" and "InputCeilingExceeded" in (node.reason or "")
    assert run.nodes["never"].requests == [] and run.nodes["never"].status == "pending"
    assert run.status == "failed" and run.events == len(a_run().items)


def test_hostile_strings_are_escaped_and_fetch_nothing(tmp_path: Path) -> None:
    node = '<script src="http://x/a.js"></script>'
    reason = '<img src=http://x/p.png onerror=alert(1)> url(http://x) @import "http://x"'
    path = tmp_path / "s.jsonl"
    path.write_text("".join(canonical_json(e.to_json()) + "\n" for e in a_run(node, reason).items))
    source = load_source(path)
    assert isinstance(source, RunSource) and source.kind == "signals"
    text = run_page(source)
    assert "<script" not in text and "<img" not in text
    assert "&lt;script src=&quot;http://x/a.js&quot;&gt;" in text
    page = Page(text)
    assert [g.attrs["data-node"] for g in page.find("g", "req")] == [node] * 3
    # Only the hostile text mentions url( or @import, and as escaped text, never as markup or style.
    assert "@import" not in "".join(page.styles)
    assert outside_references(text, textual=False) == []
    assert {e.tag for e in page.elements} <= {
        "html",
        "head",
        "meta",
        "title",
        "style",
        "body",
        "header",
        "h1",
        "h2",
        "h3",
        "p",
        "section",
        "div",
        "span",
        "b",
        "ul",
        "li",
        "details",
        "summary",
        "pre",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "code",
        "svg",
        "g",
        "rect",
        "line",
        "path",
        "text",
        "polygon",
    }


def test_axis_tops_are_round_and_cover_the_value() -> None:
    for value in (0.5, 1, 7, 99, 104_000, 16_000, 23_835 * 1.04, 3_140):
        top = nice_ceiling(value)
        ticks = axis_ticks(top)
        assert top >= value and ticks[0] == 0 and abs(ticks[-1] - top) < 1e-9 and 3 <= len(ticks) <= 7


def test_a_fold_mark_tells_its_target_prediction_and_the_previous_cycle_when_the_event_has_them() -> None:
    from runtime.display.requests_chart import fold_text

    e = Events()
    e.add("RunStarted", None, {"scenario": "t", "provider": "scripted", "nodes": ["a"]})
    e.add("NodeStarted", "a", {"operation": "iterative", "parent": None})
    cost_fields = {
        "policy": "cost",
        "target_tokens": 2_000,
        "predicted_bit": 12_345.6,
        "predicted_requests": 4.5,
        "realised_bit": 11_000.0,
        "realised_requests": 5,
    }
    e.add("FoldCommitted", "a", {**_fold(400), **cost_fields})
    e.add("FoldCommitted", "a", _fold(100))  # written before the cost fields existed
    e.add("ContextDecision", "a", _decision("fold", 500), "br-1:1")
    run = picture_events(e.items, pricing=PricingTable.load_default(), default_model=None)
    with_cost, without = run.nodes["a"].requests[0].folds
    assert fold_text(with_cost).endswith(
        "; target 2,000 (cost policy) reached; predicted 12,346 BIT over 4.5 requests; "
        "the previous cycle cost 11,000 BIT over 5 requests"
    )
    assert fold_text(without) == "tool_io: 900 -> 800 tokens, freed 100 (target reached)"


def test_the_dashed_line_is_drawn_where_each_request_says_the_fold_line_was_and_a_missed_target_says_why() -> None:
    from runtime.display.requests_chart import _lines, fold_text

    e = Events()
    e.add("RunStarted", None, {"scenario": "t", "provider": "scripted", "nodes": ["a"]})
    e.add("NodeStarted", "a", {"operation": "iterative", "parent": None})
    for i, line in enumerate((700, 650, None), start=1):
        decision = {**_decision("pass", 400), "fold_line": line, "fold_target": 200 if line else None}
        e.add("ContextDecision", "a", decision, f"br-1:{i}")
    stopped = "stopped over the target 200: the rest is what a fold keeps (task, first round, tail, unanswered calls)"
    e.add(
        "FoldCommitted",
        "a",
        {**_fold(100), "target_reached": False, "target_tokens": 200, "fold_line_tokens": 700, "stopped": stopped},
    )
    e.add("ContextDecision", "a", _decision("fold", 800), "br-1:4")
    run = picture_events(e.items, pricing=PricingTable.load_default(), default_model=None)
    node = run.nodes["a"]
    assert [r.fold_line for r in node.requests] == [700, 650, None, None]
    paths = _lines(node, 10.0, lambda v: v / 10)  # y = value / 10, so the path's heights are the lines
    fold_path = next(p for p in paths if "foldline" in p)
    # 700 and 650 in force at the first two requests; the third names none: the fraction, 0.8 x 1000
    assert 'd="M62 70H72M72 65H82M82 80H92' in fold_path
    assert "in force at each request" in fold_path
    text = fold_text(node.requests[3].folds[0])
    assert text.startswith("tool_io at the fold line 700: 900 -> 800 tokens") and text.endswith(": " + stopped)


def test_the_timeline_has_a_legend_draws_depends_on_and_leaves_the_start_up_out() -> None:
    from runtime.display.timeline import timeline, timeline_legend

    e = Events()
    e.add("RunStarted", None, {"scenario": "t", "provider": "scripted", "nodes": ["a", "b"]})  # t=101
    for _ in range(8):  # start-up: eight seconds of nothing the nodes did
        e.add("RunStarted", None, {"scenario": "t", "provider": "scripted", "nodes": ["a", "b"]})
    e.add("NodeStarted", "a", {"operation": "iterative", "parent": None})  # t=110
    e.add("NodeFinished", "a", {"rounds": 1})  # t=111
    e.add("NodeStarted", "b", {"operation": "bounded", "parent": None})  # t=112
    e.add("NodeFinished", "b", {"rounds": 1})  # t=113
    run = picture_events(
        e.items, pricing=PricingTable.load_default(), default_model=None, depends_on={"b": ("a",), "a": ()}
    )
    assert run.nodes["b"].depends_on == ("a",)
    drawn = timeline(run)
    assert "<title>b depends on a</title>" in drawn and 'class="depends"' in drawn
    assert "the start-up before it, 9.00 s, left out" in drawn
    assert ">0.00s<" in drawn and ">3.00s<" in drawn  # the axis spans the nodes' 3 s, not the run's 12 s
    legend = timeline_legend()
    for text in ("node&#x27;s life", "fold summary request", "tool round", "spawn", "depends_on (waits for)", "▼ fold"):
        assert text in legend
