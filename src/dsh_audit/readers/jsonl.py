"""JSONL session logs, raw or zstd-framed, in both on-disk forms.

* Persisted form (session-persistence-jsonl): events carry `seq`/`time`, packed rows `seq0`/`time0`.
* Committed-fixture form: those keys are stripped; a record's seq is its position, the running count of
  decoded events, where a packed row counts once per member. A missing time stays missing.

An explicit seq is reported as stored, never checked against the position here: gaps and duplicates are
findings for the verifier, not read errors.

Crash rules, after the reference loader (`SessionLogScanner`, format.ts): its last record is committed only
when newline-terminated, so a final line without a newline is dropped as a torn tail *even when it parses*;
we mirror that and record it in `LogSource.torn_tail`. A line that is not JSON is a torn tail when nothing
but blank lines follows it and a read error otherwise (the reference instead drops everything after it
unless a later line holds a `turn/end`; an auditor should not drop events silently).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from pathlib import Path
from typing import BinaryIO

from dsh_audit.errors import LogReadError
from dsh_audit.readers.jsonvalue import MAX_SAFE_INTEGER, JsonProblem, is_number, js_number, parse_json, safe_int
from dsh_audit.readers.packed import CHUNK_ROW_TYPES, MalformedRow, check_row
from dsh_audit.records import JSON, LogRecord, LogSource, TornTail

# (physical line number from 1, line bytes without the newline, whether a newline ended it)
Line = tuple[int, bytes, bool]

SUPPORTED_FORMAT_VERSION = 0
_ENVELOPE_KEYS = frozenset({"type", "seq0", "time0", "data"})
_UNTERMINATED = ("final line has no trailing newline; the reference loader ignores an unterminated "
                 "record even if it parses")


def raw_lines(handle: BinaryIO) -> Iterator[Line]:
    """Lines of a plain file, one buffered read at a time (never the whole file)."""
    for number, raw in enumerate(handle, 1):
        if raw.endswith(b"\n"):
            yield number, raw[:-1], True
        else:
            yield number, raw, False


def version_refusal(session_id: JSON, version: JSON) -> str:
    """The reference's directional refusal of a format version it does not read."""
    shown = f'session "{session_id}" uses log format v{js_number(version)}'
    if isinstance(version, int | float) and version > SUPPORTED_FORMAT_VERSION:
        return (f"{shown}, but only v{SUPPORTED_FORMAT_VERSION} is supported: it was written by a newer "
                "harness, upgrade to read it")
    return f"{shown}, older than the supported v{SUPPORTED_FORMAT_VERSION}; there is no upgrade path for it"


def check_header(value: JSON, *, label: str, line: int | None) -> dict[str, JSON]:
    """Accept a session header object. The version is refused before any shape check, like the reference.
    A header without `version` is accepted: 7 committed fixtures lack it and the reference's fixture
    reader skips the header (its persistence loader would refuse them)."""
    if isinstance(value, dict):
        version = value.get("version")
        if is_number(version) and version != SUPPORTED_FORMAT_VERSION:
            raise LogReadError(version_refusal(value.get("id"), version), path=label, line=line)
    if not isinstance(value, dict) or value.get("type") != "session":
        raise LogReadError('first line is not a session header: expected {"type":"session",...}',
                           path=label, line=line)
    if "version" in value and not is_number(value["version"]):
        raise LogReadError("session header version must be a number", path=label, line=line)
    if not isinstance(value.get("id"), str):
        raise LogReadError("session header has no string id", path=label, line=line)
    return value


def _read_header(lines: Iterator[Line], label: str, tail_note: Callable[[], str | None]
                 ) -> tuple[dict[str, JSON], int]:
    for number, data, terminated in lines:
        if not data.strip():
            continue
        if not terminated:
            raise LogReadError("torn header: the session header line has no trailing newline",
                               path=label, line=number)
        try:
            value = parse_json(data)
        except JsonProblem as problem:
            raise LogReadError(f"session header line: {problem}; expected a JSON object",
                               path=label, line=number) from None
        return check_header(value, label=label, line=number), number
    note = tail_note()
    raise LogReadError("empty log: no session header line" + (f" ({note})" if note else ""), path=label)


