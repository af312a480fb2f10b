"""Which files are dsh session logs, told by their content (plus the zstd suffix the writer uses), and which
of them to read: in a session directory only the newest generation of each log is current.

dsh never rewrites a generation: a migration writes its successor beside it (session.jsonl, then
session.v2.jsonl.zstd, session.v3.jsonl; a child session.1.jsonl, then session.1.v3.jsonl), and reads the
highest. Below a directory the older generations are therefore skipped (reported, never read) unless every
generation is asked for; a file named on the command line is always read, and so are `-` (standard input), a
named pipe and `store.db#sessionId` (one session of a SQLite store). A directory walk reads regular files only:
a pipe or device below it could block or never end. Nor does it follow a symbolic link (readers.found): a link
with a log's name below a folder is unreadable, named with why; every file it finds is opened from the folder
given down without following one. An object-storage URL is expanded by the same rules (readers.remote), its logs
read through the spool (readers.spool).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path, PurePath
from typing import TypeVar

import msgspec

from dsh_audit.errors import DshAuditError, LogReadError
from dsh_audit.generations import parse_log_name
from dsh_audit.readers.found import FoundFileError, opener, refused_link
from dsh_audit.readers.jsonvalue import JsonProblem, JsonTooDeep, parse_json
from dsh_audit.readers.magic import APPLICATION_ID, SQLITE_MAGIC, ZSTD_MAGIC
from dsh_audit.readers.objects import RemoteLog, RemoteSource
from dsh_audit.readers.stream import STDIN

ZSTD_SUFFIXES = (".jsonl.zstd", ".jsonl.zst")
LOG_SUFFIXES = (".jsonl", *ZSTD_SUFFIXES)
_HEADER_PROBE_BYTES = 1 << 20  # a header line is small; never read further to classify a file
Found = Path | RemoteLog   # a log to read: a local file, or an object in storage (readers.remote)
L = TypeVar("L", Path, RemoteLog)
T = TypeVar("T")


def split_selector(path: Path) -> tuple[Path, str | None]:
    """`store.db#sessionId` names one session of a SQLite store (only when no file has that literal name)."""
    text = str(path)
    if "#" in text and not path.exists():
        store, _, session_id = text.rpartition("#")
        return Path(store), session_id
    return path, None


def _names_an_input(path: Path) -> bool:
    """A path given on the command line that is no directory: a file, a pipe, `-`, or `store.db#sessionId`."""
    if path.exists():
        return True
    store, session_id = split_selector(path)
    return session_id is not None and store.is_file()


def sniff(path: Path, below: Path | None = None) -> str:
    """'zstd', 'sqlite' or 'jsonl', from the first bytes of the file (`below`: see readers.found.opener)."""
    with opener(path, below) as handle:
        return kind_of(handle.read(100))


def kind_of(start: bytes) -> str:
    """'zstd', 'sqlite' or 'jsonl', from a file's first bytes."""
    if start.startswith(ZSTD_MAGIC):
        return "zstd"
    if start.startswith(SQLITE_MAGIC):
        return "sqlite"
    return "jsonl"


def _is_dsh_store(path: Path, below: Path | None) -> bool:
    with opener(path, below) as handle:
        start = handle.read(72)
    # The SQLite file header keeps PRAGMA application_id big-endian at offset 68.
    if len(start) < 72 or not start.startswith(SQLITE_MAGIC):
        return False
    return int.from_bytes(start[68:72], "big") == APPLICATION_ID


def _first_line(path: Path, below: Path | None) -> bytes:
    with opener(path, below) as handle:
        line = handle.readline(_HEADER_PROBE_BYTES)
        while line and not line.strip():
            line = handle.readline(_HEADER_PROBE_BYTES)
    return line


def is_dsh_log(path: Path) -> bool:
    """Whether a directory walk reads `path` as a dsh log (`classify`): outputs are never written onto one."""
    return classify(path) is None


NOT_A_CANDIDATE = ""


