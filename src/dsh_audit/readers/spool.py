"""The bounded local spool a remote log is read through: the object is streamed in chunks into a file of its
own, in a private folder (0700, created anew: never a link) of the spool folder, read there by the local readers,
and deleted after. Never more than one chunk of it is in memory, and never more than the spool cap on disk: an
object larger than the cap is refused, named with its size. Reading a log so costs about what reading it from a
local disk does, plus the copy (docs/fleet.md, Sources); an fsspec file object read line by line cost far more.

While a log is spooled, the readers name it by its URL, never by the spool's path (`label_of`): a finding, an
error, a report row says `s3://bucket/key`. The spool folder and cap come from the environment
($DSH_AUDIT_SPOOL_DIR, else the system's temporary folder; $DSH_AUDIT_SPOOL_MAX), which `verify -j` workers
inherit and the CLI's --spool-dir sets; on another machine (a Dask worker) they are that machine's own."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from dsh_audit.errors import DshAuditError, LogReadError
from dsh_audit.readers.limits import describe, parse_size
from dsh_audit.readers.objects import RemoteLog

SPOOL_DIR_ENV = "DSH_AUDIT_SPOOL_DIR"
SPOOL_MAX_ENV = "DSH_AUDIT_SPOOL_MAX"
DEFAULT_SPOOL_MAX = 4 << 30   # as the plaintext cap of one zstd log (readers.limits)
CHUNK = 8 << 20               # one ranged read of the object, and all of it ever held in memory at once
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

_labels: dict[str, str] = {}   # a spooled file's path -> its URL, while it is spooled (this process only)


def label_of(path: Path) -> str:
    """How the readers name the log at `path`: its URL while it is a spooled copy, else the path itself."""
    text = str(path)
    return _labels.get(text, text)


def spool_root() -> Path:
    """The spool folder: $DSH_AUDIT_SPOOL_DIR, else the system's temporary folder. It must be an existing folder,
    not a link: the spool follows none."""
    import tempfile  # for remote logs only: a local run never loads it (with random and shutil, ~3 ms)

    given = os.environ.get(SPOOL_DIR_ENV, "").strip()
    root = Path(given) if given else Path(tempfile.gettempdir())
    try:
        mode = root.lstat().st_mode
    except OSError as error:
        raise DshAuditError(f"the spool folder cannot be used: {error.strerror}", path=str(root)) from None
    if stat.S_ISLNK(mode):
        raise DshAuditError("the spool folder is a symbolic link: the spool follows none (name the folder it "
                            "points to)", path=str(root))
    if not stat.S_ISDIR(mode):
        raise DshAuditError("the spool folder is not a folder", path=str(root))
    return root


def spool_cap() -> int:
    """The most bytes one spooled log may take: $DSH_AUDIT_SPOOL_MAX, else DEFAULT_SPOOL_MAX."""
    given = os.environ.get(SPOOL_MAX_ENV, "").strip()
    return parse_size(given, SPOOL_MAX_ENV) if given else DEFAULT_SPOOL_MAX


def _too_large(log: RemoteLog, size: str, cap: int) -> LogReadError:
    return LogReadError(f"{size} is larger than the spool cap of {describe(cap)}; raise it with --spool-max or "
                        f"{SPOOL_MAX_ENV}", path=log.url)


@contextmanager
def spooled(log: RemoteLog) -> Iterator[Path]:
    """`log` copied into the spool, as a file of the object's own name (which states its generation); deleted
    when the block ends, whatever happens in it. Raises a LogReadError naming the URL when it cannot be copied."""
    cap = spool_cap()
    if log.size is not None and log.size > cap:
        raise _too_large(log, f"the object ({describe(log.size)})", cap)
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="dsh-audit-spool-", dir=spool_root()))   # 0700, made anew
    target = folder / (log.name if log.name not in ("", ".", "..") else "log")
    try:
        with os.fdopen(os.open(target, _CREATE, 0o600), "wb") as out:
            _copy(log, out, cap, folder.parent)
        _labels[str(target)] = log.url
        yield target
    finally:
        _labels.pop(str(target), None)
        target.unlink(missing_ok=True)
        folder.rmdir()


def _copy(log: RemoteLog, out: BinaryIO, cap: int, spool: Path) -> None:
    from dsh_audit.readers.remote import filesystem, reading_error

    fs, path = filesystem(log.url, log.options)
    copied = 0
    try:
        # no read-ahead cache: each read is one ranged request of CHUNK bytes, nothing kept beyond it
        with fs.open(path, "rb", block_size=CHUNK, cache_type="none") as remote:
            while chunk := remote.read(CHUNK):
                copied += len(chunk)
                if copied > cap:
                    raise _too_large(log, "the object", cap)
                _write(out, chunk, log, spool)
    except DshAuditError:
        raise
    except Exception as error:   # fsspec's filesystems raise their own types; each becomes one line naming the URL
        raise reading_error(log.url, error, listed=True) from None
    if log.size is not None and copied != log.size:
        raise LogReadError(f"changed since it was listed ({log.size} bytes listed, {copied} read)", path=log.url)


def _write(out: BinaryIO, chunk: bytes, log: RemoteLog, spool: Path) -> None:
    try:
        out.write(chunk)
    except OSError as error:   # the spool's disk, not the store: say so
        raise LogReadError(f"cannot be copied into the spool ({spool}): "
                           f"{error.strerror or error}", path=log.url) from None
