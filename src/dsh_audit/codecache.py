"""Generated Python source compiled once per machine rather than once per process.

The fast path's types and the schema checks (dsh_audit.fastcheck) are Python source generated from schemas/ at
run time; compiling it is a third of their start-up on a small log. The code object is kept, as Python keeps a
module's bytecode, in `$DSH_AUDIT_CACHE_DIR` (default `$XDG_CACHE_HOME/dsh-audit`, else `~/.cache/dsh-audit`),
under the sha256 of the source and the interpreter's version, so an edited schema or generator, or another
Python, never meets a stale entry. An empty DSH_AUDIT_CACHE_DIR turns the cache off. A cache that cannot be read
or written is passed over: the source is compiled as if there were none. An entry is a file dsh-audit finds
itself, so, as everywhere else (readers/found.py), a link there is not followed and only a regular file of
bounded size is read.

What generates that source is cached too (`generated`): the source and the tables beside it, as plain data, under
the sha256 of its inputs (the schema files' bytes, the generating modules' bytes, the interpreter's version), so
that a run whose schemas and code are unchanged neither walks the schemas nor writes the source again. The same
rules hold: no link followed, a regular file of bounded size, written whole or not at all, a torn or foreign
entry generated again.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import stat
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import CodeType
from typing import Any, TypeVar

CACHE_DIR = "DSH_AUDIT_CACHE_DIR"
ENTRY_CAP = 16 << 20   # bytes; the largest entry (one generation's fast types) is about 0.5 MiB
T = TypeVar("T")


def cache_dir() -> Path | None:
    """Where compiled code is kept, or None when the cache is off."""
    chosen = os.environ.get(CACHE_DIR)
    if chosen is not None:
        return Path(chosen) if chosen else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "dsh-audit")


def compiled(source: str, filename: str) -> CodeType:
    """`compile(source, filename, "exec")`, without the caller's future flags, from the cache when it holds it."""
    folder = cache_dir()
    if folder is None:
        return _compile(source, filename)
    key = hashlib.sha256(f"{sys.version}\0{filename}\0{source}".encode()).hexdigest()
    code: CodeType = _kept(folder / f"{key}.code", lambda found: isinstance(found, CodeType),
                           lambda: _compile(source, filename))
    return code


def generated(kind: str, inputs: str, generator: Iterable[str], generate: Callable[[], T]) -> T:
    """`generate()`, plain data marshal writes, from the cache when it holds it for these inputs. `inputs` stands
    for all that `generate` reads (a digest of the schemas); `generator` names the files of the code that
    generates it, whose bytes are part of the key, so an edited generator never meets a stale entry."""
    folder = cache_dir()
    if folder is None:
        return generate()
    key = hashlib.sha256(f"{sys.version}\0{kind}\0{inputs}".encode())
    try:
        for name in generator:
            with open(name, "rb") as handle:
                key.update(b"\0" + hashlib.sha256(handle.read()).digest())
    except OSError:   # a generator that cannot be read cannot be told unchanged
        return generate()
    entry = _kept(folder / f"{key.hexdigest()}.plan",
                  lambda found: type(found) is tuple and len(found) == 2 and found[0] == kind,
                  lambda: (kind, generate()))   # plain data, as generate promises
    value: T = entry[1]
    return value


def fingerprint(paths: Iterable[str | os.PathLike[str]]) -> str:
    """What changes whenever one of the files at `paths` changes, as `generated`'s inputs: each one's path, size,
    inode, modification and change times (a change time moves at every write to a file, and no one can set it
    back), so an unchanged file need not be read to be known unchanged. Raises OSError for a file it cannot stat."""
    lines = []
    for path in paths:
        status = os.stat(path)
        lines.append(f"{path}\0{status.st_size}\0{status.st_ino}\0{status.st_mtime_ns}\0{status.st_ctime_ns}")
    return "\n".join(lines)


def _kept(path: Path, usable: Callable[[Any], bool], make: Callable[[], Any]) -> Any:
    """The entry at `path` when it holds something `usable`, else `make()`, kept there for the next run. An entry
    that is absent, a link, unreadable, torn or foreign is made again."""
    try:
        found = marshal.loads(_entry(path))
        if usable(found):
            return found
    except (OSError, ValueError, EOFError, TypeError):
        pass
    made = make()
    _keep(path.parent, path, marshal.dumps(made))
    return made


def _entry(path: Path) -> bytes:
    """The entry's bytes: never through a link, from a regular file of at most ENTRY_CAP bytes."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(descriptor, "rb") as handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode) or status.st_size > ENTRY_CAP:
            raise ValueError(f"{path}: not a cache entry")
        return handle.read(ENTRY_CAP + 1)


def _keep(folder: Path, path: Path, data: bytes) -> None:
    """Write `path` whole or not at all: another process may be reading the same entry."""
    import tempfile

    try:
        folder.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=f".{path.stem}.")
    except OSError:
        return
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def _compile(source: str, filename: str) -> CodeType:
    return compile(source, filename, "exec", dont_inherit=True)
