"""`audit report DATASET`: the HTML report (reports.html) of a dataset `audit export` wrote, the fleet's overview:
its totals, the costliest collapses of all, the sessions ranked by what collapses lost, and the worst ones drawn.
The page's parts are read from the dataset, not from the logs: only the drawn sessions' rows and every collapse
are collected, whatever the fleet's size. With a filter (reports.filters.CallFilter) the page is that of the calls it
keeps, as `audit report` narrows the logs it reads (one_walk.narrowed): the kept calls are collected, each log's
row summed again over its own."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from ..errors import DshAuditError
from ..findings import Finding
from ..readers.discover import Unreadable
from ..readers.home import SessionOrigin
from ..reports.cache_report import LOG_COLUMNS, REQUEST_COLUMNS, CacheReport
from ..reports.filters import CallFilter, summed_per_log
from ..reports.header_diff import COLUMNS as HEADER_COLUMNS
from ..reports.html import (
    DETAILED_SESSIONS,
    FINDING_COLUMNS,
    FINDINGS_SHOWN,
    TALLY_COLUMNS,
    VerifyFindings,
    ranked_logs,
)
from .columns import CACHE_RENAMED
from .dataset import MANIFEST
from .query import calls, scan, totals


def is_dataset(path: Path) -> bool:
    """`path` is a folder `audit export` wrote (it holds a manifest)."""
    return path.is_dir() and (path / MANIFEST).is_file()


@dataclass(frozen=True, slots=True)
class DatasetPage:
    """render_report's arguments from a dataset (`dataset_parts`), with how many session logs cache-report read
    (`read_count`, before a filter) and how the page's `audit explain` commands name each log (`targets`)."""

    report: CacheReport
    headers: pl.DataFrame
    findings: VerifyFindings
    origins: dict[str, SessionOrigin]
    read_count: int
    targets: dict[str, str]


def _real_path_targets(all_logs: pl.DataFrame) -> dict[str, str]:
    """How the page's `audit explain` commands name each log the export was given by a relative path (its `log`,
    as verify names it): by the file's real path (`file`), with a store's `#session`, so that they work from any
    folder, not only the one the export ran in (explain reads logs, not a dataset's rows)."""
    rows = all_logs.select("log", "file", "sessionId").filter(pl.col("file").is_not_null())
    targets = {}
    for log, file, session_id in rows.iter_rows():
        if os.path.isabs(log) or "://" in log or log == file:
            continue
        store_session = session_id is not None and log.endswith(f"#{session_id}") and not file.endswith(log)
        targets[log] = shlex.quote(f"{file}#{session_id}" if store_session else file)
    return targets


def dataset_parts(root: Path, chosen: CallFilter | None = None) -> DatasetPage:
    """render_report's arguments from the dataset at `root`: the cache report (every log's row, the totals, the
    calls of the sessions drawn and every collapse), the drawn sessions' header changes, verify's findings (the
    drawn sessions' first ones, every one counted) and each session's origin; of the calls `chosen` keeps and the
    logs that keep any, if given. As over logs (one_walk.read_once), a dataset none of whose logs could be read
    has no page: the first one's reason is raised."""
    all_logs = scan(root, "logs").collect()
    read = all_logs.filter(pl.col("cacheBlock").is_not_null())
    read_count = read.height
    logs = read.select([pl.col(CACHE_RENAMED.get(name, name)).alias(name) for name in LOG_COLUMNS])
    findings = scan(root, "findings")
    kept_calls, kept = scan(root, "calls"), pl.lit(True)
    if chosen:   # as one_walk.narrowed: the findings of the logs that keep any call, no other
        kept_frame = calls(root, chosen).select("key", *REQUEST_COLUMNS).collect()   # read and filtered once
        kept_calls = kept_frame.lazy()
        logs = summed_per_log(logs, kept_frame)
        kept = pl.col("log").is_in(logs["log"].to_list())
        read, findings = read.filter(kept), findings.filter(kept)
    tally = pl.concat([
        findings.group_by("log", "generation", "severity", "code").agg(count=pl.len().cast(pl.Int64)).collect(),
        all_logs.filter(pl.col("status") == "unreadable").select(
            "log", "generation", severity=pl.lit("error"), code=pl.lit("unreadable"), count=pl.lit(1, pl.Int64)),
    ]).select(list(TALLY_COLUMNS)).filter(kept)
    drawn = ranked_logs(logs, tally).head(DETAILED_SESSIONS)["log"].to_list()
    drawn_calls = (kept_calls.filter(pl.col("log").is_in(drawn) | pl.col("collapse"))
                   .select(list(REQUEST_COLUMNS)).collect())
    headers = scan(root, "header_changes").filter(pl.col("log").is_in(drawn)).select(list(HEADER_COLUMNS)).collect()
    shown = (findings.filter(pl.col("log").is_in(drawn)).with_columns(rank=pl.int_range(pl.len()).over("log"))
             .filter(pl.col("rank") < FINDINGS_SHOWN).collect())
    rows = [{"log": row["log"], "generation": row["generation"], "severity": row["severity"], "code": row["code"],
             "seq": row["seq"], "line": row["line"],
             "text": Finding(row["code"], row["message"], row["severity"], row["seq"], row["line"],
                             row["eventType"], bool(row["rejects"]), row["log"]).render()}
            for row in shown.iter_rows(named=True)]
    unread = [Unreadable(row["log"], row["readError"] or row["cacheError"] or "")
              for row in all_logs.filter(pl.col("cacheBlock").is_null()).iter_rows(named=True)]
    if read_count == 0 and unread:
        raise DshAuditError(unread[0].reason)
    report = CacheReport(drawn_calls, logs, totals(root, chosen, kept_calls if chosen else None), unreadable=unread)
    origins = {row["log"]: SessionOrigin(row["createdMs"], row["cwd"]) for row in read.iter_rows(named=True)}
    return DatasetPage(report, headers, VerifyFindings(pl.DataFrame(rows, schema=FINDING_COLUMNS, orient="row"), tally),
                       origins, read_count, _real_path_targets(all_logs))

