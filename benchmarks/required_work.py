"""The C-level work that verify cannot skip, measured on its own: how close to the parse floor can any
CPython verifier get?

    python benchmarks/required_work.py LOG [--repeat 3]

Each stage adds to the one before; every stage is a plain orjson line loop plus only built-in calls
(no dsh_audit code, no per-event Python functions beyond the loop itself):

- `parse`     orjson.loads per line: the floor (parse_floor.py's `lines` loop).
- `+rows`     the packed-row checks the reference codec makes: members are strings, dt gaps are safe integers
              and so are the member times (one type pass over each array, a min and a sum of the gaps).
- `+messages` each surface event's message serialized once (orjson.dumps): the bytes a request is made of.
- `+hash`     sha256 of each serialized message once, and per step/start (one dispatch per step) a copy of
              the running hash plus the header's tail (system prompt and tools), to finish that request's
              digest.
- `+seqs`     one type pass and a min/max over each sourceEventSeqs list (the provenance rule).

The last line is a lower bound for a verifier that also validates every event against its schema, checks the
structural invariants and keeps the fold state, none of which is counted here.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import orjson

from logio import open_binary

PACKED = {"text-chunks": "texts", "reasoning-chunks": "texts", "tool-call-chunks": "args"}
SURFACE = {"user/message", "assistant/message", "tool/result"}
STAGES = ("parse", "+rows", "+messages", "+hash", "+seqs")


def run(path: Path, depth: int) -> float:
    """Seconds for the first `depth` stages over the whole log."""
    loads, dumps, packed = orjson.loads, orjson.dumps, PACKED
    running = hashlib.sha256()
    tail = b"}"
    started = time.perf_counter()
    with open_binary(path) as handle:
        for line in handle:
            event = loads(line)
            if depth < 2:
                continue
            kind = event.get("type")
            key = packed.get(kind)
            if key is not None:
                data = event["data"]
                gaps = data["dt"]
                if not (set(map(type, data[key])) <= {str} and set(map(type, gaps)) <= {int}
                        and (not gaps or min(gaps) >= 0) and sum(gaps) < 2**53):
                    raise SystemExit(f"unexpected packed row in {path}")
                continue
            if depth < 3:
                continue
            if kind in SURFACE:
                data = event["data"]
                body = dumps(data if kind == "user/message" else data["message"])
                if depth >= 4:
                    running.update(body)
                seqs = event.get("sourceEventSeqs")
                if depth >= 5 and seqs:
                    set(map(type, seqs))
                    min(seqs)
                    max(seqs)
            elif depth >= 4 and kind == "request/header":
                header = event["data"]["header"]
                tail = dumps({key: header[key] for key in ("system", "tools") if key in header})
            elif depth >= 4 and kind == "step/start":
                final = running.copy()
                final.update(tail)
                final.hexdigest()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the unavoidable C-level work of verify, stage by stage")
    parser.add_argument("log", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"{args.log}, best of {args.repeat}:")
    floor = 0.0
    for depth, stage in enumerate(STAGES, 1):
        best = min(run(args.log, depth) for _ in range(args.repeat))
        floor = floor or best
        print(f"  {stage:10} {best:7.3f}s  {best / floor:5.2f}x parse")
    return 0


if __name__ == "__main__":
    sys.exit(main())
