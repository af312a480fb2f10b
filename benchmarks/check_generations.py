"""Check that a v3 twin carries the same requests as its v0 log, with dsh_audit's own reconstruction.

    python benchmarks/check_generations.py V0.jsonl V3.jsonl
    python benchmarks/check_generations.py --size 2MB [--seed 1] [--compaction pressure]

The second form writes both twins with generate_log.py (into benchmarks/data/, gitignored) and compares them.

"Same content": the same messages in the same order and the same requests. Format v3 moves the system prompt
from the header into a surface `system/message` head, so a v3 request is `{...config, messages, tools?}` with the
prompt as `messages[0]` (role system) where v0 has `{...config, messages, system, tools?}`. Both logs are rebuilt
by `dsh_audit.iter_requests` (bodies on), streamed in lockstep and aligned by turn.step#attempt; each v3 body gets
its leading system message moved back into a top-level `system` after `messages` and must then equal the v0 body
byte for byte (`dsh_audit.jsjson`, JSON.stringify's bytes). Exits 1 on the first difference.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from dsh_audit import iter_requests, open_logs
from dsh_audit.fold import RebuiltRequest
from dsh_audit.jsjson import dumps_bytes

HERE = Path(__file__).resolve().parent


def requests(path: Path) -> Iterator[RebuiltRequest]:
    sources = list(open_logs(path))
    if len(sources) != 1:
        raise SystemExit(f"{path}: expected one session, found {len(sources)}")
    yield from iter_requests(sources[0], bodies=True)


def as_v0(body: bytes) -> bytes:
    """A v3 request body with its system head moved back into a top-level `system` after `messages`."""
    request: dict[str, Any] = orjson.loads(body)
    messages = request["messages"]
    head = messages[0] if messages else {}
    content = head.get("content")
    if head.get("role") != "system" or not isinstance(content, list) or len(content) != 1 \
            or content[0].get("type") != "text":
        raise ValueError("messages[0] is not a one-text system message")
    out: dict[str, Any] = {}
    for key, value in request.items():
        if key == "system":
            raise ValueError("a v3 request carries a top-level system")
        out[key] = messages[1:] if key == "messages" else value
        if key == "messages":
            out["system"] = content[0]["text"]
    encoded: bytes = dumps_bytes(out)
    return encoded


def compare(v0: Path, v3: Path) -> int:
    started = time.perf_counter()
    count = volume = 0
    old_iter, new_iter = requests(v0), requests(v3)
    while True:
        old, new = next(old_iter, None), next(new_iter, None)
        if old is None or new is None:
            if old is not None or new is not None:
                extra = "v0" if old is not None else "v3"
                print(f"FAIL: the {extra} log has more requests (after {count} equal ones)", file=sys.stderr)
                return 1
            break
        key_old, key_new = (old.turn, old.step, old.attempt), (new.turn, new.step, new.attempt)
        label = "{}.{}#{}".format(*key_old)
        if key_old != key_new:
            print(f"FAIL: request {count}: v0 {label} aligned with v3 {'{}.{}#{}'.format(*key_new)}", file=sys.stderr)
            return 1
        if old.body is None or new.body is None:
            print(f"FAIL: {label}: no body (v0 {old.body is not None}, v3 {new.body is not None})", file=sys.stderr)
            return 1
        try:
            moved = as_v0(new.body)
        except ValueError as err:
            print(f"FAIL: {label}: v3 body: {err}", file=sys.stderr)
            return 1
        if moved != old.body:
            at = next((i for i, (a, b) in enumerate(zip(moved, old.body, strict=False)) if a != b),
                      min(len(moved), len(old.body)))
            print(f"FAIL: {label}: bodies differ at byte {at}: v0 {old.body[at - 60:at + 60]!r} "
                  f"v3 {moved[at - 60:at + 60]!r}", file=sys.stderr)
            return 1
        count += 1
        volume += len(old.body)
    print(f"OK: {count:,} requests equal (v3 with its system head moved back into `system`), "
          f"{volume / 1e6:,.0f} MB of v0 bodies, in {time.perf_counter() - started:.1f}s: {v0} = {v3}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", nargs="*", type=Path, metavar="V0 V3")
    parser.add_argument("--size", help="generate both twins of this size first, e.g. 2MB")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--compaction", choices=("once", "pressure"), default="pressure")
    args = parser.parse_args(argv)
    if args.size:
        if args.logs:
            parser.error("give either two logs or --size")
        stem = HERE / "data" / f"gencheck-{args.size.lower()}-{args.compaction}-seed{args.seed}"
        paths = [stem.with_name(stem.name + ".jsonl"), stem.with_name(stem.name + ".v3.jsonl")]
        for generation, path in zip((0, 3), paths, strict=True):
            subprocess.run([sys.executable, str(HERE / "generate_log.py"), "--size", args.size, "--seed",
                            str(args.seed), "--compaction", args.compaction, "--generation", str(generation),
                            "--out", str(path)], check=True)
    elif len(args.logs) == 2:
        paths = args.logs
    else:
        parser.error("give two logs (v0, then v3) or --size")
    return compare(paths[0], paths[1])


if __name__ == "__main__":
    sys.exit(main())
