"""Golden-log checks for CI: the rebuilt request digests of every log under a directory, pinned in one golden
file beside the logs, and a per-step diff when a rebuild changes.

The golden file is `DIR/dsh-audit.golden.json`, keyed by each log's path relative to DIR (SQLite sessions as
`path#sessionId`). It is written atomically with sorted keys; the logs themselves are only ever read. With
`full`, each request also keeps its exact body, so a check can show what changed. A body is stored as pieces
(each top-level value, each message) named by their digest in the file's one `bodies` table: a conversation's
requests repeat their history, so each message is stored once, not once per later request.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import DshAuditError, LogReadError
from .findings import Finding
from .header import system_text
from .jsjson import dumps
from .output import write_output
from .readers import discover, open_logs
from .readers.discover import Skipped
from .readers.found import read_found
from .readers.jsonvalue import JsonProblem, JsonTooDeep, parse_json
from .readers.limits import LINE_ENV, InputLimits, located
from .reconstruct import iter_requests

GOLDEN_NAME = "dsh-audit.golden.json"
FORMAT = "dsh-audit-golden/2"
READ_FORMATS = (FORMAT, "dsh-audit-golden/1")   # /1 kept each --full body whole, as a string: still read
_MAX_PATHS = 5   # JSON paths shown per changed request
_TEXT_LINES = 20   # diff lines shown of a message text that changed


@dataclass(slots=True)
class LogRequests:
    """One log's rebuilt requests (or why it could not be read)."""

    key: str                                   # path relative to the golden directory
    generation: int | None = None              # the log format version it was read as
    requests: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


def golden_path(directory: Path) -> Path:
    return directory / GOLDEN_NAME


def _key(directory: Path, path: Path, label: str) -> str:
    relative = path.relative_to(directory).as_posix()
    return relative + label[len(str(path)):]   # keeps a SQLite store's "#sessionId"


def collect(directory: Path, *, full: bool = False, message_prefix: str = "legacy",
            skipped: list[Skipped] | None = None) -> Iterator[LogRequests]:
    """Every log below `directory`, rebuilt (the older generations left out are added to `skipped` when given).
    Findings do not stop a rebuild (verify reports them); an unreadable log yields an entry with `error` set."""
    if not directory.is_dir():
        raise LogReadError("is not a directory; golden commands take the directory holding the logs",
                           path=str(directory))
    for path in discover([directory], skipped=skipped):   # a link with a log's name is an error: a gate reads all
        try:
            for source in open_logs(path, found_in=directory):
                entry = LogRequests(_key(directory, path, source.label), source.generation.version)
                ignored: list[Finding] = []
                for request in iter_requests(source, message_prefix=message_prefix, bodies=full,
                                             on_finding=ignored.append):
                    record: dict[str, Any] = {"turn": request.turn, "step": request.step,
                                              "attempt": request.attempt, "dispatchSeq": request.dispatch_seq,
                                              "sha256": request.sha256}
                    if full:
                        # jsjson escapes lone surrogates, so the body bytes are always valid UTF-8
                        record["body"] = None if request.body is None else request.body.decode("utf-8")
                    entry.requests.append(record)
                yield entry
        except DshAuditError as error:
            yield LogRequests(path.relative_to(directory).as_posix(), error=str(error))


def golden_document(entries: list[LogRequests], *, full: bool, message_prefix: str) -> dict[str, Any]:
    """The golden file's content; with `full`, each body is replaced by its pieces, kept once in `bodies`."""
    bodies: dict[str, str] = {}
    for entry in entries:
        for request in entry.requests:
            if isinstance(request.get("body"), str):
                request["body"] = _stored(request["body"], bodies)
    document: dict[str, Any] = {"format": FORMAT, "full": full, "messagePrefix": message_prefix, "logs": {
        entry.key: {"generation": entry.generation, "requests": entry.requests} for entry in entries}}
    if full:
        document["bodies"] = bodies
    return document


# A stored body: a list of [key, ref] and ["messages", [ref, ...]] in the body's key order, each ref naming a
# piece of `bodies`; or a single ref, for a body its pieces would not give back byte for byte.
Pieces = list[list[Any]]


