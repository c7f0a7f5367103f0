"""The pricing table: packaged data, user files, validation, and what calls cost."""

from __future__ import annotations

import datetime
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.errors import ConfigError
from runtime.inputs.toml_text import TOO_DEEP
from runtime.models.pricing import ZERO_COST, Cost, PriceTier, PricingTable
from runtime.values.usage import Usage

DEFAULT = PricingTable.load_default()

GOOD_ENTRY = """
schema = "foldline.pricing/v1"

[models.my-model]
source = "https://example.com/pricing"
read_on = 2026-10-01

[[models.my-model.tiers]]
max_prompt_tokens = 50000
input = 1.0
output = 4.0

[[models.my-model.tiers]]
input = 2.0
"""


def write(tmp_path, text: str, name: str = "prices.toml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- packaged data -------------------------------------------------------------


# A user's table that knows only some prices (what the packaged table once held for claude-haiku-5-5).
PARTIAL = PricingTable.from_toml(
    """
schema = "foldline.pricing/v1"
[models.partial-model]
source = "a test's own figures"
read_on = 2026-12-04
[[models.partial-model.tiers]]
max_prompt_tokens = 100000
input = 0.10
cache_read = 0.01
cache_write_5m = 0.125
[[models.partial-model.tiers]]
""",
    "partial.toml",
)


def test_packaged_table_has_every_model_the_readme_and_scenarios_run_each_with_source_and_date() -> None:
    assert {entry.model for entry in DEFAULT.models} == {
        "claude-haiku-5-5",
        "claude-haiku-4-5",
        "claude-sonnet-4-6",
        "claude-sonnet-4",
        "claude-sonnet-4-5",
        "claude-opus-4-6",
        "claude-opus-5",
        "gpt-5-mini",
    }
    for entry in DEFAULT.models:
        assert entry.source and isinstance(entry.read_on, datetime.date)
        assert not re.match(r"^(/|~|[A-Za-z]:\\)", entry.source)


def test_haiku_is_tier_priced_at_100k_with_every_price() -> None:
    entry = DEFAULT.entry("claude-haiku-5-5")
    assert entry is not None and entry.is_tier_priced and DEFAULT.is_tier_priced("claude-haiku-5-5")
    assert entry.tiers[0] == PriceTier(
        max_prompt_tokens=100_000, input=0.10, output=0.50, cache_read=0.01, cache_write_5m=0.125, cache_write_1h=0.20
    )
    assert entry.tiers[1] == PriceTier(
        max_prompt_tokens=None, input=0.50, output=2.50, cache_read=0.05, cache_write_5m=0.625, cache_write_1h=1.00
    )
    assert entry.source.startswith("https://platform.claude.com/docs/en/models/haiku-5-5/overview")
    # D6: a 60,000-token five-minute suffix costs $0.0075 to write against $0.0006 to read
    assert 60_000 * entry.tiers[0].cache_write_5m / 1e6 == pytest.approx(0.0075)
    assert 60_000 * entry.tiers[0].cache_read / 1e6 == pytest.approx(0.0006)


def test_sonnet_4_is_tier_priced_at_200k_with_derived_cache_prices() -> None:
    first, second = DEFAULT.entry("claude-sonnet-4").tiers
    assert (first.max_prompt_tokens, first.input, first.output) == (200_000, 3.0, 15.0)
    assert (second.max_prompt_tokens, second.input, second.output) == (None, 6.0, 22.5)
    for tier in (first, second):
        assert tier.cache_write_5m == pytest.approx(tier.input * 1.25)
        assert tier.cache_write_1h == pytest.approx(tier.input * 2)
        assert tier.cache_read == pytest.approx(tier.input * 0.1)
    assert "multipliers" in DEFAULT.entry("claude-sonnet-4").source


@pytest.mark.parametrize(
    "model, prices",
    [
        ("claude-sonnet-4-5", (3.0, 15.0, 0.30, 3.75, 6.0)),
        ("claude-sonnet-4-6", (3.0, 15.0, 0.30, 3.75, 6.0)),
        ("claude-haiku-4-5", (1.0, 5.0, 0.10, 1.25, 2.0)),
        ("claude-opus-4-6", (5.0, 25.0, 0.50, 6.25, 10.0)),
    ],
)
def test_flat_entries(model: str, prices: tuple) -> None:
    assert not DEFAULT.is_tier_priced(model)
    tier = DEFAULT.first_tier(model)
    assert tier.max_prompt_tokens is None
    assert (tier.input, tier.output, tier.cache_read, tier.cache_write_5m, tier.cache_write_1h) == prices
    assert DEFAULT.entry(model).source.startswith("https://platform.claude.com/docs/en/about-claude/pricing")


def test_unknown_model_queries() -> None:
    assert DEFAULT.entry("gpt-x") is None
    assert DEFAULT.first_tier("gpt-x") is None
    assert not DEFAULT.is_tier_priced("gpt-x")


# --- user files ------------------------------------------------------------------


def test_user_file_adds_and_overrides_by_model(tmp_path) -> None:
    user = PricingTable.load(
        write(
            tmp_path,
            GOOD_ENTRY
            + """
[models.claude-opus-4-6]
source = "internal price sheet 2026-Q4"
read_on = "2026-10-20"

[[models.claude-opus-4-6.tiers]]
input = 4.0
""",
        )
    )
    merged = DEFAULT.merged_with(user)
    assert merged.entry("my-model").tiers[0].max_prompt_tokens == 50_000
    assert merged.is_tier_priced("my-model")
    assert merged.entry("claude-opus-4-6").tiers == (PriceTier(max_prompt_tokens=None, input=4.0),)
    assert merged.entry("claude-opus-4-6").read_on == datetime.date(2026, 10, 20)
    assert merged.entry("claude-sonnet-4-5") == DEFAULT.entry("claude-sonnet-4-5")
    assert DEFAULT.entry("claude-opus-4-6").tiers[0].input == 5.0  # the packaged table is unchanged


def test_a_user_file_nested_too_deep_or_malformed_is_refused_naming_it(tmp_path) -> None:
    deep = write(tmp_path, "x = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError) as info:  # before: a RecursionError out of tomllib
        PricingTable.load(deep)
    assert str(info.value) == f"{deep}: not valid TOML: {TOO_DEEP}"
    bad = write(tmp_path, 'schema = "foldline.pricing/v1"\n[models\n', name="bad.toml")
    with pytest.raises(
        ConfigError, match=rf"^{re.escape(str(bad))}: not valid TOML: line 2, column 8: TOML syntax error"
    ):
        PricingTable.load(bad)


def test_an_empty_models_table_is_a_valid_file(tmp_path) -> None:
    table = PricingTable.load(write(tmp_path, 'schema = "foldline.pricing/v1"\n'))
    assert table.models == ()


def _refused(tmp_path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        PricingTable.load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    return message


@pytest.mark.parametrize(
    "edit, expected",
    [
        (
            ("read_on = 2026-10-01", 'read_on = 2026-10-01\ncurrency = "EUR"'),
            r"models\.my-model\.currency: unknown key",
        ),
        (("input = 2.0", "input = 2.0\nbatch = 0.5"), r"models\.my-model\.tiers\[1\]\.batch: unknown key"),
        (('schema = "foldline.pricing/v1"', 'schema = "foldline.pricing/v1"\nversion = 2'), r"version: unknown key"),
        (("input = 1.0", "input = -1.0"), r"models\.my-model\.tiers\[0\]\.input: -1\.0 is not a non-negative price"),
        (("output = 4.0", "output = nan"), r"tiers\[0\]\.output: nan is not a non-negative price"),
        (("output = 4.0", "output = inf"), r"tiers\[0\]\.output: inf is not a non-negative price"),
        (("output = 4.0", 'output = "4"'), r"tiers\[0\]\.output: '4' is not a number"),
        (("output = 4.0", "output = true"), r"tiers\[0\]\.output: True is not a number"),
        (('source = "https://example.com/pricing"\n', ""), r"models\.my-model\.source: missing"),
        (("read_on = 2026-10-01\n", ""), r"models\.my-model\.read_on: missing"),
        (('source = "https://example.com/pricing"', 'source = ""'), r"models\.my-model\.source: '' is not a URL"),
        (('source = "https://example.com/pricing"', 'source = "/home/me/prices.txt"'), r"is a path on a machine"),
        (('source = "https://example.com/pricing"', 'source = "C:\\\\prices.txt"'), r"is a path on a machine"),
        (("read_on = 2026-10-01", "read_on = 2026-10-01T10:00:00"), r"read_on: .* is a date and time"),
        (("read_on = 2026-10-01", 'read_on = "last week"'), r"read_on: 'last week' is not a date"),
        (
            ("input = 2.0", "max_prompt_tokens = 900000\ninput = 2.0"),
            r"tiers\[1\]\.max_prompt_tokens: 900000 on the last tier",
        ),
        (("max_prompt_tokens = 50000\n", ""), r"tiers\[0\]\.max_prompt_tokens: missing"),
        (
            ("max_prompt_tokens = 50000", "max_prompt_tokens = 0"),
            r"tiers\[0\]\.max_prompt_tokens: 0 is not a positive integer",
        ),
        (
            ("max_prompt_tokens = 50000", "max_prompt_tokens = 5e4"),
            r"max_prompt_tokens: 50000\.0 is not a positive integer",
        ),
        (
            ('schema = "foldline.pricing/v1"', 'schema = "foldline.pricing/v2"'),
            r"schema: 'foldline\.pricing/v2'; expected",
        ),
        (('schema = "foldline.pricing/v1"\n', ""), r"schema: None; expected"),
        (("input = 1.0", "input = 1.0 ="), r"not valid TOML"),
    ],
)
def test_validation_names_the_file_and_key_path(tmp_path, edit: tuple[str, str], expected: str) -> None:
    old, new = edit
    assert old in GOOD_ENTRY
    assert re.search(expected, _refused(tmp_path, GOOD_ENTRY.replace(old, new, 1)))


def test_unsorted_tiers_are_refused(tmp_path) -> None:
    text = GOOD_ENTRY.replace(
        "[[models.my-model.tiers]]\ninput = 2.0",
        "[[models.my-model.tiers]]\nmax_prompt_tokens = 40000\ninput = 2.0\n\n[[models.my-model.tiers]]\ninput = 3.0",
    )
    message = _refused(tmp_path, text)
    assert "models.my-model.tiers[1].max_prompt_tokens: 40000 is not above the previous tier's 50000" in message


def test_a_model_with_no_tiers_is_refused(tmp_path) -> None:
    text = 'schema = "foldline.pricing/v1"\n[models.x]\nsource = "doc"\nread_on = 2026-01-01\ntiers = []\n'
    assert "models.x.tiers: expected a non-empty array of tables" in _refused(tmp_path, text)


def test_a_quoted_model_name_is_quoted_in_the_key_path(tmp_path) -> None:
    text = 'schema = "foldline.pricing/v1"\n[models."vendor.model-1"]\nsource = "doc"\nread_on = 2026-01-01\nsize = 3\n'
    assert 'models."vendor.model-1".size: unknown key' in _refused(tmp_path, text)


def test_a_missing_file_and_a_non_utf8_file_are_config_errors(tmp_path) -> None:
    missing = tmp_path / "absent.toml"
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(missing))}: cannot read the pricing file"):
        PricingTable.load(missing)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b'schema = "\xff"')
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        PricingTable.load(binary)


