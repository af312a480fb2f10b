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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl
from deepdiff import DeepDiff

from ..header import HeaderSnapshot, is_placeholder, system_text
from ..jsjson import dumps
from ..readers import discover, open_logs
from ..records import LogSource
from ..walker import Walker
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
    """What header-diff needs from one log: its snapshots, and where its events first name other sessions."""

    label: str
    file: Path
    session: dict[str, Any]
    generation: int
    snapshots: list[Snapshot] = field(default_factory=list)
    mentions: dict[str, int] = field(default_factory=dict)

    @property
    def session_id(self) -> str:
        return str(self.session.get("id"))

    def in_force_before(self, seq: int) -> Snapshot | None:
        found = None
        for snap in self.snapshots:
            if snap.seq < seq:
                found = snap
        return found


def collect_headers(source: LogSource, file: Path, watch_ids: frozenset[str] = frozenset()) -> LogHeaders:
    """Walk one log (so legacy events are upgraded and refused ones skipped, as the reference does), keeping
    each header snapshot the fold takes, with the turn and step it falls in. From v3 a new system head under
    the same header is a snapshot of its own (reason "system/message")."""
    in_surface = source.generation.system_prompt == "surface"
    result = LogHeaders(label=source.label, file=file, session=source.header, generation=source.generation.version)
    turn: int | None = None
    step: int | None = None
    walker = Walker(source, on_finding=lambda _finding: None)
    seen: tuple[HeaderSnapshot | None, str] = (None, "")
    for walked in walker:
        event, record = walked.event or {}, walked.record
        if record is None:
            continue
        raw_data = event.get("data")
        data: dict[str, Any] = raw_data if isinstance(raw_data, dict) else {}
        if event.get("type") == "turn/start":
            turn, step = _int(data.get("turn")), None
        elif event.get("type") == "step/start":
            step = _int(data.get("step"))
        header, head = walker.header, system_text(walker.system_head)
        if header is not None and (header is not seen[0] or head != seen[1]):
            shown = header if header is not seen[0] else replace(header, reason="system/message")
            result.snapshots.append(Snapshot(record.seq, turn, step, _with_head(shown, head, in_surface)))
        seen = (header, head)
        if watch_ids:
            text = json.dumps(record.event)
            for session_id in watch_ids - result.mentions.keys():
                if session_id in text:
                    result.mentions[session_id] = record.seq
    return result


def _with_head(header: HeaderSnapshot, head: str, in_surface: bool) -> HeaderSnapshot:
    """The snapshot as header-diff compares it: from v3 its system is the surface head's text."""
    if not in_surface:
        return header
    raw = {key: value for key, value in header.raw.items() if key != "system"}
    if head:
        raw["system"] = head
    scrubbed = tuple(key for key in ("system", "tools") if is_placeholder(raw.get(key)))
    return replace(header, raw=raw, placeholders=scrubbed)


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
    changes += _diff_config(old.header.get("config"), new.header.get("config"))
    a, b = old.header.get("adapterDefaults"), new.header.get("adapterDefaults")
    if _text(a) != _text(b):
        changes.append(_row("adapterDefaults", _presence(a, b), before=_text(a), after=_text(b)))
    changes += _diff_system(old.raw.get("system"), new.raw.get("system"))
    changes += _diff_tools(old.raw.get("tools"), new.raw.get("tools"))
    changes += _diff_prefix(old.message_prefix, new.message_prefix)
    return changes


def _diff_config(old: Any, new: Any) -> list[Change]:
    old = old if isinstance(old, dict) else {}
    new = new if isinstance(new, dict) else {}
    return [_row(f"config.{key}", _presence(old.get(key), new.get(key)),
                 before=_text(old.get(key)), after=_text(new.get(key)))
            for key in dict.fromkeys([*old, *new]) if _text(old.get(key)) != _text(new.get(key))]


def _unverifiable(fld: str, old: Any, new: Any) -> Change:
    scrubbed = [side for side, value in (("before", old), ("after", new)) if is_placeholder(value)]
    return _row(fld, "unverifiable", before=_short(old), after=_short(new),
                detail=f"scrubbed placeholder ({' and '.join(scrubbed)}): a real change would be invisible")


