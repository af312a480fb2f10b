"""Which files are dsh session logs, told by their content (plus the zstd suffix the writer uses)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from dsh_audit.errors import LogReadError
from dsh_audit.readers.jsonvalue import JsonProblem, parse_json
from dsh_audit.readers.sqlite import APPLICATION_ID, SQLITE_MAGIC
from dsh_audit.readers.zstd import ZSTD_MAGIC

ZSTD_SUFFIXES = (".jsonl.zstd", ".jsonl.zst")
_HEADER_PROBE_BYTES = 1 << 20  # a header line is small; never read further to classify a file


def sniff(path: Path) -> str:
    """'zstd', 'sqlite' or 'jsonl', from the first bytes of the file."""
    with path.open("rb") as handle:
        start = handle.read(100)
    if start.startswith(ZSTD_MAGIC):
        return "zstd"
    if start.startswith(SQLITE_MAGIC):
        return "sqlite"
    return "jsonl"


def _is_dsh_store(path: Path) -> bool:
    with path.open("rb") as handle:
        start = handle.read(72)
    # The SQLite file header keeps PRAGMA application_id big-endian at offset 68.
    if len(start) < 72 or not start.startswith(SQLITE_MAGIC):
        return False
    return int.from_bytes(start[68:72], "big") == APPLICATION_ID


def _starts_with_session_header(path: Path) -> bool:
    with path.open("rb") as handle:
        line = handle.readline(_HEADER_PROBE_BYTES)
        while line and not line.strip():
            line = handle.readline(_HEADER_PROBE_BYTES)
    try:
        value = parse_json(line)
    except JsonProblem:
        return False
    return isinstance(value, dict) and value.get("type") == "session"


def is_dsh_log(path: Path) -> bool:
    name = path.name
    if name.endswith(ZSTD_SUFFIXES):
        return True
    try:
        if name.endswith(".jsonl"):
            return _starts_with_session_header(path)
        return _is_dsh_store(path)
    except OSError:
        return False


def _walk(directory: Path) -> list[Path]:
    found = []
    for root, _dirs, files in os.walk(directory):
        for name in files:
            candidate = Path(root, name)
            if candidate.is_file() and is_dsh_log(candidate):
                found.append(candidate)
    return sorted(found)


def discover(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files as given; each directory replaced by every dsh log below it, sorted. No duplicates."""
    result: list[Path] = []
    seen: set[Path] = set()
    for given in paths:
        path = Path(given)
        if path.is_dir():
            expanded = _walk(path)
        elif path.exists():
            expanded = [path]
        else:
            raise LogReadError("no such file", path=str(path))
        for item in expanded:
            if item not in seen:
                seen.add(item)
                result.append(item)
    return result
