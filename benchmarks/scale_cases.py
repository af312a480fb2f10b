"""Adversarial scale cases from issues 12 and 18, generated and timed: single-node replaces, header churn, many
logs, many steps, a packed run of millions of members.

    python benchmarks/scale_cases.py replaces --count 20000 --out benchmarks/data/replaces.jsonl
    python benchmarks/scale_cases.py churn --count 20000 --out benchmarks/data/churn.jsonl [--generation 3]
    python benchmarks/scale_cases.py many --count 300 --out benchmarks/data/many
    python benchmarks/scale_cases.py steps --count 1000000 --out benchmarks/data/steps.jsonl
    python benchmarks/scale_cases.py packed --count 5000000 --generation 2 --out benchmarks/data/packed.jsonl
    python benchmarks/scale_cases.py memory --count 1000000     # peak RSS of the steps and packed cases
    python benchmarks/scale_cases.py time --sizes 5000,10000,20000      # both cases at each size: s, peak MB

`replaces`: a v0 log of COUNT user messages, then COUNT user/message replaces of one node each (start ==
end), then one request: 8.3 MB at 20k. Before the fix a replace rebuilt the visible message list (and
searched the node list), so the fold took time quadratic in the replaces (about 40 s of CPU for 20k).

`churn`: a log of COUNT request/header events, each changing `config.temperature`, with a 40-line system
prompt (v0: in the header; v3: a `system/message` head of 40 text blocks) and 15 tools. header-diff used to
keep every snapshot of every log until the end.

`many`: COUNT small logs in one folder (header-diff used to hold every one open: "Too many open files" under
`ulimit -n 200` at 300 logs).

`steps`: one turn of COUNT one-request steps, the surface compacted every 1,000 (730 MB at 1M). verify
--format json used to keep 2.5 KB per request (2,487 MB at 1M).

`packed`: one answer of COUNT text deltas in one packed run: a v0 row or (--generation 2) a v2 stream record;
55 MB at 5M. Parsed, each member is a Python object (13 times the line); a run of more than 2**20 members is
refused before the parse (dsh_audit.readers.packed.MAX_MEMBERS).

`memory` writes both into --out (a folder) and prints the peak RSS of verify --format json over COUNT steps in
both engines, and of verify and cache-report over the 5M-member run.

`time` runs `rebuild --format digest` on `replaces` and `header-diff --format csv` on `churn` at each size in
a child process, and prints wall time and peak RSS, and the ratio between consecutive sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HEADER = {"type": "session", "version": 0, "id": "scale", "createdAt": 0, "delegationDepth": 0}
CONFIG = {"provider": "deepseek-official", "model": "deepseek-v4-flash"}


def _user(text: str, uid: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "source": {"kind": "user"}, "role": "user", "id": uid}


class _Writer:
    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.handle = path.open("w", encoding="utf-8")
        self.seq = 0
        self.handle.write(json.dumps(header, separators=(",", ":")) + "\n")

    def add(self, type_: str, data: Any, **envelope: Any) -> int:
        seq = self.seq
        self.handle.write(json.dumps({"type": type_, "seq": seq, "time": seq, "data": data, **envelope},
                                            separators=(",", ":")) + "\n")
        self.seq += 1
        return seq

    def header(self, step: int) -> None:
        self.add("request/header", {"header": {"config": CONFIG, "system": "sys"},
                                    "reason": "initial" if step == 1 else "step"})

    def response(self, turn: int, step: int, text: str) -> None:
        chunks = [self.add("assistant/chunk", {"turn": turn, "step": step, "chunk": {
            "type": "text-delta", "index": 0, "text": text}}),
                  self.add("assistant/chunk", {"turn": turn, "step": step, "chunk": {
                      "type": "finish", "reason": {"kind": "stop"}}})]
        self.add("assistant/message", {"turn": turn, "step": step, "message": {
            "role": "assistant", "content": [{"type": "text", "text": text}],
            "source": {"kind": "model", **CONFIG}, "id": f"a{turn}.{step}"}},
                 sourceEventSeqs=chunks, surfaceOp="append")

    def close(self) -> None:
        self.handle.close()


def write_replaces(path: Path, count: int, *, requests_every: int = 0) -> Path:
    """COUNT appended user messages, COUNT single-node replaces (one per message), one request; with
    `requests_every`, a request after every that many replaces too (each request pins the visible list)."""
    out = _Writer(path, HEADER)
    out.add("turn/start", {"turn": 1})
    out.add("step/start", {"turn": 1, "step": 1})
    nodes = [out.add("user/message", _user(f"note {k}", f"u{k}"), surfaceOp="append") for k in range(count)]
    step = 1
    for k, node in enumerate(nodes):
        out.add("user/message", _user(f"edited {k}", f"r{k}"), sourceEventSeqs=[node],
                surfaceOp={"op": "replace", "start": node, "end": node})   # v0 spelling
        if requests_every and (k + 1) % requests_every == 0:
            out.header(step)
            out.response(1, step, "ok")
            out.add("step/end", {"turn": 1, "step": step})
            step += 1
            out.add("step/start", {"turn": 1, "step": step})
    out.header(step)
    out.response(1, step, "done")
    out.add("step/end", {"turn": 1, "step": step})
    out.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    out.close()
    return path


SYSTEM_LINES = [f"Rule {k}: " + "be exact about what the log says " * 3 for k in range(40)]
TOOLS = [{"name": f"tool_{k}", "description": "does a thing " * 5,
          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}} for k in range(15)]


def write_churn(path: Path, count: int, *, generation: int = 0) -> Path:
    """COUNT request/header events, each changing config.temperature; one turn, one user message."""
    out = _Writer(path, {**HEADER, "version": generation})
    if generation >= 3:
        out.add("system/message", {"message": {"role": "system", "content": [
            {"type": "text", "text": line + "\n"} for line in SYSTEM_LINES]}}, surfaceOp="append")
    out.add("turn/start", {"turn": 1})
    out.add("step/start", {"turn": 1, "step": 1})
    out.add("user/message", _user("go", "u0"), surfaceOp="append")
    for k in range(count):
        header: dict[str, Any] = {"config": {**CONFIG, "temperature": k}, "tools": TOOLS}
        if generation < 3:
            header["system"] = "\n".join(SYSTEM_LINES)
        out.add("request/header", {"header": header, "reason": "initial" if k == 0 else "change"})
    out.response(1, 1, "done")
    out.add("step/end", {"turn": 1, "step": 1})
    out.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    out.close()
    return path


def write_steps(path: Path, count: int, *, compact_every: int = 1000) -> Path:
    """One turn of COUNT steps, each one request answered "ok", with a compaction of the surface every
    `compact_every` steps: the live surface stays small, so memory that grows with COUNT is kept per request."""
    out = _Writer(path, HEADER)
    out.add("turn/start", {"turn": 1})
    nodes: list[int] = []
    for step in range(1, count + 1):
        out.add("step/start", {"turn": 1, "step": step})
        if step == 1:
            nodes.append(out.add("user/message", _user("go", "u0"), surfaceOp="append"))
            out.header(step)
        if len(nodes) >= compact_every:
            nodes = [_compact(out, nodes, f"c{step}")]
        out.response(1, step, "ok")
        nodes.append(out.seq - 1)
        out.add("step/end", {"turn": 1, "step": step})
    out.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    out.close()
    return path


def _compact(out: _Writer, nodes: list[int], cid: str) -> int:
    """A compaction replacing `nodes` with one summary message; its seq."""
    start = out.add("compaction/start", {"compactionId": cid, "turn": 1})
    summary = [{"type": "text", "text": "so far"}]
    told = out.add("compaction/summary", {
        "compactionId": cid, "summary": summary, "rawOutput": summary, "llmStreamCall": True,
        "shadowedRange": {"start": nodes[0], "end": nodes[-1]}, "shadowedSeqs": nodes, "shadowedTokenCount": 10,
        "provider": CONFIG["provider"], "model": CONFIG["model"], "maxTokens": 8192,
        "usage": {"inputTokens": 10, "outputTokens": 5}})
    message = {"content": summary, "source": {"kind": "plugin", "plugin": "compact", "compactionId": cid},
               "role": "user", "id": f"m-{cid}"}
    seq = out.add("user/message", message, sourceEventSeqs=[start, told, *nodes],
                  surfaceOp={"op": "replace", "start": nodes[0], "end": nodes[-1]})
    out.add("compaction/end", {"compactionId": cid, "turn": 1})
    return seq


def write_packed(path: Path, members: int, *, generation: int = 2) -> Path:
    """One request answered by one text block of MEMBERS deltas "ab", 1 ms apart: a v0 packed row (the message
    citing every member) or, from v2, a text-chunks run in the message's stream. At 5M members the line is 55 MB."""
    out = _Writer(path, {**HEADER, "version": generation, "isSeeded": False})
    out.add("turn/start", {"turn": 1})
    out.add("step/start", {"turn": 1, "step": 1})
    out.add("user/message", _user("go", "u0"), surfaceOp="append")
    out.header(1)
    text = "ab" * members
    message = {"role": "assistant", "content": [{"type": "text", "text": text}],
               "source": {"kind": "model", **CONFIG}, "id": "a1.1"}
    run = {"index": 0, "dt": [1] * (members - 1), "texts": ["ab"] * members}
    if generation < 2:
        first = out.seq
        out.handle.write(json.dumps({"type": "text-chunks", "seq0": first, "time0": first,
                                     "data": {"turn": 1, "step": 1, **run}}, separators=(",", ":")) + "\n")
        out.seq += members
        finish = out.add("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "finish",
                                                                          "reason": {"kind": "stop"}}})
        out.add("assistant/message", {"turn": 1, "step": 1, "message": message},
                sourceEventSeqs=[*range(first, first + members), finish], surfaceOp="append")
    else:
        stream = [{"type": "chunk", "time": 0, "chunk": {"type": "block-start", "index": 0, "blockType": "text"}},
                  {"type": "text-chunks", "time0": 0, **run},
                  {"type": "chunk", "time": 0, "chunk": {"type": "block-end", "index": 0,
                                                         "block": {"type": "text", "text": text}}},
                  {"type": "chunk", "time": 0, "chunk": {"type": "finish", "reason": {"kind": "stop"}}}]
        out.add("assistant/message", {"turn": 1, "step": 1, "message": message, "stream": stream},
                surfaceOp="append")
    out.add("step/end", {"turn": 1, "step": 1})
    out.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    out.close()
    return path


