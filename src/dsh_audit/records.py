"""What a reader yields: the session header plus a stream of decoded events, each with its location.

Readers live at the edge (dsh_audit.readers); everything downstream of this module is pure.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

JSON = Any  # a decoded JSON value


@dataclass(slots=True)
class LogRecord:
    """One decoded event.

    `event` is the event object as stored (type, data, and where present seq, time, surfaceOp,
    sourceEventSeqs, ignorable). Members of a packed chunk row arrive already expanded into
    `assistant/chunk` events carrying the row's line. `seq` is the explicit seq when the stored event has
    one, otherwise the position-implied seq (the committed-fixture convention).
    """

    line: int
    seq: int
    event: dict[str, JSON]
    packed: bool = False
    explicit_seq: bool = False


@dataclass(slots=True)
class TornTail:
    """What a reader dropped at the end of a crash-truncated log, and why."""

    line: int
    dropped_bytes: int
    reason: str


@dataclass(slots=True)
class LogSource:
    """An opened log: its header now, its events on iteration (streamed, never all in memory).

    `label` names the log in findings (a file path, or `path#sessionId` for one session of a SQLite store).
    `torn_tail` is filled in by the reader once iteration reaches the end.
    """

    label: str
    header: dict[str, JSON]
    header_line: int
    _events: Iterator[LogRecord] = field(repr=False)
    torn_tail: TornTail | None = None
    explicit_seq: bool = False

    def records(self) -> Iterator[LogRecord]:
        return self._events
