"""Packed chunk rows (`text-chunks`, `reasoning-chunks`, `tool-call-chunks`): validation and expansion into
the `assistant/chunk` events they stand for, with the checks and key order of the reference codec
(packages/core/session/src/chunk-rows.ts; the SQLite schema-17 codec adds member and size bounds)."""

from __future__ import annotations

from dataclasses import dataclass

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


def _members(tag: str, data: dict[str, JSON], payload_key: str, bounds: MemberBounds) -> list[str]:
    if not all(is_number(data[key]) for key in ("turn", "step", "index")):
        raise MalformedRow(tag, "turn/step/index must be numbers")
    payload = data[payload_key]
    if not isinstance(payload, list) or not all(isinstance(member, str) for member in payload):
        raise MalformedRow(tag, f"{payload_key} must be an array of strings")
    if len(payload) < bounds.minimum or (bounds.maximum is not None and len(payload) > bounds.maximum):
        upper = "" if bounds.maximum is None else f"..{bounds.maximum}"
        raise MalformedRow(tag, f"{payload_key} must hold {bounds.minimum}{upper} members, "
                                f"got {len(payload)}")
    gaps = data["dt"]
    if not isinstance(gaps, list) or any(safe_int(gap) is None for gap in gaps):
        raise MalformedRow(tag, "dt must be an array of safe integers")
    if len(gaps) != len(payload) - 1:
        raise MalformedRow(tag, f"dt length {len(gaps)} does not match {len(payload)} members")
    return payload


def expand_row(tag: str, seq0: JSON, time0: JSON, data: JSON, *,
               bounds: MemberBounds = MemberBounds()) -> list[dict[str, JSON]]:
    """The events a packed row stands for. `seq0`/`time0` are None in the committed-fixture form: the
    members then carry no `seq`/`time` keys (the reader supplies the position-implied seq separately)."""
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
        members = _members(tag, data, "args", bounds)
    else:
        has_name = False
        if keys != _TEXT_KEYS:
            raise MalformedRow(tag, "data must be exactly {turn, step, index, dt, texts}")
        members = _members(tag, data, "texts", bounds)
    if first_seq is not None and first_seq + len(members) - 1 > MAX_SAFE_INTEGER:
        raise MalformedRow(tag, "member seqs must stay safe integers")

    gaps = [safe_int(gap) or 0 for gap in data["dt"]]
    events: list[dict[str, JSON]] = []
    for k, member in enumerate(members):
        if time is not None and k > 0:
            time += gaps[k - 1]
            if abs(time) > MAX_SAFE_INTEGER:
                raise MalformedRow(tag, "member times must stay safe integers")
        chunk: dict[str, JSON]
        if tag == "tool-call-chunks":
            chunk = {"type": "tool-call-delta", "index": data["index"], "id": data["id"]}
            if has_name:
                chunk["name"] = data["name"]
            chunk["argumentsDelta"] = member
        else:
            chunk = {"type": _DELTA_OF_ROW[tag], "index": data["index"], "text": member}
        event: dict[str, JSON] = {"type": "assistant/chunk"}
        if first_seq is not None:
            event["seq"] = first_seq + k
        if time is not None:
            event["time"] = time
        event["data"] = {"turn": data["turn"], "step": data["step"], "chunk": chunk}
        events.append(event)
    return events
