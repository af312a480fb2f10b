"""`audit header-diff`: one row per change between consecutive `request/header` snapshots of a log.

A fork or subagent child's first snapshot is diffed against its parent's snapshot in force at the fork,
when the parent log sits in the same run (same directory, or the same SQLite store). Scrubbed fields
("{{system}}", "{{tools}}", ["{{messagePrefix}}"]) hide any real change, so they are `unverifiable`.
From v3 the system prompt is the `system/message` head of the surface, not a header field: each snapshot
carries the head in force as its `system`, and a head replaced between headers is a row of its own.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
from deepdiff import DeepDiff
from msgspec import structs

from ..errors import DshAuditError, LogReadError
from ..header import HeaderSnapshot, is_placeholder, system_text
from ..jsjson import dumps, same_text
from ..log_filter import LogFilter
from ..readers import open_logs
from ..readers.discover import Skipped, Unreadable, read_each
from ..readers.progress import watching
from ..records import LogSource
from ..text import clip
from ..walker import Walked, Walker
from .render import rows_frame

COLUMNS = {"log": pl.String, "generation": pl.Int64, "sessionId": pl.String, "seq": pl.Int64, "turn": pl.Int64,
           "step": pl.Int64, "reason": pl.String, "against": pl.String, "field": pl.String, "change": pl.String,
           "path": pl.String, "before": pl.String, "after": pl.String, "detail": pl.String}
SCHEMA_VERSION = 2   # of COLUMNS; docs/cache-report.md (header-diff section) says what each holds
CHILD_LOG = re.compile(r"^session\.\d+\.(?:v\d+\.)?jsonl")


@dataclass(slots=True)
class Snapshot:
    seq: int
    turn: int | None
    step: int | None
    header: HeaderSnapshot


@dataclass(slots=True)
class LogHeaders:
    """One log of a run, before it is walked: its session header, and how to read it again. Only the first
    pass (the headers of a run, to match forks) opens every log, one at a time; each is walked later."""

    label: str
    file: Path
    session: dict[str, Any]
    generation: int
    reopen: Callable[[], LogSource] | None = field(default=None, repr=False)
    kept: LogSource | None = field(default=None, repr=False)   # a source that cannot be reopened (a pipe)

    @property
    def session_id(self) -> str:
        return str(self.session.get("id"))

    def open(self) -> LogSource:
        if self.kept is not None:
            source, self.kept = self.kept, None
            return source
        if self.reopen is None:
            raise LogReadError("header-diff must read this log twice (a fork cycle), and it can be read only once",
                               path=self.label)
        return self.reopen()


@dataclass(slots=True)
class ForkPoints:
    """What a parent's walk leaves for its children: the snapshot in force at each fork point asked for, not
    every snapshot (a log of header churn holds one snapshot per event)."""

    seeds: dict[int, Snapshot | None] = field(default_factory=dict)   # seedLength -> last snapshot before it
    mentions: dict[str, tuple[int, Snapshot | None]] = field(default_factory=dict)  # child id -> (seq, in force)
    last: Snapshot | None = None


def log_headers(file: Path, found_in: Path | None, *, keep: bool = False) -> list[LogHeaders]:
    """The logs a file holds, each closed again before the next is opened (a store's sessions hold no file
    until read; a pipe cannot be reopened, so it stays open, to be walked once); with `keep`, each stays open to
    be walked without opening it again. A progress bar counts the walks, not this pass."""
    logs = []
    with watching(lambda _label, _position: None):
        for source in open_logs(file, found_in=found_in):
            log = LogHeaders(source.label, file, source.header, source.generation.version, source.reopen)
            if keep or source.reopen is None:
                log.kept = source
            else:
                source.close()
            logs.append(log)
    return logs


def _walk(log: LogHeaders, start: tuple[Snapshot | None, str | None], *, seeds: Iterable[int] = (),
          watch: Iterable[str] = (), rows: list[dict[str, Any]] | None = None) -> ForkPoints:
    """Walk one log for its snapshots alone (SnapshotTaker: what `start`, `seeds`, `watch` and `rows` mean)."""
    source = log.open()
    taker = SnapshotTaker(log, source, start, seeds=seeds, watch=watch, rows=rows)
    walker = Walker(source, on_finding=lambda _finding: None)
    for walked in walker:
        taker.take(walker, walked)
    return taker.finish()


class SnapshotTaker:
    """The header snapshots of one walk (so legacy events are upgraded and refused ones skipped, as the reference
    does): each one the fold takes, with the turn and step it falls in, diffed against the one before at once
    (`rows`, when given, receives the changes); only the latest snapshot is kept. From v3 a new system head under
    the same header is a snapshot of its own (reason "system/message"). Fed each step of a walk as it is taken,
    with the walker whose state it reads; `finish` once the walk is over.

    `start` is what the first snapshot is diffed against: a fork parent's snapshot, with the `against` text.
    `seeds` and `watch` ask for the fork points of this log's children: the snapshot in force before a
    seedLength, and the one in force at the first event naming a child's session id."""

    def __init__(self, log: LogHeaders, source: LogSource, start: tuple[Snapshot | None, str | None], *,
                 seeds: Iterable[int] = (), watch: Iterable[str] = (), rows: list[dict[str, Any]] | None = None
                 ) -> None:
        self.log, self.rows = log, rows
        self.in_surface = source.generation.system_prompt == "surface"
        self.points = ForkPoints(seeds=dict.fromkeys(seeds))
        self.unsettled = sorted(self.points.seeds)   # seed lengths not yet reached, smallest first
        self.settled = 0
        self.pending = set(watch)
        self.previous, self.against = start
        self.turn: int | None = None
        self.step: int | None = None
        self.seen: tuple[HeaderSnapshot | None, str] = (None, "")
        self.head_of: tuple[Any, str] = (None, "")   # (head message, its text): the text is joined once per head

    def take(self, walker: Walker, walked: Walked) -> None:
        event, record = walked.event or {}, walked.record
        if record is None:
            return
        raw_data = event.get("data")
        data: dict[str, Any] = raw_data if isinstance(raw_data, dict) else {}
        if event.get("type") == "turn/start":
            self.turn, self.step = _int(data.get("turn")), None
        elif event.get("type") == "step/start":
            self.step = _int(data.get("step"))
        self.see_head(record.seq, walker.header, walker.system_head, system_text)
        if self.pending:
            text = json.dumps(record.event)
            for session_id in [session_id for session_id in self.pending if session_id in text]:
                self.pending.discard(session_id)
                self.points.mentions[session_id] = (record.seq, self.points.last)

    def see_head(self, seq: int, header: HeaderSnapshot | None, message: Any, text_of: Callable[[Any], str]) -> None:
        """`see`, with the system head as its message (whatever the walk keeps it as), whose text `text_of` joins
        once per head."""
        if message is not self.head_of[0]:
            self.head_of = (message, text_of(message))
        self.see(seq, header, self.head_of[1])

    def see(self, seq: int, header: HeaderSnapshot | None, head: str) -> None:
        """After event `seq`: the header in force and the system head's text (`turn` and `step` already that
        event's). A new header, or a new head under the same one, is a snapshot. The fast walk calls this alone
        (reports.fast_walk), after each event that may change either: nothing else moves a fork point."""
        points, unsettled = self.points, self.unsettled
        while self.settled < len(unsettled) and unsettled[self.settled] <= seq:   # in force before the seed
            points.seeds[unsettled[self.settled]] = points.last
            self.settled += 1
        seen = self.seen
        if header is not None and (header is not seen[0] or head != seen[1]):
            shown = header if header is not seen[0] else structs.replace(header, reason="system/message")
            snap = Snapshot(seq, self.turn, self.step, _with_head(shown, head, self.in_surface))
            if self.rows is not None:
                self.rows.extend(_snapshot_rows(self.log, snap, self.previous, self.against))
            self.previous, self.against, points.last = snap, None, snap
        self.seen = (header, head)

    def finish(self) -> ForkPoints:
        for seed in self.unsettled[self.settled:]:
            self.points.seeds[seed] = self.points.last
        return self.points


