"""What `audit report` shows of each log, from one walk of it: the walk's findings are verify's (its checks run
in it), its steps give cache-report's calls (CallTaker) and header-diff's snapshots (SnapshotTaker). The three
parts are what build_cache_report (with its defaults), build_header_diff and verify_paths give over the same logs,
read once instead of three times. Where the fast path decides a log, one pass of it gives all three instead
(reports.fast_walk); where it declines, the log is walked in full, as verify walks it.

Logs are walked in the order the commands read them, but a fork parent before its children (header-diff's Run),
so the parts are handed on file by file in the commands' order: a result walked early waits for its turn.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import polars as pl

from .. import stopping
from ..checks import walk_checks
from ..errors import DshAuditError
from ..findings import Finding
from ..model_calls import Call
from ..readers.discover import (
    Discovery,
    Skipped,
    Unreadable,
    discover_logs,
    each_read,
    in_order,
    local_files,
    skipped_generations,
)
from ..readers.home import SessionOrigin, session_origin
from ..records import LogSource
from ..verify import LogReport, check_end, check_header, noting, paused_gc
from ..walker import Walker
from .cache_report import CacheFrames, CacheOptions, CacheReport, CallTaker, calls_frame
from .fast_walk import fast_parts
from .filters import CallFilter, filtered
from .header_diff import COLUMNS, ForkPoints, LogHeaders, Run, Snapshot, SnapshotTaker, log_headers
from .html import VerifyFindings, verify_findings
from .prediction import RealHeader
from .render import rows_frame

OPTIONS = CacheOptions()   # the page's figures are cache-report's with its defaults
# A run of at most this many files (a session folder: a log and its forks) keeps each log open from the first pass,
# which reads the headers of the run, to its walk; a larger one (a flat folder of logs) opens each log again to
# walk it, so that what stays open is bounded (a reader's buffers, a file descriptor).
KEPT_OPEN = 16


@dataclass(slots=True)
class PageParts:
    """The page's three parts over the same logs."""

    cache: CacheReport          # build_cache_report's, with CacheOptions()
    headers: pl.DataFrame       # build_header_diff's rows
    findings: VerifyFindings    # verify_findings of verify_paths' reports
    origins: dict[str, SessionOrigin]   # by log label: when and where each session began, from its header


def read_once(paths: Iterable[str | os.PathLike[str]], *, all_generations: bool = False,
              superseded: Mapping[Path, Path] | None = None, allow_events: tuple[str, ...] = ()) -> PageParts:
    """The page's parts from one walk of each log at `paths` (an older generation picked by --session is in
    `superseded`; `allow_events` as verify takes them). When no log can be read at all, the first reason raises,
    as build_cache_report raises it."""
    reading = _Reading(allow_events)
    findings = verify_findings(reading.reports(paths, all_generations, superseded))
    cache = reading.cache()
    shown = set(cache.logs["log"].to_list())   # a log cache-report cannot read has no row to date
    origins = {label: origin for label, origin in reading.origins.items() if label in shown}
    cache = replace(cache, cwds={label: origin.cwd for label, origin in origins.items()})   # for --project
    return PageParts(cache, reading.headers(), findings, origins)


def narrowed(parts: PageParts, chosen: CallFilter) -> PageParts:
    """The parts of the calls `chosen` keeps, as cache-report narrows its report (reports.filters): the
    figures of the calls kept, and the header changes and verify's findings of the logs that keep any."""
    if not chosen:
        return parts
    cache = filtered(parts.cache, chosen)
    kept = pl.col("log").is_in(cache.logs["log"].to_list())
    findings = VerifyFindings(parts.findings.shown.filter(kept), parts.findings.tally.filter(kept),
                              parts.findings.skipped)
    origins = {label: origin for label, origin in parts.origins.items() if label in set(cache.logs["log"])}
    return PageParts(cache, parts.headers.filter(kept), findings, origins)


@dataclass(slots=True)
class Walked:
    """One log's three parts once walked: verify's report, its unjudged call rows or why cache-report cannot
    read it, and its header-diff rows."""

    report: LogReport
    frame: pl.DataFrame | None
    cache_error: DshAuditError | None
    header_rows: list[dict[str, object]] = field(default_factory=list)
    origin: SessionOrigin | None = None   # when and where the session began, once its header is read


