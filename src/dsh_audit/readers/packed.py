"""Packed chunk rows (`text-chunks`, `reasoning-chunks`, `tool-call-chunks`): validation and expansion into
the `assistant/chunk` events they stand for, with the checks and key order of the reference codec
(packages/core/session/src/chunk-rows.ts; the SQLite schema-17 codec adds member and size bounds)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

from dsh_audit.readers.jsonvalue import MAX_SAFE_INTEGER, is_number, safe_int
from dsh_audit.records import JSON

CHUNK_ROW_TYPES = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})
_DELTA_OF_ROW = {"text-chunks": "text-delta", "reasoning-chunks": "reasoning-delta"}
_TEXT_KEYS = frozenset({"turn", "step", "index", "dt", "texts"})
_TOOL_KEYS = frozenset({"turn", "step", "index", "id", "dt", "args"})


class MalformedRow(ValueError):
    """A row-tagged value that is not a valid packed row: corrupt storage, never skipped."""

    def __init__(self, tag: str, why: str) -> None:
        super().__init__(f"malformed {tag} storage row: {why}")


@dataclass(frozen=True, slots=True)
class MemberBounds:
    """How many members a row may hold. JSONL accepts any non-empty run; SQLite schema 17 bounds it."""

    minimum: int = 1
    maximum: int | None = None


def _gap_bounds(values: list[JSON]) -> tuple[int, int] | None:
    """(smallest gap, sum of gaps) when every dt gap is a safe integer, else None. The common case, all
    non-negative ints, costs a type pass, a min and a sum at C speed: then no gap exceeds the sum."""
    if set(map(type, values)) <= {int}:
        if not values:
            return 0, 0
        low, total = min(values), sum(values)
        if (low >= 0 and total <= MAX_SAFE_INTEGER) or (low >= -MAX_SAFE_INTEGER
                                                        and max(values) <= MAX_SAFE_INTEGER):
            return low, total
        return None
    if not all(safe_int(value) is not None for value in values):
        return None
    numbers = [int(value) for value in values]   # non-empty: an empty list took the branch above
    return min(numbers), sum(numbers)


def _members(tag: str, data: dict[str, JSON], payload_key: str, bounds: MemberBounds
             ) -> tuple[list[str], tuple[int, int]]:
    if not all(is_number(data[key]) for key in ("turn", "step", "index")):
        raise MalformedRow(tag, "turn/step/index must be numbers")
    payload = data[payload_key]
    if not isinstance(payload, list) or not set(map(type, payload)) <= {str}:
        raise MalformedRow(tag, f"{payload_key} must be an array of strings")
    if len(payload) < bounds.minimum or (bounds.maximum is not None and len(payload) > bounds.maximum):
        upper = "" if bounds.maximum is None else f"..{bounds.maximum}"
        raise MalformedRow(tag, f"{payload_key} must hold {bounds.minimum}{upper} members, "
                                f"got {len(payload)}")
    gaps = data["dt"]
    bounds_of_gaps = _gap_bounds(gaps) if isinstance(gaps, list) else None
    if bounds_of_gaps is None:
        raise MalformedRow(tag, "dt must be an array of safe integers")
    if len(gaps) != len(payload) - 1:
        raise MalformedRow(tag, f"dt length {len(gaps)} does not match {len(payload)} members")
    return payload, bounds_of_gaps


@dataclass(frozen=True, slots=True)
class PackedRow:
    """A validated packed row: a run of same-block delta chunks of one step, kept packed until someone needs
    the members (the fold only looks at the first: deltas never open, close or bill an attempt)."""

    tag: str
    first_seq: int | None       # seq0; None in the committed-fixture form
    first_time: int | None      # time0
    data: dict[str, JSON]
    members: list[str]
    has_name: bool

    def __len__(self) -> int:
        return len(self.members)

    def _event(self, k: int, time: int | None) -> dict[str, JSON]:
        data = self.data
        chunk: dict[str, JSON]
        if self.tag == "tool-call-chunks":
            chunk = {"type": "tool-call-delta", "index": data["index"], "id": data["id"]}
            if self.has_name:
                chunk["name"] = data["name"]
            chunk["argumentsDelta"] = self.members[k]
        else:
            chunk = {"type": _DELTA_OF_ROW[self.tag], "index": data["index"], "text": self.members[k]}
        event: dict[str, JSON] = {"type": "assistant/chunk"}
        if self.first_seq is not None:
            event["seq"] = self.first_seq + k
        if time is not None:
            event["time"] = time
        event["data"] = {"turn": data["turn"], "step": data["step"], "chunk": chunk}
        return event

    def first_event(self) -> dict[str, JSON]:
        return self._event(0, self.first_time)

    def events(self) -> list[dict[str, JSON]]:
        """Every member as the `assistant/chunk` event it stands for, in the reference's key order."""
        time = self.first_time
        gaps = self.data["dt"]
        assert isinstance(gaps, list)
        events = []
        for k in range(len(self.members)):
            if time is not None and k > 0:
                time += int(gaps[k - 1])   # bounds were checked by check_row
            events.append(self._event(k, time))
        return events


def _times_stay_safe(time: int, gaps: list[JSON], bounds: tuple[int, int]) -> bool:
    """Whether time0 plus every running sum of the gaps stays a safe integer (time0 itself is one). With
    non-negative gaps the running sums rise from time0 to time0 + sum: one bound instead of a pass."""
    low, total = bounds
    if low >= 0:
        return time + total <= MAX_SAFE_INTEGER
    times = list(accumulate(gaps, initial=time))
    return bool(max(times) <= MAX_SAFE_INTEGER and min(times) >= -MAX_SAFE_INTEGER)


def check_row(tag: str, seq0: JSON, time0: JSON, data: JSON, *,
              bounds: MemberBounds = MemberBounds()) -> PackedRow:
    """Validate a packed row as the reference's decoder does. `seq0`/`time0` are None in the committed-fixture
    form: the members then carry no `seq`/`time` keys (the reader supplies the position-implied seq)."""
    first_seq = None if seq0 is None else safe_int(seq0)
    if seq0 is not None and (first_seq is None or first_seq < 0):
        raise MalformedRow(tag, "seq0 must be a non-negative safe integer")
    time = None if time0 is None else safe_int(time0)
    if time0 is not None and time is None:
        raise MalformedRow(tag, "time0 must be a safe integer")
    if not isinstance(data, dict):
        raise MalformedRow(tag, "data must be an object")
    keys = set(data)
    if tag == "tool-call-chunks":
        has_name = keys == _TOOL_KEYS | {"name"}
        if not has_name and keys != _TOOL_KEYS:
            raise MalformedRow(tag, "data must be exactly {turn, step, index, id, name?, dt, args}")
        if not isinstance(data["id"], str) or (has_name and not isinstance(data["name"], str)):
            raise MalformedRow(tag, "id (and name when present) must be strings")
        members, gap_bounds = _members(tag, data, "args", bounds)
    else:
        has_name = False
        if keys != _TEXT_KEYS:
            raise MalformedRow(tag, "data must be exactly {turn, step, index, dt, texts}")
        members, gap_bounds = _members(tag, data, "texts", bounds)
    if first_seq is not None and first_seq + len(members) - 1 > MAX_SAFE_INTEGER:
        raise MalformedRow(tag, "member seqs must stay safe integers")
    if time is not None and not _times_stay_safe(time, data["dt"], gap_bounds):
        raise MalformedRow(tag, "member times must stay safe integers")
    return PackedRow(tag, first_seq, time, data, members, has_name)
