"""What a reader yields: the session header plus a stream of decoded events, each with its location.

Readers live at the edge (dsh_audit.readers); everything downstream of this module is pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, BinaryIO, Protocol

import msgspec

from .generations import Generation, generation

JSON = Any  # a decoded JSON value


class PackedRun(Protocol):
    """A stored run of delta chunks (a packed row), kept packed: `events()` gives the members, one at a time."""

    def __len__(self) -> int: ...

    def events(self) -> Iterator[dict[str, Any]]: ...


class LogRecord(msgspec.Struct):
    """One decoded event.

    `event` is the event object as stored (type, data, and where present seq, time, surfaceOp,
    sourceEventSeqs, ignorable). Members of a packed chunk row arrive already expanded into
    `assistant/chunk` events carrying the row's line. `seq` is the explicit seq when the stored event has
    one, otherwise the position-implied seq (the committed-fixture convention).

    A packed row read with `records(expand=False)` is one record standing for `count` events: `event` is its
    first member and `run` holds them all. Delta chunks never open, close or bill an attempt, so the fold
    handles a whole run at the cost of one event.
    """

    line: int
    seq: int
    event: dict[str, JSON]
    packed: bool = False
    explicit_seq: bool = False
    run: PackedRun | None = None
    problem: str | None = None      # why the generation's decoder refuses this row (kept as stored)

    @property
    def count(self) -> int:
        return 1 if self.run is None else len(self.run)


class TornTail(msgspec.Struct):
    """What a reader dropped at the end of a crash-truncated log, and why."""

    line: int
    dropped_bytes: int
    reason: str


# dsh did not exist before 2024: a createdAt before then is a placeholder (generated and scrubbed logs write 0,
# 700, 1000...), not a start time, and no filter, overview or rollup reads it as one.
EARLIEST_START_MS = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp() * 1000)


def started_ms(header: Mapping[str, object]) -> int | None:
    """When the session of this header started (its createdAt, epoch milliseconds), or None where it logs no
    start dsh could have written (before EARLIEST_START_MS)."""
    created = header.get("createdAt")
    if isinstance(created, int) and not isinstance(created, bool) and created >= EARLIEST_START_MS:
        return created
    return None


@dataclass(slots=True)
class LogSource:
    """An opened log: its header now, its events on iteration (streamed, never all in memory).

    `label` names the log in findings (a file path, or `path#sessionId` for one session of a SQLite store).
    `torn_tail` is filled in by the reader once iteration reaches the end. `reopen` opens the same log
    afresh (a second pass, for what only the end of a log tells); None when the reader cannot. `open_file` opens
    the file of a log file source again, as its reader opened it (never through a link the reader would not
    follow), for a second reader of its bytes (the fast path); None for any other source. `close` releases
    what the source holds open (its records close it themselves once read to the end).
    """

    label: str
    header: dict[str, JSON]
    header_line: int
    _events: Iterator[LogRecord] = field(repr=False)
    torn_tail: TornTail | None = None
    explicit_seq: bool = False
    reopen: Callable[[], LogSource] | None = field(default=None, repr=False)
    on_close: Callable[[], None] | None = field(default=None, repr=False)
    open_file: Callable[[int], BinaryIO] | None = field(default=None, repr=False)   # its buffer size

    @property
    def generation(self) -> Generation:
        """The log generation its header names (a header without `version` is v0, as in old fixtures)."""
        version = self.header.get("version", 0)
        return generation(int(version))

    def close(self) -> None:
        if self.on_close is not None:
            self.on_close()

    def records(self, *, expand: bool = True) -> Iterator[LogRecord]:
        """The events, streamed. `expand=False` keeps each packed row as one run record (see LogRecord)."""
        return self._events if not expand else _expanded(self._events)


def _expanded(records: Iterator[LogRecord]) -> Iterator[LogRecord]:
    for record in records:
        if record.run is None:
            yield record
            continue
        for k, event in enumerate(record.run.events()):
            yield LogRecord(line=record.line, seq=record.seq + k, event=event, packed=True,
                            explicit_seq=record.explicit_seq)


class RequestDigest(msgspec.Struct):
    """One rebuilt request as verify reports it (and `rebuild --format digest` prints it), from either verifier:
    `causes` as `kind@seq: detail`."""

    turn: int
    step: int
    attempt: int
    dispatch_seq: int
    sha256: str | None
    inherited: bool
    extends_previous: bool
    causes: list[str]

    @classmethod
    def of(cls, request: Any) -> RequestDigest:
        """Of the fold's RebuiltRequest, or the fast verifier's request."""
        return cls(request.turn, request.step, request.attempt, request.dispatch_seq, request.sha256,
                   request.inherited, request.extends_previous,
                   [f"{cause.kind}@{cause.seq}: {cause.detail}" for cause in request.causes])
