"""One log's three parts (one_walk.Walked) from the fast path, where it decides the log: one pass of the fast
verifier (dsh_audit.fastpath) gives verify's verdict and request digests and cache-report's calls, and the
header-diff snapshots are taken at the events that change the header in force or the system head. A log the
fast path accepts has no finding at all, so verify's part is its report and nothing more.

It declines exactly where verify's fast path does (a doubt, a check without a fast twin, DSH_AUDIT_FAST_PATH=0),
and also where cache-report's rows cannot be made of the calls (a number too large for a report: the full walk
words it) and for a log whose children are matched by the first event naming them (header-diff's `watch`: every
event's text is searched, which only the full walk reads). The caller then walks the log in full
(one_walk.walk_log), as verify falls back to the full verifier.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import orjson
import polars as pl

from ..errors import DshAuditError
from ..fastpath import Doubt, leaves_verdicts
from ..fastpath.calls import read_calls
from ..fastpath.verifier import FastVerifier
from ..header import system_text
from ..model_calls import Call, OtherCall
from ..records import LogSource
from ..verify import LogReport, paused_gc
from .cache_report import CacheOptions, calls_frame
from .header_diff import ForkPoints, Run, Snapshot, SnapshotTaker
from .prediction import RealHeader

FastParts = tuple[LogReport, pl.DataFrame, list[dict[str, object]], ForkPoints]


def fast_parts(run: Run, k: int, source: LogSource, start: tuple[Snapshot | None, str | None] | None,
               options: CacheOptions, *, keep_requests: bool = False) -> FastParts | None:
    """Log `k` of `run` (opened as `source`; `start`: what its first snapshot is diffed against, None when
    header-diff leaves it out) read by the fast path: verify's report, cache-report's unjudged call rows, the
    header-diff rows and the fork points it leaves; None where the fast path declines (the module's docstring)."""
    if leaves_verdicts() or run.watch[k]:
        return None
    report = LogReport(label=source.label, generation=source.generation.version, keep_requests=keep_requests)
    report.fast_path = True
    rows: list[dict[str, object]] = []
    snapshots = None if start is None else SnapshotTaker(run.members[k], source, start, seeds=run.seeds[k],
                                                         rows=rows)
    verifiers: list[FastVerifier] = []

    def started(verifier: FastVerifier) -> None:
        verifiers.append(verifier)
        if snapshots is not None:
            verifier.on_header = _Snapshots(verifier, snapshots)

    calls = read_calls(source, options.message_prefix, digests=keep_requests, started=started)
    try:
        with paused_gc():
            frame = calls_frame(source, options, RealHeader(options.system, options.tools), _added(calls, report))
    except (Doubt, DshAuditError):   # doubted, or a row cannot be made: the full walk says what
        return None
    report.events = verifiers[0].events
    return report, frame, rows if snapshots is not None else [], (
        snapshots.finish() if snapshots is not None else ForkPoints())


def _added(calls: Iterable[Call], report: LogReport) -> Iterator[Call]:
    """`calls`, each request added to verify's `report` as it is handed out (the full walk adds each as it
    closes: the same order)."""
    for call in calls:
        if not isinstance(call, OtherCall):
            report.add(call[0])
        yield call


class _Snapshots:
    """The fast verifier's on_header: the header in force and the system head after event `seq`, to the taker,
    dated by the turn and step last started."""

    def __init__(self, verifier: FastVerifier, taker: SnapshotTaker) -> None:
        self.verifier, self.taker = verifier, taker

    def __call__(self, seq: int) -> None:
        verifier, taker = self.verifier, self.taker
        taker.turn, taker.step = verifier.last_turn, verifier.last_step
        taker.see_head(seq, verifier.header, verifier.system_head, _head_text)


def _head_text(message: bytes | None) -> str:
    """The text of the fast verifier's system head (its message's JSON bytes)."""
    return "" if message is None else system_text(orjson.loads(message))
