"""The unit of work of an export: one log file, read once, turned into the rows the dataset holds of it. It is a
plain top-level function of picklable arguments and results, so any engine runs it: `audit export`'s process pool,
a Dask cluster, or a Ray or Spark job of your own (docs/fleet.md shows how).

One read of each session gives all five tables (reports.one_walk.walk_log: verify's verdict, cache-report's calls,
header-diff's snapshots), by the fast path where it decides the log and by the full walk elsewhere, with the same
rows either way. A file that cannot be read at all is one `logs` row saying why, never nothing."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from ..errors import DshAuditError
from ..readers.discover import Found
from ..readers.found import opener
from ..readers.objects import RemoteLog
from ..readers.spool import label_of
from ..reports.cache_report import judge, log_summary, with_block
from ..reports.header_diff import LogHeaders, Run, log_headers
from ..reports.one_walk import OPTIONS, Walked, walk_log
from .columns import CACHE_RENAMED, TABLES, scanned_columns


@dataclass(frozen=True, slots=True)
class ExportOptions:
    """What a run asks of every unit: verify's allowed events (findings.allowed_events)."""

    allow_events: tuple[str, ...] = ()


Columns = dict[str, list[Any]]   # a table's rows as a list per column


@dataclass(slots=True)
class ExportedLog:
    """Everything the dataset holds of one log file: its identity, and its rows as a list per column of each
    table (with the partition columns, which the writer turns into folders): plain lists pickle in a twentieth
    of the time Arrow tables take, and the writer makes one table of a batch of logs."""

    key: str                      # log_key of the file's name
    file: str                     # the file's real path (log_name), or an object's URL
    size: int | None              # bytes, None when it could not be opened
    sha256: str | None            # of its bytes, as read
    mtime_ns: int | None
    rows: dict[str, Columns] = field(default_factory=dict)
    blocks: list[tuple[str, int]] = field(default_factory=list)   # each session's measured cache block
    error: str | None = None      # could not be read: whole (a failed row), or past its header (rows kept)
    cache_error: str | None = None   # read, but cache-report's figures could not be made of it (why)
    version: str | None = None    # an object in storage: its ETag or version id, as listed (no mtime_ns then)

    @property
    def tables(self) -> dict[str, pa.Table]:
        """Its rows as Arrow tables, one per dataset table, in the declared columns and the partitions."""
        return {table: pa.Table.from_pydict(columns, schema=_arrow_schema(table))
                for table, columns in self.rows.items()}


def log_key(name: str) -> str:
    """A log file's key in the dataset: from its name (log_name, or an object's URL), so the same file keeps its
    key."""
    return hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def log_name(path: Path) -> str:
    """What names a log file in the dataset: its real path, links in its folders resolved, so a log reached
    through a linked folder is the log at its real path, not a second one."""
    return os.path.realpath(path)


def export_log(path: Path | RemoteLog, found_in: Path | None, options: ExportOptions, *, name: str | None = None
               ) -> ExportedLog:
    """The rows of the log file at `path` (`found_in`: the folder a walk found it in, from which it is opened
    without following a link; `name`: its log_name, where the caller has resolved it already), or of an object in
    storage, spooled where this runs (readers.spool) and named by its URL. Never raises for the log's sake: an
    unreadable file is a failed `logs` row."""
    return export_logs([(path, found_in, options, name)])[0]


def export_logs(items: Sequence[tuple[Found, Path | None, ExportOptions, str | None]]) -> list[ExportedLog]:
    """export_log of each item (its arguments), in order. The cache figures of all of them are judged in one pass
    of polars (reports.cache_report.judge, which reads each row alone): on a small log its fixed cost was most of
    the judgement's."""
    read = [_read(*item) for item in items]
    _judge([one for one in read if isinstance(one, _Read)])
    return [one if isinstance(one, ExportedLog) else one.exported_rows() for one in read]


