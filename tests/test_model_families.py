"""The model table's token priors by family (issue 18): documented, sourced, bounded, longest prefix first."""

from __future__ import annotations

import pytest

from runtime.errors import ConfigError
from runtime.models.limits import MAX_TOKEN_PRIOR, ModelTable, default_model_table

HEAD = 'schema = "foldline.models/v1"\n'


def table(families: str) -> ModelTable:
    return ModelTable.from_toml(HEAD + families, "t.toml")


def family(prefix: str, body: str) -> str:
    return f'[families."{prefix}"]\nsource = "a record"\nread_on = 2026-12-01\n{body}\n'


def test_every_packaged_family_says_where_its_prior_comes_from() -> None:
    families = default_model_table().families
    assert families, "the packaged table lists no family"
    for prefix, entry in families.items():
        assert entry.prefix == prefix and entry.source.strip() and entry.read_on
        assert 1.0 <= entry.token_prior <= MAX_TOKEN_PRIOR
        assert (entry.tokenizer == "o200k_base") == (entry.token_prior == 1.0), prefix


def test_the_longest_prefix_names_the_family() -> None:
    t = table(family("gpt-4", "token_prior = 1.2") + family("gpt-4o", 'token_prior = 1.0\ntokenizer = "o200k_base"'))
    assert t.token_prior("gpt-4o-mini") == 1.0 and t.token_prior("gpt-4-turbo") == 1.2
    assert t.token_prior("mistral-large") == 1.2  # no family: the largest prior listed
    assert ModelTable({}).token_prior("anything") == 1.0  # a table that lists none: our count


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("token_prior = 0.9", "families.x.token_prior: 0.9 is not a number from 1.0 to 2.0"),
        ("token_prior = 2.5", "families.x.token_prior: 2.5 is not a number from 1.0 to 2.0"),
        ('token_prior = "1.2"', "families.x.token_prior: '1.2' is not a number"),
        ("token_prior = true", "families.x.token_prior: True is not a number"),
        ("", "families.x.token_prior: None is not a number"),
        ('token_prior = 1.2\ntokenizer = "o200k_base"', "a family tokenized with o200k_base (ours) has the prior 1.0"),
        ("token_prior = 1.2\ntokenizer = 3", "families.x.tokenizer: 3 is not a tokenizer name"),
        ("token_prior = 1.2\nratio = 1.1", "families.x.ratio: unknown key"),
    ],
)
def test_a_bad_family_is_refused_naming_the_key(body: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        table(family("x", body))
    assert "t.toml: families.x" in str(caught.value) and message in str(caught.value)


def test_a_family_without_a_source_or_date_is_refused() -> None:
    with pytest.raises(ConfigError, match="families.x.source: missing"):
        table('[families."x"]\nread_on = 2026-12-01\ntoken_prior = 1.1\n')
    with pytest.raises(ConfigError, match="families.x.read_on"):
        table('[families."x"]\nsource = "s"\ntoken_prior = 1.1\n')
    with pytest.raises(ConfigError, match="families: expected a table"):
        table("families = 3\n")
