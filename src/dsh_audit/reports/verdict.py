"""What a cache-report row says of its request's cache read, in one sentence: the one wording cache-report's views
(terminal, HTML) and `audit explain` share, so they cannot disagree about a request.

The verdict reads only the judged row (cache_report.judge): the logged usage, the expected read and the
predecessor's read, the collapse and its cause. A first request is the first of its log; a read on it came from
the provider's cache of another session (the same prompt head sent before), not from this log.

`unexplained` is the one test of a request cache-report calls an unexplained collapse: `cache-report
--fail-on-unexplained` and `audit explain` exit 1 on it, and on nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .cache_report import UNEXPLAINED

FIRST_REQUEST = "first-request"   # cache_report's cause for a log's first request
UNEXPLAINED_COLLAPSE = "unexplained-collapse"


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: str   # first-request | cross-session-read | healthy | collapse | unexplained-collapse | no-usage | one-shot
    text: str

    @property
    def unexplained(self) -> bool:
        return self.kind == UNEXPLAINED_COLLAPSE


def unexplained(row: dict[str, Any]) -> bool:
    """A request's collapse no logged event explains: exit 1 for cache-report's gate and for explain alike."""
    return row["kind"] == "request" and bool(row["collapse"]) and row["cause"] == UNEXPLAINED


def _share(row: dict[str, Any]) -> str:
    """`; hit H % of P prompt tokens`: the share of the prompt the provider served from its cache."""
    if row["hitRatio"] is None or row["inputTokens"] is None:
        return ""
    prompt = row["cacheReadTokens"] + row["inputTokens"]
    return f"; hit {100 * row['hitRatio']:.1f} % of {prompt:,} prompt tokens"


def verdict(row: dict[str, Any]) -> Verdict:
    """The verdict on one judged cache-report row."""
    if row["kind"] != "request":
        return Verdict("one-shot", f"a one-shot {row['kind']} call, outside the loop's cache lineage")
    if row["cacheReadTokens"] is None:
        if row["inputTokens"] is None:
            return Verdict("no-usage", "no usage logged: what the provider read from its cache is unknown")
        return Verdict("no-usage", "no cache read logged (its usage has no cacheReadTokens): what the provider "
                                   "read from its cache is unknown")
    reads = row["cacheReadTokens"]
    if row["cause"] == FIRST_REQUEST:   # never a collapse: nothing of this log came before it
        if reads > 0:
            return Verdict("cross-session-read", f"first request of the log; the provider read {reads:,} tokens from "
                                                 f"its cache, from another session{_share(row)}")
        return Verdict(FIRST_REQUEST, f"first request of the log: nothing was cached for it (read 0)"
                                      f"{_share(row)}")
    expected = "" if row["expectedCacheReadTokens"] is None else f", expected {row['expectedCacheReadTokens']:,}"
    if row["collapse"]:
        said = "unexplained collapse" if unexplained(row) else f"collapse ({row['cause']})"
        was = "" if row["previousCacheReadTokens"] is None else f" (was {row['previousCacheReadTokens']:,})"
        return Verdict(UNEXPLAINED_COLLAPSE if unexplained(row) else "collapse",
                       f"{said}: read {reads:,}{was}{expected}{_share(row)}")
    return Verdict("healthy", f"healthy: read {reads:,}{expected}{_share(row)}")
