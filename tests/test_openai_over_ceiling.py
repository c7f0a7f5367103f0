"""Nothing goes over its ceiling by the server's count on the chat face either (issue 18).

Chat completions has no count-tokens endpoint, so an uncalibrated model is
measured at its family's uncalibrated maximum (``actors.exact_count.family_maximum``:
1.0 for a family tokenized with o200k_base, else 2.0, the most the simulator's
token factor may be). Every shipped scenario
runs on the openai provider against the simulator's chat face
(``scripts/over_ceiling_by_server.py``'s tally) with a model of no listed
family (``gpt-sim``: the face counts it by its factor, 1.15 or 1.37; the
maximum 2.0 stands in) and with one OpenAI tokenizes with o200k_base
(``gpt-5-mini``: the face counts it exactly; the maximum is 1.0). The
contrast shows what the bound prevents: with every family at 1.0 (before
issue 18) the same runs went over.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("openai")

from test_exact_count import OVER

import actors.exact_count

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
SCENARIOS = OVER.scenario_paths()


@pytest.fixture
def anyio_backend() -> str:
    """Whole scenario runs, on asyncio only: they are the script's tally, twenty runs of the provider paths that
    tests/test_openai_provider.py and tests/test_sim_chat_tokens.py run on asyncio and trio."""
    return "asyncio"


@pytest.mark.parametrize("factor", OVER.FACTORS)
@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
async def test_a_model_of_no_listed_family_never_goes_over_by_the_servers_count(path: Path, factor: float) -> None:
    tally = await OVER.scenario_tally(path, factor, "openai", "gpt-sim")
    assert tally.responses > 0 and tally.over == 0, tally.worst
    assert tally.count_calls == 0  # no endpoint: the prior decided


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
async def test_a_model_counted_exactly_never_goes_over_by_the_servers_count(path: Path) -> None:
    tally = await OVER.scenario_tally(path, max(OVER.FACTORS), "openai", "gpt-5-mini")
    assert tally.responses > 0 and tally.over == 0, tally.worst


@pytest.mark.parametrize(("name", "factor"), [("ceiling.toml", 1.37), ("vision.toml", 1.37)], ids=str)
async def test_without_the_priors_the_same_runs_went_over(
    name: str, factor: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(actors.exact_count, "family_maximum", lambda model: 1.0)  # every family at 1.0, as before
    path = next(p for p in SCENARIOS if p.name == name)
    tally = await OVER.scenario_tally(path, factor, "openai", "gpt-sim")
    assert tally.over >= 1, "the contrast no longer shows what the priors prevent"
