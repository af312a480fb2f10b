"""`verify`: schema validation, the reference's refusals and every structural invariant, per log."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import msgspec

from . import fastpath
from .checks import walk_checks
from .digest_spool import DigestSpool
from .engines import EngineChoice, map_units
from .errors import DshAuditError
from .findings import Finding, allowing, counts, ignoring, severity_counts
from .fold import RebuiltRequest
from .generations import generations
from .readers import open_logs
from .readers.discover import Discovery, Found, discover_logs, in_order, no_log_below
from .readers.objects import RemoteLog, RemoteSource
from .readers.spool import spooled
from .readers.stream import is_stream
from .records import LogSource, RequestDigest
from .vocabulary import validate_header, vocabulary
from .walker import Walker

FINDINGS_KEPT = 10_000   # per log; beyond, findings are counted by severity, not kept
# What leaves a log out unread (dsh_audit.log_filter): None, or the option as given and what the log says against it
Select = Callable[[LogSource], tuple[str, str] | None]


class LogReport(msgspec.Struct):
    label: str
    generation: int | None = None    # the log format version read (None: unreadable before its header)
    findings: list[Finding] = msgspec.field(default_factory=list)
    requests: DigestSpool = msgspec.field(default_factory=DigestSpool)   # kept only with keep_requests
    request_count: int = 0
    events: int = 0
    read_error: str | None = None    # the log could not be read at all (exit 2)
    superseded_by: str | None = None  # an older generation, skipped: the newer file read instead
    ignored: str | None = None       # a .jsonl file or database below a directory that is no dsh log: why
    left_out_by: str | None = None   # left out unread by a filter: the option as given (`--since 7d`)
    left_out: str | None = None      # and what the log says against it (`started 2026-11-20 09:30 UTC`)
    seconds: float = 0.0             # wall time spent verifying it (JUnit reports it per test case)
    fast_path: bool = False          # decided by the fast path (dsh_audit.fastpath); the report is the same either way
    unlisted: dict[str, int] = msgspec.field(default_factory=dict)   # findings past FINDINGS_KEPT: counted by severity
    unlisted_rejects: bool = False

    keep_requests: bool = True

    def add(self, request: RebuiltRequest) -> None:
        self.request_count += 1
        if self.keep_requests:
            self.requests.append(RequestDigest.of(request))

    @property
    def skipped(self) -> bool:
        return self.superseded_by is not None

    @property
    def counted(self) -> bool:
        """A log that was read (or failed to be): neither an older generation, a file that is no log, nor one a
        filter left out."""
        return self.superseded_by is None and self.ignored is None and self.left_out_by is None

    def note(self, finding: Finding) -> None:
        """Keep a finding, or past FINDINGS_KEPT count it: a log of a million findings stays bounded."""
        if len(self.findings) < FINDINGS_KEPT:
            self.findings.append(finding)
            return
        self.unlisted[finding.severity] = self.unlisted.get(finding.severity, 0) + 1
        self.unlisted_rejects = self.unlisted_rejects or finding.rejects

    def severities(self) -> dict[str, int]:
        """Every finding by severity, the unlisted ones included."""
        found = dict(self.unlisted)
        for finding in self.findings:
            found[finding.severity] = found.get(finding.severity, 0) + 1
        return found

    @property
    def rejected(self) -> bool:
        return self.unlisted_rejects or any(f.rejects for f in self.findings)

    def failing(self, strict: bool = False) -> int:
        """How many findings fail the log, the unlisted ones included."""
        return (sum(counts(f, strict) for f in self.findings)
                + sum(n for severity, n in self.unlisted.items() if severity_counts(severity, strict)))

    def failed(self, strict: bool = False) -> bool:
        return self.read_error is not None or self.failing(strict) > 0


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


def verify_source(source: LogSource, *, message_prefix: str = "legacy", keep_requests: bool = True,
                  allow_events: tuple[str, ...] = (), ignore: Mapping[str, str] | None = None) -> LogReport:
    """One log's findings and rebuilt request count; the per-request digests too unless `keep_requests` is off
    (then memory stays bounded by the live surface, whatever the log's length). `allow_events`: globs on the
    type of ignorable unknown events whose warnings become notes (findings.allowing); `ignore`: finding codes
    whose findings become notes, each with where it was named (findings.ignoring)."""
    started = time.perf_counter()
    with paused_gc():
        report = _verify_source(source, message_prefix, keep_requests, allow_events, ignore or {})
    report.seconds = time.perf_counter() - started
    return report


def _verify_source(source: LogSource, message_prefix: str, keep_requests: bool,
                   allow_events: tuple[str, ...], ignore: Mapping[str, str]) -> LogReport:
    report = LogReport(label=source.label, generation=source.generation.version, keep_requests=keep_requests)
    decided = fastpath.fast_verify(source, message_prefix=message_prefix, keep_requests=keep_requests)
    if decided is not None:   # no finding at all; otherwise the full verifier below reads the log and words them
        report.fast_path, report.events, report.request_count = True, decided.events, decided.request_count
        report.requests = decided.requests
        return report
    note = noting(report, allow_events, ignore)
    check_header(source, report, note)
    walker = None
    try:
        walker = Walker(source, message_prefix=message_prefix, on_finding=note,
                        checks=walk_checks())
        for walked in walker:
            if walked.closed is not None:
                report.add(walked.closed)
    except DshAuditError as error:   # unreadable from here on: keep what was found before
        report.read_error = str(error)
        report.events = walker.events if walker is not None else 0
        return report
    report.events = walker.events
    check_end(source, report, note)
    return report


def check_header(source: LogSource, report: LogReport, note: Callable[[Finding], None] | None = None) -> None:
    """The full verifier's findings before the walk: the session header against its generation's schema (kept
    in `report`, or through `note`)."""
    for violation in validate_header(source.header, source.generation.version):
        (note or report.note)(Finding("schema", f"session header {violation.pointer or '/'}: {violation.message}",
                                line=source.header_line, log=source.label))


def noting(report: LogReport, allow_events: tuple[str, ...], ignore: Mapping[str, str] | None = None
           ) -> Callable[[Finding], None]:
    """Where the walk's findings go: into `report`, allowed events' warnings and ignored codes' findings as
    notes (findings.allowing, findings.ignoring)."""
    if not allow_events and not ignore:
        return report.note
    allow, accept = allowing(allow_events), ignoring(ignore or {})
    return lambda finding: report.note(accept(allow(finding)))


def check_end(source: LogSource, report: LogReport, note: Callable[[Finding], None] | None = None) -> None:
    """The full verifier's findings once the walk has read the whole log: a torn tail, no event at all (kept in
    `report`, or through `note`)."""
    note = note or report.note
    if source.torn_tail is not None:
        tail = source.torn_tail
        what = (f"dropped torn final line {tail.line} ({tail.dropped_bytes} bytes)" if tail.dropped_bytes
                else f"torn tail after line {tail.line - 1}")
        note(Finding("torn-tail", f"{what}: {tail.reason}", severity="warning", line=tail.line, log=source.label))
    if report.events == 0:
        note(Finding("empty-log", "the log has a header but no events", severity="warning", log=source.label))


def verify_path(path: Found, found_in: Path | None = None, *, message_prefix: str = "legacy",
                keep_requests: bool = True, allow_events: tuple[str, ...] = (),
                ignore: Mapping[str, str] | None = None, select: Select | None = None) -> list[LogReport]:
    """Every session stored at `path`; an unreadable file becomes a report with `read_error` set. `found_in`:
    the folder a walk found it in, from which it is opened without following a link (readers.open_logs). A
    remote log (readers.objects.RemoteLog) is spooled here, where this runs, and named by its URL. A log `select`
    leaves out is a report saying why, not verified."""
    reports: list[LogReport] = []
    try:
        with spooled(path) if isinstance(path, RemoteLog) else nullcontext(path) as local:
            for source in open_logs(local, found_in=found_in):
                outside = select(source) if select is not None else None
                if outside is not None:
                    source.close()
                    reports.append(LogReport(label=source.label, generation=source.generation.version,
                                             left_out_by=outside[0], left_out=outside[1]))
                    continue
                reports.append(verify_source(source, message_prefix=message_prefix, keep_requests=keep_requests,
                                             allow_events=allow_events, ignore=ignore))
    except DshAuditError as error:
        reports.append(LogReport(label=str(path), read_error=str(error)))
    return reports


def verify_paths(paths: Iterable[Path | RemoteSource], *, message_prefix: str = "legacy", jobs: int | None = 1,
                 keep_requests: bool = True, all_generations: bool = False,
                 superseded: Mapping[Path, Path] | None = None, allow_events: tuple[str, ...] = (),
                 ignore: Mapping[str, str] | None = None, select: Select | None = None,
                 engine: EngineChoice | None = None) -> Iterator[LogReport]:
    """Reports for every log below `paths`, in discovery order, then one per older generation skipped in a
    session directory, or of a log picked by --session (`superseded`; all are read with `all_generations`).
    A log `select` leaves out (dsh_audit.log_filter) is reported in its place, unread, with why.
    `jobs` > 1 (None: one per core) verifies logs in that many processes; `engine` runs them on another engine
    (dsh_audit.engines; its own jobs then count, not `jobs`). The reports are the same and in the same order
    whatever the engine and the number of workers."""
    found = discover_logs(list(paths), all_generations=all_generations, superseded=superseded)
    for folder, why in sorted(found.unlisted.items()):   # a gate never passes over what it could not read
        yield LogReport(label=str(folder), read_error=f"{folder}: {why}")
    for link, why in sorted(found.links.items()):
        yield LogReport(label=str(link), read_error=f"{link}: {why}")
    for directory in found.empty:
        yield LogReport(label=str(directory), read_error=f"{directory}: {no_log_below(directory, found)}")
    for url, error in found.unreachable.items():
        yield LogReport(label=url, read_error=str(error))
    yield from _verified(found.files, found, message_prefix, engine or EngineChoice(jobs=jobs), keep_requests,
                         allow_events, ignore, select)
    for older, newer in in_order(found.skipped.items()):
        yield LogReport(label=str(older), superseded_by=str(newer))
    for path, why in sorted(found.ignored.items()):
        yield LogReport(label=str(path), ignored=why)


def _verified(files: list[Found], found: Discovery, message_prefix: str, engine: EngineChoice,
              keep_requests: bool, allow_events: tuple[str, ...], ignore: Mapping[str, str] | None,
              select: Select | None) -> Iterator[LogReport]:
    ambiguous = found.ambiguous
    unit = VerifyUnit(message_prefix, keep_requests, allow_events, dict(ignore or {}),
                      portable=engine.address is not None, select=select)
    # Standard input and pipes are read here: a worker's stdin is not ours, and a pipe is read once. An
    # ambiguous path is a failed row made here.
    here = {path for path in files if path in ambiguous or (isinstance(path, Path) and is_stream(path))}
    readable = [(path, found.found_in.get(path)) for path in files if path not in here]
    if engine.engine == "local" and min(engine.workers, len(readable)) > 1:
        for known in generations():   # load the schemas once, before the pool forks, not once per worker
            vocabulary(known.version)
    # The fast path's decoders are left to the workers: each builds those of the generations it meets, in
    # parallel, where building all five here first (about a second) was serial start-up for every run.
    mapped = map_units(unit, readable, engine) if readable else iter(())
    for path in files:   # the engine's results come in the order of `readable`
        if path in ambiguous:
            yield LogReport(label=str(path), read_error=f"{path}: {ambiguous[path]}")
        else:
            yield from unit((path, found.found_in.get(path))) if path in here else next(mapped)


class VerifyUnit(msgspec.Struct, frozen=True):
    """verify's unit of work, on any engine (dsh_audit.engines): a log's path and the folder a walk found it in
    (or None) -> its reports, an unreadable log a report with `read_error` set (verify_path). Picklable, so a
    Ray or Spark job can map it too (docs/fleet.md). `portable`: the reports' request digests travel as bytes,
    never as a temporary file's name, for a worker on another machine than the one that reads its results."""

    message_prefix: str = "legacy"
    keep_requests: bool = True
    allow_events: tuple[str, ...] = ()
    ignore: Mapping[str, str] = msgspec.field(default_factory=dict)
    portable: bool = False
    select: Select | None = None   # picklable: a LogFilter's bound `outside`

    def __call__(self, found: tuple[Found, Path | None]) -> list[LogReport]:
        path, found_in = found
        reports = verify_path(path, found_in, message_prefix=self.message_prefix, keep_requests=self.keep_requests,
                              allow_events=self.allow_events, ignore=self.ignore, select=self.select)
        for report in reports:
            report.requests.portable = self.portable
        return reports


def summary(reports: list[LogReport], strict: bool = False) -> dict[str, Any]:
    severities = [r.severities() for r in reports]
    return {
        "logs": sum(r.counted for r in reports),
        "skipped": sum(r.skipped for r in reports),
        "ignored": sum(r.ignored is not None for r in reports),
        "leftOut": left_out(reports),
        "failed": sum(r.failed(strict) for r in reports),
        "unreadable": sum(r.read_error is not None for r in reports),
        "requests": sum(r.request_count for r in reports),
        "errors": sum(counted.get("error", 0) for counted in severities),
        "warnings": sum(counted.get("warning", 0) for counted in severities),
        "notes": sum(counted.get("info", 0) for counted in severities),
    }


def left_out(reports: list[LogReport]) -> dict[str, int]:
    """How many logs each filter option left out, by the option as given, in the order first met."""
    by: dict[str, int] = {}
    for report in reports:
        if report.left_out_by is not None:
            by[report.left_out_by] = by.get(report.left_out_by, 0) + 1
    return by
