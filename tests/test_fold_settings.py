"""The fold's profile keys and settings: validated alike from code and from a scenario file."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.config import Profile
from runtime.config.loader import ScenarioError, loads_scenario
from runtime.errors import ConfigError
from runtime.fold.settings import FoldSettings, fold_settings


def scenario(profile_lines: str) -> str:
    return (
        'schema = "foldline.scenario/v1"\nname = "x"\n[profiles.p]\n'
        + profile_lines
        + '\n[[nodes]]\nid = "n"\nprofile = "p"\ninstruction = "go"\n'
    )


def test_the_strategy_keys_default_to_epoch_and_fold() -> None:
    profile = Profile()
    assert (profile.fold_scheduling, profile.context_strategy) == ("epoch", "fold")
    loaded = loads_scenario(
        scenario('fold_scheduling = "immediate"\ncontext_strategy = "compaction"'), path_label="x.toml", tool_names=()
    )
    assert loaded.profiles["p"].fold_scheduling == "immediate"
    assert loaded.profiles["p"].context_strategy == "compaction"


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("fold_scheduling", "epochs", '"epochs" is not one of "epoch", "immediate" (did you mean "epoch"?)'),
        ("fold_scheduling", 1, 'is an integer, not one of "epoch", "immediate"'),
        ("context_strategy", "compact", '"compact" is not one of "fold", "compaction"'),
        ("context_strategy", True, 'is a boolean, not one of "fold", "compaction"'),
    ],
)
def test_bad_values_are_refused_naming_the_key_the_value_and_the_choices(key: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError) as from_code:
        Profile(**{key: value})
    assert str(from_code.value) == f"Profile.{key}: " + str(from_code.value).split(": ", 1)[1]
    assert message in str(from_code.value)
    rendered = f'"{value}"' if isinstance(value, str) else str(value).lower()
    with pytest.raises(ScenarioError) as from_file:
        loads_scenario(scenario(f"{key} = {rendered}"), path_label="x.toml", tool_names=())
    assert str(from_file.value).startswith(f"x.toml: profiles.p.{key}: ")
    assert message in str(from_file.value)


def test_a_fold_is_installed_only_with_context_management_and_a_ceiling() -> None:
    common: dict[str, Any] = {
        "fold_at": 0.8,
        "target": 0.6,
        "tail_margin": 0.045,
        "result_bound": None,
        "caching": False,
        "scheduling": "epoch",
        "strategy": "fold",
    }
    assert fold_settings(context_management=False, ceiling=20_000, **common) is None
    assert fold_settings(context_management=True, ceiling=None, **common) is None
    installed = fold_settings(context_management=True, ceiling=20_000, **common)
    assert installed is not None and installed.fold_line == 16_000 and installed.target_tokens == 12_000
    assert installed.fold_line == 16_000
    assert installed.reached(12_000) and not installed.reached(12_001)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ceiling": 0}, "ceiling: 0 is not a positive integer"),
        ({"ceiling": True}, "ceiling: True is not a positive integer"),
        ({"ceiling": 100, "target": 0.9, "fold_at": 0.8}, "break 0 < target < fold_at <= 1"),
    ],
)
def test_fold_settings_refuse_what_the_profile_would(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FoldSettings(**kwargs)
