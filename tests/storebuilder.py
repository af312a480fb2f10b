"""A session-persistence-sqlite store (schema 17) as the tests build one: its tables, and the varint encoding
of `source_event_seqs` (spec §8.6), written independently of the reader."""

from __future__ import annotations

STORE_SCHEMA = """
CREATE TABLE persistence_state (singleton INTEGER PRIMARY KEY CHECK (singleton = 1), store_id TEXT NOT NULL) STRICT;
CREATE TABLE sessions (
  id TEXT PRIMARY KEY, version INTEGER NOT NULL, created_at INTEGER NOT NULL, cwd TEXT, parent_session TEXT,
  seed_length INTEGER, origin TEXT, delegation_depth INTEGER, agent_preset TEXT,
  incarnation TEXT NOT NULL, revision INTEGER NOT NULL) STRICT;
CREATE TABLE events (
  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE, seq INTEGER NOT NULL,
  type TEXT NOT NULL, time INTEGER NOT NULL, data ANY NOT NULL, source_event_seqs ANY, surface_op TEXT,
  ignorable INTEGER CHECK (ignorable IS NULL OR ignorable IN (0, 1)), PRIMARY KEY (session_id, seq)) STRICT;
"""


def varints(seqs: list[int]) -> bytes:
    """First value plain LEB128, then zigzag deltas (spec §8.6), written independently of the reader."""
    out, previous = bytearray(), 0
    for index, seq in enumerate(seqs):
        value = seq if index == 0 else ((seq - previous) * 2 if seq >= previous else (previous - seq) * 2 - 1)
        while value >= 0x80:
            out.append(value & 0x7F | 0x80)
            value >>= 7
        out.append(value)
        previous = seq
    return bytes(out)
