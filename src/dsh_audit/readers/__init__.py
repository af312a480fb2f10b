"""Readers at the edge: turn bytes into `LogSource`s (header now, records streamed on iteration).

Formats, told apart by content: plain JSONL (persisted or committed-fixture form), multi-frame
`.jsonl.zstd`, and SQLite session stores (one source per session, labelled `path#sessionId`). Any of them but a
store may also come once through a pipe: `-` (standard input), a named pipe, a device (readers.stream). Every
read is held to the caps of readers.limits, from the environment unless the caller passes its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from dsh_audit.errors import LogReadError
from dsh_audit.readers.discover import discover, is_dsh_log, sniff, split_selector
from dsh_audit.readers.jsonl import open_log_file
from dsh_audit.readers.limits import InputLimits
from dsh_audit.readers.lines import FileLines
from dsh_audit.readers.spool import label_of
from dsh_audit.readers.stream import is_stream, open_stream
from dsh_audit.records import LogSource

__all__ = ["InputLimits", "discover", "is_dsh_log", "open_log", "open_logs"]


def open_logs(path: str | os.PathLike[str], *, limits: InputLimits | None = None,
              found_in: Path | None = None) -> Iterator[LogSource]:
    """Every session the input holds: one for a JSONL log, one per session for a SQLite store (`store.db#id`:
    that one), one for a pipe (`-`: standard input). `found_in`: the folder given that a directory walk found
    `path` in; the file is then opened from there without following a link, and must be a regular file
    (readers.found; SQLite opens a store by its name itself, just after that check)."""
    limits = limits or InputLimits.from_env()
    file, session_id = split_selector(Path(path))
    if found_in is None:
        if is_stream(file):
            if session_id is not None:
                raise LogReadError("a #sessionId selector applies only to SQLite stores, which are files",
                                   path=str(file))
            yield open_stream(file, limits)
            return
        if not file.exists():
            raise LogReadError("no such file", path=str(file))
        if file.is_dir():
            raise LogReadError("is a directory; expected a log file (use discover() to list the logs below it)",
                               path=str(file))
    try:
        kind = sniff(file, found_in)
    except OSError as error:
        raise LogReadError(f"cannot read: {error.strerror}", path=label_of(file)) from None
    if kind == "sqlite":
        from dsh_audit.readers.sqlite import open_store  # sqlite3: for a store only

        sources = open_store(file, limits)
        if session_id is None:
            yield from sources
            return
        matching = [source for source in sources if source.header.get("id") == session_id]
        if not matching:
            raise LogReadError(f"no session {session_id!r} in this store", path=label_of(file))
        yield from matching
        return
    if session_id is not None:
        raise LogReadError("a #sessionId selector applies only to SQLite stores", path=label_of(file))
    if kind == "zstd":
        from dsh_audit.readers.zstd import ZstdLines  # zstandard: for a compressed log only

        yield open_log_file(file, ZstdLines, limits, found_in=found_in)
        return
    yield open_log_file(file, FileLines, limits, found_in=found_in)


def open_log(path: str | os.PathLike[str], *, limits: InputLimits | None = None,
             found_in: Path | None = None) -> LogSource:
    """The single session an input holds; a SQLite store must hold exactly one (or be given as `path#id`)."""
    sources = list(open_logs(path, limits=limits, found_in=found_in))
    if len(sources) != 1:
        raise LogReadError(f"holds {len(sources)} sessions; expected exactly one (use open_logs, "
                           "or name one as path#sessionId)", path=str(path))
    return sources[0]