def _short(value: Any, limit: int = 60) -> str | None:
    text = _text(value)
    return text if text is None or len(text) <= limit else text[:limit] + "…"


def _diff_system(old: Any, new: Any) -> list[Change]:
    if is_placeholder(old) or is_placeholder(new):
        return [_unverifiable("system", old, new)]
    if old == new:
        return []
    before, after = (v.splitlines() if isinstance(v, str) else [] for v in (old, new))
    lines = [line for line in difflib.unified_diff(before, after, lineterm="", n=0)
             if not line.startswith(("---", "+++"))]
    added = sum(1 for line in lines if line.startswith("+"))
    removed = sum(1 for line in lines if line.startswith("-"))
    return [_row("system", _presence(old, new), before=f"{len(before)} lines", after=f"{len(after)} lines",
                 path=f"+{added} -{removed} lines", detail="\n".join(lines))]


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


def _diff_tools(old: Any, new: Any) -> list[Change]:
    if is_placeholder(old) or is_placeholder(new):
        return [_unverifiable("tools", old, new)]
    listed = [*(old if isinstance(old, list) else []), *(new if isinstance(new, list) else [])]
    names_only = any(isinstance(tool, str) for tool in listed)
    if _text(old) == _text(new) and not names_only:
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
    if _text(old) == _text(new) or isinstance(old, str) or isinstance(new, str):
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
    if _text(old) == _text(new):
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


def fork_snapshot(child: LogHeaders, parent: LogHeaders) -> tuple[Snapshot | None, str]:
    """The parent's snapshot in force at the fork: before the child's seedLength when it has one (a
    seeded child replays the parent's first seedLength events), else before the parent's first event
    naming the child's session id (the spawn), else the parent's last snapshot."""
    seed = child.session.get("seedLength")
    if isinstance(seed, int) and not isinstance(seed, bool):
        return parent.in_force_before(seed), f"seedLength {seed}"
    mention = parent.mentions.get(child.session_id)
    if mention is not None:
        return parent.in_force_before(mention + 1), f"spawn at parent seq {mention}"
    return (parent.snapshots[-1] if parent.snapshots else None), "parent's last snapshot (fork point unknown)"


def log_rows(log: LogHeaders, parent: tuple[LogHeaders, str] | None) -> Iterator[dict[str, Any]]:
    previous: Snapshot | None = None
    against: str | None = None
    if parent is not None:
        previous, basis = fork_snapshot(log, parent[0])
        against = (f"parent {parent[0].file.name} seq {previous.seq} ({basis}; matched by {parent[1]})"
                   if previous else None)
    for snap in log.snapshots:
        base = {"log": log.label, "generation": log.generation, "sessionId": log.session_id, "seq": snap.seq,
                "turn": snap.turn, "step": snap.step, "reason": snap.header.reason,
                "against": against if against is not None else (f"seq {previous.seq}" if previous else None)}
        if previous is None:
            scrubbed = snap.header.placeholders
            yield {**base, **_row(None, "initial", detail=f"scrubbed: {', '.join(scrubbed)}" if scrubbed else None)}
        else:
            changes = diff_headers(previous.header, snap.header)
            verifiable = [c for c in changes if c["change"] != "unverifiable"]
            if not verifiable:
                unverified = [c["field"] for c in changes]
                yield {**base, **_row(None, "unchanged", detail=f"but {', '.join(unverified)} unverifiable"
                                      if unverified else None)}
            for change in changes:
                yield {**base, **change}
        previous, against = snap, None


def build_header_diff(paths: Iterable[str | os.PathLike[str]], *, all_generations: bool = False) -> pl.DataFrame:
    """The header-diff report over every log at `paths` (files or directories)."""
    files = discover(paths, all_generations=all_generations)
    runs: dict[Path, list[tuple[Path, LogSource]]] = {}
    for file in files:
        for source in open_logs(file):
            runs.setdefault(_run_key(file), []).append((file, source))
    rows: list[dict[str, Any]] = []
    for members in runs.values():
        ids = frozenset(str(s.header.get("id")) for _, s in members)
        logs = [collect_headers(source, file, ids) for file, source in members]
        for log in logs:
            rows.extend(log_rows(log, find_parent(log, logs)))
    return rows_frame(rows, COLUMNS) if rows else pl.DataFrame(schema=COLUMNS)