def _with_head(header: HeaderSnapshot, head: str, in_surface: bool) -> HeaderSnapshot:
    """The snapshot as header-diff compares it: from v3 its system is the surface head's text."""
    if not in_surface:
        return header
    raw = {key: value for key, value in header.raw.items() if key != "system"}
    if head:
        raw["system"] = head
    scrubbed = tuple(key for key in ("system", "tools") if is_placeholder(raw.get(key)))
    return structs.replace(header, raw=raw, placeholders=scrubbed)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# -- diffing two snapshots -----------------------------------------------------------------------------
Change = dict[str, Any]


def _text(value: Any) -> str | None:
    return None if value is None else dumps(value)


def _row(fld: str | None, change: str, *, path: str | None = None, before: Any = None, after: Any = None,
         detail: str | None = None) -> Change:
    return {"field": fld, "change": change, "path": path, "before": before, "after": after, "detail": detail}


def _presence(old: Any, new: Any) -> str:
    return "added" if old is None else "removed" if new is None else "changed"


def diff_headers(old: HeaderSnapshot, new: HeaderSnapshot) -> list[Change]:
    """Every difference between two snapshots, field by field; empty when nothing (verifiable) changed."""
    changes: list[Change] = []
    changes += diff_config(old.header.get("config"), new.header.get("config"))
    a, b = old.header.get("adapterDefaults"), new.header.get("adapterDefaults")
    if not same_text(a, b):
        changes.append(_row("adapterDefaults", _presence(a, b), before=_text(a), after=_text(b)))
    changes += diff_system(old.raw.get("system"), new.raw.get("system"))
    changes += diff_tools(old.raw.get("tools"), new.raw.get("tools"))
    changes += _diff_prefix(old.message_prefix, new.message_prefix)
    return changes


