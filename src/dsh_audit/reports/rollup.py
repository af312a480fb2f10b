"""`--by day|week|month|model|project`: a cache report's own calls summed per group, one row each, with the
same figures its totals have; so the groups add up to the totals (a call without a time falls in a group of its
own, a null `group`). Days, weeks (from Monday) and months are those of the time zone given."""

from __future__ import annotations

from typing import Any

import polars as pl

from .cache_report import UNEXPLAINED, CacheReport
from .filters import logged_time
from .numbers import checked_total
from .sums import cost_sums

ROLLUP_VERSION = 1   # of ROLLUP_COLUMNS; docs/cache-report.md says what each holds
ROLLUPS = ("day", "week", "month", "model", "project")
_TIME_STEPS = {"day": ("1d", "%Y-%m-%d"), "week": ("1w", "%Y-%m-%d"), "month": ("1mo", "%Y-%m")}
_SUMS = ("inputTokens", "cacheReadTokens", "outputTokens")
ROLLUP_COLUMNS: dict[str, Any] = {
    "by": pl.String, "group": pl.String, "sessions": pl.Int64, "requests": pl.Int64, "calls": pl.Int64,
    **{name: pl.Int64 for name in _SUMS}, "hitRatio": pl.Float64, "collapses": pl.Int64, "unexplained": pl.Int64,
    "collapseCostUsd": pl.Float64, "costUsd": pl.Float64,
}


def _group(by: str, report: CacheReport, zone: str) -> pl.Expr:
    if by == "model":
        return pl.col("model")
    if by == "project":
        return pl.col("log").replace_strict(report.cwds, default=None, return_dtype=pl.String)
    every, shown = _TIME_STEPS[by]
    local = pl.from_epoch(logged_time(), time_unit="ms").dt.replace_time_zone("UTC").dt.convert_time_zone(zone)
    return local.dt.truncate(every).dt.strftime(shown)


def rollup(report: CacheReport, by: str, zone: str = "UTC") -> pl.DataFrame:
    """One row per group of `by` over the report's own calls (a child's inherited calls were its parent's):
    periods in time order, models and projects by what their collapses lost, then cost, most first."""
    own = report.requests.filter(~pl.col("inherited")).with_columns(_group(by, report, zone).alias("group"))
    request, collapse = pl.col("kind") == "request", pl.col("collapse").fill_null(False)
    frame = own.group_by("group", maintain_order=True).agg(
        sessions=pl.col("log").n_unique(), requests=request.sum(), calls=pl.len(),
        **{name: pl.col(name).cast(pl.Int128).fill_null(0).sum() for name in _SUMS},
        collapses=(collapse & request).sum(),
        unexplained=(collapse & request & (pl.col("cause") == UNEXPLAINED)).sum(),
        collapseCostUsd=pl.col("collapseCostUsd").filter(collapse & request).drop_nulls(),
        costUsd=pl.col("costUsd").drop_nulls(),
    )
    frame = cost_sums(frame)
    for name in _SUMS:   # summed wider than the column, as the totals are: an Int64 sum wraps silently
        checked_total(int(frame.select(pl.col(name).max().fill_null(0)).item()), name, None)
    reads, fresh = pl.col("cacheReadTokens"), pl.col("inputTokens")
    frame = frame.with_columns(
        by=pl.lit(by), hitRatio=pl.when(reads + fresh > 0).then(reads / (reads + fresh)),
        **{name: pl.col(name).cast(pl.Int64) for name in ("sessions", "requests", "calls", *_SUMS, "collapses",
                                                          "unexplained")})
    ordered = (frame.sort("group", nulls_last=True) if by in _TIME_STEPS
               else frame.sort(["collapseCostUsd", "costUsd"], descending=True, nulls_last=True, maintain_order=True))
    return ordered.select(list(ROLLUP_COLUMNS)).cast(pl.Schema(ROLLUP_COLUMNS))
