"""Every file dsh-audit writes goes through here (`--out`, `--junit`, `audit report -o`, the golden file), so
every command writes by the same rules (docs/outputs.md):

- a regular file (or a missing path) is written to a temporary file beside it and renamed over it: a reader
  sees the old file or the whole new one, never half of one; a failed write leaves the old file as it was;
- `-` is stdout; a character device (`/dev/null`, `/dev/stdout`, a terminal) or a pipe is written through,
  never replaced by a regular file;
- anything else (a folder, a block device, a socket) is refused, and so is a file the command reads: an input
  log named on the command line or found below an input folder, an option file, the golden file it checks;
- a path dsh-audit names itself (the golden file: `follow_links=False`) is written only as a regular file: a
  symbolic link, a device or a pipe planted there is refused, never written through (readers.found);
- a new file gets the user's umask (0o666 & ~umask), a replaced file keeps its mode;
- every failure (no such folder, read-only folder, disk full) is a DshAuditError: one line, exit 2, also when a
  library writes through the file object and wraps the OSError in an error of its own (`library_sink`).

Outputs stream: the writer gets a file object and writes as it goes.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Literal, TypeGuard, cast, overload

import msgspec

from . import stopping
from .errors import DshAuditError
from .readers.discover import is_dsh_log, split_selector

STDOUT = "-"
_STDOUT_NAMES = frozenset({"/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"})
_STDERR_NAMES = frozenset({"/dev/stderr", "/dev/fd/2", "/proc/self/fd/2"})


class OutputError(DshAuditError):
    """An output that cannot or must not be written (exit 2, like an unreadable input)."""


def umask() -> int:
    """The process's umask: from /proc where Linux shows it, else by setting it and setting it back."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status", encoding="ascii",
                                                        errors="replace") as status:
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    current = os.umask(0o022)
    os.umask(current)
    return current


def new_file_mode() -> int:
    return 0o666 & ~umask()


class _Plan(msgspec.Struct, frozen=True):
    """Where and how a target is written."""

    kind: Literal["stdout", "stderr", "through", "replace"]
    path: Path | None = None            # "through": the path opened; "replace": the file renamed over
    mode: int | None = None             # "replace": the mode the written file gets
    owner: tuple[int, int] | None = None   # "replace" of an existing file: its uid and gid


def _reason(error: OSError) -> str:
    return error.strerror or str(error)


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _is_input(target: Path, target_stat: os.stat_result, inputs: Iterable[Path]) -> Path | None:
    """The input `target` is (the same file, through any name, link or symlink), or None."""
    absolute, real = Path(os.path.abspath(target)), Path(os.path.realpath(target))
    for given in inputs:
        source, _session = split_selector(Path(given))   # store.db#sessionId reads store.db
        try:
            source_stat = os.stat(source)
        except (OSError, ValueError):
            continue
        if stat.S_ISDIR(source_stat.st_mode):
            # below an input folder: the command reads it if it is a dsh log (as discovery finds them)
            folders = {Path(os.path.abspath(source)), Path(os.path.realpath(source))}
            below = [path for path in (absolute, real) if any(_under(path, folder) for folder in folders)]
            if any(is_dsh_log(path) for path in below):   # the name as found, or the file a link names
                return below[-1]
        elif (source_stat.st_dev, source_stat.st_ino) == (target_stat.st_dev, target_stat.st_ino):
            return source
    return None


def _not_through_a_link(target: Path, what: str) -> None:
    """A path dsh-audit names itself is written as a new file, or as the regular file there replaced by rename
    (which would replace a link swapped in later, never write its target); a link, device or pipe is refused."""
    try:
        found = os.lstat(target)
    except FileNotFoundError:
        return
    except OSError as error:
        raise OutputError(f"cannot write {what}: {_reason(error)}", path=str(target)) from None
    if stat.S_ISLNK(found.st_mode):
        raise OutputError(f"refusing to write {what} through a symbolic link: dsh-audit names this path itself and "
                          "never writes through a link found there (remove the link)", path=str(target))
    if not stat.S_ISREG(found.st_mode) and not stat.S_ISDIR(found.st_mode):
        raise OutputError(f"cannot write {what}: it is not a regular file; refusing to write into it",
                          path=str(target))


