"""Issue 11, case 10: ``resume`` of a finished store verifies before it reports, as ``replay --all`` does."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from support import copy_store, tamper_first_tool_result
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


def resume_cli(store: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["resume", str(store), "--quiet"], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_an_intact_finished_store_reports_and_says_it_verified(finished_store: Path, tmp_path: Path) -> None:
    code, out, err = resume_cli(copy_store(finished_store, tmp_path))
    assert code == 0, err
    assert "nothing to resume" in err and "13 of 13 requests verified" in err
    assert "bytes unrecoverable: 0" in out


def test_a_tampered_finished_store_fails_naming_the_message(finished_store: Path, tmp_path: Path) -> None:
    store = copy_store(finished_store, tmp_path)
    message_id = tamper_first_tool_result(store)
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
