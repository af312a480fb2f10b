"""A log's request digests as verify keeps them for `--format json`, in memory up to SPILL_BYTES and in an
anonymous temporary file beyond: a log of a million requests costs about 100 bytes of disk per request, not
2.5 KB of memory (issue 18). They must be kept, not written as they come: the log's "ok" and findings precede
its "requests" in the document, and are known only at the end of the log.

Records are marshalled: exact for any int and any str, lone surrogates included (a cause quotes the log).

DigestLines keeps `rebuild --format digest`'s lines the same way, already as printed: that output shows no cause
and no flag, so a request costs one short line, written out whole once the fast path has accepted the log."""

from __future__ import annotations

import marshal
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, BinaryIO

from .records import RequestDigest

SPILL_BYTES = 4 * 1024 * 1024
LINES_PER_WRITE = 1024   # records a write (_Spool): about 100 KB of digest lines


class _Spool:
    """Records appended to a spooled temporary file LINES_PER_WRITE at a time: a write per record (the file's
    Python-level write and its error context) cost three times the formatting of a short one, 0.06 s of CPU per
    GB of log. `written()` flushes them before anything reads the file back. The file is made at the first write:
    verify's table keeps no digest, so a run on a small log never loads tempfile (with random and shutil, ~3 ms of
    start-up)."""

    __slots__ = ("file", "pending", "what")

    def __init__(self, what: str) -> None:
        self.what = what   # what the records are, named in an error of the temporary folder (_named_on_error)
        self.file: IO[bytes] | None = None
        self.pending: list[bytes] = []

    def add(self, record: bytes) -> None:
        pending = self.pending
        pending.append(record)
        if len(pending) >= LINES_PER_WRITE:
            self.written()

    def written(self) -> IO[bytes] | None:
        """The file, with every record added so far in it (positioned at its end); None when none was added."""
        if self.pending:
            with _named_on_error(self.what):
                if self.file is None:
                    self.file = _spooled_file()
                self.file.write(b"".join(self.pending))
            self.pending.clear()
        return self.file


class DigestSpool:
    """Appended to in dispatch order, read back as RequestDigest objects (once or more)."""

    def __init__(self) -> None:
        self._spool = _Spool(_SPOOLED)
        self._count = 0
        self._size = 0   # bytes added: beyond SPILL_BYTES, they are in the temporary file
        self.portable = False   # sent between processes as bytes, whatever their size (to another machine)

    def append(self, digest: RequestDigest) -> None:
        record = marshal.dumps((digest.turn, digest.step, digest.attempt, digest.dispatch_seq, digest.sha256,
                                digest.inherited, digest.extends_previous, digest.causes))
        self._spool.add(record)
        self._count += 1
        self._size += len(record)

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[RequestDigest]:
        file = self._spool.written()
        if file is None:
            return
        file.seek(0)
        try:
            for _ in range(self._count):
                yield RequestDigest(*marshal.load(file))
        finally:
            file.seek(0, os.SEEK_END)   # appends go on at the end

    # verify -j sends reports between processes. A spool still in memory travels as its bytes; one on disk as
    # the name of a copy the receiver opens and unlinks at once, so neither process holds the log's digests. A
    # portable one travels as bytes: a worker of a Dask cluster may be on another machine than its driver.
    def __getstate__(self) -> dict[str, Any]:
        file = self._spool.written()
        if file is None:
            return {"bytes": b"", "count": 0, "size": 0}
        file.seek(0)
        try:
            if self._size <= SPILL_BYTES or self.portable:
                return {"bytes": file.read(), "count": self._count, "size": self._size}
            import shutil
            import tempfile

            with _named_on_error(_SPOOLED):
                copy = tempfile.NamedTemporaryFile(prefix="dsh-audit-digests-", delete=False)   # noqa: SIM115
                try:
                    with copy:
                        shutil.copyfileobj(file, copy)
                except OSError:
                    os.unlink(copy.name)
                    raise
            return {"path": copy.name, "count": self._count, "size": self._size}
        finally:
            file.seek(0, os.SEEK_END)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._count, self._size = state["count"], state["size"]
        self._spool = _Spool(_SPOOLED)
        if "bytes" in state:
            if state["bytes"]:
                self._spool.add(state["bytes"])
            return
        self._spool.file = open(state["path"], "r+b")   # noqa: SIM115 (owned)
        os.unlink(state["path"])
        self._spool.file.seek(0, os.SEEK_END)


def digest_line(request: Any) -> bytes:
    """A request as `rebuild --format digest` prints it: TURN.STEP#ATTEMPT, dispatch seq, sha256 (of a
    RequestDigest, the fold's RebuiltRequest or the fast verifier's request)."""
    return (f"{request.turn}.{request.step}#{request.attempt}\tseq={request.dispatch_seq}\t{request.sha256}\n"
            .encode())


class DigestLines:
    """A log's `rebuild --format digest` lines, appended in dispatch order and written out once (batched as
    DigestSpool's records are)."""

    def __init__(self) -> None:
        self._spool = _Spool(_LINES)
        self._count = 0

    def append(self, request: Any) -> None:
        self._spool.add(digest_line(request))
        self._count += 1

    def __len__(self) -> int:
        return self._count

    def write_to(self, out: BinaryIO) -> None:
        file = self._spool.written()
        if file is None:
            return
        file.seek(0)
        while True:
            with _named_on_error(_LINES):
                chunk = file.read(1 << 16)
            if not chunk:
                return
            out.write(chunk)   # outside: a failed write to `out` is the output's error, not the spool's


def _spooled_file() -> IO[bytes]:
    import tempfile

    return tempfile.SpooledTemporaryFile(max_size=SPILL_BYTES)


_SPOOLED = "verify's request digests for --format json"
_LINES = "rebuild's request digests"


@contextmanager
def _named_on_error(what: str) -> Iterator[None]:
    """A full temporary folder is the environment's, as a full disk is: one line naming it, exit 2."""
    try:
        yield
    except OSError as error:
        import tempfile

        raise OSError(error.errno, error.strerror, f"{tempfile.gettempdir()} ({what})") from None