def classify(path: Path, below: Path | None = None) -> str | None:
    """None: a file a directory walk reads as a dsh log. Else why it is left out: NOT_A_CANDIDATE for a file
    that is no kind of log (not counted), or the reason a .jsonl file or SQLite database is not a dsh log.
    A candidate that cannot be told apart from a broken log (unreadable, a first line that is not JSON: a byte
    order mark, a torn or binary file) is read, so that it fails loudly instead of passing a gate unseen.
    `below`: the folder the walk started in, from which `path` is opened without following a link."""
    name = path.name
    if name.endswith(ZSTD_SUFFIXES):
        return None
    try:
        if name.endswith(".jsonl"):
            line = _first_line(path, below)
            if not line.strip():
                return None if parse_log_name(name).version is not None else "an empty .jsonl file"
            try:
                value = parse_json(line)
            except (JsonProblem, JsonTooDeep):
                return None
            if isinstance(value, dict) and value.get("type") == "session":
                return None
            return "its first line is not a dsh session header"
        with opener(path, below) as handle:
            start = handle.read(len(SQLITE_MAGIC))
        if start != SQLITE_MAGIC:
            return NOT_A_CANDIDATE
        return None if _is_dsh_store(path, below) else "a SQLite database that is not a dsh session store"
    except (OSError, FoundFileError):   # read, to fail with its reason
        return None


def _walk(directory: Path, discovery: Discovery) -> list[Path]:
    found = []

    def unlisted(error: OSError) -> None:
        folder = Path(error.filename) if error.filename is not None else directory
        discovery.unlisted[folder] = f"cannot list this folder: {error.strerror or error}"

    for root, _dirs, files in os.walk(directory, onerror=unlisted):   # never into a linked folder
        for name in files:
            candidate = Path(root, name)
            try:
                mode = candidate.lstat().st_mode
            except OSError:   # gone since the listing
                continue
            if stat.S_ISLNK(mode):
                if name.endswith(LOG_SUFFIXES):
                    discovery.links[candidate] = refused_link("this log, found below the folder given,")
                continue
            if not stat.S_ISREG(mode):
                continue
            reason = classify(candidate, directory)
            if reason is None:
                found.append(candidate)
                discovery.found_in[candidate] = directory
            elif reason:
                discovery.ignored[candidate] = reason
    return sorted(found)


class Discovery(msgspec.Struct):
    """The logs to read, in order; the older generations left out (each with the file read instead);
    generations stored twice (compressed and not), which cannot be told apart and are read as errors; and what
    a gate must not pass over in silence: files that are not dsh logs, folders that could not be listed, links
    with a log's name (never followed), directories with no log at all. `found_in` maps each file the walk found
    to the folder given it was found in: it is opened from there without following a link (`opener`)."""

    files: list[Found] = msgspec.field(default_factory=list)
    skipped: dict[Found, Found] = msgspec.field(default_factory=dict)
    ambiguous: dict[Found, str] = msgspec.field(default_factory=dict)
    ignored: dict[Path, str] = msgspec.field(default_factory=dict)    # .jsonl files and databases that are not dsh logs
    unlisted: dict[Path, str] = msgspec.field(default_factory=dict)   # folders a walk could not list, and why
    links: dict[Path, str] = msgspec.field(default_factory=dict)      # links with a log's name, not followed, and why
    found_in: dict[Found, Path] = msgspec.field(default_factory=dict)  # a file the walk found -> the folder given
    empty: list[Path] = msgspec.field(default_factory=list)           # directories given with no dsh log below them
    unreachable: dict[str, DshAuditError] = msgspec.field(default_factory=dict)   # URLs that could not be listed


def newest_generations(found: list[L], where: Callable[[L], PurePath]
                       ) -> tuple[list[L], dict[L, L], dict[L, str]]:
    """Of `found` (files, or objects at the path `where` gives), the newest generation of each log, in their
    order; each older one with the log read instead; the newest generations stored twice (the first kept, as an
    error to read, the others left out), with why."""
    groups: dict[tuple[PurePath, str], list[tuple[int, L]]] = {}
    for item in found:
        place = where(item)
        name = parse_log_name(place.name)
        if name.version is not None:
            groups.setdefault((place.parent, name.group), []).append((name.version, item))
    kept, skipped, ambiguous = set(found), {}, {}
    for members in groups.values():
        top = max(version for version, _ in members)
        newest = sorted((item for version, item in members if version == top), key=lambda item: where(item))
        for version, item in members:
            if version < top:
                kept.discard(item)
                skipped[item] = newest[0]
        if len(newest) > 1:
            for item in newest[1:]:
                kept.discard(item)
            ambiguous[newest[0]] = (f"generation v{top} is stored twice ("
                                    f"{', '.join(where(item).name for item in newest)}): cannot tell which is current")
    return [item for item in found if item in kept], skipped, ambiguous


