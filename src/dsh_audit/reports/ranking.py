"""Worst first: the logs of a cache report in the order asked (`--sort`), the first N (`--top`), with only the
collapses (`--collapses-only`); and each session named by the shortest start of its id that tells it apart
from the others in the same view, which `--session` accepts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

import polars as pl

from ..header import is_placeholder
from ..readers.home import ID_PREFIX
from .cache_report import CacheReport
from .views import shown_path

# What `--sort` ranks by. Money and hit ratio rank worst first; `path` keeps the order the logs were read in.
SORT_KEYS = ("lost", "cost", "hit", "requests", "recent", "path")
# How a view's heading says the order: "4 sessions by ...".
ORDER_WORDS = {"lost": "what cache collapses lost, most first", "cost": "cost, highest first",
               "hit": "cache hit ratio, lowest first", "requests": "requests, most first",
               "recent": "last activity, newest first", "path": "path"}
MIN_PREFIX = 8   # characters of an id shown at least: a prefix this short is rarely shared, and reads as an id


def short_ids(ids: Sequence[str | None]) -> list[str | None]:
    """Per id (dsh's `session-` left out), its shortest start of at least MIN_PREFIX characters that starts no
    other id given, or the whole id where it is itself the start of another (an explain command then names the
    log by its path: cli.cache_report checks what `--session` picks); None where there is no id, or where
    another log has the same one (two generations of one session, a copied log): only its path tells those
    apart."""
    bare = [None if session is None else session.removeprefix(ID_PREFIX) for session in ids]
    seen = Counter(name for name in bare if name)
    unique = sorted(seen)
    needed: dict[str, int] = {}
    for i, name in enumerate(unique):
        shared = max((_common(name, other) for other in unique[max(0, i - 1):i + 2] if other != name), default=0)
        needed[name] = max(MIN_PREFIX, shared + 1)
    return [name[:needed[name]] if name and seen[name] == 1 else None for name in bare]


def _common(one: str, other: str) -> int:
    """How many leading characters two ids share."""
    return next((i for i, (a, b) in enumerate(zip(one, other, strict=False)) if a != b), min(len(one), len(other)))


def session_prefixes(logs: pl.DataFrame) -> dict[str, str]:
    """The logs of a report's per-log rows that have a short id of their own (`short_ids`), each with it; a
    scrubbed log's placeholder (`{{sessionId}}`) is no id."""
    labels, ids = logs["log"].to_list(), logs["sessionId"].to_list()
    shorts = short_ids([None if session in (None, "None") or is_placeholder(session) else session
                        for session in ids])
    return {label: short for label, short in zip(labels, shorts, strict=True) if short is not None}


def session_names(logs: pl.DataFrame) -> dict[str, str]:
    """Each log of a report's per-log rows named by its session's short id, else by its path."""
    prefixes = session_prefixes(logs)
    return {label: prefixes.get(label) or shown_path(label) for label in logs["log"].to_list()}


def _order(logs: pl.DataFrame, requests: pl.DataFrame, key: str) -> pl.DataFrame:
    """The per-log rows in `key`'s order, ties in the order read; a log without the figure last."""
    if key == "path":
        return logs
    if key == "recent":
        last = requests.group_by("log").agg(pl.col("timeMs").max().alias("_last"))
        return (logs.join(last, on="log", how="left", maintain_order="left")
                .sort("_last", descending=True, nulls_last=True, maintain_order=True).drop("_last"))
    # Then by cost: among sessions that lost nothing, the dearest is the one to look at.
    columns, descending = {"lost": (["collapseCostUsd", "costUsd"], True), "cost": (["costUsd"], True),
                           "hit": (["hitRatio"], False), "requests": (["requests"], True)}[key]
    return logs.sort(columns, descending=descending, nulls_last=True, maintain_order=True)


def ranked(report: CacheReport, *, sort: str = "path", top: int | None = None,
           collapses_only: bool = False) -> CacheReport:
    """The report with its per-log rows in `sort`'s order, only those with a collapse (`collapses_only`), the
    first `top` of them; its call rows those of the logs kept, log by log in that order (only the collapses with
    `collapses_only`). The totals stay those of every log read."""
    logs = _order(report.logs, report.requests, sort)
    if collapses_only:
        logs = logs.filter(pl.col("collapses") > 0)
    if top is not None:
        logs = logs.head(top)
    if not collapses_only and logs["log"].equals(report.logs["log"]):   # one log, or already in order: no copy
        return report
    rank = pl.DataFrame({"log": logs["log"], "_rank": range(logs.height)}, schema={"log": pl.String,
                                                                                   "_rank": pl.Int64})
    requests = (report.requests.with_row_index("_row").join(rank, on="log", how="inner")
                .sort("_rank", "_row").drop("_row", "_rank"))
    if collapses_only:
        requests = requests.filter(pl.col("collapse"))
    return replace(report, logs=logs, requests=requests)
