"""Files dsh-audit finds itself, rather than being given: a log below a folder, a session in dsh's home, the
golden file beside the logs, a sidecar beside a log. A symbolic link planted there (by a pull request in a CI
checkout, say) must not put another file into a run nor hang it, so such a path is opened without following
links: from the folder the user gave (or the file's own folder) down, every component is opened relative to the
one before with O_NOFOLLOW (a link anywhere below that folder is refused, even one swapped in after a listing),
the file itself without blocking (a FIFO cannot stall the open), and it must then be a regular file (fstat on
the descriptor: what was opened, not what a name says now). Paths the user typed are followed as given.

What dsh-audit writes at a path it names itself (the golden file) is refused through a link by
dsh_audit.output (`follow_links=False`).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from dsh_audit.errors import LogReadError
from dsh_audit.readers.limits import describe

__all__ = ["FoundFileError", "open_found", "opener", "read_found", "refused_link"]

_NO_FOLLOW = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
# ELOOP: the component is a link (O_NOFOLLOW); ENOTDIR: a link or file where a folder was listed (O_DIRECTORY).
_A_LINK = (errno.ELOOP, errno.ENOTDIR)


class FoundFileError(LogReadError):
    """A path dsh-audit found itself that it will not read: a link, not a regular file, too large, unreadable."""


def refused_link(what: str) -> str:
    return (f"{what} is a symbolic link: dsh-audit does not follow links it finds itself (name the file it points "
            "to, to read it)")


def _refuse(path: Path, what: str, why: str, hint: str | None) -> FoundFileError:
    return FoundFileError(f"{what} {why}" + (f"; {hint}" if hint else ""), path=str(path))


def open_found(path: Path, *, below: Path | None = None, what: str = "the file", hint: str | None = None,
               buffering: int = -1) -> BinaryIO:
    """`path`, a regular file, opened for reading without following a link in any component below `below`
    (the folder the user gave; by default the file's own folder, which is followed as given)."""
    root = path.parent if below is None else below
    *folders, name = path.relative_to(root).parts
    try:
        folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        raise _refuse(path, what, f"cannot be read: {error.strerror}", hint) from None
    try:
        for part in folders:
            inner = os.open(part, _NO_FOLLOW | os.O_DIRECTORY, dir_fd=folder)
            os.close(folder)
            folder = inner
        fd = os.open(name, _NO_FOLLOW | os.O_NONBLOCK, dir_fd=folder)
    except OSError as error:
        if error.errno in _A_LINK:
            raise _refuse(path, what, "is a symbolic link, or below one: dsh-audit does not follow links it "
                          "finds itself", hint) from None
        raise _refuse(path, what, f"cannot be read: {error.strerror}", hint) from None
    finally:
        os.close(folder)
    if not stat.S_ISREG(os.fstat(fd).st_mode):   # a FIFO, a device, a folder: nothing to read there
        os.close(fd)
        raise _refuse(path, what, "is not a regular file", hint)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb", buffering=buffering)


def read_found(path: Path, *, limit: int, below: Path | None = None, what: str = "the file",
               hint: str | None = None, raise_cap: str | None = None) -> bytes:
    """All of `path`, opened as `open_found` does, at most `limit` bytes: a larger file is refused unread, saying
    how to `raise_cap` when the cap can be raised."""
    too_large = f"is larger than the cap of {describe(limit)}" + (f"; {raise_cap}" if raise_cap else "")
    with open_found(path, below=below, what=what, hint=hint) as handle:
        if os.fstat(handle.fileno()).st_size > limit:
            raise _refuse(path, what, too_large, hint)
        try:
            data = handle.read(limit + 1)
        except OSError as error:
            raise _refuse(path, what, f"cannot be read: {error.strerror}", hint) from None
    if len(data) > limit:   # it grew since the fstat
        raise _refuse(path, what, too_large, hint)
    return data


def opener(path: Path, below: Path | None, buffering: int = -1) -> BinaryIO:
    """A log opened for reading: as given (`below` None), or, when a directory walk found it below the folder
    `below`, as `open_found` opens it."""
    if below is None:
        return path.open("rb", buffering=buffering)
    return open_found(path, below=below, what="this log", buffering=buffering)
