"""Fold ids and span digests depend on structure and content, never on random message ids."""

from __future__ import annotations

import io
import json
from pathlib import Path

from runtime.cli import main
from runtime.fold.notes import fold_id, span_digest, structural_digest
from runtime.values.messages import ClipInfo, Instruction, Note, ToolResult

ROOT = Path(__file__).resolve().parents[1]


def test_messages_differing_only_in_ids_have_one_structural_digest() -> None:
    a = Note("folded #2-#5", ("id-a", "id-b"), 2, "tool_io")
    b = Note("folded #2-#5", ("id-x", "id-y"), 2, "tool_io")
    assert a.sha256 != b.sha256  # the stored form keeps the ids
    assert structural_digest(a) == structural_digest(b)
    clip = ClipInfo(original_index=4, total=9000, head=750, tail=250)
    c1 = ToolResult("toolu_1", "read_file", "{}", "head…tail", clipped_from="orig-1", clip=clip)
    c2 = ToolResult("toolu_1", "read_file", "{}", "head…tail", clipped_from="orig-2", clip=clip)
    assert structural_digest(c1) == structural_digest(c2)
    assert fold_id("reset", [a, c1]) == fold_id("reset", [b, c2])
    assert span_digest([a, c1]) == span_digest([b, c2])
    # content still counts: a different text or a different original index is a different span
    assert structural_digest(Note("folded #2-#6", ("id-a",), 2, "tool_io")) != structural_digest(a)
    other = ToolResult(
        "toolu_1",
        "read_file",
        "{}",
        "head…tail",
        clipped_from="orig-1",
        clip=ClipInfo(original_index=5, total=9000, head=750, tail=250),
    )
    assert structural_digest(other) != structural_digest(c1)
    plain = Instruction("task")
    assert structural_digest(plain) == plain.sha256


def test_the_fold_scenario_sends_the_same_bytes_on_every_run(tmp_path: Path) -> None:
    runs = []
    for i in range(2):
        signals = tmp_path / f"s{i}.jsonl"
        code = main(
            [
                "run",
                str(ROOT / "scenarios" / "fold.toml"),
                "--provider",
                "scripted",
                "--quiet",
                "--signals",
                str(signals),
            ],
            out=io.StringIO(),
            err=io.StringIO(),
        )
        assert code == 0
        runs.append(
            [
                json.loads(line)["data"]["digest"]
                for line in signals.read_text().splitlines()
                if '"type":"RequestSent"' in line
            ]
        )
    assert len(runs[0]) > 40 and runs[0] == runs[1]
