"""The report page: one HTML file with its CSS and SVG inline, nothing fetched from anywhere.

:func:`run_page` draws a run (from a store or a signals file), :func:`bench_page`
a bench output, :func:`branches_page` one or more branches (``foldline inspect
--html``). The page prints: each node and branch keeps together on paper and
the collapsed tables stay out of the printout.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from runtime.display.bench_view import bench_body
from runtime.display.branch_view import branch_section
from runtime.display.model import NodePicture, RunPicture, picture_events
from runtime.display.requests_chart import legend, node_chart, node_notes, request_table
from runtime.display.sources import BranchFacts, RunSource
from runtime.display.svg import el, esc
from runtime.display.timeline import timeline, timeline_legend
from runtime.report import format_report

CSS = """
:root { --read:#4c78a8; --w5:#f2a541; --w1:#c65f1c; --fresh:#9aa5b1; --ceiling:#c62828; --fold:#2e7d32;
  --notice:#b7791f; --rewrite:#7b3fa0; --ink:#1f2933; --quiet:#616e7c; --line:#d9dee4; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  color: var(--ink); margin: 0 auto; max-width: 1000px; padding: 18px 20px 40px; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 26px 0 6px; border-bottom: 1px solid var(--line); }
h3 { font-size: 15px; margin: 18px 0 4px; }
.quiet, .empty { color: var(--quiet); } code { font: 12px ui-monospace, Menlo, Consolas, monospace; }
svg.chart { width: 100%; height: auto; display: block; margin: 6px 0; }
svg text { font: 11px system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; fill: var(--ink); }
svg .axis { fill: var(--quiet); font-size: 10px; } svg .grid { stroke: #eef1f4; stroke-width: 1; }
.seg.read { fill: var(--read); } .seg.write-5m { fill: var(--w5); } .seg.write-1h { fill: var(--w1); }
.seg.fresh { fill: var(--fresh); }
.refused-outline { fill: #fdecea; stroke: var(--ceiling); stroke-width: 1.2; stroke-dasharray: 3 2; }
.estimate { stroke: var(--ink); stroke-width: 1.4; }
path.ceiling { stroke: var(--ceiling); stroke-width: 1.6; fill: none; }
path.foldline { stroke: var(--fold); stroke-width: 1.3; stroke-dasharray: 5 3; fill: none; }
.mark text { font-size: 11px; } .mark-fold text { fill: var(--fold); } .mark-notice text { fill: var(--notice); }
.mark-refuse text { fill: var(--ceiling); font-weight: 700; } .mark-rewrite text { fill: var(--rewrite); }
.legend { display: flex; flex-wrap: wrap; gap: 6px 14px; font-size: 12px; color: var(--quiet); margin: 2px 0 6px; }
.key::before { content: ""; display: inline-block; width: 11px; height: 11px; margin-right: 4px; vertical-align: -1px;
  background: var(--sw, #ccc); }
.key.read { --sw: var(--read); } .key.write-5m { --sw: var(--w5); } .key.write-1h { --sw: var(--w1); }
.key.fresh { --sw: var(--fresh); } .key.output { --sw: #6b7785; } .key.estimate-key { --sw: var(--ink); } .key.estimate-key::before { height: 2px; }
.key.ceiling-key { --sw: var(--ceiling); } .key.ceiling-key::before { height: 2px; }
.key.fold-key { --sw: var(--fold); } .key.fold-key::before { height: 2px; }
.key.refused-key::before { background: #fdecea; border: 1px dashed var(--ceiling); }
ul.marks { margin: 4px 0; padding-left: 18px; font-size: 12.5px; } ul.marks li.fold { color: var(--fold); }
ul.marks li.refuse { color: var(--ceiling); } ul.marks li.notice { color: var(--notice); }
ul.marks li.rewrite { color: var(--rewrite); }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(128px, 1fr)); gap: 6px; margin: 8px 0; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 4px 9px; }
.card b { display: block; font-size: 16px; white-space: nowrap; } .card span { color: var(--quiet); font-size: 11.5px; }
table { border-collapse: collapse; font-size: 12px; width: 100%; margin: 6px 0; }
th, td { text-align: left; padding: 2px 6px; border-bottom: 1px solid #eef1f4; vertical-align: top; }
td.preview { color: var(--quiet); max-width: 320px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
tr.detail td, tr.original td { color: var(--quiet); font-size: 11.5px; border-bottom: none; }
tr.entry.note td:nth-child(3) { color: var(--fold); } tr.entry.clipped td:nth-child(3) { color: var(--w1); }
tr.entry.restored td:nth-child(3) { color: var(--read); }
.life { fill: #e8edf2; } .life.failed { fill: #fbe3e1; } .life.running { fill: #fff6e0; }
.span { fill: var(--read); } .span.side { fill: var(--rewrite); } .toolround { stroke: var(--w5); stroke-width: 2; }
.tfold { fill: var(--fold); font-size: 10px; } .refusal, .end.failed { fill: var(--ceiling); font-weight: 700; }
.end.ok { fill: var(--fold); font-weight: 700; } .end.skipped { fill: var(--quiet); }
.spawn line { stroke: var(--rewrite); stroke-width: 1.3; } .spawn polygon { fill: var(--rewrite); }
.depends line { stroke: var(--quiet); stroke-width: 1.2; stroke-dasharray: 4 3; } .depends polygon { fill: var(--quiet); }
.key.life-key { --sw: #e8edf2; } .key.span-key { --sw: var(--read); } .key.side-key { --sw: var(--rewrite); }
.key.toolround-key { --sw: var(--w5); } .key.toolround-key::before { height: 2px; }
.key.spawn-key { --sw: var(--rewrite); } .key.spawn-key::before { height: 2px; }
.key.depends-key::before { height: 0; border-top: 2px dashed var(--quiet); background: none; }
.key.glyph::before { display: none; }
.rowlabel { font-size: 12px; } svg .offscale { fill: var(--ceiling); font-size: 11px; }
rect.record { fill: #cfd6de; } rect.part.visible, .key.part.visible { fill: var(--read); --sw: var(--read); }
rect.part.note, .key.part.note { fill: var(--fold); --sw: var(--fold); }
rect.part.clipped, .key.part.clipped { fill: var(--w1); --sw: var(--w1); }
rect.part.bounded, .key.part.bounded { fill: var(--w5); --sw: var(--w5); }
rect.part.restored, .key.part.restored { fill: #2b9fd9; --sw: #2b9fd9; }
.key.part.thinking { --sw: #b9a3d0; } .key.record { --sw: #cfd6de; }
.seg.output { fill: #6b7785; } .strategy.ours .rowlabel { font-weight: 700; }
.bound line { stroke: var(--fold); stroke-width: 2; stroke-dasharray: 4 3; }
li.met { color: var(--fold); } li.missed { color: var(--ceiling); }
pre { font: 12px ui-monospace, Menlo, Consolas, monospace; background: #f6f8fa; padding: 8px; overflow-x: auto; }
ul.facts { columns: 2; column-gap: 28px; margin: 4px 0; font-size: 12.5px; }
.unavailable { border-left: 3px solid var(--notice); padding: 4px 10px; background: #fffaf0; }
@media print {
  body { max-width: none; padding: 0; font-size: 11px; } details { display: none; }
  section.node, section.branch, section.workload, .timeline { break-inside: avoid; }
  a { color: inherit; text-decoration: none; }
}
"""


def document(title_text: str, heading: str, body: str) -> str:
    """A whole page: inline CSS, no script, no link, no external resource."""
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{esc(title_text)}</title><style>{CSS}</style></head>"
        f"<body><header><h1>{esc(heading)}</h1></header>{body}</body></html>\n"
    )


def _cards(report: Mapping[str, Any]) -> str:
    u, cost = report["usage"], report["cost"]
    usd = f"${cost['usd']:.4f}" if cost.get("usd") is not None else "no USD price"
    cards = [
        ("status", str(report.get("status"))),
        (f"requests ({report['attempts']:,} attempts)", f"{report['requests']:,}"),
        ("cost (BIT)", f"{cost['bit']:,.0f}"),
        ("cost (USD)", usd),
        ("cached share", f"{report['cached_share']:.3f}"),
        ("cache read", f"{u['cache_read_input_tokens']:,}"),
        ("cache write 5m / 1h", f"{u['cache_write_5m_tokens']:,} / {u['cache_write_1h_tokens']:,}"),
        ("fresh input", f"{u['input_tokens']:,}"),
        ("output", f"{u['output_tokens']:,}"),
        ("peak request", f"{report['peak_request_tokens']:,}"),
        ("notices / refusals", f"{report['notices']} / {report['refusals']}"),
        ("folds / freed", f"{report['folds']} / {report['tokens_freed']:,}"),
        ("rewrites expl. / unexpl.", f"{report['rewrites']['explained']} / {report['rewrites']['unexplained']}"),
        ("bytes unrecoverable", f"{report['bytes_unrecoverable']:,}"),
    ]
    return el(
        "div",
        {"class": "cards"},
        *(el("div", {"class": "card"}, el("b", text=v), el("span", text=k)) for k, v in cards),
    )


def _totals(report: Mapping[str, Any]) -> str:
    return el(
        "section",
        {"class": "totals"},
        el("h2", text="totals"),
        _cards(report),
        el(
            "details",
            {},
            el("summary", text="the report as foldline run prints it, and its JSON"),
            el("pre", text=format_report(report)),
            el("pre", text=json.dumps(report, indent=2, sort_keys=True)),
        ),
    )


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" + ("" if count == 1 else "s")


def _line_words(node: NodePicture) -> str:
    """The dashed line in words: the lines in force at the requests when the events name them, else the fraction."""
    lines = sorted({r.fold_line for r in node.requests if r.fold_line is not None})
    if lines:
        shown = f"{lines[0]:,}" if len(lines) == 1 else f"{lines[0]:,} to {lines[-1]:,}"
        return f"; fold line in force {shown} (drawn at each request)"
    return "; {} {:g} x ceiling ({})".format(*node.dashed_line())


def _node_section(node: NodePicture, report_node: Mapping[str, Any]) -> str:
    cost = sum(r.cost_bit or 0.0 for r in node.requests)
    ceilings = sorted(set(node.ceilings()))
    line = (
        f"{node.status}" + (f" ({node.reason})" if node.reason else "") + f"; {_plural(len(node.requests), 'request')}"
        f" ({sum(1 for r in node.requests if r.refused)} refused); ceiling "
        + (", ".join(f"{c:,}" for c in ceilings) or "none")
        + _line_words(node)
        + f"; cached share {float(report_node.get('cached_share', 0.0)):.3f}; cost {cost:,.1f} BIT"
    )
    return el(
        "section",
        {"class": "node", "data-node": node.node_id},
        el("h3", text=f"node {node.node_id}" + (f" (spawned by {node.parent})" if node.parent else "")),
        el("p", {"class": "quiet"}, text=line),
        node_chart(node),
        node_notes(node),
        request_table(node) if node.requests else "",
    )


def _branches(source: RunSource) -> str:
    if source.branches is None:
        return el(
            "section",
            {"class": "branches"},
            el("h2", text="branches"),
            el(
                "p",
                {"class": "unavailable"},
                text="Not available from a signals file: the branches' records and views (visible messages, "
                "notes, clipped copies, restored originals, their bytes and recovery calls) are kept only in "
                "the store. Run with foldline run --store PATH and report on the store.",
            ),
        )
    return el(
        "section",
        {"class": "branches"},
        el("h2", text="branches at the end"),
        *(branch_section(facts) for facts in source.branches),
    )


def run_picture(source: RunSource) -> RunPicture:
    return picture_events(
        source.events,
        pricing=source.pricing,
        default_model=source.default_model,
        fold_at=source.fold_at,
        depends_on=source.depends_on,
    )


def run_page(source: RunSource) -> str:
    """The report of one run."""
    run = run_picture(source)
    report = source.report
    heading = f"{run.scenario or 'run'}: {run.run_id} ({run.status or 'not finished'})"
    unavailable = ""
    if source.kind == "signals":
        unavailable = el(
            "p",
            {"class": "unavailable"},
            text="From a signals file: the branches' views are not in it, and neither are the profiles' "
            "fold settings (the fold line is drawn at the default 0.8 x ceiling).",
        )
    intro = el(
        "p",
        {"class": "quiet"},
        text=f"from the {source.kind} {source.path}: {run.events:,} events, models {', '.join(run.models()) or '-'}",
    )
    nodes = [_node_section(node, report["nodes"].get(node.node_id, {})) for node in run.nodes.values()]
    body = (
        intro
        + unavailable
        + _totals(report)
        + el("section", {"class": "timeline"}, el("h2", text="timeline"), timeline_legend(), timeline(run))
        + el("h2", text="requests per node")
        + legend()
        + "".join(nodes)
        + _branches(source)
    )
    return document(f"foldline report: {heading}", heading, body)


def bench_page(document_json: Mapping[str, Any]) -> str:
    heading, body = bench_body(document_json)
    return document(f"foldline report: {heading}", heading, body)


def branches_page(path: str, branches: Sequence[BranchFacts]) -> str:
    """``foldline inspect PATH --html``: the branches' views."""
    heading = f"branches of {path}"
    return document(f"foldline inspect: {heading}", heading, "".join(branch_section(f) for f in branches))