def diff_config(old: Any, new: Any) -> list[Change]:
    old = old if isinstance(old, dict) else {}
    new = new if isinstance(new, dict) else {}
    return [_row(f"config.{key}", _presence(old.get(key), new.get(key)),
                 before=_text(old.get(key)), after=_text(new.get(key)))
            for key in dict.fromkeys([*old, *new]) if not same_text(old.get(key), new.get(key))]


def _unverifiable(fld: str, old: Any, new: Any) -> Change:
    scrubbed = [side for side, value in (("before", old), ("after", new)) if is_placeholder(value)]
    return _row(fld, "unverifiable", before=_short(old), after=_short(new),
                detail=f"scrubbed placeholder ({' and '.join(scrubbed)}): a real change would be invisible")


def _short(value: Any, limit: int = 60) -> str | None:
    text = _text(value)
    return text if text is None else clip(text, limit + 1)


def diff_system(old: Any, new: Any) -> list[Change]:
    if is_placeholder(old) or is_placeholder(new):
        return [_unverifiable("system", old, new)]
    if old == new:
        return []
    before, after = (text_lines(v) if isinstance(v, str) else [] for v in (old, new))
    lines = line_diff(before, after)
    added = sum(1 for line in lines if line.startswith("+"))
    removed = sum(1 for line in lines if line.startswith("-"))
    return [_row("system", _presence(old, new), before=f"{len(before)} lines", after=f"{len(after)} lines",
                 path=f"+{added} -{removed} lines", detail="\n".join(lines))]


def line_diff(before: list[str], after: list[str]) -> list[str]:
    """A unified diff of two texts' lines, no context, without its file names: @@ hunks, -old, +new."""
    return [line for line in difflib.unified_diff(before, after, lineterm="", n=0)
            if not line.startswith(("---", "+++"))]


