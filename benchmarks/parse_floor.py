"""Parse floor: the fastest plain Python JSON-lines loop over a log (orjson.loads per line), no semantics.

    python benchmarks/parse_floor.py LOG [--repeat 3]

Two loops over a buffered binary file, best of --repeat each: `lines` iterates the file object;
`blocks` reads 4 MiB blocks and splits them on b"\\n" (fewer Python-level readline calls). `expand`
(reported after the floor, not part of it) also builds one dict per packed member, the cost any fold
over reference-shaped events pays. All count events the way the reference does (a packed chunk row
counts once per member), so events/s is comparable with reconstructor figures. Nothing a
reconstructor does can go faster than this in CPython, so the runner reports reconstruct time as a
multiple of this floor. Peak RSS is the process maximum (resource.getrusage).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson

from logio import expand, open_binary

PACKED = {"text-chunks": "texts", "reasoning-chunks": "texts", "tool-call-chunks": "args"}
BLOCK = 4 << 20


def count(lines: Iterator[bytes]) -> tuple[int, int, int]:
    """(lines, events, bytes) after orjson.loads of every line."""
    n_lines = n_events = n_bytes = 0
    loads, packed = orjson.loads, PACKED
    for line in lines:
        obj = loads(line)
        n_lines += 1
        n_bytes += len(line)
        key = packed.get(obj.get("type"))
        n_events += 1 if key is None else len(obj["data"][key])
    return n_lines, n_events - 1, n_bytes  # the header line is not an event


def expanded(lines: Iterator[bytes]) -> tuple[int, int, int]:
    """Like count(), but also materializes every packed member as an assistant/chunk dict (what a fold needs)."""
    n_lines = n_events = n_bytes = 0
    loads = orjson.loads
    for line in lines:
        events = expand(loads(line))
        n_lines += 1
        n_bytes += len(line)
        n_events += len(events)
    return n_lines, n_events - 1, n_bytes


def by_lines(path: Path) -> Iterator[bytes]:
    with open_binary(path) as f:
        yield from f


def by_blocks(path: Path) -> Iterator[bytes]:
    with open_binary(path) as f:
        tail = b""
        while block := f.read(BLOCK):
            parts = (tail + block).split(b"\n")
            tail = parts.pop()
            yield from parts
        if tail:
            yield tail


Counter = Callable[[Iterator[bytes]], tuple[int, int, int]]


def measure(name: str, reader: Callable[[Path], Iterator[bytes]], path: Path, repeat: int,
            counter: Counter = count) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        n_lines, n_events, n_bytes = counter(reader(path))
        best = min(best, time.perf_counter() - started)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  {name:6} {best:7.3f}s  {n_lines / best:>12,.0f} lines/s  {n_events / best:>12,.0f} events/s  "
          f"{n_bytes / best / 1e6:8.1f} MB/s  peak RSS {rss:,.0f} MiB")
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="orjson parse floor over a JSONL log")
    parser.add_argument("log", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"{args.log} ({args.log.stat().st_size:,} bytes on disk), orjson {orjson.__version__}, "
          f"best of {args.repeat}:")
    floor = min(measure("lines", by_lines, args.log, args.repeat), measure("blocks", by_blocks, args.log, args.repeat))
    print(f"  floor {floor:.3f}s")
    measure("expand", by_lines, args.log, args.repeat, expanded)
    return 0


if __name__ == "__main__":
    sys.exit(main())
