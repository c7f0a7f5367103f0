"""``foldline sim`` as a user runs it: a subprocess on a free port, driven by the official SDK over HTTP."""

from __future__ import annotations

import io
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import anthropic
import anyio
import pytest

from runtime.cli import main
from tests.sim_process import foldline_sim

pytestmark = pytest.mark.slow

MODEL = "claude-haiku-5-5"  # minimum cacheable prefix: 512 simulator tokens
SYSTEM = [
    {
        "type": "text",
        "text": "The simulator counts every word of this system prompt. " * 80,
        "cache_control": {"type": "ephemeral"},
    }
]


def admin(url: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method="GET" if body is None else "POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def cached(client: anthropic.Anthropic, text: str = "q") -> tuple[int, int]:
    message = client.messages.create(
        model=MODEL, max_tokens=50, system=SYSTEM, messages=[{"role": "user", "content": text}]
    )
    return message.usage.cache_read_input_tokens or 0, message.usage.cache_creation_input_tokens or 0


def test_ttl_expiry_at_five_minutes_and_a_second_through_the_virtual_clock() -> None:
    with foldline_sim("--clock", "virtual") as sim:
        client = anthropic.Anthropic(base_url=sim.url, api_key="sk-sim", max_retries=0)
        # Warm up (the server loads its tokenizer on its first count), then time only the TTL story.
        client.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": "warm up"}])
        started = time.monotonic()
        start = admin(sim.url, "/_foldline/clock")
        assert start["clock"] == "virtual"
        read, written = cached(client)
        assert read == 0 and written > 0
        admin(sim.url, "/_foldline/clock/advance", {"seconds": 299})
        assert cached(client) == (written, 0)  # read at 4:59 (and the read refreshes the entry)
        moved = admin(sim.url, "/_foldline/clock/advance", {"seconds": 301})
        assert moved["now"] == pytest.approx(start["now"] + 600)
        assert cached(client) == (0, written)  # 5 min + 1 s after the last read: expired, written again
        elapsed = time.monotonic() - started
        client.close()
    # Ten minutes of cache time without waiting for them (a generous bound: a loaded machine is slow, not 600 s slow).
    assert elapsed < 60.0


def test_the_admin_endpoint_refuses_bad_input_and_the_wall_clock_cannot_be_advanced() -> None:
    with foldline_sim("--clock", "virtual") as sim:
        with pytest.raises(urllib.error.HTTPError) as info:
            admin(sim.url, "/_foldline/clock/advance", {"seconds": -1})
        assert info.value.code == 400
        assert "seconds: expected a finite number >= 0, got -1" in json.loads(info.value.read())["error"]["message"]
    with foldline_sim() as sim:
        assert admin(sim.url, "/_foldline/clock")["clock"] == "wall"
        with pytest.raises(urllib.error.HTTPError) as info:
            admin(sim.url, "/_foldline/clock/advance", {"seconds": 1})
        assert "--clock virtual" in json.loads(info.value.read())["error"]["message"]


def test_with_latency_concurrent_identical_requests_each_pay_the_write() -> None:
    async def both(url: str) -> list[tuple[int, int]]:
        client = anthropic.AsyncAnthropic(base_url=url, api_key="sk-sim", max_retries=0)
        results: list[tuple[int, int]] = []

        async def one() -> None:
            message = await client.messages.create(
                model=MODEL, max_tokens=50, system=SYSTEM, messages=[{"role": "user", "content": "q"}]
            )
            results.append((message.usage.cache_read_input_tokens or 0, message.usage.cache_creation_input_tokens or 0))

        async with anyio.create_task_group() as tg:
            tg.start_soon(one)
            tg.start_soon(one)
        await client.close()
        return results

    with foldline_sim("--clock", "virtual", "--latency", "2") as sim:
        results = anyio.run(both, sim.url)
        client = anthropic.Anthropic(base_url=sim.url, api_key="sk-sim", max_retries=0)
        # Neither response had begun when the other started: both wrote. Time has not moved: still unreadable.
        assert [read for read, _ in results] == [0, 0] and all(written > 0 for _, written in results)
        assert cached(client)[0] == 0
        admin(sim.url, "/_foldline/clock/advance", {"seconds": 2})
        assert cached(client)[0] > 0
        client.close()


def test_a_faults_file_and_a_script_file_drive_the_server(tmp_path: Path) -> None:
    faults = tmp_path / "faults.toml"
    faults.write_text('[[faults]]\nkind = "529"\non_request = 1\nnode = "planner"\n', encoding="utf-8")
    script = tmp_path / "script.toml"
    script.write_text(
        'schema = "foldline.sim-script/v1"\n[nodes.planner]\nsteps = [{ text = "first" }, { text = "second" }]\n',
        encoding="utf-8",
    )
    with foldline_sim("--faults", str(faults), "--script", str(script), "--lookback-collapse", "off") as sim:
        client = anthropic.Anthropic(base_url=sim.url, api_key="sk-sim", max_retries=0)
        node = {"x-foldline-node": "planner"}
        with pytest.raises(anthropic.OverloadedError):
            client.messages.create(
                model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "q"}], extra_headers=node
            )
        first = client.messages.create(
            model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "q"}], extra_headers=node
        )
        second = client.messages.create(
            model=MODEL,
            max_tokens=50,
            messages=[
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": "first"},
                {"role": "user", "content": "go on"},
            ],
            extra_headers=node,
        )
        plain = client.messages.create(model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "hello"}])
        client.close()
    assert [first.content[0].text, second.content[0].text] == ["first", "second"]
    assert plain.content[0].text == "Simulated answer to: hello"


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["--latency", "-1"], "--latency: -1.0 is not a finite number >= 0"),
        (["--max-connections", "0"], "--max-connections: 0 is not a positive integer"),
        (["--faults", "missing.toml"], "missing.toml: cannot read the faults file"),
    ],
)
def test_bad_options_exit_2_naming_the_option(options: list[str], expected: str) -> None:
    err = io.StringIO()
    assert main(["sim", "--port", "0", *options], out=io.StringIO(), err=err) == 2
    assert expected in err.getvalue()


def test_a_bad_fault_rule_names_the_file_and_key_path(tmp_path: Path) -> None:
    faults = tmp_path / "faults.toml"
    faults.write_text('[[faults]]\nkind = "explode"\non_request = 1\n', encoding="utf-8")
    err = io.StringIO()
    assert main(["sim", "--faults", str(faults)], out=io.StringIO(), err=err) == 2
    assert f"{faults}: faults[0].kind: 'explode' is not one of" in err.getvalue()


def test_a_bad_script_step_names_the_file_and_key_path(tmp_path: Path) -> None:
    script = tmp_path / "script.toml"
    script.write_text('schema = "foldline.sim-script/v1"\n[nodes.a]\nsteps = [{ txt = "x" }]\n', encoding="utf-8")
    err = io.StringIO()
    assert main(["sim", "--script", str(script)], out=io.StringIO(), err=err) == 2
    assert f"{script}: nodes.a.steps[0]: unknown key 'txt'" in err.getvalue()