def text_lines(text: str) -> list[str]:
    """A prompt's lines, split at newlines only: a CR or another separator in a line is data, kept (and shown
    escaped by the view), not a line break of its own."""
    if not text:
        return []
    lines = text.split("\n")
    return lines[:-1] if text.endswith("\n") else lines


def _tool_map(tools: Any) -> dict[str, Any]:
    """Tools by name; a nameless tool keeps its position as its name."""
    if not isinstance(tools, list):
        return {}
    named: dict[str, Any] = {}
    for index, tool in enumerate(tools):
        if isinstance(tool, str):
            named[tool] = tool  # a names-only scrubbed list: the schema was not logged
        else:
            named[str(tool.get("name")) if isinstance(tool, dict) and "name" in tool else f"#{index}"] = tool
    return named


def diff_tools(old: Any, new: Any) -> list[Change]:
    if is_placeholder(old) or is_placeholder(new):
        return [_unverifiable("tools", old, new)]
    listed = [*(old if isinstance(old, list) else []), *(new if isinstance(new, list) else [])]
    names_only = any(isinstance(tool, str) for tool in listed)
    if same_text(old, new) and not names_only:
        return []
    before, after = _tool_map(old), _tool_map(new)
    changes = [_row("tools", "removed", path=f"tools[{name}]", before=name) for name in before if name not in after]
    changes += [_row("tools", "added", path=f"tools[{name}]", after=name) for name in after if name not in before]
    for name in (n for n in before if n in after):
        changes += _diff_tool_schema(name, before[name], after[name])
    common_old = [n for n in before if n in after]
    common_new = [n for n in after if n in before]
    if common_old != common_new:
        changes.append(_row("tools", "reordered", path="tools", before=", ".join(common_old),
                            after=", ".join(common_new)))
    if any(isinstance(tool, str) for tool in [*before.values(), *after.values()]):
        changes.append(_row("tools", "unverifiable", path="tools",
                            detail="tools logged by name only: a schema change would be invisible"))
    return changes


def _diff_tool_schema(name: str, old: Any, new: Any) -> list[Change]:
    if same_text(old, new) or isinstance(old, str) or isinstance(new, str):
        return []
    tree = DeepDiff(old, new, view="tree")
    changes = []
    for kind, items in tree.items():
        for item in items:
            path = "".join(f"[{step}]" if isinstance(step, int) else f".{step}"
                           for step in item.path(output_format="list"))
            changes.append(_row("tools", "schema-changed", path=f"tools[{name}]{path}",
                                before=_short(_deep_value(item.t1)), after=_short(_deep_value(item.t2)),
                                detail=kind))
    if not changes:  # equal as data, different as bytes: the request (and its cache prefix) still changes
        changes.append(_row("tools", "schema-changed", path=f"tools[{name}]", detail="key order changed"))
    return changes


def _deep_value(value: Any) -> Any:
    """DeepDiff marks a missing side with its NotPresent sentinel; show that as absent."""
    return None if type(value).__name__ == "NotPresent" else value


def _diff_prefix(old: Any, new: Any) -> list[Change]:
    if old is None and new is None:
        return []
    if is_placeholder(old) or is_placeholder(new):
        return [_unverifiable("messagePrefix", old, new)]
    if same_text(old, new):
        return []
    return [_row("messagePrefix", _presence(old, new), before=_count(old), after=_count(new))]


def _count(value: Any) -> str | None:
    return f"{len(value)} message(s)" if isinstance(value, list) else _short(value)


# -- the report ----------------------------------------------------------------------------------------
def _run_key(file: Path) -> Path:
    return file.parent


def find_parent(child: LogHeaders, run: list[LogHeaders]) -> tuple[LogHeaders, str] | None:
    """The child's parent in the same run: by parentSession id, else by layout (session.N.jsonl beside
    session.jsonl — scrubbed fixtures do not always keep matching ids)."""
    parent_id = child.session.get("parentSession")
    if parent_id is None:
        return None
    for log in run:
        if log is not child and log.session_id == str(parent_id):
            return log, "parentSession id"
    if CHILD_LOG.match(child.file.name):
        for log in run:
            if log.file.name.startswith("session.jsonl") and log.file.parent == child.file.parent:
                return log, "file layout (parentSession id not found)"
    return None


def _fork_start(child: LogHeaders, parent: LogHeaders, matched: str, points: ForkPoints
                ) -> tuple[Snapshot | None, str | None]:
    """The parent's snapshot in force at the fork, and how it was found: before the child's seedLength when it
    has one (a seeded child replays the parent's first seedLength events), else at the parent's first event
    naming the child's session id (the spawn), else the parent's last snapshot."""
    seed = _seed(child)
    if seed is not None:
        snap, basis = points.seeds.get(seed), f"seedLength {seed}"
    elif child.session_id in points.mentions:
        mention, snap = points.mentions[child.session_id]
        basis = f"spawn at parent seq {mention}"
    else:
        snap, basis = points.last, "parent's last snapshot (fork point unknown)"
    against = f"parent {parent.file.name} seq {snap.seq} ({basis}; matched by {matched})" if snap else None
    return snap, against


def _seed(log: LogHeaders) -> int | None:
    seed = log.session.get("seedLength")
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def _snapshot_rows(log: LogHeaders, snap: Snapshot, previous: Snapshot | None,
                   against: str | None) -> list[dict[str, Any]]:
    base = {"log": log.label, "generation": log.generation, "sessionId": log.session_id, "seq": snap.seq,
            "turn": snap.turn, "step": snap.step, "reason": snap.header.reason,
            "against": against if against is not None else (f"seq {previous.seq}" if previous else None)}
    if previous is None:
        scrubbed = snap.header.placeholders
        return [{**base, **_row(None, "initial", detail=f"scrubbed: {', '.join(scrubbed)}" if scrubbed else None)}]
    changes = diff_headers(previous.header, snap.header)
    rows = []
    if not any(c["change"] != "unverifiable" for c in changes):
        unverified = [c["field"] for c in changes]
        rows.append({**base, **_row(None, "unchanged", detail=f"but {', '.join(unverified)} unverifiable"
                                    if unverified else None)})
    rows.extend({**base, **change} for change in changes)
    return rows


@dataclass(slots=True)
class Run:
    """The logs of one run and who forks from whom: each log's parent in the run (its index, and how it was
    matched), the seed lengths and child ids each log is asked to leave fork points for, and the fork points
    left by the logs walked so far. A parent is walked before its children (it leaves them their fork points)."""

    members: list[LogHeaders]
    parents: list[tuple[int, str] | None]
    seeds: list[set[int]]
    watch: list[set[str]]
    points: dict[int, ForkPoints] = field(default_factory=dict)   # of the logs walked
    forked: set[int] = field(default_factory=set)   # the logs a child names as its parent

    @classmethod
    def of(cls, members: list[LogHeaders]) -> Run:
        index = {id(log): k for k, log in enumerate(members)}
        run = cls(members, [], [set() for _ in members], [set() for _ in members])
        for child in members:
            found = find_parent(child, members)
            run.parents.append(None if found is None else (index[id(found[0])], found[1]))
            if found is not None:
                run.forked.add(index[id(found[0])])
                seed = _seed(child)
                if seed is not None:
                    run.seeds[index[id(found[0])]].add(seed)
                else:
                    run.watch[index[id(found[0])]].add(child.session_id)
        return run

    def left(self, k: int, points: ForkPoints) -> None:
        """Log `k` walked, leaving `points`; kept only for its children (a snapshot holds a whole header)."""
        self.points[k] = points if k in self.forked else ForkPoints()

    def order(self, k: int) -> list[int]:
        """Log `k` and its ancestors not walked yet (up to a walked one, a root or a cycle), parents first."""
        chain: list[int] = []
        j: int | None = k
        while j is not None and j not in self.points and j not in chain:
            chain.append(j)
            parent = self.parents[j]
            j = parent[0] if parent is not None else None
        return chain[::-1]

    def start(self, k: int) -> tuple[Snapshot | None, str | None]:
        """What log `k`'s first snapshot is diffed against: its parent's snapshot at the fork, if it has a parent.
        Only in a fork cycle (ids that name each other) is the parent not walked yet: it is then walked for the
        fork points alone."""
        parent = self.parents[k]
        if parent is None:
            return None, None
        p, matched = parent
        fork = self.points.get(p)
        if fork is None:
            fork = _walk(self.members[p], (None, None), seeds=self.seeds[p], watch=self.watch[p])
        return _fork_start(self.members[k], self.members[p], matched, fork)


def _run_rows(members: list[LogHeaders], unreadable: list[Unreadable]) -> list[dict[str, Any]]:
    """The rows of one run, log by log in the run's order. Each log is walked once, and only a fork cycle walks
    a parent twice. A log that turns out unreadable on the way gives no rows and is added to `unreadable`; its
    children are diffed as if it had no fork points."""
    run = Run.of(members)
    rows: dict[int, list[dict[str, Any]]] = {}
    for k in range(len(members)):
        for j in run.order(k):
            rows[j] = []
            try:
                run.left(j, _walk(members[j], run.start(j), seeds=run.seeds[j], watch=run.watch[j], rows=rows[j]))
            except DshAuditError as error:
                rows[j], run.points[j] = [], ForkPoints()
                unreadable.append(Unreadable(members[j].label, str(error)))
    return [row for k in range(len(members)) for row in rows[k]]


def build_header_diff(paths: Iterable[str | os.PathLike[str]], *, all_generations: bool = False,
                      unreadable: list[Unreadable] | None = None, skipped: list[Skipped] | None = None,
                      superseded: Mapping[Path, Path] | None = None, select: LogFilter | None = None,
                      left_out: list[tuple[str, str, str]] | None = None) -> pl.DataFrame:
    """The header-diff report over every log at `paths` (files or directories). One log file is open at a
    time, and memory holds the rows, one run's session headers and, per log walked, its latest snapshot and
    its children's fork points. Given an `unreadable` list, a log that cannot be read is left out and named
    there (readers.discover.read_each); without one, it is an error. Given a `skipped` list, the older
    generations left out (`superseded`: those of a log picked by --session) are added to it. A log `select`
    leaves out (dsh_audit.log_filter) is not walked, and is added to `left_out` (label, option, why); a fork
    whose parent is left out is diffed from its first snapshot."""
    runs: dict[Path, list[LogHeaders]] = {}
    per_file, missed, older = read_each(paths, lambda file, found_in: (file, log_headers(file, found_in)),
                                        all_generations=all_generations, superseded=superseded)
    if skipped is not None:
        skipped.extend(older)
    for file, logs in per_file:
        for log in logs:
            outside = select.left_by(log.session, log.reopen) if select else None
            if outside is not None:
                if log.kept is not None:   # a stream kept open for its walk
                    log.kept.close()
                if left_out is not None:
                    left_out.append((log.label, *outside))
                continue
            runs.setdefault(_run_key(file), []).append(log)
    broken: list[Unreadable] = []   # logs that failed on the way, after their header was read
    rows = [row for members in runs.values() for row in _run_rows(members, broken)]
    walked = sum(len(members) for members in runs.values()) - len(broken)
    missed += broken
    if missed and (unreadable is None or walked == 0):
        raise LogReadError(missed[0].reason)
    if unreadable is not None:
        unreadable.extend(missed)
    return rows_frame(rows, COLUMNS) if rows else pl.DataFrame(schema=COLUMNS)
