"""Line access to a raw `.jsonl` or a multi-frame `.jsonl.zstd` session log (benchmark helpers only)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import zstandard

PACKED_TYPES = {"text-chunks": "text-delta", "reasoning-chunks": "reasoning-delta",
                "tool-call-chunks": "tool-call-delta"}
BUFFER = 1 << 20


def open_binary(path: Path) -> BinaryIO:
    """A buffered binary reader; zstd files are decoded across all frames (one-shot would stop at frame 1)."""
    raw = open(path, "rb", buffering=BUFFER)  # noqa: SIM115 - returned to the caller
    if path.name.endswith(".zstd") or path.name.endswith(".zst"):
        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        return io.BufferedReader(reader, buffer_size=BUFFER)
    return raw


def iter_lines(path: Path) -> Iterator[bytes]:
    with open_binary(path) as f:
        yield from f


def _packed_chunks(delta: str, fields: dict[str, Any], members: list[str], time: int,
                   gaps: list[int]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(time, chunk) per member of a packed run; `fields` holds its index, and id and name for tool calls."""
    for k, member in enumerate(members):
        if k:
            time += gaps[k - 1]
        if delta == "tool-call-delta":
            chunk = {"type": delta, "index": fields["index"], "id": fields["id"]}
            if "name" in fields:
                chunk["name"] = fields["name"]
            chunk["argumentsDelta"] = member
        else:
            chunk = {"type": delta, "index": fields["index"], "text": member}
        yield time, chunk


def _members(delta: str, fields: dict[str, Any]) -> list[str]:
    members: list[str] = fields["args"] if delta == "tool-call-delta" else fields["texts"]
    return members


def expand(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Expand a packed chunk row into its assistant/chunk events; any other record is returned as is."""
    delta = PACKED_TYPES.get(record["type"])
    if delta is None:
        return [record]
    data = record["data"]
    chunks = _packed_chunks(delta, data, _members(delta, data), record["time0"], data["dt"])
    return [{"type": "assistant/chunk", "seq": record["seq0"] + k, "time": time,
             "data": {"turn": data["turn"], "step": data["step"], "chunk": chunk}}
            for k, (time, chunk) in enumerate(chunks)]


def expand_stream(stream: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """(time, chunk) of each chunk embedded in a v2+ settlement's `data.stream` (packed records expanded)."""
    out: list[tuple[int, dict[str, Any]]] = []
    for record in stream:
        if record["type"] == "chunk":
            out.append((record["time"], record["chunk"]))
            continue
        delta = PACKED_TYPES[record["type"]]
        out.extend(_packed_chunks(delta, record, _members(delta, record), record["time0"], record["dt"]))
    return out


def load_events(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, expanded events) of a whole log, in memory."""
    lines = iter_lines(path)
    header = orjson.loads(next(lines))
    events: list[dict[str, Any]] = []
    for line in lines:
        if line.strip():
            events.extend(expand(orjson.loads(line)))
    return header, events
