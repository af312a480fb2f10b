"""The fast path of `verify`: a verifier that decides, beside the full verifier that explains.

`fast_verify` reads a plain or zstd JSONL log in one pass with decoders generated from schemas/ and returns the
report of a log with no finding at all, or None on any doubt (a finding, a warning, a note, or a shape the fast
types do not cover); the caller then runs the full verifier (dsh_audit.verify), which words the findings. A log
the fast path accepts gets the same report from either: tests/test_fastpath.py checks that differentially. It
decides only while every check verify runs has a fast twin (dsh_audit.checks): a check added without one makes
it decline every log, so the full verifier runs that check.

`fast_calls` is the same pass for `audit cache-report` (dsh_audit.fastpath.calls): it hands out each model call
as it is read, and raises Doubt where the fast verifier doubts, so that the report is built again by the
full walk; tests/test_cache_fastpath.py checks that both build the same report.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import msgspec

from .. import checks
from ..digest_spool import DigestLines, DigestSpool
from ..model_calls import Call
from ..records import LogSource
from .calls import read_calls, reading
from .lines import Doubt

__all__ = ["SWITCH", "Decided", "Doubt", "decide", "fast_calls", "fast_verify", "leaves_verdicts", "switched_off"]

SWITCH = "DSH_AUDIT_FAST_PATH"


class Decided(msgspec.Struct, frozen=True):
    """A log the fast path accepted: no finding, these events and requests."""

    events: int
    request_count: int
    requests: DigestSpool   # empty unless asked for (keep_requests)
    lines: DigestLines | None = None   # rebuild --format digest's lines, when asked for (digest_lines)


def switched_off() -> bool:
    """DSH_AUDIT_FAST_PATH=0 in the environment: every log goes to the full verifier and full walk."""
    return os.environ.get(SWITCH) == "0"


def leaves_verdicts() -> bool:
    """Whether every verdict is the full verifier's: the fast path is switched off, or a check has no fast twin
    (decide says which)."""
    return switched_off() or bool(checks.without_fast_twin())


def fast_verify(source: LogSource, *, message_prefix: str = "legacy", keep_requests: bool = True,
                digest_lines: bool = False) -> Decided | None:
    """The verdict of the fast path on a file source, or None when the full verifier must read it (always with
    DSH_AUDIT_FAST_PATH=0 in the environment: for comparisons and bisecting). `digest_lines`: the requests as
    `rebuild --format digest` prints them, in Decided.lines."""
    if switched_off():
        return None
    verdict = decide(source, message_prefix=message_prefix, keep_requests=keep_requests, digest_lines=digest_lines)
    return verdict if isinstance(verdict, Decided) else None


def fast_calls(source: LogSource, *, message_prefix: str = "legacy") -> Iterator[Call] | None:
    """The priced model calls of a file source, read by the fast path as they come, or None when it is switched
    off (DSH_AUDIT_FAST_PATH=0). Iterating raises Doubt wherever the fast verifier doubts: the calls
    handed out before it are then to be dropped, and the log walked in full (reports.cache_report.calls). A check
    without a fast twin does not stop it: cache-report reads no check's findings."""
    if switched_off():
        return None
    return read_calls(source, message_prefix)


def decide(source: LogSource, *, message_prefix: str = "legacy", keep_requests: bool = True,
           digest_lines: bool = False) -> Decided | str:
    """The fast path's verdict, or why it leaves the log to the full verifier (for tests and benchmarks)."""
    if untwinned := checks.without_fast_twin():
        return f"no fast twin for the check {', '.join(untwinned)}"
    try:
        with reading(source, message_prefix, keep_requests=keep_requests,
                     digest_lines=digest_lines) as (verifier, lines):
            verifier.feed(lines.lines, max_line=lines.max_line, max_depth=lines.max_depth)
            requests = verifier.finish(check_newline=lines.check_newline)
    except Doubt as doubt:
        return str(doubt)
    return Decided(verifier.events, verifier.request_count, requests, verifier.lines)
