"""The one walk over a log: each stored record is decoded by its generation's codec (the reader), admitted
and lifted (dsh_audit.admission), folded into requests (dsh_audit.fold) and shown to every check, in one
pass. Verify, rebuild and the reports all consume this walk; a new generation or report is added here or beside
it, never by reading another module's state back; a new check is registered in dsh_audit.checks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

import msgspec

from .admission import Admission
from .errors import LogRejected
from .findings import Finding, FindingSink, Report
from .fold import RebuiltRequest, RequestFold
from .header import HeaderSnapshot
from .records import LogRecord, LogSource

Event = dict[str, Any]


class Walked(msgspec.Struct):
    """One step of the walk. At the end of the log a last step with `record` None may carry the attempt
    that was still open."""

    record: LogRecord | None
    native: Event | None        # the event as its generation's loader admits it (what its schemas describe)
    event: Event | None         # the same, lifted to the newest vocabulary (what the fold and checks read)
    closed: RebuiltRequest | None   # the request attempt this event closed


class Check(Protocol):
    """A verify check fed by the walk. Checks report through the walk's FindingSink."""

    def observe(self, walked: Walked) -> None: ...

    def finish(self, last_seq: int | None) -> None: ...


CheckType = Callable[[Report, LogSource], Check]   # a check class: built per log with the walk's report


def raise_rejections(finding: Finding) -> None:
    """The default for rebuilds: a finding that means dsh would refuse the log stops the walk."""
    if finding.rejects:
        raise LogRejected(finding.message, path=finding.log, line=finding.line, seq=finding.seq,
                          event_type=finding.event_type)


def inherited_cut(source: LogSource, sink: FindingSink) -> int | None:
    """The seq below which a seeded child's events were inherited from its parent, by its generation's rule:
    the header's seedLength (v0/v1), or the last session/end-seed tagged `inherited: true` (v2 on; the marker
    itself is the child's). Only the end of the log tells the last marker, so that is a first pass over a
    fresh copy of the log (children are the only logs that need it)."""
    header = source.header
    if source.generation.seed_cut == "seedLength":
        seed_length = header.get("seedLength")
        return seed_length if isinstance(seed_length, int) and not isinstance(seed_length, bool) else None
    if header.get("isSeeded") is not True:
        return None
    if source.reopen is None:
        sink.report("seed-cut-unknown", "a seeded session's inherited cut is its last inherited session/end-seed, "
                    "and this reader cannot read the log twice: no request is marked inherited",
                    seq=None, event_type=None, severity="warning")
        return None
    cut = None
    for record in source.reopen().records(expand=False):
        event = record.event
        data = event.get("data")
        if event.get("type") == "session/end-seed" and isinstance(data, dict) and data.get("inherited") is True:
            cut = record.seq
    return cut


class Walker:
    """Iterate to walk the log once; `events` counts the stored events seen so far."""

    def __init__(self, source: LogSource, *, message_prefix: str = "legacy", bodies: bool = False,
                 parts: bool = False, on_finding: Callable[[Finding], None] | None = None,
                 checks: Iterable[CheckType] = ()) -> None:
        self.source = source
        self.generation = source.generation
        self.sink = FindingSink(source.label, on_finding or raise_rejections)
        report = self.sink.report
        self.admission = Admission(self.generation, str(source.header.get("id")), report)
        self.fold = RequestFold(source.header, generation=self.generation, report=report,
                                message_prefix=message_prefix, bodies=bodies, parts=parts,
                                seed_cut=inherited_cut(source, self.sink))
        self.checks = [check(report, source) for check in checks]
        self.events = 0
        self.last_seq: int | None = None

    def __iter__(self) -> Iterator[Walked]:
        sink, admit, feed = self.sink, self.admission.admit, self.fold.feed
        observers = [check.observe for check in self.checks]
        expected = 0
        for record in self.source.records(expand=False):
            sink.line = record.line
            seq = record.seq
            run = record.run
            count = 1 if run is None else len(run)
            self.events += count
            if seq != expected:
                sink.report("seq-duplicate" if seq < expected else "seq-gap",
                            f"session event seq {seq} is not contiguous; expected {expected}",
                            seq=seq, event_type=record.event.get("type"), rejects=True)
            expected = seq + count
            if record.problem is not None:
                sink.report("source-ranges", record.problem, seq=seq, event_type=record.event.get("type"),
                            rejects=True)
            native, event = admit(record.event, seq)
            walked = Walked(record, native, event, feed(record, event))
            for observe in observers:
                observe(walked)
            self.last_seq = seq
            yield walked
        last = self.fold.finish()
        for check in self.checks:
            check.finish(self.last_seq)
        if last is not None:
            yield Walked(None, None, None, last)

    @property
    def header(self) -> HeaderSnapshot | None:
        """The request/header snapshot in force after the events walked so far."""
        return self.fold.header

    @property
    def system_head(self) -> Any:
        """From v3: the message of the system head (surface node 0), or None (no head, or an empty one)."""
        return self.fold.surface.head_message

    def requests(self) -> Iterator[RebuiltRequest]:
        """Just the rebuilt requests, in dispatch order."""
        for walked in self:
            if walked.closed is not None:
                yield walked.closed
