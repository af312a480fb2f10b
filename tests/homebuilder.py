"""dsh session homes built for tests: a log's header given a real id and cwd, files placed with a set mtime, and a
home as users have one (several generations, a session from a newer dsh, a torn one)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from dsh_audit.generations import newest

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_logs" / "compaction-recovery"
ZQ = REPO / "tests" / "fixtures" / "generations" / "zq0929" / "snapshots" / "sdk"
V2 = (REPO / "tests" / "fixtures" / "generations" / "zsagi1368" / "packages" / "test-support" / "session-snapshot"
      / "tests" / "fixtures" / "suite" / "pin-turn" / "session.v2.jsonl")
MOMENT = 1_790_000_000
NEWER = newest().version + 1   # the generation of a session a newer dsh wrote


def with_header(source: Path, session_id: str, cwd: str | None) -> bytes:
    """The log's bytes with a real id and cwd in its header (the fixtures carry placeholders)."""
    first, rest = source.read_bytes().split(b"\n", 1)
    header = json.loads(first)
    header["id"] = session_id
    if cwd is None:
        header.pop("cwd", None)
    else:
        header["cwd"] = cwd
    return json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode() + b"\n" + rest


def put(path: Path, data: bytes, mtime: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (mtime, mtime))
    return path


def build_messy_home(root: Path) -> Path:
    """Below the session root `root`: v0, v2, v3 and v4 sessions, one written by a newer dsh (NEWER), one torn in
    the middle (line 7); returns `root`."""
    placed = {"v0": (SAMPLE / "session.jsonl", "session.jsonl"), "v2": (V2, "session.v2.jsonl"),
              "v3": (SAMPLE / "session.v3.jsonl", "session.v3.jsonl"),
              "v4": (ZQ / "text-turn" / "session.v4.jsonl", "session.v4.jsonl")}
    for name, (source, file) in placed.items():
        put(root / f"--work-{name}--" / f"session-{name}" / file, with_header(source, f"session-{name}", "/w"),
            MOMENT)
    first, rest = (ZQ / "text-turn" / "session.v4.jsonl").read_bytes().split(b"\n", 1)
    put(root / f"--work-v{NEWER}--" / f"session-v{NEWER}" / f"session.v{NEWER}.jsonl",
        json.dumps({**json.loads(first), "version": NEWER}).encode() + b"\n" + rest, MOMENT)
    lines = (SAMPLE / "session.jsonl").read_bytes().splitlines()
    put(root / "--work-torn--" / "session-torn" / "session.jsonl",
        b"\n".join([*lines[:6], b'{"seq": 5, "type": "turn/start", "data": {', *lines[7:]]) + b"\n", MOMENT)
    return root
