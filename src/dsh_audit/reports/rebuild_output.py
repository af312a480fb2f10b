"""What `audit rebuild` prints: a log's rebuilt requests as one JSON document (each annotated and indented), as
JSON Lines (the exact request bytes), or as digests, streamed as they are rebuilt."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

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
    document's array); how many."""
    written = 0
    for request in _rebuilt(source, message_prefix, fmt):
        if wanted is not None and ((request.turn, request.step) != wanted[:2]
                                   or wanted[2] not in (None, request.attempt)):
            continue
        name = f"{request.turn}.{request.step}#{request.attempt}"
        if fmt == "digest":
            out.write(f"{name}\tseq={request.dispatch_seq}\t{request.sha256}\n".encode())
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


def _rebuilt(source: LogSource, message_prefix: str, fmt: str) -> Iterable[RebuiltRequest | RequestDigest]:
    """The requests of one log. Digests only: those of verify's fast path when it accepts the log (the same
    sha256s as the fold's, tests/test_fastpath.py), else the fold's."""
    from .. import fastpath
    from ..reconstruct import iter_requests

    if fmt == "digest":
        decided = fastpath.fast_verify(source, message_prefix=message_prefix)
        if decided is not None:
            return decided.requests
    return iter_requests(source, message_prefix=message_prefix, bodies=fmt != "digest")