def test_from_mapping_refuses_a_model_entry_that_is_not_a_table() -> None:
    with pytest.raises(ConfigError, match=r"^here: models\.m: expected a table"):
        PricingTable.from_mapping({"schema": "foldline.pricing/v1", "models": {"m": 3}}, "here")


def test_a_table_cannot_hold_one_model_twice() -> None:
    entry = DEFAULT.entry("claude-opus-4-6")
    with pytest.raises(ValueError, match="'claude-opus-4-6' appears twice"):
        PricingTable((entry, entry))


# --- costs -----------------------------------------------------------------------

USAGE = Usage(
    input_tokens=1_000,
    cache_read_input_tokens=50_000,
    cache_write_5m_tokens=4_000,
    cache_write_1h_tokens=2_000,
    output_tokens=500,
)


def test_flat_model_cost_in_base_input_token_units_and_dollars() -> None:
    cost = DEFAULT.cost(USAGE, "claude-sonnet-4-5")
    # fresh x1 + read x0.1 + 5m x1.25 + 1h x2 + output x (15 / 3)
    assert cost.bit == pytest.approx(1_000 + 5_000 + 5_000 + 4_000 + 2_500)
    assert cost.output_priced
    usd = (1_000 * 3 + 50_000 * 0.30 + 4_000 * 3.75 + 2_000 * 6 + 500 * 15) / 1e6
    assert cost.usd == pytest.approx(usd)
    assert DEFAULT.cost_bit(USAGE, "claude-sonnet-4-5") == cost.bit
    assert DEFAULT.cost_usd(USAGE, "claude-sonnet-4-5") == cost.usd