def _plan(target: Path, inputs: Iterable[Path], what: str, create_folder: bool, follow_links: bool = True) -> _Plan:
    text = str(target)
    if not follow_links:
        _not_through_a_link(target, what)
    if text == STDOUT:
        return _Plan("stdout")
    absolute = os.path.abspath(text)
    if absolute in _STDOUT_NAMES:
        return _Plan("stdout")
    if absolute in _STDERR_NAMES:
        return _Plan("stderr")
    try:
        found = os.stat(target)
    except FileNotFoundError:
        found = None
    except OSError as error:
        raise OutputError(f"cannot write {what}: {_reason(error)}", path=text) from None
    if found is None:
        real = Path(os.path.realpath(target))   # a dangling symlink: its target is created
        folder = real.parent
        if create_folder:
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise OutputError(f"cannot write {what}: cannot create the folder {folder}: {_reason(error)}",
                                  path=text) from None
        try:
            folder_stat = os.stat(folder)
        except FileNotFoundError:
            raise OutputError(f"cannot write {what}: no such folder: {folder} does not exist (create it first)",
                              path=text) from None
        except OSError as error:
            raise OutputError(f"cannot write {what}: {_reason(error)}", path=text) from None
        if not stat.S_ISDIR(folder_stat.st_mode):
            raise OutputError(f"cannot write {what}: {folder} is not a folder", path=text)
        _writable_folder(folder, what, text)
        return _Plan("replace", real, new_file_mode())
    mode = found.st_mode
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return _Plan("through", Path(target))
    if stat.S_ISDIR(mode):
        raise OutputError(f"cannot write {what}: it is a folder; name a file in it", path=text)
    if not stat.S_ISREG(mode):
        kind = "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file"
        raise OutputError(f"cannot write {what}: it is {kind}; refusing to replace it", path=text)
    source = _is_input(Path(target), found, inputs)
    if source is not None:
        same = "" if os.path.abspath(source) == absolute else f" (the same file as {source})"
        raise OutputError(f"refusing to write {what} onto a file this command reads{same}", path=text)
    real = Path(os.path.realpath(target))
    _writable_folder(real.parent, what, text)
    return _Plan("replace", real, stat.S_IMODE(mode), (found.st_uid, found.st_gid))


def _writable_folder(folder: Path, what: str, shown: str) -> None:
    """The temporary file is created in the target's folder: say early when it cannot be (the write itself
    still reports what access() cannot foresee)."""
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write {what}: the folder {folder} is not writable", path=shown)


def check_output(target: Path | str | None, *, inputs: Iterable[Path] = (), what: str = "the output",
                 create_folder: bool = False, follow_links: bool = True) -> None:
    """Raise the OutputError writing `target` would raise, before any work is done; writes nothing (but
    creates the folder when `create_folder`). `follow_links=False`: a path dsh-audit names itself, written only
    as a regular file (never through a link, a device or a pipe)."""
    if target is not None:
        _plan(Path(target), list(inputs), what, create_folder, follow_links)


def _stream(name: Literal["stdout", "stderr"], binary: bool) -> IO[bytes] | IO[str]:
    stream = sys.stdout if name == "stdout" else sys.stderr
    if binary:
        return stream.buffer
    return stream


@overload
def open_output(target: Path | str | None, *, binary: Literal[False] = ..., inputs: Iterable[Path] = ...,
                what: str = ..., create_folder: bool = ..., follow_links: bool = ...
                ) -> contextlib.AbstractContextManager[IO[str]]: ...


@overload
def open_output(target: Path | str | None, *, binary: Literal[True], inputs: Iterable[Path] = ...,
                what: str = ..., create_folder: bool = ..., follow_links: bool = ...
                ) -> contextlib.AbstractContextManager[IO[bytes]]: ...


def open_output(target: Path | str | None, *, binary: bool = False, inputs: Iterable[Path] = (),
                what: str = "the output", create_folder: bool = False, follow_links: bool = True
                ) -> contextlib.AbstractContextManager[IO[str]] | contextlib.AbstractContextManager[IO[bytes]]:
    """A file object to write `target` through (None or `-`: stdout), by the rules above. A regular file is
    renamed into place when the block ends without an exception; on an exception it is left as it was.
    Text is UTF-8; what UTF-8 cannot hold (a lone surrogate) is written backslash-escaped."""
    opened = _open_output(target, binary, list(inputs), what, create_folder, follow_links)
    if binary:
        return cast(contextlib.AbstractContextManager[IO[bytes]], opened)
    return cast(contextlib.AbstractContextManager[IO[str]], opened)


@contextmanager
def _open_output(target: Path | str | None, binary: bool, inputs: list[Path], what: str,
                 create_folder: bool, follow_links: bool) -> Iterator[IO[str] | IO[bytes]]:
    plan = _Plan("stdout") if target is None else _plan(Path(target), inputs, what, create_folder, follow_links)
    shown = STDOUT if target is None else str(target)
    if plan.kind in ("stdout", "stderr"):
        stream = _stream(plan.kind, binary)
        yield stream
        stream.flush()   # a broken pipe or a full disk surfaces here, in the command's error path
        return
    assert plan.path is not None
    if plan.kind == "through":
        yield from _write_through(plan.path, binary, what, shown)
    else:
        yield from _write_replacing(plan, binary, what, shown)


