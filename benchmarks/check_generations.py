"""Check that a v3 or v4 twin carries the same requests as its v0 log, with dsh_audit's own reconstruction.

    python benchmarks/check_generations.py V0.jsonl V3_OR_V4.jsonl
    python benchmarks/check_generations.py --size 2MB [--seed 1] [--compaction pressure] [--generation 4]

The second form writes both twins with generate_log.py (into benchmarks/data/, gitignored) and compares them.

"Same content": the same messages in the same order and the same requests. Format v3 moves the system prompt
from the header into a surface `system/message` head, so a v3 request is `{...config, messages, tools?}` with the
prompt as `messages[0]` (role system) where v0 has `{...config, messages, system, tools?}`. Both logs are rebuilt
by `dsh_audit.iter_requests` (bodies on), streamed in lockstep and aligned by turn.step#attempt; each v3 body gets
its leading system message moved back into a top-level `system` after `messages` and must then equal the v0 body
byte for byte (`dsh_audit.jsjson`, JSON.stringify's bytes). Exits 1 on the first difference.

A v4 body is first taken back to v3 message by message (`as_v3`), the inverse of the v3->v4 edge's mapping: a
tool-role message becomes the user message of one tool-result block, a producer kind the plugin source it names
(`system-prompt`, `runtime-context`, `compact-checkpoint`; any other kind fails), and a developer message, which
v3 has not, is dropped (the generator's v4 twin announces its tool change with one).
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
from dsh_audit.records import LogSource

HERE = Path(__file__).resolve().parent
SYSTEM_PLUGIN = "@deepseek-ai/dsh-system-prompt"
PLUGINS = {"system-prompt": SYSTEM_PLUGIN, "runtime-context": SYSTEM_PLUGIN, "compact-checkpoint": "compact"}
UNCHANGED_KINDS = frozenset({"user", "model", "tool"})   # sources that were no plugin's in v3 either


def source_of(path: Path) -> LogSource:
    sources = list(open_logs(path))
    if len(sources) != 1:
        raise SystemExit(f"{path}: expected one session, found {len(sources)}")
    return sources[0]


def requests(path: Path) -> Iterator[RebuiltRequest]:
    yield from iter_requests(source_of(path), bodies=True)


def v3_source(source: dict[str, Any]) -> dict[str, Any]:
    kind = source.get("kind")
    if kind in UNCHANGED_KINDS:
        return source
    if kind not in PLUGINS:
        raise ValueError(f"source kind {kind!r} names no plugin this check knows")
    return {"kind": "plugin", "plugin": PLUGINS[kind], **{k: v for k, v in source.items() if k != "kind"}}


def as_v3(body: bytes) -> tuple[bytes, int]:
    """A v4 request body with its messages as v3 carried them, and how many developer messages it dropped."""
    request: dict[str, Any] = orjson.loads(body)
    messages, dropped = [], 0
    for message in request["messages"]:
        if message["role"] == "developer":
            dropped += 1
            continue
        if message["role"] == "tool":
            block = {"type": "tool-result", "toolCallId": message["toolCallId"], "content": message["content"]}
            if "isError" in message:
                block["isError"] = message["isError"]
            message = {"source": message["source"], "content": [block], "role": "user", "id": message["id"]}
        messages.append({**message, "source": v3_source(message["source"])})
    encoded: bytes = dumps_bytes({**request, "messages": messages})
    return encoded, dropped


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
    count = volume = developer = 0
    generation = source_of(v3).generation.version
    if generation not in (3, 4):
        print(f"FAIL: {v3} is format v{generation}, not v3 or v4", file=sys.stderr)
        return 1
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
            body = new.body
            if generation == 4:
                body, dropped = as_v3(body)
                developer += bool(dropped)
            moved = as_v0(body)
        except ValueError as err:
            print(f"FAIL: {label}: v{generation} body: {err}", file=sys.stderr)
            return 1
        if moved != old.body:
            at = next((i for i, (a, b) in enumerate(zip(moved, old.body, strict=False)) if a != b),
                      min(len(moved), len(old.body)))
            print(f"FAIL: {label}: bodies differ at byte {at}: v0 {old.body[at - 60:at + 60]!r} "
                  f"v{generation} {moved[at - 60:at + 60]!r}", file=sys.stderr)
            return 1
        count += 1
        volume += len(old.body)
    how = "with its system head moved back into `system`" if generation == 3 else (
        f"as v3, then with its system head moved back into `system`; {developer:,} of them carry the developer "
        "message")
    print(f"OK: {count:,} requests equal (v{generation} {how}), "
          f"{volume / 1e6:,.0f} MB of v0 bodies, in {time.perf_counter() - started:.1f}s: {v0} = {v3}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", nargs="*", type=Path, metavar="V0 V3_OR_V4")
    parser.add_argument("--size", help="generate both twins of this size first, e.g. 2MB")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--compaction", choices=("once", "pressure"), default="pressure")
    parser.add_argument("--generation", type=int, choices=(3, 4), default=3, help="the twin to write with --size")
    args = parser.parse_args(argv)
    if args.size:
        if args.logs:
            parser.error("give either two logs or --size")
        stem = HERE / "data" / f"gencheck-{args.size.lower()}-{args.compaction}-seed{args.seed}"
        paths = [stem.with_name(stem.name + ".jsonl"), stem.with_name(stem.name + f".v{args.generation}.jsonl")]
        for generation, path in zip((0, args.generation), paths, strict=True):
            subprocess.run([sys.executable, str(HERE / "generate_log.py"), "--size", args.size, "--seed",
                            str(args.seed), "--compaction", args.compaction, "--generation", str(generation),
                            "--out", str(path)], check=True)
    elif len(args.logs) == 2:
        paths = args.logs
    else:
        parser.error("give two logs (v0, then v3 or v4) or --size")
    return compare(paths[0], paths[1])


if __name__ == "__main__":
    sys.exit(main())