def _read(path: Path | RemoteLog, found_in: Path | None, options: ExportOptions, name: str | None
          ) -> _Read | ExportedLog:
    """One log file read and walked (or its failed row)."""
    if isinstance(path, RemoteLog):
        from ..readers.spool import spooled

        exported = ExportedLog(log_key(path.url), path.url, None, None, None, version=path.version)
        try:
            with spooled(path) as local:
                read = _walked(exported, local, None, options)
        except DshAuditError as error:
            return failed(exported, str(error))
        exported.mtime_ns = None   # the spool's copy's, not the object's
        return read
    file = name if name is not None else log_name(path)
    return _walked(ExportedLog(log_key(file), file, None, None, None), path, found_in, options)


def _walked(exported: ExportedLog, path: Path, found_in: Path | None, options: ExportOptions
            ) -> _Read | ExportedLog:
    try:
        with opener(path, found_in) as handle:
            status = os.fstat(handle.fileno())
            exported.size, exported.mtime_ns = status.st_size, status.st_mtime_ns
            digest = hashlib.sha256()
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
            exported.sha256 = digest.hexdigest()
        logs = log_headers(path, found_in, keep=True)
    except (DshAuditError, OSError) as error:
        label = label_of(path)
        why = str(error) if isinstance(error, DshAuditError) else f"{label}: {error.strerror or error}"
        return failed(exported, why, label)
    run = Run.of(logs)
    walked: dict[int, Walked] = {}
    for k in range(len(logs)):
        for j in run.order(k):
            walked[j] = walk_log(run, j, options.allow_events, keep_requests=True)
    parts = [walked[k] for k in range(len(logs))]
    # a line past the header that cannot be read fails the file as verify fails it (UNREADABLE, exit 2): the run
    # names it, and the next run reads it again instead of skipping it as recorded
    exported.error = next((one.report.read_error for one in parts if one.report.read_error is not None), None)
    # cache-report reads a file whole or not at all: one session it cannot read leaves the file out
    cache_error = next((str(one.cache_error) for one in parts if one.cache_error is not None), None)
    return _Read(exported, logs, parts, cache_error, [None] * len(parts))


@dataclass(slots=True)
class _Read:
    """A log file walked, its sessions' cache figures still to be judged (`_judge`)."""

    exported: ExportedLog
    logs: list[LogHeaders]
    parts: list[Walked]
    cache_error: str | None
    figures: list[_CacheFigures | None]

    def exported_rows(self) -> ExportedLog:
        """The file's rows, every table."""
        exported = self.exported
        exported.cache_error = self.cache_error
        rows: dict[str, list[dict[str, Any]]] = {table: [] for table in TABLES if table != "calls"}
        calls = _columns("calls", [])
        for log, one, figures in zip(self.logs, self.parts, self.figures, strict=True):
            _session_rows(exported, log, one, self.cache_error, figures, rows, calls)
        exported.rows = {table: _columns(table, rows[table]) for table in rows} | {"calls": calls}
        return exported


@dataclass(frozen=True, slots=True)
class _CacheFigures:
    """One session's judged calls (the calls table's own columns), the cache block they were judged by and its
    logs row's cache columns."""

    calls: Columns
    height: int
    block: int
    summary: dict[str, Any]


def _judge(reads: list[_Read]) -> None:
    """cache-report's figures of every session of `reads` whose file it reads, judged together, each by its own
    block. A file whose sums pass what a report's column holds (reports.numbers.checked_total) is left without
    figures, as a number past the bound leaves it: cache-report refuses it in one line, the export says so."""
    placed: list[tuple[_Read, int, int, int]] = []   # (file, session, its first row, its block)
    frames: list[pl.DataFrame] = []
    rows = 0
    for read in reads:
        for k, one in enumerate(read.parts):
            if read.cache_error is None and one.frame is not None:
                frame, block = with_block(one.frame, OPTIONS)
                placed.append((read, k, rows, block))
                frames.append(frame)
                rows += frame.height
    if not frames:
        return
    judged = judge(pl.concat(frames), OPTIONS.collapse_ratio)
    own = judged.select(column for column in scanned_columns("calls") if column not in ("key", "date"))
    columns = own.to_dict(as_series=False)
    for (read, k, first, block), frame in zip(placed, frames, strict=True):
        if read.cache_error is not None:
            continue
        report = read.parts[k].report
        try:
            summed = log_summary(report.label, report.generation, read.logs[k].session_id,
                                 judged.slice(first, frame.height))
            summary = {CACHE_RENAMED.get(name, name): value for name, value in summed.items()}
        except DshAuditError as error:   # sums past what a report holds, which cache-report refuses in one line
            read.cache_error, read.figures = str(error), [None] * len(read.parts)
            continue
        mine = {column: values[first:first + frame.height] for column, values in columns.items()}
        read.figures[k] = _CacheFigures(mine, frame.height, block, summary | {"cacheBlock": block})


