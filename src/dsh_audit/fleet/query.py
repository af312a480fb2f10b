"""The fleet's questions, as polars lazy scans over a dataset (`audit query`): totals equal to `audit cache-report
--rows totals` over the same logs, cache waste per model, project or day, the header changes that preceded
collapses, and verification status per generation. docs/fleet.md gives the same questions for DuckDB."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ..errors import DshAuditError
from ..reports.cache_report import UNEXPLAINED, report_block
from .columns import PARTITIONS, TABLES
from .dataset import read_manifest

QUESTIONS = ("totals", "waste", "breaks", "status")
WASTE_BY = ("model", "project", "day")


def scan(root: Path, table: str) -> pl.LazyFrame:
    """One table of the dataset at `root`, with its partition columns; an empty one when no row was written."""
    if read_manifest(root) is None:
        raise DshAuditError("is not a dsh-audit dataset (no _manifest.json): write one with audit export",
                            path=str(root))
    folder = root / table
    if not folder.is_dir() or next(folder.rglob("*.parquet"), None) is None:   # no row written yet
        return pl.LazyFrame(schema={**TABLES[table], **PARTITIONS})
    return pl.scan_parquet(folder / "**" / "*.parquet", hive_partitioning=True, hive_schema=PARTITIONS,
                           schema=TABLES[table])


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
            pl.col("collapseCostUsd").fill_null(0).sum().alias("lostUsd"),
            pl.col("costUsd").sum().alias("costUsd")]


def totals(root: Path) -> pl.DataFrame:
    """The dataset's totals in cache-report's columns (--rows totals): own calls only, as it sums them."""
    own = scan(root, "calls").filter(~pl.col("inherited"))
    request, compaction, side = (pl.col("kind") == kind for kind in ("request", "compaction", "side"))
    reads = pl.col("cacheReadTokens").cast(pl.Int128).fill_null(0).sum()
    fresh = pl.col("inputTokens").cast(pl.Int128).fill_null(0).sum()
    collapse = request & pl.col("collapse")
    sums = own.select(
        requests=request.sum(), compactionCalls=compaction.sum(),
        otherCalls=(~request & ~compaction & ~side).sum(), sideCalls=side.sum(),
        sideCallTokens=pl.when(~(side & pl.col("estimatedTokens").is_null()).any())   # cache-report: none if one
        .then(pl.when(side).then(pl.col("estimatedTokens")).sum()),
        **{name: pl.col(name).cast(pl.Int128).fill_null(0).sum().cast(pl.Int64)
           for name in ("inputTokens", "cacheReadTokens", "outputTokens", "reasoningTokens")},
        hitRatio=_hit_ratio(reads, fresh).cast(pl.Float64),
        collapses=collapse.sum(), unexplained=(collapse & (pl.col("cause") == UNEXPLAINED)).sum(),
        collapseCostUsd=pl.when(collapse).then(pl.col("collapseCostUsd")).fill_null(0).sum(),
        predictionsCompared=(request & pl.col("withinBlock").is_not_null()).sum(),
        predictionsWithinBlock=(request & pl.col("withinBlock").fill_null(False)).sum(),
        costUsd=pl.when(pl.col("costUsd").is_not_null().any()).then(pl.col("costUsd").sum()),
        approximate=pl.col("approximate").any(),
    )
    logs = scan(root, "logs").filter(pl.col("cacheBlock").is_not_null()).select(logs=pl.len())
    frame = pl.concat([logs, sums], how="horizontal").collect()
    manifest = read_manifest(root) or {}
    block, basis = report_block([(str(label), int(size)) for entry in manifest.get("logs", {}).values()
                                 for label, size in entry["blocks"]])
    return frame.with_columns(pl.col(pl.UInt32, pl.UInt64).cast(pl.Int64), cacheBlock=pl.lit(block, pl.Int64),
                              cacheBlockBasis=pl.lit(basis))


def waste(root: Path, by: str) -> pl.DataFrame:
    """Cache waste per model, project (the session's cwd) or day (of each call, UTC), most lost first."""
    if by not in WASTE_BY:
        raise DshAuditError(f"unknown grouping {by!r}; expected one of {', '.join(WASTE_BY)}")
    calls = scan(root, "calls").filter(~pl.col("inherited"))
    if by == "project":
        projects = scan(root, "logs").select("key", "log", pl.col("cwd").alias("project"))
        calls = calls.join(projects, on=["key", "log"], how="left")
    elif by == "day":
        calls = calls.with_columns(day=pl.from_epoch("timeMs", time_unit="ms").dt.date().cast(pl.String))
    return (calls.group_by(by).agg(_waste(calls)).sort(["lostUsd", by], descending=[True, False], nulls_last=True)
            .collect())


def breaks(root: Path) -> pl.DataFrame:
    """Collapses by what changed in the request header last before them in their log (header-diff's field and
    change, or none), with the generation that logged them: which change broke prefix stability, fleet-wide."""
    collapses = (scan(root, "calls").filter(pl.col("collapse") & ~pl.col("inherited"))
                 .select("key", "log", "generation", "seq", "cause", "collapseCostUsd").sort("seq"))
    changes = (scan(root, "header_changes").filter(~pl.col("change").is_in(["initial", "unchanged"]))
               .select("key", "log", "seq", "field", "change").sort("seq"))
    joined = collapses.join_asof(changes, on="seq", by=["key", "log"], strategy="backward", check_sortedness=False)
    return (joined.group_by("generation", "cause", "field", "change")
            .agg(collapses=pl.len(), lostUsd=pl.col("collapseCostUsd").fill_null(0).sum(),
                 logFiles=pl.col("key").n_unique())
            .sort(["lostUsd", "collapses"], descending=True).collect())


def status(root: Path) -> pl.DataFrame:
    """Verification per generation: logs, those clean, with findings, unreadable, and the findings' counts."""
    logs = scan(root, "logs")
    return (logs.group_by("generation")
            .agg(logs=pl.len(), clean=(pl.col("status") == "clean").sum(),
                 findings=(pl.col("status") == "findings").sum(),
                 unreadable=(pl.col("status") == "unreadable").sum(),
                 rebuiltRequests=pl.col("rebuiltRequests").fill_null(0).sum(),
                 errors=pl.col("errors").fill_null(0).sum(), warnings=pl.col("warnings").fill_null(0).sum(),
                 notes=pl.col("notes").fill_null(0).sum())
            .sort("generation", nulls_last=True).collect())
