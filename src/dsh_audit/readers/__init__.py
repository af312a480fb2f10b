"""Readers at the edge: turn bytes on disk into `LogSource`s (header now, records streamed on iteration).

Formats, told apart by content: plain JSONL (persisted or committed-fixture form), multi-frame
`.jsonl.zstd`, and SQLite session stores (one source per session, labelled `path#sessionId`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from dsh_audit.errors import LogReadError
from dsh_audit.readers.discover import discover, is_dsh_log, sniff
from dsh_audit.readers.jsonl import open_jsonl
from dsh_audit.readers.sqlite import open_store
from dsh_audit.readers.zstd import open_zstd
from dsh_audit.records import LogSource

__all__ = ["discover", "is_dsh_log", "open_log", "open_logs"]


def _split_selector(path: Path) -> tuple[Path, str | None]:
    """`store.db#sessionId` names one session of a SQLite store (only when no file has that literal name)."""
    text = str(path)
    if not path.exists() and "#" in text:
        store, _, session_id = text.rpartition("#")
        return Path(store), session_id
    return path, None


def open_logs(path: str | os.PathLike[str]) -> Iterator[LogSource]:
    """Every session the file holds: one for a JSONL log, one per session for a SQLite store."""
    file, session_id = _split_selector(Path(path))
    if not file.exists():
        raise LogReadError("no such file", path=str(file))
    if file.is_dir():
        raise LogReadError("is a directory; expected a log file (use discover() to list the logs below it)",
                           path=str(file))
    try:
        kind = sniff(file)
    except OSError as error:
        raise LogReadError(f"cannot read: {error.strerror}", path=str(file)) from None
    if kind == "sqlite":
        sources = open_store(file)
        if session_id is None:
            yield from sources
            return
        matching = [source for source in sources if source.header.get("id") == session_id]
        if not matching:
            raise LogReadError(f"no session {session_id!r} in this store", path=str(file))
        yield from matching
        return
    if session_id is not None:
        raise LogReadError("a #sessionId selector applies only to SQLite stores", path=str(file))
    yield open_zstd(file) if kind == "zstd" else open_jsonl(file)


def open_log(path: str | os.PathLike[str]) -> LogSource:
    """The single session a file holds; a SQLite store must hold exactly one (or be given as `path#id`)."""
    sources = list(open_logs(path))
    if len(sources) != 1:
        raise LogReadError(f"holds {len(sources)} sessions; expected exactly one (use open_logs, "
                           "or name one as path#sessionId)", path=str(path))
    return sources[0]
