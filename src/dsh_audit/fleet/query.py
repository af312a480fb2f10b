"""The fleet's questions, as polars lazy scans over a dataset (`audit query`): totals equal to `audit cache-report
--rows totals` over the same logs, cache waste per model, project or day, the header changes that preceded
collapses, and verification status per generation. docs/fleet.md gives the same questions for DuckDB.

Each question takes the filters of every multi-log command (reports.filters.CallFilter: --since/--until, --model,
--project): the calls counted are those the filter keeps, judged over their whole log at export, so the figures
are cache-report's with the same filters on the same logs."""

from __future__ import annotations

import os
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import polars as pl

from ..errors import DshAuditError
from ..log_filter import in_project
from ..reports.cache_report import TOTAL_COLUMNS, report_block, summarize
from ..reports.filters import CallFilter
from ..reports.sums import cost_sums, exact_sums
from .columns import PARTITIONS, TABLES
from .dataset import MANIFEST, read_manifest

QUESTIONS = ("totals", "waste", "breaks", "status")
WASTE_BY = ("model", "project", "day")


def manifest(root: Path) -> dict[str, Any] | None:
    """The dataset's manifest (dataset.read_manifest), parsed once while its file stays the same: a question
    scans several tables, each checked against it (a million logs' manifest is some 700 MB of JSON)."""
    try:
        status = os.stat(root / MANIFEST)
        stamp = (status.st_ino, status.st_size, status.st_mtime_ns)
    except OSError:
        stamp = None   # read_manifest says what is wrong, if anything
    return _parsed(root, stamp)


@lru_cache(maxsize=1)
def _parsed(root: Path, stamp: tuple[int, int, int] | None) -> dict[str, Any] | None:
    return read_manifest(root)


def scan(root: Path, table: str) -> pl.LazyFrame:
    """One table of the dataset at `root`, with its partition columns; an empty one when no row was written."""
    if manifest(root) is None:
        raise DshAuditError("is not a dsh-audit dataset (no _manifest.json): write one with audit export"
                            if os.path.lexists(root) else "no such dataset folder", path=str(root))
    folder = root / table
    if not folder.is_dir() or next(folder.rglob("*.parquet"), None) is None:   # no row written yet
        return pl.LazyFrame(schema={**TABLES[table], **PARTITIONS})
    return pl.scan_parquet(folder / "**" / "*.parquet", hive_partitioning=True, hive_schema=PARTITIONS,
                           schema=TABLES[table])


def calls(root: Path, chosen: CallFilter | None = None) -> pl.LazyFrame:
    """The calls table, narrowed to the calls `chosen` keeps: a call's time and model as logged, its log's cwd
    (--project) from the logs table, matched by file and label, so two logs of one label are told apart."""
    scanned = scan(root, "calls")
    if not chosen:
        return scanned
    scanned = scanned.filter(replace(chosen, projects=()).expression({}))
    if chosen.projects:
        logs = scan(root, "logs").select("key", "log", "cwd").unique().collect()
        inside = logs.filter(pl.Series([any(in_project(cwd, project) for project in chosen.projects)
                                        for cwd in logs["cwd"]], dtype=pl.Boolean))
        scanned = scanned.join(inside.lazy().select("key", "log"), on=["key", "log"], how="semi")
    return scanned


def _hit_ratio(reads: pl.Expr, fresh: pl.Expr) -> pl.Expr:
    return pl.when((reads + fresh) > 0).then(reads / (reads + fresh))


def _waste(calls: pl.LazyFrame) -> list[pl.Expr]:
    """What a group of own calls read, missed, lost to collapses and cost."""
    reads = pl.col("cacheReadTokens").cast(pl.Int128).fill_null(0).sum()
    fresh = pl.col("inputTokens").cast(pl.Int128).fill_null(0).sum()
    request = pl.col("kind") == "request"
    return [pl.col("key").n_unique().alias("logFiles"), request.sum().alias("requests"),
            reads.cast(pl.Int64).alias("cacheReadTokens"), fresh.cast(pl.Int64).alias("inputTokens"),
            _hit_ratio(reads, fresh).cast(pl.Float64).alias("hitRatio"),
            (request & pl.col("collapse")).sum().alias("collapses"),
            pl.col("collapseCostUsd").drop_nulls().alias("lostUsd"), pl.col("costUsd").drop_nulls()]


