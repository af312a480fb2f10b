"""Logs found where dsh keeps them: its session root, the sessions below it, and one picked by an id prefix.

dsh resolves one home directory (`@deepseek-ai/dsh-home-paths`: a non-blank `$DSH_HOME`, else `~/.dsh`) and its
base bundle mounts the JSONL session backend at `<home>/sessions`. Below that root each project has a directory
(`--<cwd, separators as '-'>--`, or `_no-cwd`), each session a directory named by its path-escaped id, and that
directory holds the session's generations (`session.vN.jsonl`, compressed by default: `.jsonl.zstd`).
docs/session-home.md gives the layout with its upstream sources.

A session here is what dsh reads as one: the newest generation of the main log in a directory (older
snapshot-style directories also hold child logs, `session.N.jsonl`, counted as its children). Logs that are no
main log of a directory (replay fixtures, a lone child) are listed on their own.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from dsh_audit.errors import DshAuditError, LogReadError
from dsh_audit.generations import parse_log_name
from dsh_audit.readers import open_logs
from dsh_audit.readers.discover import Selection, Unreadable, discover_logs, local_files
from dsh_audit.readers.found import refused_link
from dsh_audit.records import LogSource, started_ms

HOME_ENV = "DSH_HOME"
HOME_DIR_NAME = ".dsh"
SESSIONS_DIR = "sessions"
ID_PREFIX = "session-"  # dsh's entry points mint ids as session-<uuid4>; a prefix may leave it out
MAX_CANDIDATES = 5


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One session below a root. `last_activity` is the log file's modification time (UTC): dsh appends every
    event batch, so it is the time of the last write, and it costs a stat instead of a pass over the log.
    `requests` counts the session's own rebuilt requests (a seeded child's inherited ones were its parent's);
    `requests`, `cost_usd`, `hit_ratio` and `lost_usd` stay None when not computed (dsh_audit.sessions counts
    them) or when the log cannot be read (`error` says why)."""

    session_id: str | None
    path: Path                  # the log read; `store.db#id` for a session of a SQLite store
    directory: Path
    cwd: str | None
    generation: int | None
    size: int                   # bytes of the file read
    last_activity: datetime
    children: tuple[Path, ...] = ()
    skipped: tuple[Path, ...] = ()   # older generations of the log beside it, which dsh no longer reads
    requests: int | None = None
    cost_usd: float | None = None
    hit_ratio: float | None = None   # share of its own calls' prompt tokens read from cache
    lost_usd: float | None = None    # what its cache collapses cost (cache-report's collapseCostUsd, summed)
    error: str | None = None
    root: Path | None = None    # the root the log was found below, from which it is opened (readers.found)

    @property
    def short_id(self) -> str:
        """The id without dsh's `session-` prefix, which every id shares and so tells nothing apart."""
        text = self.session_id if self.session_id is not None else self.directory.name
        return text.removeprefix(ID_PREFIX)


# --- the root -------------------------------------------------------------------------------------------------

def _os_home(environ: Mapping[str, str]) -> str:
    # Node's os.homedir(), which dsh uses, reads HOME on POSIX and USERPROFILE on Windows.
    variable = "USERPROFILE" if os.name == "nt" else "HOME"
    return environ.get(variable) or str(Path.home())


def _expand_tilde(path: str, environ: Mapping[str, str]) -> str:
    # Only `~`, `~/…` and `~\\…` are expanded, as dsh does; `~user` stays literal.
    if path == "~":
        return _os_home(environ)
    if path.startswith(("~/", "~\\")):
        return os.path.join(_os_home(environ), path[2:])
    return path


def dsh_home(environ: Mapping[str, str] = os.environ) -> Path:
    """dsh's home: `$DSH_HOME` unless blank (a blank value must not resolve to the working directory), else
    `~/.dsh`; made absolute without resolving links, as Node's path.resolve does."""
    configured = environ.get(HOME_ENV, "")
    chosen = configured if configured.strip() else os.path.join(_os_home(environ), HOME_DIR_NAME)
    return Path(os.path.abspath(_expand_tilde(chosen, environ)))


def session_root(environ: Mapping[str, str] = os.environ) -> Path:
    """Where dsh's JSONL backend keeps sessions: `<dsh home>/sessions`."""
    return dsh_home(environ) / SESSIONS_DIR


def require_root(root: Path, *, other: str | None = None) -> None:
    """A one-line LogReadError unless `root` is a directory that can be listed (a walk would skip an unreadable
    one silently, and list nothing). `other`, for a root taken from the environment: how else to name one."""
    hint = "" if other is None else f"; set {HOME_ENV} to dsh's home, or {other}"
    if not root.is_dir():
        raise LogReadError(f"no dsh session root at {root}{hint}")
    try:
        with os.scandir(root):
            pass
    except OSError as error:
        raise LogReadError(f"cannot read the session root {root}: {error.strerror}{hint}") from None


# --- finding the sessions ---------------------------------------------------------------------------------------

def _is_child_log(path: Path) -> bool:
    name = parse_log_name(path.name)
    return name.canonical and name.group != "session"


def _sessions_in(files: Iterable[Path]) -> Iterator[tuple[Path, tuple[Path, ...]]]:
    """(log, children) per session: a directory's main log with its child logs, and every other log alone."""
    by_directory: dict[Path, list[Path]] = {}
    for path in files:
        by_directory.setdefault(path.parent, []).append(path)
    for members in by_directory.values():
        main = next((p for p in members if parse_log_name(p.name).group == "session"), None)
        children = tuple(p for p in members if main is not None and _is_child_log(p))
        if main is not None:
            yield main, children
        yield from ((p, ()) for p in members if p != main and p not in children)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _described(base: SessionInfo, source: LogSource) -> SessionInfo:
    try:
        version: int | None = source.generation.version
    except DshAuditError as error:
        return replace(base, path=Path(source.label), error=str(error))
    header = source.header
    return replace(base, session_id=_text(header.get("id")), cwd=_text(header.get("cwd")), generation=version,
                   path=Path(source.label))


def _headers(path: Path, children: tuple[Path, ...], problem: str | None, root: Path) -> list[SessionInfo]:
    """The sessions one file holds, from its header alone (one per session for a SQLite store), opened from
    `root` down without following a link (readers.found)."""
    try:
        stat = path.lstat()
    except OSError as error:
        return [SessionInfo(None, path, path.parent, None, None, 0, datetime.fromtimestamp(0, UTC), children,
                            error=f"{path}: cannot read: {error.strerror}")]
    base = SessionInfo(None, path, path.parent, None, None, stat.st_size,
                       datetime.fromtimestamp(stat.st_mtime, UTC), children, error=problem, root=root)
    try:
        sources = list(open_logs(path, found_in=root))
    except DshAuditError as error:
        return [replace(base, error=str(error))]
    infos = []
    for source in sources:
        infos.append(_described(base, source))
        source.close()
    return infos


def _linked(path: Path, why: str) -> SessionInfo:
    """A link with a log's name in the home: listed with why it is not read (its own time, not its target's)."""
    try:
        changed = path.lstat().st_mtime
    except OSError:   # gone since the listing
        changed = 0
    return SessionInfo(None, path, path.parent, None, None, 0, datetime.fromtimestamp(changed, UTC),
                       error=f"{path}: {why}")


def _newest_first(info: SessionInfo) -> tuple[float, str, str]:
    return -info.last_activity.timestamp(), info.session_id or "", str(info.path)


@dataclass(frozen=True, slots=True)
class SessionScan:
    """The sessions below some roots, newest first, and what could not be looked into: a folder the walk could
    not list may hold sessions, so a listing names it (as read_each does) and never passes over it."""

    sessions: list[SessionInfo]
    unlisted: list[Unreadable]
    # the short id of every session found, listed or not (a filter or a limit lists fewer): what a short name
    # must tell apart, since --session searches them all
    every_id: tuple[str, ...] = ()


def scan_sessions(roots: Iterable[Path]) -> SessionScan:
    """Every session below `roots`, newest first, from headers only (no request counts, no cost), and each folder
    below them that could not be listed, with why."""
    infos: list[SessionInfo] = []
    unlisted: list[Unreadable] = []
    for root in roots:
        discovery = discover_logs([root])
        older: dict[Path, tuple[Path, ...]] = {}
        for old, newer in sorted(discovery.skipped.items()):
            if isinstance(old, Path) and isinstance(newer, Path):   # always: a root is a local folder
                older[newer] = (*older.get(newer, ()), old)
        for path, children in _sessions_in(local_files(discovery)):
            # The same generation stored twice (plain and compressed): reading either would be a guess.
            infos += [replace(info, skipped=older.get(path, ()))
                      for info in _headers(path, children, discovery.ambiguous.get(path), root)]
        infos.extend(_linked(path, why) for path, why in discovery.links.items())
        unlisted += [Unreadable(str(folder), f"{folder}: {why}") for folder, why in sorted(discovery.unlisted.items())]
    return SessionScan(sorted(infos, key=_newest_first), unlisted, tuple(info.short_id for info in infos))


@dataclass(frozen=True, slots=True)
class SessionOrigin:
    """When and where a session began, from its header: `createdAt` (epoch milliseconds) and `cwd`."""

    created_ms: int | None
    cwd: str | None


def session_origin(header: dict[str, object]) -> SessionOrigin:
    """When (`started_ms`) and where the session of this header began."""
    return SessionOrigin(started_ms(header), _text(header.get("cwd")))


# --- picking one ------------------------------------------------------------------------------------------------

def _names(info: SessionInfo) -> set[str]:
    names = {info.directory.name}
    if info.session_id is not None:
        names.add(info.session_id)
    return names | {name.removeprefix(ID_PREFIX) for name in names}


def _matching(infos: list[SessionInfo], prefix: str) -> list[SessionInfo]:
    exact = [info for info in infos if info.session_id == prefix]
    if exact:
        return exact  # a whole id picks its session even when it is also the prefix of a longer one
    return [info for info in infos if any(name.startswith(prefix) for name in _names(info))]


def _candidates(infos: list[SessionInfo]) -> str:
    shown = ", ".join(info.session_id or str(info.path) for info in infos[:MAX_CANDIDATES])
    more = len(infos) - MAX_CANDIDATES
    return shown + (f" and {more} more" if more > 0 else "")


def _find(roots: Iterable[Path], prefix: str) -> SessionInfo:
    roots = list(roots)
    if not prefix:
        raise LogReadError("an empty --session prefix matches every session; give the start of an id")
    scan = scan_sessions(roots)
    matches = _matching(scan.sessions, prefix)
    where = ", ".join(str(root) for root in roots)
    if not matches:   # it may be in a folder that could not be listed: say which
        unlisted = f" ({len(scan.unlisted)} folder(s) could not be listed: {scan.unlisted[0].reason})" \
            if scan.unlisted else ""
        raise LogReadError(f"no session id or directory starts with {prefix!r} under {where}{unlisted}")
    if len(matches) > 1:
        raise LogReadError(f"session prefix {prefix!r} is ambiguous under {where}: {len(matches)} sessions "
                           f"match ({_candidates(matches)})")
    if matches[0].path.is_symlink():   # found, not given: never followed (readers.found)
        raise LogReadError(refused_link("this session's log"), path=str(matches[0].path))
    return matches[0]


def picked_by_prefix(root: Path, prefixes: Mapping[Path, str]) -> set[Path]:
    """Of the logs in `prefixes` (each with the start of its session id), those that `--session PREFIX` below
    `root` picks: that log, and no other session with it. One scan of `root`'s headers for them all."""
    sessions = scan_sessions([root]).sessions
    picked = set()
    for path, prefix in prefixes.items():
        matches = _matching(sessions, prefix)
        if len(matches) == 1 and matches[0].path == path and not path.is_symlink():
            picked.add(path)
    return picked


def find_session(root: Path, prefix: str) -> Path:
    """The log of the one session below `root` whose header id or directory name starts with `prefix` (dsh's
    `session-` prefix may be left out). No match, or more than one, is a one-line LogReadError naming up to five
    candidates."""
    return _find([root], prefix).path


# --- what the commands read -------------------------------------------------------------------------------------

def default_paths(logs: tuple[Path, ...], session: str | None,
                  environ: Mapping[str, str] = os.environ) -> Selection:
    """The paths a command reads: the LOGS given; with `session`, the one log whose id starts with it (searched
    below the LOGS given, else below dsh's session root); with neither, dsh's session root. A missing root is
    a one-line LogReadError saying how to choose another."""
    if session is None and logs:
        return Selection(list(logs))
    roots = list(logs) if logs else [session_root(environ)]
    if not logs:
        require_root(roots[0], other="pass a log or directory")
    if session is None:
        return Selection(roots)
    for root in roots:   # a session is found below a folder; a log given is already one session
        if root.is_file():
            raise LogReadError("--session picks a session below a directory; this is a log: pass it alone",
                               path=str(root))
    picked = _find(roots, session)
    return Selection([picked.path], dict.fromkeys(picked.skipped, picked.path))
