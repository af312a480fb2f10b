"""seq_facts: one description of a seq list shared by the schema, provenance and message/chunk checks."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_audit.seqlist import seq_facts


@pytest.mark.parametrize(("values", "expected"), [
    ([], (True, True, False)),
    ([4, 5, 6], (True, True, True)),
    ([6, 5, 4], (True, True, False)),
    ([4, 6], (True, True, False)),
    ([4, 4, 5], (True, False, False)),
    ([1, True], (False, False, False)),
    ([1, 2.0], (False, False, False)),
    (["1"], (False, False, False)),
])
def test_facts(values: list[Any], expected: tuple[bool, bool, bool]) -> None:
    facts = seq_facts(values)
    assert (facts.all_int, facts.unique, facts.contiguous) == expected


@given(st.lists(st.integers(min_value=-5, max_value=40), max_size=30))
def test_facts_agree_with_the_definitions(values: list[int]) -> None:
    facts = seq_facts(values)
    assert facts.all_int and facts.unique == (len(set(values)) == len(values))
    if values:
        assert (facts.low, facts.high) == (min(values), max(values))
        assert facts.contiguous == (values == list(range(values[0], values[0] + len(values))))
    else:
        assert not facts.contiguous


def test_the_same_list_object_is_described_once_and_a_new_one_afresh() -> None:
    values = [1, 2, 3]
    assert seq_facts(values) is seq_facts(values)
    assert seq_facts([1, 3]).contiguous is False