def _stored(body: str, bodies: dict[str, str]) -> Pieces | str:
    try:
        value = json.loads(body)
    except ValueError:
        value = None
    if isinstance(value, dict):
        pieces = [[key, [dumps(message) for message in item] if key == "messages" and isinstance(item, list)
                   else dumps(item)] for key, item in value.items()]
        if _joined(pieces) == body:   # the pieces are JSON.stringify's: a body of other bytes is kept whole
            return [[key, [_ref(text, bodies) for text in part] if isinstance(part, list) else _ref(part, bodies)]
                    for key, part in pieces]
    return _ref(body, bodies)


def _ref(text: str, bodies: dict[str, str]) -> str:
    """The piece's name in `bodies`: its SHA-256, cut to 16 digits unless another piece has those."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    for ref in (digest[:16], digest):
        if bodies.setdefault(ref, text) == text:
            return ref
    raise AssertionError("two texts of one SHA-256")


def _joined(pieces: Pieces) -> str:
    return "{" + ",".join(f"{dumps(key)}:" + ("[" + ",".join(part) + "]" if isinstance(part, list) else part)
                          for key, part in pieces) + "}"


def body_text(stored: Any, bodies: dict[str, Any] | None) -> str | None:
    """A pinned body as the request's text: from its pieces in `bodies`, or, from a /1 file (`bodies` None),
    the string it kept. None when none is stored or a piece it names is not in the file (a check then shows
    digests only)."""
    if bodies is None:
        return stored if isinstance(stored, str) else None
    try:
        if isinstance(stored, str):
            whole = bodies[stored]
            return whole if isinstance(whole, str) else None
        pieces = [[key, [bodies[ref] for ref in part] if isinstance(part, list) else bodies[part]]
                  for key, part in stored]
    except (KeyError, TypeError, ValueError):
        return None
    texts = [text for _, part in pieces for text in (part if isinstance(part, list) else [part])]
    return _joined(pieces) if all(isinstance(text, str) for text in texts) else None


def write_golden(directory: Path, document: dict[str, Any]) -> Path:
    """Replace the golden file by dsh_audit.output's rules: atomically (a reader never sees a half-written one),
    with the user's umask (it is meant to be committed and shared), never onto a log below `directory`, and never
    through a link planted at its name (dsh-audit names that path itself)."""
    target = golden_path(directory)
    text = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=True) + "\n"
    write_output(target, text.encode("ascii"), inputs=[directory], what="the golden file", follow_links=False)
    return target


def read_golden(directory: Path, limits: InputLimits | None = None) -> dict[str, Any]:
    """The golden file, read as a file dsh-audit found itself (readers.found: never through a link, a regular file
    only) and held to the caps of a log: the whole file to the line cap, its JSON to the depth cap."""
    path = golden_path(directory)
    if not os.path.lexists(path):
        raise LogReadError("no golden file; create it with `audit golden update`", path=str(path))
    limits = limits or InputLimits.from_env()
    data = read_found(path, limit=limits.max_line_bytes, below=directory, what="the golden file",
                      raise_cap=f"if it is genuine, raise the line cap with --max-line-bytes or {LINE_ENV}")
    try:
        document = parse_json(data)
    except JsonProblem as problem:
        raise LogReadError(f"unreadable golden file: {problem}", path=str(path)) from None
    except JsonTooDeep as deep:
        raise located(deep, path=str(path)) from None
    if not isinstance(document, dict) or document.get("format") not in READ_FORMATS or not isinstance(
            document.get("logs"), dict):
        raise LogReadError(f'not a dsh-audit golden file: expected {{"format": "{FORMAT}", "logs": {{...}}}}',
                           path=str(path))
    return document


# -- comparison ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RequestChange:
    """A pinned request rebuilt with other bytes. With both bodies pinned (--full), what changed in it:
    header-diff's rows for the config, the system prompt and the tools, then where the messages differ."""

    name: str                                   # turn.step#attempt
    digests: tuple[Any, str]                    # sha256 pinned -> rebuilt
    seqs: tuple[Any, int]                       # dispatch seq pinned -> rebuilt
    parts: tuple[dict[str, Any], ...] = ()      # reports.header_diff's change rows
    notes: tuple[str, ...] = ()                 # the first differing message, its JSON paths

    @property
    def summary(self) -> str:
        (old_digest, new_digest), (old_seq, new_seq) = self.digests, self.seqs
        return (f"~ {self.name} changed: sha256 {old_digest} -> {new_digest}"
                + (f", dispatch seq {old_seq} -> {new_seq}" if old_seq != new_seq else ""))

    def items(self) -> list[tuple[str, dict[str, Any] | None, tuple[str, ...]]]:
        """What changed, item by item (each config key, the system prompt, each tool change, then the messages'
        notes as one), each with a key that requests changed alike share; none when only digests are known."""
        items: list[tuple[str, dict[str, Any] | None, tuple[str, ...]]] = [
            (json.dumps(part, sort_keys=True), part, ()) for part in self.parts]
        if self.notes:
            items.append((json.dumps(self.notes), None, self.notes))
        return items


