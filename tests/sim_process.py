"""Run ``foldline sim`` as a real subprocess for tests: start it on a free port, yield its URL, stop it."""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

START_TIMEOUT_S = 60.0
_PREFIX = "foldline sim: serving the simulated Anthropic API on "


class SimProcess:
    """A running ``foldline sim``: its URL and what it has written on stderr (read by a thread, so it never blocks)."""

    def __init__(self, url: str, first_lines: list[str], pid: int) -> None:
        self.url = url
        self.pid = pid
        self.stderr_lines = first_lines

    def drain(self, process: subprocess.Popen[str]) -> None:
        assert process.stderr is not None
        for line in process.stderr:
            self.stderr_lines.append(line)


@contextmanager
def foldline_sim(*options: str) -> Iterator[SimProcess]:
    """``foldline sim --port 0 OPTIONS`` in a subprocess; yields it once it listens."""
    command = [sys.executable, "-m", "runtime.cli", "sim", "--port", "0", *options]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        seen: list[str] = []
        sim = SimProcess(_wait_for_url(process, seen), seen, process.pid)
        reader = threading.Thread(target=sim.drain, args=(process,), daemon=True)
        reader.start()
        yield sim
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_for_url(process: subprocess.Popen[str], seen: list[str]) -> str:
    assert process.stderr is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stderr, selectors.EVENT_READ)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if not selector.select(timeout=deadline - time.monotonic()):
            break
        line = process.stderr.readline()
        if not line:
            break
        seen.append(line)
        if line.startswith(_PREFIX):
            selector.close()
            return line[len(_PREFIX) :].strip()
    raise RuntimeError(f"foldline sim did not start (exit {process.poll()}): {''.join(seen)}")
