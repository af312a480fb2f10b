"""The logged numbers a report holds, checked where they enter it.

A report's integer columns are 64-bit (polars Int64, Parquet INT64) and its costs are floats. dsh is a
JavaScript program: it writes an integer exactly only up to Number.MAX_SAFE_INTEGER (2**53 - 1), and that is the
bound its schemas give (schemas/common.schema.json: SafeInt, NonNegativeInt), so a report takes a logged integer
only inside it: a token count is an integer from 0 to 2**53 - 1, an event's time, turn and step an integer of at
most 2**53 - 1 either side of zero. Anything else stops the report with one line naming the file, line, seq,
event type and field (exit 2), where verify reports the same value as a `schema` finding. A sum of such counts
can still pass 2**63 - 1 (1,024 calls of 2**53 tokens): `checked_total` refuses that too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, TypeGuard

from ..errors import DshAuditError
from ..readers.jsonvalue import MAX_SAFE_INTEGER
from ..records import LogRecord

MAX_INT64 = 2**63 - 1
# The events a call row reads its usage, turn and step from (fold.py, model_calls.py).
CALL_EVENTS = frozenset({"assistant/chunk", "assistant/message", "assistant/attempt", "compaction/summary"})
TOKEN_FIELDS = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens", "reasoningTokens",
                "totalTokens")   # schemas/common.schema.json TokenUsage
_SHOWN = 40   # characters of a bad value in the message: 10**400 is 401 digits


def is_count(value: object) -> TypeGuard[int | float]:
    """A token count a report holds: an integer (integral JSON numbers included, as the schema reads them) from 0
    to 2**53 - 1."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return (isinstance(value, int) or value.is_integer()) and 0 <= value <= MAX_SAFE_INTEGER


def _fits(value: object) -> bool:
    """An integer the fold takes (int, not bool) within the safe range; values of other types it never reads."""
    return not isinstance(value, int) or isinstance(value, bool) or abs(value) <= MAX_SAFE_INTEGER


def _usages(data: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(pointer, usage) for each usage object of a call event: its own, a v0/v1 usage chunk's, or one in a v2-on
    embedded stream."""
    if isinstance(data.get("usage"), dict):
        yield "/data/usage", data["usage"]
    chunk = data.get("chunk")
    if isinstance(chunk, dict) and chunk.get("type") == "usage" and isinstance(chunk.get("usage"), dict):
        yield "/data/chunk/usage", chunk["usage"]
    stream = data.get("stream")
    for index, record in enumerate(stream if isinstance(stream, list) else ()):
        chunk = record.get("chunk") if isinstance(record, dict) else None
        if isinstance(chunk, dict) and chunk.get("type") == "usage" and isinstance(chunk.get("usage"), dict):
            yield f"/data/stream/{index}/chunk/usage", chunk["usage"]


def _shown(value: object) -> str:
    """The value as JSON writes it (a float as Python reads it: 1e400 is inf)."""
    text = repr(value) if isinstance(value, float) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN - 1]}… ({len(text)} characters)"


def _problem(event: dict[str, Any]) -> str | None:
    if not _fits(event.get("time")):
        return f"/time: {_shown(event['time'])} is not a time a report holds (an integer within ±2**53-1)"
    data = event.get("data")
    if event.get("type") not in CALL_EVENTS or not isinstance(data, dict):
        return None
    for key in ("turn", "step"):
        if not _fits(data.get(key)):
            return f"/data/{key}: {_shown(data[key])} is not a {key} a report holds (an integer within ±2**53-1)"
    for pointer, usage in _usages(data):
        for key in TOKEN_FIELDS:
            if key in usage and not is_count(usage[key]):
                return (f"{pointer}/{key}: {_shown(usage[key])} is not a token count a report holds "
                        f"(an integer from 0 to 2**53-1)")
    return None


def check_numbers(record: LogRecord, event: dict[str, Any] | None, label: str) -> None:
    """Raise a one-line DshAuditError where `event` carries a number a report's rows cannot hold."""
    problem = None if event is None else _problem(event)
    if event is not None and problem is not None:
        raise DshAuditError(problem, path=label, line=record.line, seq=record.seq, event_type=str(event.get("type")))


def checked_total(total: int, column: str, log: str | None) -> int:
    """A sum of in-range counts (of one log, or of all: `log` None), refused once it passes what an Int64 column
    holds."""
    if total > MAX_INT64:
        over = "this log's" if log is not None else "the logs'"
        raise DshAuditError(f"{over} {column} add up to {total}, past 2**63-1, the most a report column holds",
                            path=log)
    return total
