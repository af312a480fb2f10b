"""What `audit rebuild` prints: a log's rebuilt requests as one JSON document (each annotated and indented), as
JSON Lines (the exact request bytes), or as digests, streamed as they are rebuilt."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from ..digest_spool import digest_line
from ..errors import DshAuditError
from ..fold import RebuiltRequest
from ..readers import open_logs
from ..records import LogSource, RequestDigest
from ..text import printable

FORMATS = ("json", "jsonl", "digest")   # the sinks (dsh_audit.sinks) requests are written to
Step = tuple[int, int, int | None]      # turn, step and attempt (None: every attempt of the step)


def write_requests(log: Path, wanted: Step | None, fmt: str, message_prefix: str, out: BinaryIO) -> int:
    """Write the requests of `log` (those of `wanted` only, when given) to `out` in `fmt`; how many were written.
    JSON is one document per log, {"schema", "version", "log", "generation", "requests": [...]}; a log whose
    rebuild stops (a log dsh would refuse, a torn line) still ends its document, with "stopped": why, before the
    error is raised."""
    written = 0
    for source in open_logs(log):
        if fmt != "json":
            written += _write_log(source, wanted, fmt, message_prefix, out)
            continue
        head = {"schema": "dsh-audit/rebuild", "version": 1, "log": source.label,
                "generation": source.generation.version}
        out.write(printable(json.dumps(head, ensure_ascii=False))[:-1].encode() + b', "requests": [')
        try:
            written += _write_log(source, wanted, fmt, message_prefix, out)
        except DshAuditError as error:
            out.write(f'\n], "stopped": {printable(json.dumps(str(error), ensure_ascii=False))}}}\n'.encode())
            out.flush()
            raise
        out.write(b"\n]}\n")
    return written


def _write_log(source: LogSource, wanted: Step | None, fmt: str, message_prefix: str, out: BinaryIO) -> int:
    """The requests of one log (`wanted` only), written as they are rebuilt (in JSON, the items of its own
    document's array); how many. Every digest of a log the fast path accepts is written at once: its lines were
    kept as printed (fastpath.Decided.lines), or, for one step, its requests."""
    from .. import fastpath
    from ..reconstruct import iter_requests

    requests: Iterable[RebuiltRequest | RequestDigest]
    decided = fastpath.fast_verify(source, message_prefix=message_prefix, keep_requests=wanted is not None,
                                   digest_lines=wanted is None) if fmt == "digest" else None
    if decided is not None and decided.lines is not None:
        decided.lines.write_to(out)
        out.flush()
        return len(decided.lines)
    if decided is not None:
        requests = decided.requests
    else:   # the fold's, as they are rebuilt (the same sha256s as the fast path's, tests/test_fastpath.py)
        requests = iter_requests(source, message_prefix=message_prefix, bodies=fmt != "digest")
    written = 0
    for request in requests:
        if wanted is not None and ((request.turn, request.step) != wanted[:2]
                                   or wanted[2] not in (None, request.attempt)):
            continue
        name = f"{request.turn}.{request.step}#{request.attempt}"
        if fmt == "digest":
            out.write(digest_line(request))
        elif not isinstance(request, RebuiltRequest):   # the fast path answers digests only
            raise AssertionError("a fast-path request has no body")
        elif fmt == "jsonl":
            out.write((request.body or b"null") + b"\n")
        else:
            text = printable(json.dumps(annotated(request, name), indent=2, ensure_ascii=False))
            out.write((",\n  " if written else "\n  ").encode() + text.replace("\n", "\n  ").encode())
        written += 1
        out.flush()
    return written


def annotated(request: RebuiltRequest, name: str) -> dict[str, object]:
    """A request in the JSON document: where it is in the log, what it is rebuilt from, and its body."""
    return {"name": name, "turn": request.turn, "step": request.step, "attempt": request.attempt,
            "dispatchSeq": request.dispatch_seq, "headerSeq": request.header_seq, "sha256": request.sha256,
            "inherited": request.inherited, "owner": request.owner, "prefix": request.prefix,
            "placeholders": request.placeholders, "request": json.loads(request.body) if request.body else None}

