"""Adversarial scale cases from issue 12, generated and timed: single-node replaces, header churn, many logs.

    python benchmarks/scale_cases.py replaces --count 20000 --out benchmarks/data/replaces.jsonl
    python benchmarks/scale_cases.py churn --count 20000 --out benchmarks/data/churn.jsonl [--generation 3]
    python benchmarks/scale_cases.py many --count 300 --out benchmarks/data/many
    python benchmarks/scale_cases.py time --sizes 5000,10000,20000      # both cases at each size: s, peak MB

`replaces`: a v0 log of COUNT user messages, then COUNT user/message replaces of one node each (start ==
end), then one request: 8.3 MB at 20k. Before the fix a replace rebuilt the visible message list (and
searched the node list), so the fold took time quadratic in the replaces (about 40 s of CPU for 20k).

`churn`: a log of COUNT request/header events, each changing `config.temperature`, with a 40-line system
prompt (v0: in the header; v3: a `system/message` head of 40 text blocks) and 15 tools. header-diff used to
keep every snapshot of every log until the end.

`many`: COUNT small logs in one folder (header-diff used to hold every one open: "Too many open files" under
`ulimit -n 200` at 300 logs).

`time` runs `rebuild --format digest` on `replaces` and `header-diff --format csv` on `churn` at each size in
a child process, and prints wall time and peak RSS, and the ratio between consecutive sizes.
"""

from __future__ import annotations

import argparse
import json
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


def _timed(args: list[str]) -> tuple[float, float]:
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
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=False)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", choices=["replaces", "churn", "steps", "many", "time"])
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
    elif args.case == "many":
        write_many(args.out, args.count)
    else:
        time_cases([int(size) for size in args.sizes.split(",")], args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
