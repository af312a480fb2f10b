"""Official-code differential oracle: the corpus's v0 logs as genuine v1, v2 and v3 logs.

`realize` turns a committed (projected) v0 fixture into the persisted form the released decoders accept;
`migrate_corpus` realizes every corpus log and runs tests/reference-format/migrate.mjs (the published
npm migration packages) over all of them in one node process. See docs/official-migration.md.
No pytest here: the fixture lives in conftest_migration.py.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT_DIR = Path(__file__).resolve().parent / "reference-format"
FORMAT_NODE = FORMAT_DIR / "node_modules" / ".bin" / "node"
MIGRATE = FORMAT_DIR / "migrate.mjs"
TARGETS = (1, 2, 3)

PACKED_ROW_TYPES = {"text-chunks": "texts", "reasoning-chunks": "texts", "tool-call-chunks": "args"}
# On-disk header key order (dsh-log-spec §1.2); a default is inserted at its canonical place.
HEADER_ORDER = ("type", "version", "id", "createdAt", "cwd", "parentSession", "seedLength", "origin",
                "delegationDepth", "agentPreset")
CANONICAL_NAME = re.compile(r"^session(?:\.[0-9]+)?\.jsonl$")


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _with_default(header: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """`header` with `key` inserted before the first present key that follows it on disk."""
    later = set(HEADER_ORDER[HEADER_ORDER.index(key) + 1:])
    items = list(header.items())
    at = next((i for i, (k, _) in enumerate(items) if k in later), len(items))
    return dict([*items[:at], (key, value), *items[at:]])


def _called_tools(events: list[dict[str, Any]]) -> list[str]:
    """Tool names the log calls, in order of first appearance (chunks, messages, tool/call)."""
    names: dict[str, None] = {}
    for event in events:
        data: dict[str, Any] = event["data"] if isinstance(event.get("data"), dict) else {}
        kind = event.get("type")
        found: list[Any] = []
        if kind == "tool-call-chunks":
            found = [data.get("name")]
        elif kind == "assistant/chunk" and isinstance(data.get("chunk"), dict):
            chunk = data["chunk"]
            found = [chunk.get("name")] if chunk.get("type") == "tool-call-delta" else []
        elif kind == "assistant/message":
            message = data.get("message") if "message" in data else data   # both payload generations
            content = message.get("content") if isinstance(message, dict) else None
            found = [b.get("name") for b in content or [] if isinstance(b, dict) and b.get("type") == "tool-call"]
        elif kind == "tool/call":
            found = [data.get("name")]
        names.update((name, None) for name in found if isinstance(name, str) and name)
    return list(names)


def _realize_tools(event: dict[str, Any], called: list[str]) -> bool:
    """Scrubbed or name-only request/header tools -> one empty ToolSchema per called tool (True if changed)."""
    data = event.get("data")
    header = data.get("header") if event.get("type") == "request/header" and isinstance(data, dict) else None
    if not isinstance(header, dict):
        return False
    tools = header.get("tools")
    if not (isinstance(tools, str) or (isinstance(tools, list) and tools and all(isinstance(t, str) for t in tools))):
        return False
    header["tools"] = [{"name": name, "description": "", "parameters": {}} for name in called]
    return True


def realize(path: Path) -> bytes:
    """The persisted v0 form of a committed fixture, changed only as log-generations.md §5.3 lists.

    Explicit seq/time (none in the corpus) are kept; unchanged lines keep their exact bytes.
    """
    lines = [line for line in Path(path).read_bytes().split(b"\n") if line.strip()]
    header = json.loads(lines[0])
    rows = [json.loads(line) for line in lines[1:]]
    original = dict(header)
    if "version" not in header:
        header = _with_default(header, "version", 0)
    if "delegationDepth" not in header:
        header = _with_default(header, "delegationDepth", 0)
    if isinstance(header.get("cwd"), str) and not header["cwd"].startswith("/"):
        header["cwd"] = "/" + header["cwd"]
    out = [lines[0] if header == original and list(header) == list(original) else _dumps(header)]

    called = _called_tools(rows)
    count = 0   # running count of decoded events: a packed row stands for one event per member
    for line, row in zip(lines[1:], rows, strict=True):
        members = PACKED_ROW_TYPES.get(row.get("type"))
        seq_key, time_key = ("seq0", "time0") if members else ("seq", "time")
        changed = _realize_tools(row, called)
        if seq_key not in row or time_key not in row:
            changed = True
            rest = {k: v for k, v in row.items() if k not in ("type", seq_key, time_key)}
            row = {"type": row.get("type"), seq_key: row.get(seq_key, count), time_key: row.get(time_key, 0), **rest}
        count += len(row["data"][members]) if members else 1
        out.append(_dumps(row) if changed else line)
    return b"\n".join(out) + b"\n"


def canonical_location(relpath: str) -> tuple[Path, str]:
    """(folder, v0 file name) for a corpus log under the output root.

    session.jsonl / session.K.jsonl stay together in their scenario folder (children keep their index);
    any other name (seed.jsonl, child.replay.jsonl, *.expected.jsonl) gets a folder of its own, named after it.
    """
    rel = Path(relpath)
    if CANONICAL_NAME.match(rel.name):
        return rel.parent, rel.name
    return rel.parent / rel.name.removesuffix(".jsonl"), "session.jsonl"


@dataclass(frozen=True)
class MigratedLog:
    """One corpus log: its realized v0 file and, per target 1/2/3, the written file or the refusal message."""

    v0: Path
    targets: dict[int, Path | str]

    def ok(self, target: int) -> bool:
        return isinstance(self.targets[target], Path)


def run_migrate(paths: list[Path], *, descriptor_bump: bool = False) -> list[dict[str, Any]]:
    """One migrate.mjs process over `paths` (outputs beside each input); its JSON lines, checked for order."""
    command = [str(FORMAT_NODE), str(MIGRATE), *(["--descriptor-bump"] if descriptor_bump else [])]
    done = subprocess.run(command, cwd=FORMAT_DIR, input="".join(f"{p}\n" for p in paths), capture_output=True,
                          text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"migrate.mjs exited {done.returncode}:\n{done.stderr}")
    results = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    expected = [(str(p), t) for p in paths for t in TARGETS]
    if [(r["path"], r["target"]) for r in results] != expected:
        raise RuntimeError("migrate.mjs did not answer once per log and target, in order")
    return results


def corpus_session_logs(logs_root: Path) -> list[str]:
    files = json.loads((logs_root / "manifest.json").read_text(encoding="utf-8"))["files"]
    return sorted(entry["path"] for entry in files if entry["kind"] == "session-log")


def migrate_corpus(logs_root: Path, out_dir: Path, *, descriptor_bump: bool = False) -> dict[str, MigratedLog]:
    """Realize every corpus session log under out_dir and migrate them all; keyed by corpus relative path."""
    relpaths = corpus_session_logs(Path(logs_root))
    realized: list[Path] = []
    for relpath in relpaths:
        folder, name = canonical_location(relpath)
        target = Path(out_dir) / folder / name
        if target in realized:
            raise RuntimeError(f"two corpus logs map to {target}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(realize(Path(logs_root) / relpath))
        realized.append(target)
    results = run_migrate(realized, descriptor_bump=descriptor_bump)
    migrated: dict[str, MigratedLog] = {}
    for index, (relpath, v0) in enumerate(zip(relpaths, realized, strict=True)):
        rows = results[3 * index: 3 * index + 3]
        migrated[relpath] = MigratedLog(v0, {r["target"]: Path(r["file"]) if r["ok"] else r["error"] for r in rows})
    return migrated
