"""verify's JSON document, {"schema", "version", "logs": [...], "summary": {...}}, written a log at a time and
each log's requests one at a time from its spool: memory holds one request's digest, not a log's, let alone
every log's."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import IO, Any

from ..digest_spool import DigestSpool
from ..findings import failing_rule
from ..text import printable
from ..verify import LogReport, summary

_NO_REQUESTS = '[]\n    }'   # how an empty "requests" array ends a log's object in write_document's layout
_WRITE_BYTES = 65536
SCHEMA, SCHEMA_VERSION = "dsh-audit/verify", 1   # the document's tag: dsh_audit/output_schemas/verify.schema.json


def write_document(found: Iterable[LogReport], kept: list[LogReport], strict: bool, out: IO[str]) -> None:
    """The document for the reports `found`, each appended to `kept` once written, its requests dropped (the
    summary and the exit code need only counts and findings)."""
    out.write(f'{{\n  "schema": "{SCHEMA}",\n  "version": {SCHEMA_VERSION},\n  "logs": [\n')
    for index, report in enumerate(found):
        text = json.dumps(report_json(report, strict), indent=2, ensure_ascii=False).replace("\n", "\n    ")
        head = text.removesuffix(_NO_REQUESTS)   # "requests" is the last key: its items follow one by one
        assert head != text
        out.write(("    " if index == 0 else ",\n    ") + printable(head))
        _write_requests(report.requests, out)
        report.requests = DigestSpool()
        kept.append(report)
    totals = json.dumps(summary(kept, strict), indent=2).replace("\n", "\n  ")
    out.write(("\n  ],\n" if kept else "  ],\n") + f'  "summary": {totals}\n}}\n')


def _write_requests(requests: DigestSpool, out: IO[str]) -> None:
    """A log's "requests" array and the end of its object, laid out as json.dumps(indent=2) would inside the
    document, in writes of about _WRITE_BYTES."""
    pending: list[str] = []
    size = 0
    for number, q in enumerate(requests):
        item = {"turn": q.turn, "step": q.step, "attempt": q.attempt, "dispatchSeq": q.dispatch_seq,
                "sha256": q.sha256, "inherited": q.inherited, "extendsPrevious": q.extends_previous,
                "causes": q.causes}
        text = ("[\n        " if number == 0 else ",\n        ") + json.dumps(
            item, indent=2, ensure_ascii=False).replace("\n", "\n        ")
        pending.append(text)
        size += len(text)
        if size >= _WRITE_BYTES:
            out.write(printable("".join(pending)))
            pending, size = [], 0
    pending.append("\n      ]\n    }" if requests else _NO_REQUESTS)
    out.write(printable("".join(pending)))


def report_json(report: LogReport, strict: bool) -> dict[str, Any]:
    """A log's object in the document, but for its requests (written one by one after it)."""
    return {
        "log": report.label, "generation": report.generation, "ok": not report.failed(strict),
        "failedBy": failing_rule(report.findings, report.unlisted, strict) or None,
        "skipped": report.skipped, "supersededBy": report.superseded_by, "ignored": report.ignored,
        "leftOutBy": report.left_out_by, "leftOut": report.left_out,
        "events": report.events,
        "readError": report.read_error, "rejectedByReference": report.rejected,
        "unlistedFindings": report.unlisted,
        "findings": [{"code": f.code, "severity": f.severity, "line": f.line, "seq": f.seq,
                      "eventType": f.event_type, "message": f.message, "rejects": f.rejects}
                     for f in report.findings],
        "requests": [],
    }
