"""Issue 11, case 10: ``resume`` of a finished store verifies before it reports, as ``replay --all`` does."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import pytest
from test_replay import RECOVER, stored_run

from runtime.cli.store import main
from runtime.store.resume import StoreVerification, verify_stored_requests


@pytest.fixture(scope="module")
def finished_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("finished")
    scenario = directory / "recover.toml"
    scenario.write_text(RECOVER, encoding="utf-8")
    stored_run(scenario, directory / "r.db")
    return directory / "r.db"


def _copy(store: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy.db"
    source, dest = sqlite3.connect(store), sqlite3.connect(target)
    source.backup(dest)
    source.close()
    dest.close()
    return target


def resume_cli(store: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["resume", str(store), "--quiet"], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_an_intact_finished_store_reports_and_says_it_verified(finished_store: Path, tmp_path: Path) -> None:
    code, out, err = resume_cli(_copy(finished_store, tmp_path))
    assert code == 0, err
    assert "nothing to resume" in err and "13 of 13 requests verified" in err
    assert "bytes unrecoverable: 0" in out


def test_a_tampered_finished_store_fails_naming_the_message(finished_store: Path, tmp_path: Path) -> None:
    store = _copy(finished_store, tmp_path)
    connection = sqlite3.connect(store)
    message_id, sha = connection.execute(
        "SELECT m.id, m.sha256 FROM messages m JOIN contents c ON c.sha256 = m.sha256 WHERE c.kind = 'tool_result' "
        "ORDER BY m.rowid LIMIT 1"
    ).fetchone()
    content = connection.execute("SELECT content FROM contents WHERE sha256 = ?", (sha,)).fetchone()[0]
    with connection:
        connection.execute(
            "UPDATE contents SET content = ? WHERE sha256 = ?", (content.replace("a.md", "A.md", 1), sha)
        )
    connection.close()
    code, out, err = resume_cli(store)
    assert code == 1
    assert f"stored message {message_id}" in err
    assert "not reporting on an unverified store" in err
    assert "bytes unrecoverable" not in out  # no report on what did not verify
    assert "Traceback" not in err


def test_the_verification_summary() -> None:
    assert verify_stored_requests([object(), object()]) == StoreVerification(requests=2, failures=())
    failed = verify_stored_requests([object(), ValueError("request #2: bad")])
    assert not failed.ok and failed.summary() == "1 of 2 requests verified" and failed.failures == ("request #2: bad",)
