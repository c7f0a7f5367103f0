"""Importing the runtime leaves the heavy libraries out until they are used (checked in a fresh interpreter).

structlog (which brings asyncio, and rich when installed), pydantic and
docstring_parser (building a tool), regex (a grep), email.utils (an HTTP-date
Retry-After), tiktoken (the first count) and the anthropic SDK (opening a
provider) each load when first needed; and loading them late changes nothing:
the lazy logger logs through structlog's configuration and context variables.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import structlog

from runtime.logs import LazyLogger, bound_contextvars, configure_logging, get_logger

ROOT = Path(__file__).resolve().parent.parent

LAZY = ("structlog", "asyncio", "rich", "pydantic", "docstring_parser", "regex", "email.utils", "tiktoken", "anthropic")

PROBE = """
import json, sys
from pathlib import Path
LAZY = json.loads(sys.argv[1])
loaded = lambda: sorted(m for m in LAZY if m in sys.modules)
seen = {}
import runtime.runtime
from runtime import Profile, Runtime, tool, workspace_tools
seen["import"] = loaded()
from runtime.contract.retry import retry_delay
retry_delay(0, {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, jitter=0.0, now=0.0)
seen["http date"] = loaded()

@tool
def add(a: int, b: int) -> int:
    '''Add two numbers.'''
    return a + b

tools = workspace_tools(sys.argv[2])
seen["tool"] = loaded()
from actors.tools.workspace import _grep
_grep(Path(sys.argv[2]).resolve(), "import", ".")
seen["grep"] = loaded()
from runtime.logs import bound_contextvars
with bound_contextvars(run_id="r1"):
    pass
seen["bind"] = loaded()
print(json.dumps(seen))
"""


def test_importing_the_runtime_loads_none_of_the_heavy_libraries(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import os\n")
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(LAZY), str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["import"] == []
    assert seen["http date"] == ["email.utils"]
    assert {"docstring_parser", "pydantic"} <= set(seen["tool"])
    assert not {"structlog", "asyncio", "regex", "tiktoken", "anthropic"} & set(seen["tool"])
    assert set(seen["grep"]) - set(seen["tool"]) == {"regex"}
    assert {"structlog", "asyncio"} <= set(seen["bind"])
    assert not {"tiktoken", "anthropic"} & set(seen["bind"])


def test_the_lazy_logger_logs_through_structlog_with_the_bound_context() -> None:
    out = io.StringIO()
    logger = get_logger("foldline.test")
    assert isinstance(logger, LazyLogger) and repr(logger) == "<LazyLogger 'foldline.test'>"
    configure_logging(level="info", fmt="json", stream=out)
    try:
        with bound_contextvars(run_id="run-7", node="n1"):
            logger.info("started", requests=3)
            logger.debug("not shown")
        logger.bind(branch="b2").warning("after the block")
    finally:
        structlog.reset_defaults()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line["event"], line["level"]) for line in lines] == [("started", "info"), ("after the block", "warning")]
    assert lines[0]["run_id"] == "run-7" and lines[0]["node"] == "n1" and lines[0]["requests"] == 3
    assert "run_id" not in lines[1] and lines[1]["branch"] == "b2"


def test_the_lazy_logger_follows_the_configuration_in_force_at_each_call() -> None:
    logger = get_logger("foldline.test")
    logger.info("resolved under the default configuration")
    with structlog.testing.capture_logs() as logs:
        logger.error("captured", code=2)
    assert logs == [{"event": "captured", "code": 2, "log_level": "error"}]


CONFIGURED_PROBE = """
import io, json, sys
from runtime.logs import configure_logging, get_logger
out = io.StringIO()
configure_logging(level="info", fmt="json", stream=out)
before = "structlog" in sys.modules
get_logger("foldline.probe").info("first line", n=1)
get_logger("foldline.probe").debug("below the level")
print(json.dumps({"before": before, "lines": out.getvalue().splitlines()}))
"""


def test_configuring_logging_waits_for_the_first_log_line_and_then_applies() -> None:
    """A command that never logs never imports structlog; the first line is logged as configured."""
    done = subprocess.run(
        [sys.executable, "-c", CONFIGURED_PROBE], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["before"] is False
    assert [json.loads(line)["event"] for line in seen["lines"]] == ["first line"]
    with pytest.raises(ValueError, match="unknown log level 'loud'"):
        configure_logging(level="loud")


SILENT_PROBE = """
import logging, sys
from runtime.logs import bound_contextvars, get_logger
with bound_contextvars(run_id="run-1"):
    for level in ("debug", "info", "warning", "error"):
        getattr(get_logger("foldline.sim"), level)("a library line", level=level)
    get_logger("signals.bus").warning("a bus line")
if sys.argv[1] == "configured":
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(name)s %(levelname)s %(message)s")
    get_logger("foldline.fold").info("shown once the application configures logging", n=2)
"""


def test_a_library_user_sees_no_log_line_until_the_application_configures_logging() -> None:
    silent = subprocess.run(
        [sys.executable, "-c", SILENT_PROBE, "unconfigured"], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert silent.returncode == 0 and silent.stdout == "" and silent.stderr == "", silent.stdout + silent.stderr
    shown = subprocess.run(
        [sys.executable, "-c", SILENT_PROBE, "configured"], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == ["foldline.fold INFO event='shown once the application configures logging' n=2"]


SCRIPTED_PROBE = """
import json, sys
import anyio
from runtime import Flow, Node, Operation, PolicyRegistry, Profile, Runtime, ScriptedProvider, ScriptPolicy, ScriptStep

reader = Profile(system="You read files.", tools=("synthetic_read",), max_input_tokens=20_000)
script = [
    ScriptStep.from_obj({"tool_calls": [{"name": "synthetic_read", "arguments": {"path": "a.md", "size": 600}}]}, "n"),
    ScriptStep.from_obj({"text": "Read."}, "n"),
]
provider = ScriptedProvider(PolicyRegistry({"n": ScriptPolicy("n", script)}), clock=lambda: 0.0)
seen = {}

async def main():
    from runtime.request.compiler import RequestSettings, compile_request
    from runtime.values.messages import Instruction
    request = compile_request(
        system="s", tools=(), view=[Instruction("hi")], settings=RequestSettings(model="claude-sonnet-4-5-20250929")
    )
    seen["counted"] = await provider.count_tokens(request)
    async with Runtime(provider=provider, model="claude-haiku-5-5") as rt:
        result = await rt.run(Flow([Node("n", Operation("iterative", ("Read a.md.",)), profile=reader)]))
    seen["status"] = result["n"].status
    seen["requests"] = len(provider.app.requests)

anyio.run(main, backend=sys.argv[1])
seen["anthropic"] = "anthropic" in sys.modules
print(json.dumps(seen))
"""


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_scripted_run_never_imports_the_anthropic_sdk(backend: str) -> None:
    """The scripted provider is the simulator in process; its model list comes from the model table, not the SDK."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPTED_PROBE, backend], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["status"] == "ok" and seen["requests"] == 2 and seen["counted"] > 0
    assert seen["anthropic"] is False
