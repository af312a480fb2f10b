"""Deliberately naive reconstruction baseline: a fresh fold of the log prefix at every dispatch point.

    python benchmarks/naive_baseline.py LOG [--limit N] [--hashes OUT.tsv]

For each request attempt (its first assistant/chunk within a step) it re-walks events[0:B) from scratch:
surface append/replace by node seqs, header = last request/header, messages = the surface's events mapped
to their message (assistant/message with empty content dropped), body = JSON.stringify-equivalent of
{...config, messages, system?, tools?}, then sha256. Cost is O(requests x log): this is the figure an
incremental reconstructor must beat. Not product code: no validation, no legacy shapes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

from logio import load_events


def dispatch_points(events: list[dict[str, Any]]) -> list[int]:
    """First chunk of each attempt: a run ends at finish, at a turn/step change, or at an assistant/message."""
    points, open_key = [], None
    for ev in events:
        if ev["type"] == "assistant/message":
            open_key = None
        if ev["type"] != "assistant/chunk":
            continue
        key = (ev["data"]["turn"], ev["data"]["step"])
        if key != open_key:
            points.append(ev["seq"])
        open_key = None if ev["data"]["chunk"]["type"] == "finish" else key
    return points


def message_of(ev: dict[str, Any]) -> Any:
    if ev["type"] == "user/message":
        return ev["data"]
    if ev["type"] == "assistant/message":
        return ev["data"]["message"] if ev["data"]["message"]["content"] else None
    return ev["data"]["message"]  # tool/result


def fresh_request(events: list[dict[str, Any]], end: int) -> tuple[bytes, int]:
    """Fold events[0:end) from nothing; return (body, header seq)."""
    nodes: list[int] = []
    header, header_seq = None, -1
    for ev in events[:end]:
        op = ev.get("surfaceOp")
        if op == "append":
            nodes.append(ev["seq"])
        elif op is not None:
            i, j = nodes.index(op["start"]), nodes.index(op["end"])
            nodes[i:j + 1] = [ev["seq"]]
        elif ev["type"] == "request/header":
            header, header_seq = ev["data"]["header"], ev["seq"]
    if header is None:
        raise SystemExit(f"no request/header before dispatch seq {end}")
    messages = [m for m in (message_of(events[s]) for s in nodes) if m is not None]
    body: dict[str, Any] = {**header["config"], "messages": messages}
    if header.get("system"):
        body["system"] = header["system"]
    if header.get("tools"):
        body["tools"] = header["tools"]
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(), header_seq


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="naive fresh-fold-per-request baseline")
    parser.add_argument("log", type=Path)
    parser.add_argument("--limit", type=int, help="stop after N requests (the figure is then a rate)")
    parser.add_argument("--hashes", type=Path, help="write dispatch_seq, header_seq, length, sha256 per request")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    _, events = load_events(args.log)
    loaded = time.perf_counter()
    points = dispatch_points(events)[: args.limit]
    rows, body_bytes = [], 0
    for seq in points:
        body, header_seq = fresh_request(events, seq)
        body_bytes += len(body)
        rows.append(f"{seq}\t{header_seq}\t{len(body)}\t{hashlib.sha256(body).hexdigest()}")
    done = time.perf_counter()
    if args.hashes:
        args.hashes.write_text("\n".join(rows) + "\n")
    fold = done - loaded
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{args.log}: {len(events):,} events loaded in {loaded - started:.2f}s; {len(points):,} requests "
          f"rebuilt in {fold:.2f}s = {len(points) / fold:.1f} requests/s, {body_bytes / 1e6:,.1f} MB of bodies "
          f"({body_bytes / fold / 1e6:.1f} MB/s); peak RSS {rss:,.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