def totals(root: Path, chosen: CallFilter | None = None, kept: pl.LazyFrame | None = None) -> pl.DataFrame:
    """The dataset's totals in cache-report's columns (--rows totals): own calls only, as it sums them; with a
    filter, over the calls it keeps (`kept`, where the caller has read them already), and the logs that keep any
    (the cache block stays the run's)."""
    kept = calls(root, chosen) if kept is None else kept
    logs = (kept.select(pl.struct("key", "log").n_unique()) if chosen else
            scan(root, "logs").filter(pl.col("cacheBlock").is_not_null()).select(pl.len())).collect().item()
    block, basis = report_block([(str(label), int(size)) for entry in (manifest(root) or {}).get("logs", {}).values()
                                 for label, size in entry["blocks"]])
    row = {"logs": logs, **summarize(kept), "cacheBlock": block, "cacheBlockBasis": basis}
    return pl.DataFrame([row], schema=TOTAL_COLUMNS, orient="row")


def waste(root: Path, by: str, chosen: CallFilter | None = None) -> pl.DataFrame:
    """Cache waste per model, project (the session's cwd) or day (of each call, UTC), most lost first, over the
    calls `chosen` keeps."""
    if by not in WASTE_BY:
        raise DshAuditError(f"unknown grouping {by!r}; expected one of {', '.join(WASTE_BY)}")
    own = calls(root, chosen).filter(~pl.col("inherited"))
    if by == "project":
        projects = scan(root, "logs").select("key", "log", pl.col("cwd").alias("project"))
        own = own.join(projects, on=["key", "log"], how="left")
    elif by == "day":
        own = own.with_columns(day=pl.from_epoch("timeMs", time_unit="ms").dt.date().cast(pl.String))
    groups = cost_sums(own.group_by(by).agg(_waste(own)).collect(), lost="lostUsd")
    return groups.sort(["lostUsd", by], descending=[True, False], nulls_last=True)


def breaks(root: Path, chosen: CallFilter | None = None) -> pl.DataFrame:
    """Collapses by what changed in the request header last before them in their log (header-diff's field and
    change, or none), with the generation that logged them: which change broke prefix stability, fleet-wide;
    the collapses `chosen` keeps (every header change counts: the one before a kept collapse may be older)."""
    collapses = (calls(root, chosen).filter(pl.col("collapse") & ~pl.col("inherited"))
                 .select("key", "log", "generation", "seq", "cause", "collapseCostUsd").sort("seq"))
    changes = (scan(root, "header_changes").filter(~pl.col("change").is_in(["initial", "unchanged"]))
               .select("key", "log", "seq", "field", "change").sort("seq", maintain_order=True))   # a log's as written
    joined = collapses.join_asof(changes, on="seq", by=["key", "log"], strategy="backward", check_sortedness=False)
    by = ["generation", "cause", "field", "change"]
    groups = exact_sums(joined.group_by(by).agg(collapses=pl.len(), lostUsd=pl.col("collapseCostUsd").drop_nulls(),
                                                logFiles=pl.col("key").n_unique()).collect(), ["lostUsd"])
    return groups.sort(["lostUsd", "collapses", *by], descending=[True, True, False, False, False, False],
                       nulls_last=True)   # ties in the groups' order: the same rows in the same order every run


def status(root: Path, chosen: CallFilter | None = None) -> pl.DataFrame:
    """Verification per generation: logs, those clean, with findings, unreadable, and the findings' counts; with
    a filter, of the logs that keep any call, and every unreadable one (it cannot be judged, so it is never
    left out unseen)."""
    logs = scan(root, "logs")
    if chosen:
        kept = calls(root, chosen).select("key", "log").unique()
        logs = pl.concat([logs.join(kept, on=["key", "log"], how="semi"),
                          logs.filter(pl.col("status") == "unreadable")]).unique(maintain_order=True)
    return (logs.group_by("generation")
            .agg(logs=pl.len(), clean=(pl.col("status") == "clean").sum(),
                 findings=(pl.col("status") == "findings").sum(),
                 unreadable=(pl.col("status") == "unreadable").sum(),
                 rebuiltRequests=pl.col("rebuiltRequests").fill_null(0).sum(),
                 errors=pl.col("errors").fill_null(0).sum(), warnings=pl.col("warnings").fill_null(0).sum(),
                 notes=pl.col("notes").fill_null(0).sum())
            .sort("generation", nulls_last=True).collect())
