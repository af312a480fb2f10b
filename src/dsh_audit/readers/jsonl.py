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

Lines are held to the line cap and values to the depth cap (dsh_audit.readers.limits): a line past either is a
read error, except the unterminated final line, which the reference drops whatever it holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import partial
from itertools import chain
from pathlib import Path
from typing import Protocol

from dsh_audit.errors import LogReadError
from dsh_audit.generations import generations, parse_log_name
from dsh_audit.readers.codecs import codec_for
from dsh_audit.readers.found import opener
from dsh_audit.readers.jsonvalue import JsonProblem, JsonTooDeep, is_number, js_number, parse_json, safe_int
from dsh_audit.readers.limits import InputLimits, located
from dsh_audit.readers.lines import ByteSource, Line
from dsh_audit.readers.packed import member_cap_message, over_member_cap
from dsh_audit.readers.progress import reported
from dsh_audit.readers.spool import label_of
from dsh_audit.records import JSON, LogRecord, LogSource, TornTail
from dsh_audit.vocabulary import known_versions

__all__ = ["Line", "check_header", "name_version", "open_lines", "open_log_file", "read_log", "version_refusal"]

# What a reader says of its input's end once every line is read: a note on how it ended (a torn zstd frame), or
# the final line it dropped unread (over the line cap).
TailNote = Callable[[], str | TornTail | None]

_UNTERMINATED = ("final line has no trailing newline; the reference loader ignores an unterminated "
                 "record even if it parses")


def version_refusal(session_id: JSON, version: JSON) -> str:
    """Why a format version is not read: newer than every generation this dsh-audit knows, or not one."""
    shown = f'session "{session_id}" uses log format v{js_number(version)}'
    known = generations()
    if isinstance(version, int | float) and version > known[-1].version:
        return (f"{shown}, newer than any generation dsh-audit knows (v{known[0].version} to "
                f"v{known[-1].version})")
    return f"{shown}, which is not a dsh log generation (dsh-audit reads v{known[0].version} to v{known[-1].version})"


def check_header(value: JSON, *, label: str, line: int | None, name_version: int | None = None) -> dict[str, JSON]:
    """Accept a session header object. The version is refused before any shape check, like the reference.
    A header without `version` is read as v0: 7 committed fixtures lack it and the reference's fixture
    reader skips the header (its persistence loader would refuse them). A canonical file name
    (session.jsonl, session.vN.jsonl) must agree with the header's version, as dsh's own reader requires."""
    if isinstance(value, dict):
        version = value.get("version")
        known = safe_int(version) if is_number(version) else None
        if is_number(version) and (known is None or known not in known_versions()):
            raise LogReadError(version_refusal(value.get("id"), version), path=label, line=line)
    if not isinstance(value, dict) or value.get("type") != "session":
        raise LogReadError('first line is not a session header: expected {"type":"session",...}',
                           path=label, line=line)
    if "version" in value and not is_number(value["version"]):
        raise LogReadError("session header version must be a number", path=label, line=line)
    if not isinstance(value.get("id"), str):
        raise LogReadError("session header has no string id", path=label, line=line)
    version = int(value.get("version", 0))
    if name_version is not None and version != name_version:
        raise LogReadError(f"the header says log format v{version} but the file name says v{name_version} "
                           "(session.jsonl is v0, session.vN.jsonl is vN): renamed or mislabelled",
                           path=label, line=line)
    return value


def _read_header(lines: Iterator[Line], label: str, tail_note: TailNote,
                 name_version: int | None) -> tuple[dict[str, JSON], int]:
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
        except JsonTooDeep as deep:
            raise located(deep, path=label, line=number) from None
        return check_header(value, label=label, line=number, name_version=name_version), number
    note = tail_note()
    if isinstance(note, TornTail):
        note = note.reason
    raise LogReadError("empty log: no session header line" + (f" ({note})" if note else ""), path=label)


