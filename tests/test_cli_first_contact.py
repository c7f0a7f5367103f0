"""Small things a new user meets: --version, --store naming a directory, where the Temporal CLI is looked for."""

from __future__ import annotations

import io
import os
import stat
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from runtime.cli import main
from runtime.errors import extra_hint

ROOT = Path(__file__).resolve().parents[1]


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"foldline {version('foldline')}"


@pytest.mark.slow
def test_store_naming_a_directory_says_which_file_holds_the_run(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(["run", str(ROOT / "scenarios/quickstart.toml"), "--store", str(tmp_path), "--quiet"], out=out, err=err)
    assert code == 0, err.getvalue()
    stored = tmp_path / "foldline-store.sqlite3"
    assert f"--store {tmp_path} is a directory: storing the run in {stored}" in err.getvalue()
    assert stored.is_file()
    # a file path is used as given, and nothing is said
    err = io.StringIO()
    assert (
        main(
            ["run", str(ROOT / "scenarios/quickstart.toml"), "--store", str(tmp_path / "r.db"), "--quiet"],
            out=out,
            err=err,
        )
        == 0
    )
    assert "is a directory" not in err.getvalue()


def test_install_hints_name_this_interpreter_and_the_clone() -> None:
    hint = extra_hint("openai")
    assert f"{sys.executable} -m pip install -e '.[openai]'" in hint and "foldline[" not in hint


def test_the_temporal_cli_is_found_beside_the_interpreter_when_not_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("temporalio", reason="runtime.temporal needs the temporal extra (asyncio only)")
    from runtime.temporal import worker

    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    binary = bin_dir / "temporal"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    monkeypatch.setenv("PATH", str(tmp_path / "elsewhere"))
    assert worker.temporal_binary() == str(binary)
    binary.unlink()
    assert worker.temporal_binary() is None
    assert os.environ["PATH"] == str(tmp_path / "elsewhere")
