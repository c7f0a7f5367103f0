"""Issue 11: a catalog of bad scenario files, one fault each, across every table and key.

Each file's first line names its fault and the key path the refusal must
name (``expect: <key path>``). ``foldline run FILE`` must exit 2 with one or a
few lines on stderr naming the file and that key path, no traceback, and
nothing sent (the signals file is never even created).
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from runtime.cli.main import main

CATALOG = Path(__file__).resolve().parent / "bad_scenarios"
FILES = sorted(CATALOG.glob("*.toml"))
_EXPECT = re.compile(r"^# One fault: .*\. expect: (?P<key>.+)$")


def test_the_catalog_is_large_and_each_file_has_one_stated_fault() -> None:
    assert len(FILES) >= 60
    for path in FILES:
        assert _EXPECT.match(path.read_text(encoding="utf-8").splitlines()[0]), path.name


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_a_bad_file_exits_2_naming_the_file_and_key_path_with_nothing_sent(path: Path, tmp_path: Path) -> None:
    expected = _EXPECT.match(path.read_text(encoding="utf-8").splitlines()[0])["key"]  # type: ignore[index]
    signals = tmp_path / "signals.jsonl"
    out, err = io.StringIO(), io.StringIO()
    code = main(["run", str(path), "--quiet", "--signals", str(signals)], out=out, err=err)
    message = err.getvalue()
    assert code == 2, message
    lines = message.strip().splitlines()
    assert 1 <= len(lines) <= 3, message
    assert lines[0].startswith(f"foldline: {path}: "), message
    assert expected in lines[0], (expected, message)
    assert "Traceback" not in message and out.getvalue() == ""
    assert not signals.exists()  # nothing ran, so nothing was sent


def test_a_50_megabyte_scenario_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    with open(big, "wb") as f:
        f.truncate(50 * 1024 * 1024)  # sparse: the loader must refuse it by its size, unread
    out, err = io.StringIO(), io.StringIO()
    assert main(["run", str(big), "--quiet"], out=out, err=err) == 2
    assert err.getvalue() == (
        f"foldline: {big}: {50 * 1024 * 1024} bytes is above the bound of {4 * 1024 * 1024} bytes "
        "for a scenario file; nothing was read\n"
    )
