"""What a SRC given to a multi-log command names: a local path (a log, a folder, a dsh home, `-`), an
object-storage URL (`protocol://bucket/key-or-prefix`, readers.remote), or a list file: `@FILE` (`@-`: standard
input) holds one SRC per line, either kind, in the order given; blank lines and lines whose first non-blank
character is `#` are skipped, and the rest of a line is the SRC, its surrounding blanks trimmed. A relative path
in a list is relative to the current folder, as on the command line. A list names no other list (a line starting
with `@` is an error, not a path: write ./@name for such a file), so a list cannot include itself."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from dsh_audit.errors import DshAuditError
from dsh_audit.readers.objects import RemoteSource, StorageOptions, is_url

LIST_PREFIX = "@"
LIST_MAX_BYTES = 64 << 20   # a million URLs fit; a list never costs more memory than this


NO_OPTIONS = StorageOptions()


def expand_sources(given: Iterable[str | Path], options: StorageOptions = NO_OPTIONS) -> list[Path | RemoteSource]:
    """Each SRC given as what it names, the lines of each list file in its place."""
    expanded: list[Path | RemoteSource] = []
    for item in given:
        text = str(item)
        if isinstance(item, str) and text.startswith(LIST_PREFIX):
            expanded += _listed(text[1:], options)
        else:
            expanded.append(_source(item, options))
    return expanded


def _source(item: str | Path, options: StorageOptions) -> Path | RemoteSource:
    return RemoteSource(item, options) if isinstance(item, str) and is_url(item) else Path(item)


def _listed(name: str, options: StorageOptions) -> list[Path | RemoteSource]:
    label = "standard input (@-)" if name == "-" else name
    if not name:
        raise DshAuditError("'@' names no list file: write @FILE, @- for standard input, or ./@ for a file so named")
    try:
        if name == "-":
            data = sys.stdin.buffer.read(LIST_MAX_BYTES + 1)
        else:
            with open(name, "rb") as handle:
                data = handle.read(LIST_MAX_BYTES + 1)
    except OSError as error:
        raise DshAuditError(f"cannot read the list file: {error.strerror or error}", path=label) from None
    if len(data) > LIST_MAX_BYTES:
        raise DshAuditError(f"the list file is larger than {LIST_MAX_BYTES >> 20} MiB", path=label)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DshAuditError(f"the list file is not UTF-8 (byte {error.start})", path=label) from None
    sources: list[Path | RemoteSource] = []
    for number, line in enumerate(text.splitlines(), start=1):
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        if entry.startswith(LIST_PREFIX):
            raise DshAuditError("a list file names logs, not another list file (write ./@name for a file so "
                                "named)", path=label, line=number)
        try:
            sources.append(_source(entry, options))
        except DshAuditError as error:
            raise DshAuditError(f"{error}", path=label, line=number) from None
    if not sources:
        raise DshAuditError("the list file names no log", path=label)
    return sources