def test_unknown_output_price_excludes_output_from_bit_and_leaves_dollars_unknown() -> None:
    usage = Usage(input_tokens=1_000, cache_read_input_tokens=50_000, output_tokens=500)
    cost = PARTIAL.cost(usage, "partial-model")
    assert cost == Cost(bit=pytest.approx(6_000), usd=None, output_priced=False)
    assert PARTIAL.missing_prices(usage, "partial-model") == ("partial-model output (prompts up to 100,000 tokens)",)
    # without output the first tier's known prices give dollars
    no_output = Usage(input_tokens=1_000, cache_read_input_tokens=50_000, cache_write_5m_tokens=40_000)
    assert PARTIAL.cost(no_output, "partial-model").usd == pytest.approx(
        (1_000 * 0.10 + 50_000 * 0.01 + 40_000 * 0.125) / 1e6
    )
    assert PARTIAL.missing_prices(no_output, "partial-model") == ()
    # a one-hour write has no known price
    assert PARTIAL.cost_usd(Usage(input_tokens=10, cache_write_1h_tokens=5_000), "partial-model") is None


def test_tier_is_chosen_by_the_total_input_with_cache_reads_and_writes_counted() -> None:
    at_bound = Usage(input_tokens=10_000, cache_read_input_tokens=190_000, output_tokens=100)
    over = Usage(input_tokens=10_001, cache_read_input_tokens=190_000, output_tokens=100)
    assert at_bound.total_input == 200_000 and over.total_input == 200_001
    assert DEFAULT.cost_usd(at_bound, "claude-sonnet-4") == pytest.approx((10_000 * 3 + 190_000 * 0.3 + 100 * 15) / 1e6)
    assert DEFAULT.cost_usd(over, "claude-sonnet-4") == pytest.approx((10_001 * 6 + 190_000 * 0.6 + 100 * 22.5) / 1e6)
    # output weighs at the tier's own output/input ratio: 15/3 below, 22.5/6 above
    assert DEFAULT.cost_bit(at_bound, "claude-sonnet-4") == pytest.approx(10_000 + 19_000 + 500)
    assert DEFAULT.cost_bit(over, "claude-sonnet-4") == pytest.approx(10_001 + 19_000 + 375)