class _Reading:
    """The walk of every log, handing on verify's reports as verify_paths yields them and keeping the cache
    frames and header rows. A folder's logs are a run: when its first file comes, the session headers of all its
    files are read (a fork's parent may come after its child), then each log is walked, its parent first."""

    def __init__(self, allow_events: tuple[str, ...]) -> None:
        self.allow_events = allow_events
        self.frames = CacheFrames(OPTIONS)
        self.failures: list[tuple[Unreadable, DshAuditError]] = []   # as read_each keeps them, in its order
        self.read_any = False
        self.skipped: list[Skipped] = []
        self.runs: dict[Path, tuple[int, Run]] = {}   # by folder: where header-diff puts the run, and the run
        self.places: dict[int, tuple[Run, int]] = {}  # by id of a LogHeaders: its run, its place in it
        self.opened: dict[Path, list[LogHeaders] | Exception] = {}   # each file's logs, or why not, till its turn
        self.walked: dict[int, Walked] = {}          # by id of a LogHeaders: walked, not yet handed on
        self.header_rows: dict[int, list[dict[str, object]]] = {}
        self.origins: dict[str, SessionOrigin] = {}

    def reports(self, paths: Iterable[str | os.PathLike[str]], all_generations: bool,
                superseded: Mapping[Path, Path] | None) -> Iterator[LogReport]:
        """verify_paths' reports, in its order; the cache frames and header rows are kept on the way."""
        found = discover_logs(paths, all_generations=all_generations, superseded=superseded)
        self.skipped = skipped_generations(found)
        handed: list[LogReport] = []

        def walk_file(file: Path, _found_in: Path | None) -> None:
            stopping.check()   # a stop Python could not raise where it landed ends the run here, not at its end
            if file not in self.opened:
                self._open_run(file.parent, found)
            logs = self.opened.pop(file)
            if isinstance(logs, Exception):
                raise logs   # each_read names the file with it
            for log in logs:
                run, k = self.places[id(log)]
                for j in run.order(k):
                    self.walked[id(run.members[j])] = self._walk(run, j)
            handed.extend(self._hand_on(file, logs))

        for label, error in each_read(found, walk_file):
            if error is not None:
                self.failures.append((Unreadable(str(label), str(error)), error))
                yield LogReport(label=str(label), read_error=str(error))
            yield from handed
            handed.clear()
        for older, newer in in_order(found.skipped.items()):
            yield LogReport(label=str(older), superseded_by=str(newer))
        for path, why in sorted(found.ignored.items()):
            yield LogReport(label=str(path), ignored=why)

    def _open_run(self, folder: Path, found: Discovery) -> None:
        """The session headers of every file of the run in `folder` (header-diff's first pass). A run of at most
        KEPT_OPEN files keeps each log open for its walk."""
        files = [(k, file) for k, file in enumerate(local_files(found))
                 if file.parent == folder and file not in found.ambiguous]
        members: list[LogHeaders] = []
        first = None
        for k, file in files:
            try:
                logs = log_headers(file, found.found_in.get(file), keep=len(files) <= KEPT_OPEN)
            except (DshAuditError, OSError) as error:
                self.opened[file] = error
                continue
            self.opened[file] = logs
            members += logs
            first = k if first is None and logs else first
        if first is None:
            return
        run = Run.of(members)
        self.runs[folder] = (first, run)
        self.places.update((id(log), (run, k)) for k, log in enumerate(members))

    def _hand_on(self, file: Path, logs: list[LogHeaders]) -> Iterator[LogReport]:
        """One file's parts, in its logs' order: all its call rows, or it is unreadable to cache-report."""
        walked = [self.walked.pop(id(log)) for log in logs]
        for log, one in zip(logs, walked, strict=True):
            self.header_rows[id(log)] = one.header_rows
        error = next((one.cache_error for one in walked if one.cache_error is not None), None)
        if error is not None:
            self.failures.append((Unreadable(str(file), str(error)), error))
        else:
            self.read_any = True
            for log, one in zip(logs, walked, strict=True):
                assert one.frame is not None
                self.frames.add(log.label, log.generation, log.session_id, one.frame)
        for one in walked:
            yield one.report

    def _walk(self, run: Run, k: int) -> Walked:
        walked = walk_log(run, k, self.allow_events)
        if walked.origin is not None:
            self.origins[walked.report.label] = walked.origin
        return walked

    def cache(self) -> CacheReport:
        if self.failures and not self.read_any:
            raise self.failures[0][1]
        return self.frames.finish([unreadable for unreadable, _ in self.failures], self.skipped)

    def headers(self) -> pl.DataFrame:
        runs = [run for _, run in sorted(self.runs.values(), key=lambda placed: placed[0])]
        rows = [row for run in runs for log in run.members for row in self.header_rows[id(log)]]
        return rows_frame(rows, COLUMNS) if rows else pl.DataFrame(schema=COLUMNS)


