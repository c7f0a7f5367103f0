"""``--tools`` modules that fail as they are imported: exit 2 with what was raised and where, never a traceback.

Found by an outside audit: a user's module raising at import (a RuntimeError,
a SyntaxError) or a relative module name was a traceback, and a list holding
something besides tools was called "a list, not ... a list of tools".
"""

from __future__ import annotations

import io
import sys
import uuid
from pathlib import Path

import pytest

from runtime.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # --tools puts the working directory first
    return tmp_path


def module(directory: Path, source: str) -> str:
    name = f"audit_tools_{uuid.uuid4().hex[:12]}"
    (directory / f"{name}.py").write_text(source, encoding="utf-8")
    return name


def run_with_tools(spec: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    argv = ["run", str(ROOT / "scenarios" / "quickstart.toml"), "--provider", "scripted", "--quiet", "--tools", spec]
    code = main(argv, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_a_module_raising_at_import_exits_2_naming_the_error_and_its_line(in_tmp: Path) -> None:
    name = module(in_tmp, 'import os\n\nraise RuntimeError("no config here")\n')
    code, out, err = run_with_tools(f"{name}:registry")
    assert (code, out) == (2, "")
    path = in_tmp / f"{name}.py"
    assert err == f"foldline: --tools: importing {name!r} raised RuntimeError: no config here ({path}, line 3)\n"


def test_a_module_with_a_syntax_error_exits_2_naming_the_file_and_line(in_tmp: Path) -> None:
    name = module(in_tmp, "def broken(:\n    pass\n")
    code, out, err = run_with_tools(f"{name}:registry")
    assert (code, out) == (2, "")
    assert err.startswith(f"foldline: --tools: importing {name!r} raised SyntaxError: ")
    assert err.endswith(f"({name}.py, line 1)\n") and "Traceback" not in err


def test_a_relative_module_name_exits_2() -> None:
    code, _, err = run_with_tools(".tools:registry")
    assert code == 2
    assert err == (
        "foldline: --tools: '.tools:registry' is not of the form package.module:attribute (a relative module name)\n"
    )


def test_a_list_with_something_besides_tools_names_the_item(in_tmp: Path) -> None:
    source = (
        "from runtime import tool\n\n\n@tool\ndef shout(text: str) -> str:\n"
        '    """Shout.\n\n    Args:\n        text: what to shout\n    """\n    return text.upper()\n\n\n'
        'registry = [shout, "grep"]\n'
    )
    name = module(in_tmp, source)
    code, _, err = run_with_tools(f"{name}:registry")
    assert code == 2
    assert err == f"foldline: --tools: '{name}:registry' is a list whose item 1 is a str, not a Tool\n"