@dataclass(slots=True)
class LogDiff:
    key: str
    status: str                     # "same" | "changed" | "added" | "removed" | "unreadable" | "skipped"
    lines: list[str] = field(default_factory=list)             # what is not a changed request
    changes: list[RequestChange] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "same"

    def details(self) -> list[str]:
        """Every line of the diff, the changed requests' digests and notes included (the JUnit report's text)."""
        return self.lines + [line for change in self.changes
                             for line in [change.summary, *(f"    {note}" for note in change.notes)]]


def _name(request: dict[str, Any]) -> str:
    return f"{request.get('turn')}.{request.get('step')}#{request.get('attempt')}"


def body_changes(old: Any, new: str) -> tuple[tuple[dict[str, Any], ...], tuple[str, ...]]:
    """What changed between two request bodies, in prompt order: header-diff's rows for the config, the system
    prompt (a line diff) and the tools, then the first differing message and the JSON paths that changed in the
    messages."""
    try:
        before, after = json.loads(old), json.loads(new)
    except (TypeError, ValueError):
        return (), ("the pinned body is not readable: its text cannot be shown",)
    if not isinstance(before, dict) or not isinstance(after, dict):
        return (), ("body differs",)
    from .reports.header_diff import diff_config, diff_system, diff_tools  # for a changed body only

    parts = diff_config(_rest(before), _rest(after)) + diff_system(_system(before), _system(after))
    parts += diff_tools(before.get("tools"), after.get("tools"))
    notes = _message_notes(before.get("messages"), after.get("messages"))
    if not parts and not notes:
        notes = ["same JSON value, different bytes (key order or number formatting)"]
    return tuple(parts), tuple(notes)


def _rest(body: dict[str, Any]) -> dict[str, Any]:
    """A body's config: what is not its messages, system prompt or tools."""
    return {key: value for key, value in body.items() if key not in ("messages", "system", "tools")}


def _leading_systems(messages: Any) -> int:
    if not isinstance(messages, list):
        return 0
    return next((at for at, message in enumerate(messages)
                 if not isinstance(message, dict) or message.get("role") != "system"), len(messages))


def _system(body: dict[str, Any]) -> Any:
    """The system prompt: the body's `system` (up to v2), else its leading system messages' text, joined."""
    if "system" in body:
        return body["system"]
    messages = body.get("messages")
    lead = _leading_systems(messages)
    return "\n".join(system_text(message) for message in messages[:lead]) if isinstance(messages, list) and lead \
        else None


def _message_notes(old: Any, new: Any) -> list[str]:
    """Where two bodies' messages differ past their (shared) leading system messages: the first differing
    index, then the JSON paths (the system prompt's own diff says what changed there)."""
    if not isinstance(old, list) or not isinstance(new, list):
        return [] if old == new else ["messages differ"]
    lead = min(_leading_systems(old), _leading_systems(new))
    before, after = [None] * lead + old[lead:], [None] * lead + new[lead:]
    index = next((i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b),
                 min(len(before), len(after)))
    if index == max(len(before), len(after)):
        return []
    notes = [f"first differing message: index {index}"
             + (f" ({len(old)} -> {len(new)} messages)" if len(old) != len(new) else "")]
    from deepdiff import DeepDiff  # here, for a digest that changed: `audit golden --help` starts without it

    from .reports.header_diff import line_diff, text_lines

    tree = DeepDiff({"messages": before}, {"messages": after}, view="tree")
    texts = {item.path(): (item.t1, item.t2) for item in tree.get("values_changed", [])
             if isinstance(item.t1, str) and isinstance(item.t2, str)}
    paths = sorted({item.path() for report in tree.values() for item in report})
    for path in paths[:_MAX_PATHS]:
        notes.append(path)
        if path in texts:   # a text edited: its lines, as header-diff shows a system prompt's
            lines = line_diff(*(text_lines(text) for text in texts[path]))
            notes += [f"  {line}" for line in lines[:_TEXT_LINES]]
            if len(lines) > _TEXT_LINES:
                notes.append(f"  … {len(lines) - _TEXT_LINES} more diff line(s)")
    return notes + ([f"... {len(paths) - _MAX_PATHS} more path(s)"] if len(paths) > _MAX_PATHS else [])