def _newest_generations(found: list[Path], discovery: Discovery) -> list[Path]:
    kept, skipped, ambiguous = newest_generations(found, lambda path: path)
    discovery.skipped.update(skipped.items())
    discovery.ambiguous.update(ambiguous.items())
    return kept


def in_order(items: Iterable[tuple[Found, T]]) -> list[tuple[Found, T]]:
    """`items` by their file's path, then the remote ones by URL (a path and a URL do not compare)."""
    return sorted(items, key=lambda item: (1, (str(item[0]),)) if isinstance(item[0], RemoteLog)
                  else (0, item[0].parts))


def _listed(source: RemoteSource, discovery: Discovery, all_generations: bool) -> list[Found]:
    """The logs at a URL (readers.remote; fsspec is imported only now); a URL that cannot be listed is kept in
    `discovery.unreachable`, to be named as a log that could not be read."""
    from dsh_audit.readers.remote import list_remote

    try:
        listing = list_remote(source, all_generations=all_generations)
    except DshAuditError as error:
        discovery.unreachable[source.url] = error
        return []
    discovery.skipped.update(listing.skipped.items())
    discovery.ambiguous.update(listing.ambiguous.items())
    return list(listing.logs)


def discover_logs(paths: Iterable[str | os.PathLike[str] | RemoteSource], *, all_generations: bool = False,
                  superseded: Mapping[Path, Path] | None = None) -> Discovery:
    """Files as given; each directory replaced by the dsh logs below it, sorted: the newest generation of each
    log, or every generation with `all_generations`; each URL by the objects it names (readers.remote), as a
    directory is. No duplicates. `superseded`: older generations of a log picked by --session (which names a
    session, not a file), each with the log picked: skipped as a walk of their folder skips them, or read too
    with `all_generations`."""
    discovery = Discovery()
    seen: set[Found] = set()
    older = dict(superseded or {})
    if all_generations:
        paths = [*paths, *older]
    else:
        discovery.skipped.update(older.items())
    for given in paths:
        expanded = (_listed(given, discovery, all_generations) if isinstance(given, RemoteSource)
                    else _local(Path(given), discovery, all_generations))
        for item in expanded:
            if item not in seen:
                seen.add(item)
                discovery.files.append(item)
    for item in seen:
        discovery.skipped.pop(item, None)
    return discovery


def _local(path: Path, discovery: Discovery, all_generations: bool) -> list[Found]:
    """What a local path given names: itself (a file, `-`, `store.db#id`), or a directory's logs (a walk)."""
    if str(path) == STDIN:   # always standard input: a file named `-` is named by its absolute path
        return [path]
    if path.is_dir():
        walked = _walk(path, discovery)
        if not walked and not any(link.is_relative_to(path) for link in discovery.links):
            discovery.empty.append(path)
        return list(walked if all_generations else _newest_generations(walked, discovery))
    if _names_an_input(path):
        return [path]
    raise LogReadError("no such file", path=str(split_selector(path)[0]))


def discover(paths: Iterable[str | os.PathLike[str]], *, all_generations: bool = False,
             skipped: list[Skipped] | None = None) -> list[Path]:
    """The files discover_logs selects (see there); the older generations it skipped are added to `skipped`
    when given. A folder it could not list, a link with a log's name, or a directory with no dsh log below it, is
    an error: a report over what could be read would pass over the rest in silence."""
    discovery = discover_logs(paths, all_generations=all_generations)
    for folder, why in (*discovery.unlisted.items(), *discovery.links.items()):
        raise LogReadError(why, path=str(folder))
    for error in discovery.unreachable.values():
        raise error
    for directory in discovery.empty:
        raise LogReadError(no_log_below(directory, discovery), path=str(directory))
    if skipped is not None:
        skipped += skipped_generations(discovery)
    return local_files(discovery)


def local_files(discovery: Discovery) -> list[Path]:
    """The files of a discovery of local paths, for a reader of local files only; a remote log among them is an
    error naming it (such a command is given no URL: cli.options.chosen_paths)."""
    for found in discovery.files:
        if isinstance(found, RemoteLog):
            raise DshAuditError("this command reads local logs only; verify, cache-report and explain read URLs",
                                path=found.url)
    return [found for found in discovery.files if isinstance(found, Path)]


def no_log_below(directory: Path, discovery: Discovery) -> str:
    ignored = sum(path.is_relative_to(directory) for path in discovery.ignored)
    return "no dsh log below this directory" + (f" ({ignored} other .jsonl or database file(s), none a dsh log)"
                                                 if ignored else "")


