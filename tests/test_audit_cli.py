"""Command-line arguments an outside audit found unchecked: each now exits 2 naming the argument, before anything runs.

Before, ``--signals`` into a missing directory ended in an exception-group
traceback after the run had started, ``--report /`` ran the whole flow (every
request sent) and then failed on the write with a traceback, ``--signals``
naming the scenario file itself overwrote it, and ``--log-level nope`` was a
traceback.
"""

from __future__ import annotations

import io
import shutil
import socket
from pathlib import Path

import pytest

from runtime.cli.main import main
from runtime.inputs.toml_text import TOO_DEEP

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("flag", ["--signals", "--report"])
def test_an_output_path_in_a_missing_directory_exits_2_before_the_run(flag: str, tmp_path: Path) -> None:
    target = tmp_path / "missing" / "out.json"
    signals = tmp_path / "s.jsonl"
    other = ["--signals", str(signals)] if flag == "--report" else []
    code, out, err = run_cli(["run", str(QUICKSTART), "--quiet", flag, str(target), *other])
    assert code == 2
    assert err == f"foldline: {flag}: {target}: the directory {target.parent} does not exist\n"
    assert out == "" and not signals.exists()  # the run never started: nothing sent, no report


@pytest.mark.parametrize("flag", ["--signals", "--report"])
def test_an_output_path_that_is_a_directory_exits_2_before_the_run(flag: str, tmp_path: Path) -> None:
    code, out, err = run_cli(["run", str(QUICKSTART), "--quiet", flag, str(tmp_path)])
    assert code == 2 and out == ""
    assert err == f"foldline: {flag}: {tmp_path} is a directory; expected a file path\n"


def test_an_output_path_naming_the_scenario_file_is_refused_and_the_file_kept(tmp_path: Path) -> None:
    scenario = tmp_path / "quickstart.toml"
    shutil.copy(QUICKSTART, scenario)
    code, out, err = run_cli(["run", str(scenario), "--quiet", "--signals", str(scenario)])
    assert code == 2 and out == ""
    assert err == f"foldline: --signals: {scenario} is the input {scenario}; it would be overwritten\n"
    assert scenario.read_bytes() == QUICKSTART.read_bytes()


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["resume", "STORE", "--report", "DIR"], "--report"),
        (["bench", "--small", "--json", "DIR"], "--json"),
        (["report", "STORE", "--html", "DIR"], "--html"),
        (["inspect", "STORE", "--html", "DIR"], "--html"),
    ],
)
def test_every_command_checks_its_output_paths_first(argv: list[str], flag: str, tmp_path: Path) -> None:
    store = tmp_path / "run.db"
    store.write_bytes(b"")  # never read: the output path is refused first
    args = [str(tmp_path) if a == "DIR" else str(store) if a == "STORE" else a for a in argv]
    code, out, err = run_cli(args)
    assert code == 2 and out == ""
    assert err == f"foldline: {flag}: {tmp_path} is a directory; expected a file path\n"


def test_an_unknown_log_level_is_a_usage_error_naming_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--log-level", "nope", "run", str(QUICKSTART)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --log-level: invalid choice: 'nope'" in err and "'warning'" in err
    assert "Traceback" not in err


def test_the_log_level_is_read_in_any_case(tmp_path: Path) -> None:
    code, _, err = run_cli(["--log-level", "ERROR", "run", str(tmp_path / "none.toml")])
    assert (code, err) == (2, f"foldline: {tmp_path / 'none.toml'}: no such file\n")


def test_sim_on_a_port_in_use_exits_2_naming_host_and_port() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        code, out, err = run_cli(["sim", "--port", str(port)])  # before: an exception-group traceback
    assert (code, out) == (2, "")
    assert err == f"foldline: --host 127.0.0.1 --port {port}: cannot listen there (Address already in use)\n"


@pytest.mark.parametrize("option", ["--faults", "--script"])
def test_sim_refuses_a_huge_file_unread_and_a_deep_one_by_name(option: str, tmp_path: Path) -> None:
    huge = tmp_path / "huge.toml"
    with open(huge, "wb") as f:
        f.truncate(50 * 1024 * 1024)  # sparse; before, read whole (a FIFO or /dev/zero: forever)
    what = {"--faults": "faults", "--script": "script"}[option]
    code, _, err = run_cli(["sim", "--port", "0", option, str(huge)])
    assert code == 2
    assert err == (
        f"foldline: {huge}: {50 * 1024 * 1024} bytes is above the bound of {4 * 1024 * 1024} bytes "
        f"for a {what} file; nothing was read\n"
    )
    deep = tmp_path / "deep.toml"
    deep.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    code, _, err = run_cli(["sim", "--port", "0", option, str(deep)])  # before: a RecursionError traceback
    assert code == 2
    assert err == f"foldline: {deep}: not a TOML {what} file ({TOO_DEEP})\n"


def test_report_names_a_source_nested_too_deep(tmp_path: Path) -> None:
    deep = "[" * 5000 + "]" * 5000
    whole = tmp_path / "deep.json"
    whole.write_text(deep + "\n", encoding="utf-8")
    code, _, err = run_cli(["report", str(whole), "--html", str(tmp_path / "r.html")])  # before: RecursionError
    assert (code, err) == (2, f"foldline: {whole}: JSON nested too deep; expected a signals file or bench JSON\n")
    signals = tmp_path / "s.jsonl"
    code, _, _ = run_cli(["run", str(QUICKSTART), "--quiet", "--provider", "scripted", "--signals", str(signals)])
    first = signals.read_text(encoding="utf-8").splitlines()[0]
    signals.write_text(f"{first}\n{deep}\n{first}\n", encoding="utf-8")
    code, _, err = run_cli(["report", str(signals), "--html", str(tmp_path / "r.html")])
    assert code == 2 and "Traceback" not in err
    assert err.startswith(f"foldline: not a signals file (JSON Lines of events) nor bench JSON: {signals}:2: ")
    assert "JSON nested too deep" in err


def test_report_reads_a_device_only_up_to_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    import runtime.display.sources as sources

    monkeypatch.setattr(sources, "MAX_TEXT_SOURCE_BYTES", 1 << 20)  # the real bound is 1 GiB
    code, _, err = run_cli(["report", "/dev/zero", "--html", "/dev/null"])  # before: read without end
    assert (code, err) == (
        2,
        f"foldline: /dev/zero: more than {1 << 20} bytes, above the bound for a report source; refused\n",
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--micro", "--workloads", "fits"], "--workloads: not with --micro (the table's option)"),
        (["--micro", "--provider", "scripted"], "--provider: not with --micro (the table's option)"),
        (["--scaling"], "--scaling: only with --micro"),
        (["--small", "--no-scaling"], "--no-scaling: only with --micro"),
    ],
)
def test_bench_refuses_an_option_its_mode_would_ignore(argv: list[str], message: str) -> None:
    code, out, err = run_cli(["bench", *argv])  # before: the option was ignored and the whole benchmark ran
    assert (code, out, err) == (2, "", f"foldline bench: {message}\n")
