"""One codec per log generation: a stored JSONL row in, the event (or packed run) it stands for out.

* v0 and v1 share a layout: events, and packed `text-chunks`/`reasoning-chunks`/`tool-call-chunks` rows that
  stand for one `assistant/chunk` per member.
* v2 and later store exactly one event per row; chunks live inside the settlement's `data.stream`.

In every generation a `sourceEventSeqs` member may be an inclusive `[start, end]` range (the writers encode a
run of three or more consecutive seqs that way). The codec expands them, with the official decoders' checks;
a list that breaks them is reported (`LogRecord.problem`) and left out of the event, so that one refusal
is one finding.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from dsh_audit.errors import LogReadError
from dsh_audit.generations import Generation
from dsh_audit.readers.jsonvalue import MAX_SAFE_INTEGER, safe_int
from dsh_audit.readers.packed import CHUNK_ROW_TYPES, MalformedRow, check_row
from dsh_audit.records import JSON, LogRecord
from dsh_audit.seqlist import seq_facts

_PACKED_ENVELOPE_KEYS = frozenset({"type", "seq0", "time0", "data"})


def _is_pair(member: Any) -> bool:
    return (type(member) is list and len(member) == 2
            and all(type(bound) is int and 0 <= bound <= MAX_SAFE_INTEGER for bound in member))


def decode_source_ranges(values: list[Any], seq: int, *, unique_earlier: bool,
                         limit: int | None = None) -> list[Any] | str:
    """`values` with every `[start, end]` member expanded, or why the official decoder refuses the list.
    A list without ranges is returned as it is (the schema and provenance checks judge it). The expansion may
    not outgrow `limit` (default `seq`: an event cannot cite more events than precede it); the reader passes
    the events actually decoded before it, so a claimed seq cannot make a short file expand without bound."""
    if seq_facts(values).all_int or not any(type(member) is list for member in values):
        return values
    limit = seq if limit is None else min(seq, limit)
    expanded: list[int] = []
    for member in values:
        if type(member) is list:
            if not _is_pair(member):
                return "sourceEventSeqs range must be a [start, end] pair"
            start, end = member
            if end < start:
                return f"sourceEventSeqs range [{start}, {end}] ends before it starts"
            if len(expanded) + end - start + 1 > limit:
                return "sourceEventSeqs range exceeds its event seq"
            expanded.extend(range(start, end + 1))
        else:
            if safe_int(member) is None:
                return "sourceEventSeqs members must be seqs or [start, end] ranges"
            expanded.append(int(member))
            if len(expanded) > limit:
                return "sourceEventSeqs exceeds its event seq"
    if any(later <= earlier for earlier, later in pairwise(expanded)):
        return "sourceEventSeqs ranges must be strictly increasing"
    if unique_earlier and expanded and expanded[-1] >= seq:
        return "sourceEventSeqs ranges must contain unique earlier seqs"
    return expanded


class EventRowCodec:
    """Decodes the rows of a generation that stores one event per row (v2 on). `decode` gets the parsed row,
    its line and its position (the running count of events decoded so far, which is the seq in the
    committed-fixture form)."""

    def __init__(self, generation: Generation, label: str) -> None:
        self.generation = generation
        self.label = label

    def decode(self, value: JSON, line: int, position: int) -> LogRecord:
        if not isinstance(value, dict):
            raise LogReadError(f"expected a JSON object ({self._rows})", path=self.label, line=line, seq=position)
        kind = value.get("type")
        if isinstance(kind, str) and kind in CHUNK_ROW_TYPES:   # a list or object type is unhashable
            return self._packed(kind, value, line, position)
        if not isinstance(kind, str):
            raise LogReadError("event has no string type", path=self.label, line=line, seq=position)
        record = LogRecord(line=line, seq=position, event=value)
        if "seq" in value:
            seq = value["seq"]
            if type(seq) is not int or not 0 <= seq <= MAX_SAFE_INTEGER:   # the common case without a call
                seq = safe_int(seq)
                if seq is None or seq < 0:
                    raise LogReadError(f"seq must be a non-negative safe integer, got {value['seq']!r}",
                                       path=self.label, line=line, seq=position, event_type=kind)
            record.seq, record.explicit_seq = seq, True
        sources = value.get("sourceEventSeqs")
        if type(sources) is list:
            decoded = decode_source_ranges(sources, record.seq, limit=position,
                                           unique_earlier=self.generation.unique_source_ranges)
            if isinstance(decoded, str):
                record.problem = decoded
                record.event = {key: item for key, item in value.items() if key != "sourceEventSeqs"}
            elif decoded is not sources:
                record.event = {**value, "sourceEventSeqs": decoded}
        return record

    _rows = "one event per row"

    def _packed(self, kind: str, value: dict[str, JSON], line: int, position: int) -> LogRecord:
        raise LogReadError(f"packed {kind} row in a format {self.generation.label} log: v2 and later store one "
                           "event per row", path=self.label, line=line, seq=position)


class PackedRowCodec(EventRowCodec):
    """v0 and v1: events, and packed chunk rows kept as one run record each (dsh_audit.records.LogRecord)."""

    _rows = "an event or a packed chunk row"

    def _packed(self, kind: str, value: dict[str, JSON], line: int, position: int) -> LogRecord:
        keys = set(value)
        if not keys <= _PACKED_ENVELOPE_KEYS or "data" not in keys:
            raise LogReadError(f"malformed {kind} storage row: envelope must be exactly {{type, seq0, time0, "
                               "data}} (seq0/time0 absent in the fixture form)",
                               path=self.label, line=line, seq=position)
        try:
            row = check_row(kind, value.get("seq0"), value.get("time0"), value["data"])
        except MalformedRow as bad:
            raise LogReadError(str(bad), path=self.label, line=line, seq=position) from None
        explicit = row.first_seq is not None
        return LogRecord(line=line, seq=row.first_seq if row.first_seq is not None else position,
                         event=row.first_event(), packed=True, explicit_seq=explicit, run=row)


def codec_for(generation: Generation, label: str) -> EventRowCodec:
    """The codec of a log's generation."""
    return (PackedRowCodec if generation.packed_chunk_rows else EventRowCodec)(generation, label)