def test_a_request_past_the_first_tier_is_billed_at_the_second() -> None:
    big = Usage(input_tokens=100_001)
    assert DEFAULT.cost_usd(Usage(input_tokens=100_000), "claude-haiku-5-5") == pytest.approx(0.01)
    assert DEFAULT.cost_usd(big, "claude-haiku-5-5") == pytest.approx(100_001 * 0.50 / 1e6)
    # where the second tier's prices are unknown, the dollars are unknown and the missing price is named
    assert PARTIAL.cost_usd(big, "partial-model") is None
    assert PARTIAL.cost_bit(big, "partial-model") == 100_001
    assert PARTIAL.missing_prices(big, "partial-model") == ("partial-model input (prompts over 100,000 tokens)",)
    assert DEFAULT.missing_prices(big, "nobodys-model") == ("nobodys-model: no entry",)
    assert DEFAULT.missing_prices(Usage(), "nobodys-model") == ()


def test_unknown_model_has_bit_cost_without_output_and_no_dollars() -> None:
    cost = DEFAULT.cost(USAGE, "someone-elses-model")
    assert cost == Cost(bit=pytest.approx(1_000 + 5_000 + 5_000 + 4_000), usd=None, output_priced=False)


def test_zero_usage_costs_nothing_even_where_prices_are_unknown() -> None:
    assert PARTIAL.cost(Usage(), "partial-model") == Cost(bit=0.0, usd=0.0, output_priced=False)


def test_costs_add_and_unknown_dollars_stay_unknown() -> None:
    known = DEFAULT.cost(USAGE, "claude-sonnet-4-5")
    unknown = PARTIAL.cost(USAGE, "partial-model")
    assert (ZERO_COST + known) == known
    total = known + unknown
    assert total.bit == pytest.approx(known.bit + unknown.bit)
    assert total.usd is None and not total.output_priced


def test_cost_refuses_usage_that_is_not_a_usage() -> None:
    with pytest.raises(TypeError, match="expected a runtime.values.usage.Usage"):
        DEFAULT.cost({"input_tokens": 3}, "claude-sonnet-4-5")  # type: ignore[arg-type]


@given(
    usage=st.builds(
        Usage,
        input_tokens=st.integers(0, 300_000),
        cache_read_input_tokens=st.integers(0, 300_000),
        cache_write_5m_tokens=st.integers(0, 300_000),
        cache_write_1h_tokens=st.integers(0, 300_000),
        output_tokens=st.integers(0, 50_000),
    ),
    model=st.sampled_from(["partial-model", "claude-haiku-5-5", "nobodys-model"]),
)
def test_dollars_are_unknown_exactly_when_a_missing_price_is_named(usage: Usage, model: str) -> None:
    table = DEFAULT.merged_with(PARTIAL)
    missing = table.missing_prices(usage, model)
    assert (table.cost_usd(usage, model) is None) == bool(missing)
    assert all(name.startswith(model) for name in missing)
