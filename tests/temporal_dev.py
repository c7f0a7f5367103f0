"""Temporal's dev server from the installed ``temporal`` binary, for tests (not a test module).

conftest.py starts one for the whole session (the ``temporal_server`` fixture); the restart test starts its
own with its state in a file. Imports nothing of Temporal's SDK until a server is started, so conftest.py
stays importable without the ``temporal`` extra.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
START_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, deadline: float) -> None:
    """Poll until something listens on ``port`` (every 0.05 s), or fail naming it once ``deadline`` passes."""
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on port {port}")


def start_dev_server(port: int, db: Path | None = None) -> subprocess.Popen[bytes]:
    """The dev server on ``port``, started with the runtime's own dev-server arguments, once it listens.

    With ``db`` its state is kept in that file (a restart keeps every workflow); else in memory."""
    from runtime.temporal.worker import DEV_SERVER_ARGS

    args = ["server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port), "--log-level", "error"]
    args += [*DEV_SERVER_ARGS, "--http-port", str(free_port()), "--metrics-port", str(free_port())]
    args += ["--db-filename", str(db)] if db is not None else []
    proc = subprocess.Popen([str(BIN / "temporal"), *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, time.monotonic() + START_TIMEOUT_S)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc
