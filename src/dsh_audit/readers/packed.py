"""Packed chunk rows (`text-chunks`, `reasoning-chunks`, `tool-call-chunks`): validation and expansion into
the `assistant/chunk` events they stand for, with the checks and key order of the reference codec
(packages/core/session/src/chunk-rows.ts; the SQLite schema-17 codec adds member and size bounds)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import accumulate

import msgspec

from dsh_audit.readers.jsonvalue import MAX_SAFE_INTEGER, is_number, safe_int
from dsh_audit.records import JSON

CHUNK_ROW_TYPES = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})
_DELTA_OF_ROW = {"text-chunks": "text-delta", "reasoning-chunks": "reasoning-delta"}
_TEXT_KEYS = frozenset({"turn", "step", "index", "dt", "texts"})
_TOOL_KEYS = frozenset({"turn", "step", "index", "id", "dt", "args"})


# Members of one packed run (a v0/v1 row, a run in a v2+ stream), refused before the line is parsed: parsed,
# each member is a Python object of 50 bytes or more, from 3 bytes of JSON (13 times the line, measured). A model
# answer of 256k output tokens streams fewer chunks than that.
MAX_MEMBERS = 1 << 20
# A JSON member takes at least 2 bytes (`0,` in dt; `"",` in texts): a shorter line cannot pass the cap.
SCANNED_LINE_BYTES = 2 * MAX_MEMBERS


class _Run(msgspec.Struct):
    texts: msgspec.Raw = msgspec.Raw()
    args: msgspec.Raw = msgspec.Raw()
    dt: msgspec.Raw = msgspec.Raw()


class _Data(_Run):
    stream: list[_Run] = []


class _Line(msgspec.Struct):
    seq: msgspec.Raw = msgspec.Raw()
    seq0: msgspec.Raw = msgspec.Raw()
    data: _Data | None = None


_SKELETON = msgspec.json.Decoder(_Line)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def over_member_cap(line: bytes) -> tuple[int, int | None] | None:
    """(members, seq) of a line holding a packed run of more than MAX_MEMBERS, else None; cheap for a line
    too short to hold one."""
    if len(line) <= SCANNED_LINE_BYTES:
        return None
    run = largest_run(line)
    return run if run is not None and run[0] > MAX_MEMBERS else None


def member_cap_message(members: int) -> str:
    return f"a packed run of {members:,} members, over the cap of {MAX_MEMBERS:,} per run (docs/input-limits.md)"


def largest_run(line: bytes) -> tuple[int, int | None] | None:
    """(members, seq) of the largest packed run a long line holds, counted in its bytes without parsing its
    members; None for a line of another shape (its parse reports it). `seq`: the line's own, when it has one."""
    try:
        skeleton = _SKELETON.decode(line)
    except msgspec.ValidationError:
        return None
    except msgspec.DecodeError:   # a lone surrogate's escape, which JSON.parse (and parse_json) takes: counted
        try:                      # with same-length escapes in its place, a copy only for such a line
            skeleton = _SKELETON.decode(_SURROGATE_ESCAPE.sub(rb"\\u0020", line))
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
    if skeleton.data is None:
        return None
    members = max((_count(run) for run in [skeleton.data, *skeleton.data.stream]), default=0)
    seq = _small_int(skeleton.seq) if skeleton.seq else _small_int(skeleton.seq0)
    return members, seq


def _count(run: _Run) -> int:
    """Members of a run: its strings (a backslash escapes the next byte, so escaped backslashes go first and the
    quotes left unescaped delimit them), or its gaps plus one, whichever is more."""
    most = 0
    for payload in (run.texts, run.args):
        raw = bytes(payload)
        if raw.startswith(b"["):
            bare = raw.replace(b"\\\\", b"")
            most = max(most, (bare.count(b'"') - bare.count(b'\\"')) // 2)
    gaps = bytes(run.dt)
    if gaps.startswith(b"[") and gaps.strip(b"[] \t\r\n"):
        most = max(most, gaps.count(b",") + 2)
    return most


def _small_int(raw: msgspec.Raw) -> int | None:
    try:
        value = msgspec.json.decode(raw) if raw else None
    except msgspec.DecodeError:
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class MalformedRow(ValueError):
    """A row-tagged value that is not a valid packed row: corrupt storage, never skipped."""

    def __init__(self, tag: str, why: str) -> None:
        super().__init__(f"malformed {tag} storage row: {why}")


class MemberBounds(msgspec.Struct, frozen=True):
    """How many members a row may hold. JSONL accepts any non-empty run; SQLite schema 17 bounds it."""

    minimum: int = 1
    maximum: int | None = None


_ANY_RUN = MemberBounds()   # JSONL's


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


class PackedRow(msgspec.Struct, frozen=True):
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

    def events(self) -> Iterator[dict[str, JSON]]:
        """Every member as the `assistant/chunk` event it stands for, in the reference's key order, one at a
        time: a run of a million members is never a million events at once."""
        time = self.first_time
        gaps = self.data["dt"]
        assert isinstance(gaps, list)
        for k in range(len(self.members)):
            if time is not None and k > 0:
                time += int(gaps[k - 1])   # bounds were checked by check_row
            yield self._event(k, time)


def _times_stay_safe(time: int, gaps: list[JSON], bounds: tuple[int, int]) -> bool:
    """Whether time0 plus every running sum of the gaps stays a safe integer (time0 itself is one). With
    non-negative gaps the running sums rise from time0 to time0 + sum: one bound instead of a pass."""
    low, total = bounds
    if low >= 0:
        return time + total <= MAX_SAFE_INTEGER
    times = list(accumulate(gaps, initial=time))
    return bool(max(times) <= MAX_SAFE_INTEGER and min(times) >= -MAX_SAFE_INTEGER)


def check_row(tag: str, seq0: JSON, time0: JSON, data: JSON, *,
              bounds: MemberBounds = _ANY_RUN) -> PackedRow:
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