def write_many(folder: Path, count: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for k in range(count):
        out = _Writer(folder / f"log-{k:04d}.jsonl", {**HEADER, "id": f"s-{k:04d}"})
        out.add("turn/start", {"turn": 1})
        out.add("step/start", {"turn": 1, "step": 1})
        out.add("request/header", {"header": {"config": CONFIG, "system": "sys"}, "reason": "initial"})
        out.add("user/message", _user("hi", "u0"), surfaceOp="append")
        out.response(1, 1, "hello")
        out.add("step/end", {"turn": 1, "step": 1})
        out.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        out.close()
    return folder


def _timed(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of `audit ARGS` in a child process."""
    code = ("import resource, sys, time\n"
            "from dsh_audit.cli import main\n"
            "start = time.perf_counter()\n"
            "try:\n"
            "    main(sys.argv[1:], standalone_mode=False)\n"
            "except SystemExit:\n"
            "    pass\n"
            "print(time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,"
            " file=sys.stderr)\n")
    # stdout is not kept: a child's peak RSS starts from its parent's (Linux carries it across exec), so this
    # process must stay small
    done = subprocess.run([sys.executable, "-c", code, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, check=False, env={**os.environ, **(env or {})})
    seconds, peak = done.stderr.strip().splitlines()[-1].split()
    return float(seconds), float(peak)


def time_cases(sizes: list[int], data: Path) -> None:
    data.mkdir(parents=True, exist_ok=True)
    for name, write, command in (
            ("replaces", write_replaces, ["rebuild", "--format", "digest"]),
            ("churn v0", lambda p, n: write_churn(p, n), ["header-diff", "--format", "csv"]),
            ("churn v3", lambda p, n: write_churn(p, n, generation=3), ["header-diff", "--format", "csv"])):
        previous: tuple[int, float, float] | None = None
        for size in sizes:
            path = write(data / f"{name.replace(' ', '-')}-{size}.jsonl", size)
            seconds, peak = _timed([*command, str(path)])
            ratio = (f"  x{seconds / previous[1]:.1f} time, +{peak - previous[2]:.0f} MB for x{size / previous[0]:.0f}"
                     f" size" if previous else "")
            print(f"{name:<9} {size:>7}  {path.stat().st_size / 1e6:6.1f} MB  {seconds:7.2f} s  {peak:7.0f} MB peak"
                  f"{ratio}")
            previous = (size, seconds, peak)


def memory_cases(data: Path, steps: int) -> None:
    """Peak RSS of verify --format json over STEPS steps, and of verify and cache-report over a 55 MB line
    holding a packed run of 5M members (refused by the member cap: one line, exit 2), in both engines."""
    data.mkdir(parents=True, exist_ok=True)
    log = write_steps(data / f"steps-{steps}.jsonl", steps)
    for engine in ("1", "0"):
        seconds, peak = _timed(["verify", "--format", "json", str(log)], {"DSH_AUDIT_FAST_PATH": engine})
        print(f"verify --format json, {steps:,} steps, fast path {engine}: {log.stat().st_size / 1e6:.0f} MB  "
              f"{seconds:.1f} s  {peak:.0f} MB peak")
    for generation in (0, 2):
        line = data / f"packed-v{generation}.jsonl"   # written by a child, for the reason in _timed
        subprocess.run([sys.executable, __file__, "packed", "--count", "5000000", "--generation", str(generation),
                        "--out", str(line)], check=True)
        for command in (["verify"], ["cache-report"]):
            seconds, peak = _timed([*command, str(line)])
            print(f"{command[0]} v{generation}, a run of 5M members: {line.stat().st_size / 1e6:.0f} MB  "
                  f"{seconds:.1f} s  {peak:.0f} MB peak")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", choices=["replaces", "churn", "steps", "packed", "many", "time", "memory"])
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/data/scale"))
    parser.add_argument("--generation", type=int, default=0)
    parser.add_argument("--sizes", default="5000,10000,20000")
    args = parser.parse_args(argv)
    if args.case == "replaces":
        write_replaces(args.out, args.count)
    elif args.case == "churn":
        write_churn(args.out, args.count, generation=args.generation)
    elif args.case == "steps":
        write_steps(args.out, args.count)
    elif args.case == "packed":
        write_packed(args.out, args.count, generation=args.generation)
    elif args.case == "many":
        write_many(args.out, args.count)
    elif args.case == "memory":
        memory_cases(args.out, args.count)
    else:
        time_cases([int(size) for size in args.sizes.split(",")], args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
