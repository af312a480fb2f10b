"""Which calls a multi-log view counts (`--since/--until`, `--model`, `--project`), and the report narrowed to
them: each call judged first over its whole log, so a filter never changes a verdict (a collapse stays a
collapse when its predecessor is left out), then the per-log rows and totals summed again over the calls kept.
A log none of whose calls is kept leaves the report."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl

from .cache_report import LOG_COLUMNS, TOTAL_COLUMNS, CacheReport, log_summary, summarize
from .render import rows_frame

_RELATIVE = re.compile(r"(\d{1,6})([hdw])")
_UNITS = {"h": "hours", "d": "days", "w": "weeks"}


def zone(name: str | None) -> tzinfo:
    """--timezone: an IANA name (Europe/Paris), else UTC; ValueError for a name that is none."""
    if name is None or name.upper() == "UTC":
        return ZoneInfo("UTC")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{name!r} is not a time zone name (such as UTC or Europe/Paris)") from None


def moment_ms(text: str, *, zone: tzinfo, now: datetime, end: bool = False) -> int:
    """--since/--until as epoch milliseconds: `7d`, `24h`, `2w` before `now`; an ISO date (its first moment, or
    with `end` its last: --until 2026-12-01 counts that whole day); an ISO date and time, in `zone` unless it
    names its own offset. ValueError for a text that is none of these."""
    relative = _RELATIVE.fullmatch(text)
    if relative:
        return int((now - timedelta(**{_UNITS[relative[2]]: int(relative[1])})).timestamp() * 1000)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is neither a date (2026-12-01), a date and time (2026-12-01T09:30) nor a "
                            "span back from now (7d, 24h, 2w)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    if end and len(text) == len("2026-12-01"):
        moment += timedelta(days=1)
    return int(moment.timestamp() * 1000)


def project_path(text: str) -> str:
    """--project as a directory: absolute (against the current directory), not resolved through links, as dsh
    logs its cwd; without a trailing separator."""
    return os.path.normpath(os.path.abspath(text))


def in_project(cwd: str | None, project: str) -> bool:
    """`cwd` is the project's directory or below it."""
    return cwd is not None and (cwd == project or cwd.startswith(project.rstrip("/") + "/"))


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
    parts = requests.partition_by("log", as_dict=True, maintain_order=True)
    summaries = [log_summary(log["log"], log["generation"], log["sessionId"], parts[(log["log"],)])
                 for log in report.logs.select("log", "generation", "sessionId").to_dicts()
                 if (log["log"],) in parts]
    block = report.totals.select("cacheBlock", "cacheBlockBasis").to_dicts()[0]
    totals = {"logs": len(summaries), **summarize(requests), **block}
    return replace(report, requests=requests, logs=rows_frame(summaries, LOG_COLUMNS),
                   totals=pl.DataFrame([totals], schema=TOTAL_COLUMNS, orient="row"))