class Unreadable(msgspec.Struct, frozen=True):
    """A log (or a folder) a report could not read, and why, in one line that names it."""

    label: str
    reason: str


class Skipped(msgspec.Struct, frozen=True):
    """An older generation a report left out, as dsh does, and the newer log it read instead."""

    label: str
    read_instead: str

    @property
    def reason(self) -> str:
        return f"{self.label}: skipped: an older generation; read {self.read_instead}"


class Selection(msgspec.Struct, frozen=True):
    """What a command reads: `paths` (local); for a session picked by --session, the older generations of its log
    it skips, each with the log read instead (readers.discover.discover_logs reports them as a walk does); with a
    URL among the SRC given, `given`: every SRC in order (`sources`)."""

    paths: list[Path]
    superseded: dict[Path, Path] = msgspec.field(default_factory=dict)
    given: list[Path | RemoteSource] | None = None   # the local paths and URLs in their order, when a URL is one

    @property
    def sources(self) -> list[Path | RemoteSource]:
        """What to read, in the order given: the local paths, and any URL among them."""
        return list(self.paths) if self.given is None else list(self.given)

    @property
    def inputs(self) -> list[Path]:
        """Every file the command may read (no output is ever written onto one)."""
        return [*self.paths, *self.superseded]

    @property
    def skipped(self) -> list[Skipped]:
        return [Skipped(str(older), str(newer)) for older, newer in sorted(self.superseded.items())]


def skipped_generations(discovery: Discovery) -> list[Skipped]:
    return [Skipped(str(older), str(newer)) for older, newer in in_order(discovery.skipped.items())]


def read_each(paths: Iterable[str | os.PathLike[str] | RemoteSource], read: Callable[[Path, Path | None], T], *,
              all_generations: bool = False, superseded: Mapping[Path, Path] | None = None
              ) -> tuple[list[T], list[Unreadable], list[Skipped]]:
    """`read(file, found_in)` of every file discover_logs selects (`found_in`: the folder a walk found it in, to
    open it from without following a link; None for a path given), what could not be read and the older
    generations skipped: one unreadable, newer or corrupt log never hides the others (a user's home is no curated
    folder), and nothing is left out unsaid. A folder that could not be listed, a link with a log's name, a
    directory with no log, a generation stored twice and a file whose `read` raised (a DshAuditError or an
    OSError) are each an Unreadable; `read` returns all of a file's result or raises, so nothing of it is kept
    then. Only when nothing at all could be read is the first of them raised."""
    discovery = discover_logs(paths, all_generations=all_generations, superseded=superseded)
    failures: list[tuple[Unreadable, DshAuditError]] = []
    results: list[T] = []
    for label, error in each_read(discovery, lambda file, found_in: results.append(read(file, found_in))):
        if error is not None:
            failures.append((Unreadable(str(label), str(error)), error))
    if failures and not results:
        raise failures[0][1]
    return results, [unreadable for unreadable, _ in failures], skipped_generations(discovery)


def each_read(discovery: Discovery, read: Callable[[Path, Path | None], None]
              ) -> Iterator[tuple[Path | RemoteLog | str, DshAuditError | None]]:
    """What read_each reads, in its order: each folder that could not be listed, link with a log's name,
    directory with no log and URL that could not be listed, with the error that names it; then `read(file,
    found_in)` of each file, with None or the error it raised (an OSError as a LogReadError). A remote log is
    read from its copy in the spool (readers.spool), which the readers name by its URL."""
    for folder, why in sorted(discovery.unlisted.items()):
        yield folder, LogReadError(why, path=str(folder))
    for link, why in sorted(discovery.links.items()):
        yield link, LogReadError(why, path=str(link))
    for directory in discovery.empty:
        yield directory, LogReadError(no_log_below(directory, discovery), path=str(directory))
    for url, error in discovery.unreachable.items():
        yield url, error
    for file in discovery.files:
        try:
            if file in discovery.ambiguous:
                raise LogReadError(discovery.ambiguous[file], path=str(file))
            if isinstance(file, RemoteLog):
                from dsh_audit.readers.spool import spooled

                with spooled(file) as copy:
                    read(copy, None)
            else:
                read(file, discovery.found_in.get(file))
        except DshAuditError as error:
            yield file, error
        except OSError as error:   # a log the walk listed but cannot open now (its permissions, a race)
            yield file, LogReadError(f"cannot read: {error.strerror or error}", path=str(file))
        else:
            yield file, None
