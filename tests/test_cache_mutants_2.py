"""More cache rules a mutation run found unpinned (scripts/mutation): each test names the rule it pins.

Like ``test_cache_mutants.py``: every test here was written against a mutant of
``runtime/cache`` that the module's other tests let through, named in the
comment above it.
"""

from __future__ import annotations

import pytest

from runtime.cache.errors import CacheInputError
from runtime.cache.ledger import CacheLedger


# ledger CacheLedger.__attrs_post_init__ mutmut_2: a bool is not a row count (True would pass as 1).
@pytest.mark.parametrize("flag", [True, False])
def test_a_ledger_refuses_a_bool_as_its_row_bound(flag):
    with pytest.raises(CacheInputError) as refused:
        CacheLedger(max_rows=flag)
    assert str(refused.value) == f"max_rows {flag!r} is not a positive integer"
