"""A branch's view at the end, against its record: what each part holds and how to read back what is folded.

The drawing is two bars on one scale: the record (every message the branch
ever held, in characters) and the view as the model is sent it, split into
visible messages, fold notes, clipped copies, bounded results, restored
originals and thinking. Below, every view entry with its size, and for each
note or copy the originals it stands for with the exact ``read_result`` call
that returns them. Built from :func:`runtime.store.inspect.describe_branch`'s
picture (the same facts ``foldline inspect`` prints).
"""

from __future__ import annotations

from runtime.display.sources import BranchFacts
from runtime.display.svg import el, esc, svg, title, void
from runtime.store.inspect import ViewEntry

WIDTH, LEFT, RIGHT = 960.0, 90.0, 20.0
PARTS = (
    ("visible", "visible messages"),
    ("note", "fold notes"),
    ("clipped", "clipped copies"),
    ("bounded", "bounded results"),
    ("restored", "restored originals"),
    ("thinking", "thinking"),
)
THINKING_NOTE = "thinking: none; this version's record keeps no thinking blocks (a response holds text and tool calls)"


def part_of(entry: ViewEntry, facts: BranchFacts) -> str:
    """Which part of the view an entry is."""
    if entry.kind == "note":
        return "note"
    if entry.index in facts.restored:
        return "restored"
    if entry.detail and entry.detail.startswith("clipped copy"):
        return "clipped"
    if entry.detail and entry.detail.startswith("bounded"):
        return "bounded"
    return "visible"


def part_sizes(facts: BranchFacts) -> dict[str, tuple[int, int, int]]:
    """Per part: (entries, characters, tokens)."""
    sizes = {key: (0, 0, 0) for key, _ in PARTS}
    for entry in facts.picture.entries:
        key = part_of(entry, facts)
        count, chars, toks = sizes[key]
        sizes[key] = (count + 1, chars + entry.chars, toks + entry.tokens)
    return sizes


def composition(facts: BranchFacts) -> str:
    """The record bar and the view bar, on one scale."""
    picture = facts.picture
    sizes = part_sizes(facts)
    scale_top = max(facts.record_chars, picture.view_chars, 1)
    plot = WIDTH - LEFT - RIGHT

    def w(chars: int) -> float:
        return plot * chars / scale_top

    parts = [
        el("text", {"class": "axis", "x": LEFT - 8, "y": 22, "text-anchor": "end"}, text="record"),
        el(
            "rect",
            {"class": "record", "x": LEFT, "y": 10, "width": max(w(facts.record_chars), 1.0), "height": 18},
            title(f"record: {picture.record_length} messages, {facts.record_chars:,} chars"),
        ),
        el("text", {"class": "axis", "x": LEFT - 8, "y": 52, "text-anchor": "end"}, text="view"),
    ]
    x = LEFT
    for key, label in PARTS:
        count, chars, toks = sizes[key]
        if chars:
            parts.append(
                el(
                    "rect",
                    {"class": f"part {key}", "x": x, "y": 40, "width": w(chars), "height": 18},
                    title(f"{label}: {count} entries, {chars:,} chars, {toks:,} tokens"),
                )
            )
            x += w(chars)
    parts.append(void("line", {"class": "grid", "x1": LEFT, "x2": LEFT, "y1": 6, "y2": 62}))
    return svg(WIDTH, 70, f"branch {picture.branch_id}: view against record", parts, class_="chart bars")


def _entry_rows(entry: ViewEntry, facts: BranchFacts) -> list[str]:
    part = part_of(entry, facts)
    cells = [
        f"{entry.position}",
        f"#{entry.index}",
        entry.label,
        part.replace("visible", "message"),
        f"{entry.chars:,}",
        f"{entry.tokens:,}",
    ]
    main = "".join(f"<td>{esc(c)}</td>" for c in cells) + f"<td class='preview'>{esc(entry.preview)}</td>"
    rows = [f"<tr class='entry {part}' data-index='{entry.index}'>{main}</tr>"]
    if entry.detail:
        rows.append(f"<tr class='detail'><td></td><td colspan='6'>{esc(entry.detail)}</td></tr>")
    for original in entry.stands_for:
        text = f"#{original.index} {original.label}, {original.chars:,} chars"
        rows.append(
            f"<tr class='original' data-index='{original.index}'><td></td><td colspan='6'>{esc(text)}: "
            f"<code class='recovery'>{esc(original.read_call)}</code></td></tr>"
        )
    return rows


def _summary(facts: BranchFacts) -> str:
    picture = facts.picture
    sizes = part_sizes(facts)
    items = [
        f"record: {picture.record_length} messages, {facts.record_chars:,} chars",
        f"view: {len(picture.entries)} messages, {picture.view_chars:,} chars, {picture.view_tokens:,} tokens (o200k)",
    ]
    items += [f"{label}: {sizes[key][0]} ({sizes[key][1]:,} chars)" for key, label in PARTS if key != "thinking"]
    items.append(THINKING_NOTE)
    outside = picture.outside
    for why, meaning in (
        ("replaced", "replaced by a note (directly or through earlier notes)"),
        ("clipped", "originals of clipped copies"),
        ("system", "earlier system texts"),
        ("side", "fold summaries' prompts and replies"),
        ("retired", "notes not in force, their originals reachable"),
        ("inherited", "shared with the parent, not in this view"),
        ("unreachable", "NOT reachable from the view"),
    ):
        if outside.get(why):
            items.append(f"outside the view, {meaning}: {len(outside[why])}")
    return el("ul", {"class": "facts"}, *(el("li", text=item) for item in items))


def branch_section(facts: BranchFacts) -> str:
    """One branch: its summary, the bars, and every view entry with its recovery calls."""
    picture = facts.picture
    node = f" (node {picture.node_id})" if picture.node_id else ""
    parent = f", a clone of {picture.parent_id} sharing its first {picture.fork_length}" if picture.parent_id else ""
    head = "".join(f"<th>{h}</th>" for h in ("pos", "record", "what", "part", "chars", "tokens", "starts with"))
    rows = [row for entry in picture.entries for row in _entry_rows(entry, facts)]
    table = f"<table class='view'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    keys = el(
        "div",
        {"class": "legend"},
        *(el("span", {"class": f"key part {key}"}, text=label) for key, label in PARTS),
        el("span", {"class": "key record"}, text="record"),
    )
    return el(
        "section",
        {"class": "branch", "data-branch": picture.branch_id, "data-node": picture.node_id},
        el("h3", text=f"branch {picture.branch_id}{node}{parent}"),
        _summary(facts),
        composition(facts),
        keys,
        table,
    )