def _decode(value: JSON, number: int, position: int, label: str) -> LogRecord:
    """The record one stored line holds: an event, or a packed row kept as one run record."""
    if not isinstance(value, dict):
        raise LogReadError("expected a JSON object (an event or a packed chunk row)",
                           path=label, line=number, seq=position)
    kind = value.get("type")
    if isinstance(kind, str) and kind in CHUNK_ROW_TYPES:   # a list or object type is unhashable
        keys = set(value)
        if not keys <= _ENVELOPE_KEYS or "data" not in keys:
            raise LogReadError(f"malformed {kind} storage row: envelope must be exactly {{type, seq0, time0, "
                               "data}} (seq0/time0 absent in the fixture form)",
                               path=label, line=number, seq=position)
        try:
            row = check_row(str(kind), value.get("seq0"), value.get("time0"), value["data"])
        except MalformedRow as bad:
            raise LogReadError(str(bad), path=label, line=number, seq=position) from None
        explicit = row.first_seq is not None
        return LogRecord(line=number, seq=row.first_seq if row.first_seq is not None else position,
                         event=row.first_event(), packed=True, explicit_seq=explicit, run=row)
    if not isinstance(kind, str):
        raise LogReadError("event has no string type", path=label, line=number, seq=position)
    if "seq" not in value:
        return LogRecord(line=number, seq=position, event=value)
    seq = value["seq"]
    if type(seq) is not int or not 0 <= seq <= MAX_SAFE_INTEGER:   # the common case first, without a call
        seq = safe_int(seq)
        if seq is None or seq < 0:
            raise LogReadError(f"seq must be a non-negative safe integer, got {value['seq']!r}",
                               path=label, line=number, seq=position, event_type=kind)
    return LogRecord(line=number, seq=seq, event=value, explicit_seq=True)


def _records(source: LogSource, lines: Iterable[Line], tail_note: Callable[[], str | None],
             on_close: Callable[[], None]) -> Iterator[LogRecord]:
    label = source.label
    position = 0
    last_line = source.header_line
    unparsable: tuple[int, str, int] | None = None  # (line, why, bytes) of a line not yet known to be last
    try:
        for number, data, terminated in lines:
            last_line = number
            if not data.strip():
                continue
            if unparsable is not None:
                raise LogReadError(f"{unparsable[1]}; expected one JSON object per line",
                                   path=label, line=unparsable[0])
            try:
                value = parse_json(data)
            except JsonProblem as problem:
                unparsable = (number, str(problem), len(data) + terminated)
                continue
            if not terminated:
                source.torn_tail = TornTail(number, len(data), _UNTERMINATED)
                continue
            record = _decode(value, number, position, label)
            yield record
            position += 1 if record.run is None else len(record.run)
        if unparsable is not None:
            line, why, size = unparsable
            source.torn_tail = TornTail(line, size, f"final line dropped: {why}")
        note = tail_note()
        if note is not None:
            tail = source.torn_tail
            source.torn_tail = (TornTail(last_line + 1, 0, note) if tail is None
                                else TornTail(tail.line, tail.dropped_bytes, f"{tail.reason}; {note}"))
    finally:
        on_close()


def _first_record_has_seq(first: Line | None) -> bool:
    if first is None:
        return False
    try:
        value = parse_json(first[1])
    except JsonProblem:
        return False
    return isinstance(value, dict) and ("seq" in value or "seq0" in value)


def open_lines(label: str, lines: Iterator[Line], tail_note: Callable[[], str | None],
               on_close: Callable[[], None]) -> LogSource:
    """Read the header now and return a source that decodes the remaining lines on iteration."""
    try:
        header, header_line = _read_header(lines, label, tail_note)
        first = next((line for line in lines if line[1].strip()), None)
    except BaseException:
        on_close()
        raise
    rest: Iterator[Line] = chain([first], lines) if first is not None else lines
    source = LogSource(label=label, header=header, header_line=header_line, _events=iter(()),
                       explicit_seq=_first_record_has_seq(first))
    source._events = _records(source, rest, tail_note, on_close)
    return source


def open_jsonl(path: Path) -> LogSource:
    handle = path.open("rb")
    return open_lines(str(path), raw_lines(handle), lambda: None, handle.close)
