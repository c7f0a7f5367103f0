"""What a Temporal worker parses once for every workflow task of its flows: the scenario and the price table.

Needs the ``temporal`` extra (skipped without it); no server: these are the pure parts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("temporalio", reason="the Temporal engine needs the temporal extra: pip install -e '.[temporal]'")

from actors.tools import BUILTIN_TOOLS
from runtime.config.loader import ScenarioError, loads_scenario
from runtime.models.pricing import PricingTable
from runtime.temporal.parsed import default_pricing, scenario_of
from runtime.temporal.worker import DEV_SERVER_ARGS, QUEUE_POLL_RPS

ROOT = Path(__file__).resolve().parent.parent


def test_a_scenario_text_is_parsed_once_and_equals_a_fresh_parse() -> None:
    text = (ROOT / "scenarios" / "quickstart.toml").read_text(encoding="utf-8")
    first = scenario_of(text, "quickstart.toml")
    assert scenario_of(text, "quickstart.toml") is first  # the worker's parse, kept
    assert first == loads_scenario(text, path_label="quickstart.toml", tool_names=BUILTIN_TOOLS.names())
    other = (ROOT / "scenarios" / "fold.toml").read_text(encoding="utf-8")
    assert scenario_of(other, "fold.toml").name != first.name


def test_a_bad_scenario_is_refused_every_time_naming_its_label() -> None:
    text = 'schema = "foldline.scenario/v1"\nname = "x"\n[[nodes]]\nid = 3\n'
    for _ in range(2):  # an error is not kept: each workflow that reads it fails with the reason
        with pytest.raises(ScenarioError, match="bad.toml"):
            scenario_of(text, "bad.toml")


def test_the_price_table_is_the_packaged_one_read_once() -> None:
    assert default_pricing() == PricingTable.load_default()
    assert default_pricing() is default_pricing()


def test_the_dev_server_reads_its_task_queues_often_and_starts_flows_eagerly() -> None:
    values = [DEV_SERVER_ARGS[i + 1] for i in range(0, len(DEV_SERVER_ARGS), 2)]
    assert all(flag == "--dynamic-config-value" for flag in DEV_SERVER_ARGS[::2])
    assert f"history.transferProcessorMaxPollRPS={QUEUE_POLL_RPS}" in values
    assert f"history.timerProcessorMaxPollRPS={QUEUE_POLL_RPS}" in values
    assert "system.enableEagerWorkflowStart=true" in values
