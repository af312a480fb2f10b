"""`verify`: schema validation, the reference's refusals and every structural invariant, per log."""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from .errors import DshAuditError
from .findings import Finding
from .fold import RebuiltRequest, RequestFold
from .readers import discover, open_logs
from .records import LogSource
from .structure import StructureChecker
from .vocabulary import validate_event, validate_header, vocabulary


@dataclass(slots=True)
class RequestDigest:
    turn: int
    step: int
    attempt: int
    dispatch_seq: int
    sha256: str | None
    inherited: bool
    extends_previous: bool
    causes: list[str]


@dataclass(slots=True)
class LogReport:
    label: str
    findings: list[Finding] = field(default_factory=list)
    requests: list[RequestDigest] = field(default_factory=list)   # kept only with keep_requests
    request_count: int = 0
    events: int = 0
    read_error: str | None = None    # the log could not be read at all (exit 2)
    seconds: float = 0.0             # wall time spent verifying it (JUnit reports it per test case)

    keep_requests: bool = True

    def add(self, request: RebuiltRequest) -> None:
        self.request_count += 1
        if self.keep_requests:
            self.requests.append(_digest(request))

    @property
    def rejected(self) -> bool:
        return any(f.rejects for f in self.findings)

    def failed(self, strict: bool = False) -> bool:
        return self.read_error is not None or any(
            f.severity == "error" or strict for f in self.findings)


def _digest(request: RebuiltRequest) -> RequestDigest:
    return RequestDigest(request.turn, request.step, request.attempt, request.dispatch_seq, request.sha256,
                         request.inherited, request.extends_previous,
                         [f"{c.kind}@{c.seq}: {c.detail}" for c in request.causes])


@contextmanager
def paused_gc() -> Iterator[None]:
    """The fold allocates millions of short-lived, acyclic objects; letting the cyclic collector rescan the
    growing live heap meanwhile makes a long log cost more than linear time. Reference counting frees them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def verify_source(source: LogSource, *, message_prefix: str = "legacy", keep_requests: bool = True) -> LogReport:
    """One log's findings and rebuilt request count; the per-request digests too unless `keep_requests` is off
    (then memory stays bounded by the live surface, whatever the log's length)."""
    started = time.perf_counter()
    with paused_gc():
        report = _verify_source(source, message_prefix, keep_requests)
    report.seconds = time.perf_counter() - started
    return report


def _verify_source(source: LogSource, message_prefix: str, keep_requests: bool) -> LogReport:
    report = LogReport(label=source.label, keep_requests=keep_requests)
    findings = report.findings
    fold = RequestFold(source.header, label=source.label, message_prefix=message_prefix,
                       on_finding=findings.append)
    structure = StructureChecker(fold.finding, seeded=False)
    for violation in validate_header(source.header):
        findings.append(Finding("schema", f"session header {violation.pointer or '/'}: {violation.message}",
                                line=source.header_line, log=source.label))
    last_seq: int | None = None
    try:
        for record in source.records(expand=False):
            report.events += record.count
            closed = fold.feed(record)
            event = fold.last_event
            if event is not None:
                if not record.packed:   # packed members are expanded by us from a row the reader validated
                    for violation in validate_event(event):
                        fold.finding("schema", f"{violation.pointer or '/'}: {violation.message}",
                                     seq=record.seq, event_type=event.get("type"))
                structure.observe(event, record.seq)
            if closed is not None:
                report.add(closed)
            last_seq = record.seq
    except DshAuditError as error:   # unreadable from here on: keep what was found before
        report.read_error = str(error)
        return report
    closed = fold.finish()
    if closed is not None:
        report.add(closed)
    structure.finish(last_seq)
    if source.torn_tail is not None:
        tail = source.torn_tail
        what = (f"dropped torn final line {tail.line} ({tail.dropped_bytes} bytes)" if tail.dropped_bytes
                else f"torn tail after line {tail.line - 1}")
        findings.append(Finding("torn-tail", f"{what}: {tail.reason}", severity="warning", line=tail.line,
                                log=source.label))
    if report.events == 0:
        findings.append(Finding("empty-log", "the log has a header but no events", severity="warning",
                                log=source.label))
    return report


def verify_path(path: Path, *, message_prefix: str = "legacy", keep_requests: bool = True) -> list[LogReport]:
    """Every session stored at `path`; an unreadable file becomes a report with `read_error` set."""
    reports: list[LogReport] = []
    try:
        for source in open_logs(path):
            reports.append(verify_source(source, message_prefix=message_prefix, keep_requests=keep_requests))
    except DshAuditError as error:
        reports.append(LogReport(label=str(path), read_error=str(error)))
    return reports


def verify_paths(paths: Iterable[Path], *, message_prefix: str = "legacy", jobs: int | None = 1,
                 keep_requests: bool = True) -> Iterator[LogReport]:
    """Reports for every log below `paths`, in discovery order. `jobs` > 1 (None: one per core) verifies logs in
    that many processes; the output order stays deterministic."""
    files = discover(list(paths))
    workers = min(jobs or os.cpu_count() or 1, len(files))
    if workers <= 1:
        for path in files:
            yield from verify_path(path, message_prefix=message_prefix, keep_requests=keep_requests)
        return
    vocabulary()   # compile the schemas once, before the workers fork, instead of once per worker
    with ProcessPoolExecutor(max_workers=workers) as pool:
        verify_one = partial(verify_path, message_prefix=message_prefix, keep_requests=keep_requests)
        for reports in pool.map(verify_one, files, chunksize=max(1, len(files) // (workers * 8))):
            yield from reports


def summary(reports: list[LogReport], strict: bool = False) -> dict[str, Any]:
    return {
        "logs": len(reports),
        "failed": sum(r.failed(strict) for r in reports),
        "unreadable": sum(r.read_error is not None for r in reports),
        "requests": sum(r.request_count for r in reports),
        "errors": sum(f.severity == "error" for r in reports for f in r.findings),
        "warnings": sum(f.severity == "warning" for r in reports for f in r.findings),
    }
