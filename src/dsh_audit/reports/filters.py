"""Which calls a multi-log view counts (`--since/--until`, `--model`, `--project`), and the report narrowed to
them: each call judged first over its whole log, so a filter never changes a verdict (a collapse stays a
collapse when its predecessor is left out), then the per-log rows and totals summed again over the calls kept.
A log none of whose calls is kept leaves the report."""

from __future__ import annotations

from dataclasses import dataclass, replace

import polars as pl

from ..log_filter import in_project
from .cache_report import LOG_COLUMNS, TOTAL_COLUMNS, CacheReport, log_summary, summarize
from .render import rows_frame


def logged_time() -> pl.Expr:
    """A call's time, null where none was logged (0: the committed fixtures, priced as such by reports.prices)."""
    return pl.when(pl.col("timeMs") > 0).then(pl.col("timeMs"))


@dataclass(frozen=True, slots=True)
class CallFilter:
    """What a call must be to count: logged in [since, until) (epoch ms; a call without a time is then left
    out), by one of `models` (as logged), in a log whose cwd is one of `projects` or below it."""

    since_ms: int | None = None
    until_ms: int | None = None
    models: tuple[str, ...] = ()
    projects: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return any((self.since_ms is not None, self.until_ms is not None, self.models, self.projects))

    def expression(self, cwds: dict[str, str | None]) -> pl.Expr:
        keep, time = pl.lit(True), logged_time()
        if self.since_ms is not None:
            keep &= time >= self.since_ms
        if self.until_ms is not None:
            keep &= time < self.until_ms
        if self.models:
            keep &= pl.col("model").is_in(list(self.models))
        if self.projects:
            logs = [label for label, cwd in cwds.items() if any(in_project(cwd, p) for p in self.projects)]
            keep &= pl.col("log").is_in(logs)
        return keep.fill_null(False)


def filtered(report: CacheReport, chosen: CallFilter) -> CacheReport:
    """The report of the calls `chosen` keeps: their rows, the per-log rows of the logs that keep any (in the
    report's order) summed over them, and totals over them (the cache block as judged)."""
    if not chosen:
        return report
    requests = report.requests.filter(chosen.expression(report.cwds))
    logs = summed_per_log(report.logs, requests)
    block = report.totals.select("cacheBlock", "cacheBlockBasis").to_dicts()[0]
    totals = {"logs": logs.height, **summarize(requests), **block}
    return replace(report, requests=requests, logs=logs,
                   totals=pl.DataFrame([totals], schema=TOTAL_COLUMNS, orient="row"))


def summed_per_log(logs: pl.DataFrame, requests: pl.DataFrame) -> pl.DataFrame:
    """The per-log rows (LOG_COLUMNS) of the logs in `logs` (in its order) that keep any of `requests`, each
    summed over its own."""
    parts = requests.partition_by("log", as_dict=True, maintain_order=True)
    return rows_frame([log_summary(log["log"], log["generation"], log["sessionId"], parts[(log["log"],)])
                       for log in logs.select("log", "generation", "sessionId").to_dicts() if (log["log"],) in parts],
                      LOG_COLUMNS)
