"""Facts about one list of seqs, computed once per list object.

An assistant message's sourceEventSeqs cites hundreds of chunk seqs, and three checks read it: the schema
(integers, bounds, uniqueness), the reference's provenance rule (safe, non-negative, unique, earlier) and the
message-vs-chunks comparison (membership). One pass serves all three; a contiguous run, the usual case, is
recognised without building a set.
"""

from __future__ import annotations

from typing import Any

import msgspec


class SeqFacts(msgspec.Struct, frozen=True):
    all_int: bool       # every item is an int (bool and float are not); the other fields need it
    low: int = 0        # smallest and largest item (0 for an empty list)
    high: int = 0
    unique: bool = True
    contiguous: bool = False  # non-empty and exactly low, low + 1, ..., high in that order


_NOT_ALL_INT = SeqFacts(all_int=False, unique=False)
_last: tuple[list[Any], SeqFacts] | None = None   # the list most recently described, kept alive by the holder


def seq_facts(values: list[Any]) -> SeqFacts:
    """The facts of `values`. Lists are not mutated after decoding, so the same object has the same facts."""
    global _last
    last = _last
    if last is not None and last[0] is values:
        return last[1]
    facts = _describe(values)
    _last = (values, facts)
    return facts


def _describe(values: list[Any]) -> SeqFacts:
    if not set(map(type, values)) <= {int}:
        return _NOT_ALL_INT
    if not values:
        return SeqFacts(all_int=True)
    first, last = values[0], values[-1]
    if last - first == len(values) - 1 and values == list(range(first, last + 1)):
        return SeqFacts(all_int=True, low=first, high=last, unique=True, contiguous=True)
    return SeqFacts(all_int=True, low=min(values), high=max(values), unique=len(set(values)) == len(values))