def _failed(what: str, shown: str, error: OSError) -> OutputError:
    return OutputError(f"cannot write {what}: {_reason(error)}", path=shown)


def _is_write_error(error: BaseException) -> TypeGuard[OSError]:
    """An OSError from writing the output: it names no file (an input that fails to open names itself)."""
    return isinstance(error, OSError) and error.filename is None and not isinstance(error, BrokenPipeError)


def _wrap(fd: int, binary: bool) -> IO[str] | IO[bytes]:
    if binary:
        return os.fdopen(fd, "wb")
    return os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline="")


def _write_through(path: Path, binary: bool, what: str, shown: str) -> Iterator[IO[str] | IO[bytes]]:
    """A device or a pipe: opened for writing as it is (no O_CREAT, no O_TRUNC), never replaced."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise _failed(what, shown, error) from None
    try:
        opened = os.fstat(fd).st_mode
    except OSError:
        opened = 0
    if not (stat.S_ISCHR(opened) or stat.S_ISFIFO(opened)):   # it changed since it was looked at
        os.close(fd)
        raise OutputError(f"cannot write {what}: it changed while being opened; try again", path=shown)
    handle = _wrap(fd, binary)
    try:
        yield handle
        handle.flush()
    except BaseException as error:
        with contextlib.suppress(OSError):
            handle.close()
        if _is_write_error(error):
            raise _failed(what, shown, error) from None
        raise
    try:
        handle.close()
    except OSError as error:
        raise _failed(what, shown, error) from None


def _write_replacing(plan: _Plan, binary: bool, what: str, shown: str) -> Iterator[IO[str] | IO[bytes]]:
    """A temporary file beside the target, its mode set, written, synced and renamed over the target."""
    import tempfile  # only for a file written: printing to stdout never loads it (~1 ms)

    assert plan.path is not None and plan.mode is not None
    final = plan.path
    temporary: str | None = None
    handle = None
    try:
        with stopping.deferred():   # a signal is acted on once the temporary file's name is known: it is removed
            try:
                fd, temporary = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".partial", dir=final.parent)
            except OSError as error:
                raise _failed(what, shown, error) from None
        os.fchmod(fd, plan.mode)   # mkstemp creates 0600
        if plan.owner is not None and plan.owner != (os.geteuid(), os.getegid()):
            with contextlib.suppress(OSError):   # root replacing another user's file keeps its owner
                os.fchown(fd, *plan.owner)
        handle = _wrap(fd, binary)
        yield handle
        handle.flush()
        os.fsync(handle.fileno())
        handle.close()
        os.replace(temporary, final)
    except BaseException as error:
        if temporary is not None:
            with contextlib.suppress(OSError):
                handle.close() if handle is not None else os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        if _is_write_error(error):
            raise _failed(what, shown, error) from None
        raise


class _Surfacing:
    """Writes through to `handle`, keeping the OSError a write raised."""

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle = handle
        self.error: OSError | None = None

    def write(self, data: bytes) -> int:
        try:
            return self.handle.write(data)
        except OSError as error:
            self.error = error
            raise

    def flush(self) -> None:
        try:
            self.handle.flush()
        except OSError as error:
            self.error = error
            raise


@contextmanager
def library_sink(handle: IO[bytes]) -> Iterator[IO[bytes]]:
    """`handle` for a library that writes through a file object but turns what write() raises into an error of
    its own (polars' Parquet writer: a ComputeError "Invalid thrift: transport error"). The OSError underneath
    is raised in its place, so a full disk, a closed pipe or a failing device ends the command as any other
    sink's does (exit 2 in one line, 141 quietly). The proxy has no fileno(): the library cannot write past it."""
    surfacing = _Surfacing(handle)
    try:
        yield cast(IO[bytes], surfacing)
    except Exception as error:
        if surfacing.error is not None and error is not surfacing.error:
            raise surfacing.error from None
        raise


def write_output(target: Path | str | None, data: str | bytes, *, inputs: Iterable[Path] = (),
                 what: str = "the output", create_folder: bool = False, follow_links: bool = True) -> int:
    """Write `data` whole to `target` by the rules above; the number of bytes written."""
    payload = data.encode("utf-8", "backslashreplace") if isinstance(data, str) else data
    with open_output(target, binary=True, inputs=inputs, what=what, create_folder=create_folder,
                     follow_links=follow_links) as handle:
        handle.write(payload)
    return len(payload)


def is_stream(target: Path | str | None) -> bool:
    """Whether `target` is stdout (None, `-`, /dev/stdout): a summary line then goes to stderr, not into it."""
    if target is None or str(target) == STDOUT:
        return True
    return os.path.abspath(str(target)) in _STDOUT_NAMES


__all__ = ["STDOUT", "OutputError", "check_output", "is_stream", "library_sink", "new_file_mode", "open_output",
           "umask", "write_output"]