def _records(source: LogSource, lines: Iterable[Line], tail_note: TailNote,
             on_close: Callable[[], None]) -> Iterator[LogRecord]:
    label = source.label
    decode = codec_for(source.generation, label).decode
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
            if (huge := over_member_cap(data)) is not None:   # refused before the parse makes an object of each
                if not terminated:   # dropped unread, whatever it holds, as the reference drops it
                    source.torn_tail = TornTail(number, len(data), _UNTERMINATED)
                    continue
                raise LogReadError(member_cap_message(huge[0]), path=label, line=number,
                                   seq=huge[1] if huge[1] is not None or source.explicit_seq else position)
            try:
                value = parse_json(data)
            except JsonProblem as problem:
                unparsable = (number, str(problem), len(data) + terminated)
                continue
            except JsonTooDeep as deep:
                if terminated:   # valid JSON to the reference, which would read it: we cannot judge it
                    raise located(deep, path=label, line=number,
                                  seq=None if source.explicit_seq else position) from None
                unparsable = (number, deep.message, len(data))   # unterminated: dropped whatever it holds
                continue
            if not terminated:
                source.torn_tail = TornTail(number, len(data), _UNTERMINATED)
                continue
            record = decode(value, number, position)
            yield record
            position += 1 if record.run is None else len(record.run)
        note = tail_note()
        if unparsable is not None:
            line, why, size = unparsable
            if isinstance(note, TornTail):   # a final line was dropped unread after it: it was not the last
                raise LogReadError(f"{why}; expected one JSON object per line", path=label, line=line)
            source.torn_tail = TornTail(line, size, f"final line dropped: {why}")
        if isinstance(note, TornTail):
            source.torn_tail = note
        elif note is not None:
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
    except (JsonProblem, JsonTooDeep):   # the full read reports it, with its line
        return False
    return isinstance(value, dict) and ("seq" in value or "seq0" in value)


def open_lines(label: str, lines: Iterator[Line], tail_note: TailNote,
               on_close: Callable[[], None], *, name_version: int | None = None) -> LogSource:
    """Read the header now and return a source that decodes the remaining lines on iteration.
    `name_version` is the generation the file's canonical name states, if it does."""
    try:
        header, header_line = _read_header(lines, label, tail_note, name_version)
        first = next((line for line in lines if line[1].strip()), None)
    except BaseException:
        on_close()
        raise
    rest: Iterator[Line] = chain([first], lines) if first is not None else lines
    source = LogSource(label=label, header=header, header_line=header_line, _events=iter(()),
                       explicit_seq=_first_record_has_seq(first), on_close=on_close)
    source._events = _records(source, rest, tail_note, on_close)
    return source


def name_version(path: Path) -> int | None:
    """The generation a canonical log file name states (session.jsonl: 0, session.v3.jsonl: 3)."""
    name = parse_log_name(path.name)
    return name.version if name.canonical else None


class SplitLines(Protocol):
    """The lines of one input (lines.FileLines: plain; zstd.ZstdLines: decompressed), and how it ended."""

    def __iter__(self) -> Iterator[Line]: ...

    def tail(self) -> str | TornTail | None: ...


LineReader = Callable[[ByteSource, str, InputLimits], SplitLines]


def read_log(lines_of: LineReader, handle: ByteSource, label: str, limits: InputLimits, *,
             name_version: int | None = None) -> LogSource:
    """A log from an open handle (a file, or a pipe read once), its lines split by `lines_of`; the source closes
    the handle at the end."""
    lines = lines_of(handle, label, limits)
    return open_lines(label, reported(iter(lines), handle, label), lines.tail, handle.close,
                      name_version=name_version)


def open_log_file(path: Path, lines_of: LineReader, limits: InputLimits | None = None, *,
                  found_in: Path | None = None) -> LogSource:
    """A log file, which can be opened again (`reopen`, `open_file`) for a second pass. `found_in`: the folder a
    directory walk found it in, from which it is opened without following a link (readers.found)."""
    limits = limits or InputLimits.from_env()
    opened = partial(opener, path, found_in)
    source = read_log(lines_of, opened(), label_of(path), limits, name_version=name_version(path))
    source.reopen = lambda: open_log_file(path, lines_of, limits, found_in=found_in)
    source.open_file = opened
    return source