def failed(exported: ExportedLog, error: str, label: str | None = None) -> ExportedLog:
    """`exported` as one failed `logs` row: the file could not be read. `label`: the path it was reached by, as
    verify names it and the error does (its `log`; by default its name, `file`)."""
    exported.error = error
    row = {"key": exported.key, "file": exported.file, "log": label or exported.file, "sizeBytes": exported.size,
           "sha256": exported.sha256, "status": "unreadable", "readError": error}
    exported.rows = {table: _columns(table, [row] if table == "logs" else []) for table in TABLES}
    return exported


def _columns(table: str, rows: list[dict[str, Any]]) -> Columns:
    """`rows` as a list per column of `table` and its partitions (None where a row has no value)."""
    return {column: [row.get(column) for row in rows] for column in scanned_columns(table)}


@cache
def _arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema of a table's rows with their partition columns."""
    return pl.DataFrame(schema=scanned_columns(table)).to_arrow().schema


def _date(created_ms: int | None) -> Any:
    return None if created_ms is None else datetime.fromtimestamp(created_ms / 1000, UTC).date()


def _session_rows(exported: ExportedLog, log: LogHeaders, one: Walked, cache_error: str | None,
                  figures: _CacheFigures | None, rows: dict[str, list[dict[str, Any]]], calls: Columns) -> None:
    """One session's rows into `rows` and `calls`: its logs row, requests, findings, header changes and judged
    calls (`figures`, when its file has them)."""
    report, origin = one.report, one.origin
    created = origin.created_ms if origin is not None else None
    where = {"key": exported.key, "generation": report.generation, "date": _date(created)}
    severities = report.severities()
    failing = report.failing()
    summary: dict[str, Any] = {}
    if figures is not None:
        summary = figures.summary
        exported.blocks.append((report.label, figures.block))
        for column, values in figures.calls.items():
            calls[column].extend(values)
        calls["key"].extend([exported.key] * figures.height)
        calls["date"].extend([where["date"]] * figures.height)
    rows["logs"].append({
        **summary, **where, "file": exported.file, "log": report.label, "sessionId": log.session_id,
        "createdMs": created, "cwd": origin.cwd if origin is not None else None, "sizeBytes": exported.size,
        "sha256": exported.sha256,
        "status": "unreadable" if report.read_error is not None else "findings" if failing else "clean",
        "readError": report.read_error, "cacheError": cache_error, "events": report.events,
        "rebuiltRequests": report.request_count, "errors": severities.get("error", 0),
        "warnings": severities.get("warning", 0), "notes": severities.get("info", 0), "failing": failing,
        "rejected": report.rejected})
    rows["requests"].extend(
        {**where, "log": report.label, "turn": digest.turn, "step": digest.step, "attempt": digest.attempt,
         "seq": digest.dispatch_seq, "sha256": digest.sha256, "inherited": digest.inherited,
         "extendsPrevious": digest.extends_previous, "causes": "; ".join(digest.causes) or None}
        for digest in report.requests)
    rows["findings"].extend(
        {**where, "log": report.label, "code": finding.code, "severity": finding.severity,
         "message": finding.message, "seq": finding.seq, "line": finding.line, "eventType": finding.event_type,
         "rejects": finding.rejects}
        for finding in report.findings)
    rows["header_changes"].extend({**row, **where} for row in one.header_rows)

