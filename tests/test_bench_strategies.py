"""Strategies: one profile override each, applied to every profile of the same workload."""

from __future__ import annotations

import attrs
import pytest

from runtime.bench import workloads
from runtime.bench.strategies import (
    API_STRATEGIES,
    STRATEGIES,
    Strategy,
    StrategyNotBuilt,
    strategy_named,
)
from runtime.config import Profile
from runtime.errors import ConfigError


def test_the_strategies_in_table_order() -> None:
    names = list(STRATEGIES)
    assert names[:6] == ["naive", "cache-only", "compaction", "fold-immediate", "foldline", "foldline-cost"]
    assert names[6:] == [s.name for s in API_STRATEGIES] and names[6] == "api-clear-tool-uses"
    assert all(name.startswith(("api-clear-tool-uses", "api-compaction")) for name in names[6:])


@pytest.mark.parametrize("name", [name for name, s in STRATEGIES.items() if not s.not_built])
def test_each_override_reaches_every_profile_and_leaves_the_rest_alone(name: str) -> None:
    strategy = STRATEGIES[name]
    scenario = workloads.build("fanout", workloads.SMALL)
    applied = strategy.apply(scenario)
    assert set(applied.profiles) == set(scenario.profiles)
    for profile_name, profile in applied.profiles.items():
        original = scenario.profiles[profile_name]
        for key, value in strategy.override.items():
            assert getattr(profile, key) == value
        edited = {"server_context_edits"} if strategy.edits else set()
        untouched = {f.name for f in attrs.fields(Profile)} - set(strategy.override) - edited
        assert all(getattr(profile, k) == getattr(original, k) for k in untouched)
    assert applied.nodes == scenario.nodes


def test_the_baselines_have_no_ceiling_and_the_others_keep_the_workloads() -> None:
    scenario = workloads.build("reading-20k", workloads.SMALL)
    ceiling = scenario.profiles["default"].max_input_tokens
    assert STRATEGIES["naive"].apply(scenario).profiles["default"].max_input_tokens == "none"
    assert STRATEGIES["cache-only"].apply(scenario).profiles["default"].max_input_tokens == "none"
    for name in ("compaction", "fold-immediate", "foldline", "foldline-cost"):
        profile = STRATEGIES[name].apply(scenario).profiles["default"]
        assert profile.max_input_tokens == ceiling and profile.context_management and profile.prompt_caching


def test_a_strategy_needing_a_key_this_build_lacks_says_it_is_not_built() -> None:
    future = Strategy("future", "needs a key nobody has", {"prompt_caching": True, "fold_quantum": 3})
    assert future.missing_keys() == ("fold_quantum",)
    with pytest.raises(
        StrategyNotBuilt, match=r"strategy 'future' is not built yet: it needs the profile key\(s\) fold_quantum"
    ):
        future.apply(workloads.build("fits", workloads.SMALL))


def test_a_bad_override_value_names_the_strategy_and_the_workload() -> None:
    broken = Strategy("broken", "a bad value", {"context_fold_at": 2})
    with pytest.raises(ConfigError, match=r"strategy 'broken' on workload 'fits': .*context_fold_at"):
        broken.apply(workloads.build("fits", workloads.SMALL))


def test_unknown_strategies_are_refused_by_name() -> None:
    assert strategy_named("foldline") is STRATEGIES["foldline"]
    with pytest.raises(ConfigError, match="strategy 'fold' is not one of naive, cache-only"):
        strategy_named("fold")
