"""Inputs read once, as they come: standard input (`-`), named pipes and character devices.

They are opened once and never sought: the format is told from the first bytes, which are then given back to the
reader. A pipe cannot be read twice, so a second read of one in the same process (a command that reads its logs
more than once, such as `report`) is refused instead of reading nothing or waiting for a writer that is gone.
"""

from __future__ import annotations

import stat
import sys
import weakref
from pathlib import Path
from typing import BinaryIO

from dsh_audit.errors import LogReadError
from dsh_audit.readers.jsonl import read_log
from dsh_audit.readers.limits import InputLimits
from dsh_audit.readers.lines import FileLines
from dsh_audit.readers.magic import SQLITE_MAGIC, ZSTD_MAGIC
from dsh_audit.records import LogSource

__all__ = ["STDIN", "STDIN_LABEL", "is_stream", "open_stream"]

STDIN = "-"
STDIN_LABEL = "<stdin>"

_taken_handles: weakref.WeakSet[BinaryIO] = weakref.WeakSet()
_taken_pipes: set[tuple[int, int]] = set()   # (device, inode) of the named pipes read in this process


class Prefixed:
    """A handle whose first bytes were read to tell its format: they come back first. `tell` counts what was
    read, which a pipe cannot tell."""

    def __init__(self, prefix: bytes, handle: BinaryIO) -> None:
        self._prefix = prefix
        self._handle = handle
        self._position = 0

    def read(self, size: int = -1, /) -> bytes:
        if self._prefix:
            data, self._prefix = self._prefix, b""
            if size < 0 or len(data) < size:
                data += self._handle.read(-1 if size < 0 else size - len(data))
        else:
            data = self._handle.read(size)
        self._position += len(data)
        return data

    def tell(self) -> int:
        return self._position

    def close(self) -> None:
        self._handle.close()


def is_stream(path: Path) -> bool:
    """Whether `path` names an input that is read once: `-`, or an existing file that is not a regular file
    nor a directory (a named pipe, /dev/stdin, a character device)."""
    if str(path) == STDIN:
        return True
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


_READ_ONCE = ("already read: a pipe can be read only once, and this one was read earlier in this run (named twice?); "
              "save the log to a file and give its path")


def _take(handle: BinaryIO, label: str) -> None:
    if handle in _taken_handles:   # a second read would find it at its end, or halfway
        raise LogReadError(_READ_ONCE, path=label)
    _taken_handles.add(handle)


def _open_path(path: Path) -> BinaryIO:
    identity = None
    try:
        info = path.stat()
        if stat.S_ISFIFO(info.st_mode):
            identity = (info.st_dev, info.st_ino)
    except OSError as error:
        raise LogReadError(f"cannot read: {error.strerror}", path=str(path)) from None
    if identity in _taken_pipes:   # opening it again would wait for a writer that may never come
        raise LogReadError(_READ_ONCE, path=str(path))
    try:
        handle = path.open("rb")
    except OSError as error:
        raise LogReadError(f"cannot read: {error.strerror}", path=str(path)) from None
    if identity is not None:
        _taken_pipes.add(identity)
    return handle


def _stdin() -> BinaryIO:
    if sys.stdin is None:   # the process was started with standard input closed
        raise LogReadError("standard input is closed", path=STDIN_LABEL)
    import multiprocessing  # here: only reading stdin needs it, and it costs every start 5 ms

    if multiprocessing.parent_process() is not None:   # a pool worker's stdin is /dev/null, not the pipe
        raise LogReadError("standard input can be read only by the main process, not by a worker of -j; read it "
                           "with -j 1", path=STDIN_LABEL)
    handle = sys.stdin.buffer
    _take(handle, STDIN_LABEL)
    return handle


def open_stream(path: Path, limits: InputLimits) -> LogSource:
    """The log `path` streams (`-`: standard input). JSONL and zstd logs stream; a SQLite store needs a file."""
    handle, label = (_stdin(), STDIN_LABEL) if str(path) == STDIN else (_open_path(path), str(path))
    try:
        prefix = handle.read(len(SQLITE_MAGIC))   # a pipe gives what it has: read blocks until this much or EOF
    except OSError as error:
        handle.close()
        raise LogReadError(f"cannot read: {error.strerror}", path=label) from None
    if prefix.startswith(SQLITE_MAGIC):
        handle.close()
        raise LogReadError("a SQLite store cannot be read from a pipe or device; give the path of its file",
                           path=label)
    source = Prefixed(prefix, handle)
    if prefix.startswith(ZSTD_MAGIC):
        from dsh_audit.readers.zstd import ZstdLines  # zstandard: for a compressed log only

        return read_log(ZstdLines, source, label, limits)
    return read_log(FileLines, source, label, limits)
