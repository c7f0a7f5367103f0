"""Text a model or a tool wrote reaches the terminal with its control characters shown, never obeyed.

Found by an outside audit: a refusal whose text held ``ESC [2J`` (clear the
screen) and ``ESC ]0;...BEL`` (retitle the window) was printed raw by the
progress lines, the report, and ``foldline inspect``.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from runtime.cli.main import main
from runtime.display.terminal import shown

HOSTILE = "I refuse\x1b[2J\x1b]0;pwned\x07 \u202eevil\u202c ok"
SCENARIO = """schema = "foldline.scenario/v1"
[provider]
kind = "scripted"
[[nodes]]
id = "a"
instruction = "hi"
script = [{ text = "I refuse\\u001b[2J\\u001b]0;pwned\\u0007 \\u202eevil\\u202c ok", stop_reason = "refusal" }]
"""


@pytest.mark.parametrize(
    ("text", "seen"),
    [
        ("\x1b[2J", "\\x1b[2J"),
        ("bell\x07", "bell\\x07"),
        ("csi\x9b", "csi\\x9b"),
        ("\u202eevil", "\\u202eevil"),
        ("del\x7f", "del\\x7f"),
        ("lines\nand\ttabs, é, 日本", "lines\nand\ttabs, é, 日本"),
    ],
)
def test_shown_writes_control_characters_as_escapes_and_keeps_text(text: str, seen: str) -> None:
    assert shown(text) == seen


def test_a_refusal_with_escape_sequences_is_printed_escaped(tmp_path: Path) -> None:
    scenario = tmp_path / "esc.toml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    store = tmp_path / "run.db"
    out, err = io.StringIO(), io.StringIO()
    assert main(["run", str(scenario), "--plain", "--store", str(store)], out=out, err=err) == 1
    for printed in (out.getvalue(), err.getvalue()):
        assert "\x1b" not in printed and "\x07" not in printed and "\u202e" not in printed
        assert shown(HOSTILE) in printed
    inspected = io.StringIO()
    assert main(["inspect", str(store), "--branch", "a"], out=inspected, err=io.StringIO()) == 0
    assert "\x1b" not in inspected.getvalue() and shown(HOSTILE) in inspected.getvalue()
