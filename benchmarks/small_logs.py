"""Write a directory of many small synthetic logs with distinct session ids, for `verify -j`.

    python benchmarks/small_logs.py --out benchmarks/data/small [--count 1000] [--size 50KB] [--templates 20]

The generator costs ~0.6 s per call whatever the size (its content pools are built per run), so only
--templates logs are generated (distinct seeds); the rest are copies of them with the header's session
id replaced by a deterministic uuid per file. Existing files are kept: output is deterministic.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import uuid
from pathlib import Path

import orjson

import generate_log


def template(out: Path, k: int, size: str) -> bytes:
    """Generated log k, kept beside (not inside) the directory that `verify` reads."""
    path = out.parent / f"{out.name}-templates" / f"template-{k:03d}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        with contextlib.redirect_stdout(io.StringIO()):  # one summary line per log is noise here
            generate_log.main(["--size", size, "--seed", str(1000 + k), "--out", str(path)])
    return path.read_bytes()


def with_session_id(log: bytes, session_id: str) -> bytes:
    first, rest = log.split(b"\n", 1)
    header = orjson.loads(first)
    header["id"] = session_id
    return orjson.dumps(header) + b"\n" + rest


def write_small_logs(out: Path, count: int, size: str, templates: int) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    cache: dict[int, bytes] = {}
    paths = []
    for k in range(count):
        path = out / f"small-{k:04d}.jsonl"
        if not path.exists():
            t = k % templates
            if t not in cache:
                cache[t] = template(out, t, size)
            path.write_bytes(with_session_id(cache[t], str(uuid.UUID(int=k + 1, version=4))))
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="a directory of small synthetic logs")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--size", default="50KB")
    parser.add_argument("--templates", type=int, default=20, help="distinct generated logs the copies come from")
    args = parser.parse_args(argv)
    paths = write_small_logs(args.out, args.count, args.size, args.templates)
    total = sum(p.stat().st_size for p in paths)
    print(f"{args.out}: {len(paths)} logs, {total / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