def diff_requests(golden: list[dict[str, Any]], current: list[dict[str, Any]],
                  bodies: dict[str, Any] | None = None) -> tuple[list[str], list[RequestChange]]:
    """Per-step differences, in dispatch order: the requests added and removed, by turn.step#attempt, and those
    changed (with what changed in the body, when both are pinned; `bodies`: the golden file's pieces, None for
    a /1 file)."""
    before = {_name(request): request for request in golden if isinstance(request, dict)}
    after = {_name(request): request for request in current}
    lines, changes = [], []
    for name in dict.fromkeys([*after, *before]):
        old, new = before.get(name), after.get(name)
        if old is None and new is not None:
            lines.append(f"+ {name} added (dispatch seq {new['dispatchSeq']}, sha256 {new['sha256']})")
        elif new is None and old is not None:
            lines.append(f"- {name} removed (was dispatch seq {old.get('dispatchSeq')}, sha256 {old.get('sha256')})")
        elif old is not None and new is not None and (old.get("sha256"), old.get("dispatchSeq")) != (
                new["sha256"], new["dispatchSeq"]):
            shown = body_changes(body_text(old["body"], bodies), new["body"]) if "body" in old and isinstance(
                new.get("body"), str) and old.get("sha256") != new["sha256"] else ((), ())
            changes.append(RequestChange(name, (old.get("sha256"), new["sha256"]),
                                         (old.get("dispatchSeq"), new["dispatchSeq"]), *shown))
    return lines, changes


def check(directory: Path) -> list[LogDiff]:
    """Compare the logs below `directory` with its golden file, one LogDiff per log (golden or current)."""
    document = read_golden(directory)
    full = document.get("full") is True
    prefix = document.get("messagePrefix") if document.get("messagePrefix") in ("legacy", "drop") else "legacy"
    pinned: dict[str, Any] = document["logs"]
    stored = document.get("bodies")
    bodies = None if document["format"] != FORMAT else stored if isinstance(stored, dict) else {}
    diffs: list[LogDiff] = []
    seen = set()
    skipped: list[Skipped] = []
    for entry in collect(directory, full=full, message_prefix=str(prefix), skipped=skipped):
        seen.add(entry.key)
        if entry.error is not None:
            diffs.append(LogDiff(entry.key, "unreadable", [entry.error]))
            continue
        golden = pinned.get(entry.key)
        if not isinstance(golden, dict) or not isinstance(golden.get("requests"), list):
            diffs.append(LogDiff(entry.key, "added", [f"+ new log with {len(entry.requests)} request(s), "
                                                      "not in the golden file"]))
            continue
        lines, changes = diff_requests(golden["requests"], entry.requests, bodies)
        if "generation" in golden and golden["generation"] != entry.generation:
            lines.insert(0, f"~ log format v{golden['generation']} -> v{entry.generation}")
        diffs.append(LogDiff(entry.key, "changed" if lines or changes else "same", lines, changes))
    for key in sorted(set(pinned) - seen):
        diffs.append(LogDiff(key, "removed", ["- log is in the golden file but no longer under the directory"]))
    for older in skipped:   # as dsh does: named, never pinned
        diffs.append(LogDiff(_relative(directory, older.label), "skipped",
                             [f"an older generation; read {_relative(directory, older.read_instead)}"]))
    return diffs


def _relative(directory: Path, label: str) -> str:
    return Path(label).relative_to(directory).as_posix()
