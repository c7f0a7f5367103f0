"""A scenario's `[pricing]` table prices its run; a run whose dollars are unknown names the missing price."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from support import skip_unless_extra_for

from actors.tools import BUILTIN_TOOLS
from runtime.cli import main
from runtime.config.loader import loads_scenario
from runtime.errors import ConfigError
from runtime.models.pricing import PricingTable

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
QUICKSTART = (SCENARIOS / "quickstart.toml").read_text(encoding="utf-8")

# Every price of claude-haiku-5-5 a thousand times the packaged one, first tier only (the run stays under 100,000).
EXPENSIVE = """
[pricing.models.claude-haiku-5-5]
source = "a test's own figures"
read_on = 2026-12-04

[[pricing.models.claude-haiku-5-5.tiers]]
input = 100.0
output = 500.0
cache_read = 10.0
cache_write_5m = 125.0
cache_write_1h = 200.0
"""


def run(tmp_path: Path, text: str) -> tuple[int, dict, str, str]:
    scenario, report = tmp_path / "s.toml", tmp_path / "r.json"
    scenario.write_text(text, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    code = main(["run", str(scenario), "--report", str(report), "--quiet"], out=out, err=err)
    data = json.loads(report.read_text()) if report.exists() else {}
    return code, data, out.getvalue(), err.getvalue()


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.toml")), ids=lambda p: p.stem)
def test_every_shipped_scenario_reports_dollars(path: Path, tmp_path: Path) -> None:
    skip_unless_extra_for(path)
    report = tmp_path / f"{path.stem}.json"
    main(["run", str(path), "--report", str(report), "--quiet"], out=io.StringIO(), err=io.StringIO())
    cost = json.loads(report.read_text())["cost"]
    assert cost["usd"] is not None and cost["usd"] > 0 and cost["missing_prices"] == [], (path.name, cost)


@pytest.mark.slow
def test_a_scenario_pricing_table_replaces_the_packaged_prices_for_its_model(tmp_path: Path) -> None:
    code, packaged, _, err = run(tmp_path, QUICKSTART)
    assert code == 0, err
    code, priced, out, err = run(tmp_path, QUICKSTART + EXPENSIVE)
    assert code == 0, err
    assert priced["usage"] == packaged["usage"]
    assert priced["cost"]["usd"] == pytest.approx(
        packaged["cost"]["usd"] * 1000, rel=1e-3
    )  # the report rounds to 6 places
    assert f"${priced['cost']['usd']:.6f}" in out


@pytest.mark.slow
def test_a_run_on_an_unpriced_model_names_the_missing_price_and_how_to_give_it(tmp_path: Path) -> None:
    assert PricingTable.load_default().entry("claude-opus-4-7") is None  # served by the simulator, not priced
    code, data, out, err = run(tmp_path, QUICKSTART.replace('model = "claude-haiku-5-5"', 'model = "claude-opus-4-7"'))
    assert code == 0, err
    assert data["cost"]["usd"] is None and data["cost"]["missing_prices"] == ["claude-opus-4-7: no entry"]
    assert "dollars unknown: no price for claude-opus-4-7: no entry" in out
    assert "[pricing.models." in out and "README's Prices section" in out


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("[pricing]\nmodels = 3\n", "pricing: models: expected a table of model entries, got 3"),
        ("pricing = 3\n", "pricing"),
        (EXPENSIVE.replace("input = 100.0", "input = -1.0"), "tiers[0].input: -1.0 is not a non-negative price"),
        (EXPENSIVE.replace('source = "a test\'s own figures"\n', ""), "claude-haiku-5-5.source: missing"),
        ("[pricing]\nsize = 1\n", "pricing: size: unknown key"),
    ],
)
def test_a_bad_pricing_table_is_refused_naming_its_key(table: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        loads_scenario(QUICKSTART + table, path_label="s.toml", tool_names=BUILTIN_TOOLS.names())
    assert "s.toml" in str(info.value) and message in str(info.value)


@pytest.mark.slow
def test_the_readme_pricing_example_prices_a_model_the_packaged_table_lacks(tmp_path: Path) -> None:
    readme = (SCENARIOS.parent / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Prices") :]
    example = section[section.index("```toml\n") + len("```toml\n") : section.index("```\n", section.index("```toml"))]
    text = QUICKSTART.replace('model = "claude-haiku-5-5"', 'model = "claude-opus-4-7"') + example
    code, data, out, err = run(tmp_path, text)
    assert code == 0, err
    assert data["cost"]["usd"] is not None and data["cost"]["usd"] > 0 and data["cost"]["missing_prices"] == []