def walk_log(run: Run, k: int, allow_events: tuple[str, ...] = (), *, keep_requests: bool = False) -> Walked:
    """Log `k` of `run`, read once for all three parts: by the fast path where it decides the log
    (reports.fast_walk), else walked in full. A walk that fails keeps verify's findings so far;
    cache-report and header-diff then leave the log out, as they do; a number too large for a report's rows
    stops cache-report's part alone. `keep_requests`: verify's report keeps each rebuilt request's digest."""
    log = run.members[k]
    try:
        start = run.start(k)
    except DshAuditError:   # a fork cycle's parent could not be walked: header-diff leaves this log out
        start = None
    try:
        source = log.open()
    except DshAuditError as error:
        run.points[k] = ForkPoints()
        return Walked(LogReport(label=log.label, generation=log.generation, read_error=str(error)), None, error)
    origin = session_origin(source.header)
    fast = _fast(run, k, source, start, origin, keep_requests)
    if fast is not None:
        return fast
    report = LogReport(label=source.label, generation=source.generation.version, keep_requests=keep_requests)
    check_header(source, report)
    calls = CallTaker(source.label)
    note = noting(report, allow_events)

    def found(finding: Finding) -> None:
        note(finding)
        calls.noted(finding)

    rows: list[dict[str, object]] = []
    snapshots = None if start is None else SnapshotTaker(log, source, start, seeds=run.seeds[k],
                                                         watch=run.watch[k], rows=rows)
    walk_error: DshAuditError | None = None
    cache_error: DshAuditError | None = None
    walker: Walker | None = None

    def steps() -> Iterator[Call]:
        nonlocal walk_error, cache_error
        if walker is None:
            return
        try:
            for walked in walker:
                if walked.closed is not None:
                    report.add(walked.closed)
                if snapshots is not None:
                    snapshots.take(walker, walked)
                if cache_error is None:
                    try:
                        yield from calls.take(walked)
                    except DshAuditError as error:
                        cache_error = error
        except DshAuditError as error:
            walk_error = error

    frame = None
    with paused_gc():
        try:
            walker = Walker(source, message_prefix=OPTIONS.message_prefix, parts=True, on_finding=found,
                            checks=walk_checks())
            calls.cut = walker.fold.seed_cut
        except DshAuditError as error:
            walk_error = error
        walk = steps()
        try:
            frame = calls_frame(source, OPTIONS, RealHeader(OPTIONS.system, OPTIONS.tools), walk)
        except DshAuditError as error:   # the rows cannot be built: the walk goes on for the other parts
            cache_error = cache_error or error
            for _ in walk:
                pass
    report.events = walker.events if walker is not None else 0
    if walk_error is not None:
        report.read_error = str(walk_error)
        run.points[k] = ForkPoints()
        return Walked(report, None, cache_error or walk_error, origin=origin)
    check_end(source, report)
    run.left(k, snapshots.finish() if snapshots is not None else ForkPoints())
    return Walked(report, frame if cache_error is None else None, cache_error,
                  rows if snapshots is not None else [], origin)


def _fast(run: Run, k: int, source: LogSource, start: tuple[Snapshot | None, str | None] | None,
          origin: SessionOrigin | None, keep_requests: bool) -> Walked | None:
    """Log `k` read by the fast path (reports.fast_walk), or None where it declines."""
    parts = fast_parts(run, k, source, start, OPTIONS, keep_requests=keep_requests)
    if parts is None:
        return None
    source.close()   # the fast path read the file by itself: the source's own stream never started
    report, frame, rows, points = parts
    run.left(k, points)
    return Walked(report, frame, None, rows, origin)
