"""Self-check of a generated log (independent of dsh_audit): `python benchmarks/generate_log.py --check PATH`.

Checks the on-disk form (header line, envelope key order, packed-row shape, contiguous seq, monotone time)
and the semantics the generator promises: surface ops name live nodes, replaces cite what they shadow, a
tool-result replace changes only the masked text, assistant/message cites exactly its attempt's chunks and
matches the streamed blocks, tool results cite their tool/call, turns and steps nest, headers go
initial → change. Prints a byte breakdown and the request-volume estimate the benchmark will face.
"""

from __future__ import annotations

import copy
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from logio import PACKED_TYPES, expand, iter_lines

EVENT_KEYS = ("type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp")
HEADER_KEYS = ["type", "version", "id", "createdAt", "cwd", "delegationDepth"]
SURFACE = {"user/message", "assistant/message", "tool/result"}
ROW_DATA_KEYS = {"text-chunks": ["turn", "step", "index", "dt", "texts"],
                 "reasoning-chunks": ["turn", "step", "index", "dt", "texts"],
                 "tool-call-chunks": ["turn", "step", "index", "dt", "id", "name", "args"]}


class CheckError(Exception):
    pass


def masked(data: dict[str, Any]) -> dict[str, Any]:
    clone = copy.deepcopy(data)
    clone["message"]["content"][0]["content"] = None
    return clone


class Checker:
    def __init__(self) -> None:
        self.seq = 0
        self.time = -1
        self.nodes: list[int] = []
        self.live: dict[int, dict[str, Any]] = {}  # live node seq -> event (kept to check replaces)
        self.node_bytes: dict[int, int] = {}
        self.calls: dict[int, str] = {}
        self.turn: int | None = None
        self.step: int | None = None
        self.attempt: list[dict[str, Any]] = []
        self.last_attempt: list[dict[str, Any]] = []
        self.headers: list[dict[str, Any]] = []
        self.bytes_by: Counter[str] = Counter()
        self.count_by: Counter[str] = Counter()
        self.requests = 0
        self.request_volume = 0  # sum of live surface bytes at each dispatch: what rebuilt bodies will weigh
        self.surface_bytes = 0
        self.max_surface = 0

    def fail(self, event: dict[str, Any], why: str) -> None:
        raise CheckError(f"seq {event.get('seq')}: {event.get('type')}: {why}")

    def record(self, line: bytes) -> None:
        obj = orjson.loads(line)
        kind = obj.get("type")
        if kind in PACKED_TYPES:
            if list(obj) != ["type", "seq0", "time0", "data"]:
                raise CheckError(f"seq {self.seq}: {kind}: envelope keys {list(obj)}")
            data = obj["data"]
            want = [k for k in ROW_DATA_KEYS[kind] if k != "name" or "name" in data]
            if list(data) != want:
                raise CheckError(f"seq {self.seq}: {kind}: data keys {list(data)}")
            members = data["args" if kind == "tool-call-chunks" else "texts"]
            if len(members) < 3 or len(data["dt"]) != len(members) - 1:
                raise CheckError(f"seq {self.seq}: {kind}: {len(members)} members, {len(data['dt'])} gaps")
            self.bytes_by[kind] += len(line)
            self.count_by[kind] += 1
            for event in expand(obj):
                self.event(event, 0)
        else:
            self.bytes_by[kind] += len(line)
            self.count_by[kind] += 1
            self.event(obj, len(line))

    def event(self, ev: dict[str, Any], nbytes: int) -> None:
        keys = list(ev)
        if keys != [k for k in EVENT_KEYS if k in ev] or keys[:4] != list(EVENT_KEYS[:4]):
            self.fail(ev, f"key order {keys}")
        if ev["seq"] != self.seq:
            self.fail(ev, f"expected seq {self.seq}")
        if not isinstance(ev["time"], int) or ev["time"] < self.time:
            self.fail(ev, "time not monotone")
        self.seq += 1
        self.time = ev["time"]
        kind, data = ev["type"], ev["data"]
        if kind == "assistant/chunk":
            self.chunk(ev)
        elif self.attempt:
            self.close_attempt()
        if kind in SURFACE:
            self.surface(ev, nbytes)
        elif "surfaceOp" in ev or "sourceEventSeqs" in ev:
            self.fail(ev, "non-surface event carries surface fields")
        if kind == "turn/start":
            if self.turn is not None:
                self.fail(ev, "turn already open")
            self.turn = data["turn"]
        elif kind == "turn/end":
            if self.turn != data["turn"] or self.step is not None:
                self.fail(ev, "turn/end does not close the open turn")
            self.turn = None
        elif kind == "step/start":
            if self.turn != data["turn"] or self.step is not None:
                self.fail(ev, "step/start outside a turn or inside a step")
            self.step = data["step"]
        elif kind == "step/end":
            if self.step != data["step"]:
                self.fail(ev, "step/end does not close the open step")
            self.step = None
        elif kind == "tool/call":
            self.calls[ev["seq"]] = data["callId"]
        elif kind == "request/header":
            want = "initial" if not self.headers else "change"
            if data["reason"] != want:
                self.fail(ev, f"reason {data['reason']}, expected {want}")
            if self.headers and orjson.dumps(self.headers[-1]) == orjson.dumps(data["header"]):
                self.fail(ev, "change header equals the previous one")
            self.headers.append(data["header"])

    def chunk(self, ev: dict[str, Any]) -> None:
        data = ev["data"]
        if (data["turn"], data["step"]) != (self.turn, self.step):
            self.fail(ev, "chunk outside its step")
        if not self.attempt:
            self.requests += 1
            self.request_volume += self.surface_bytes
            if not self.headers:
                self.fail(ev, "dispatch before any request/header")
        self.attempt.append(ev)
        if data["chunk"]["type"] == "finish":
            self.close_attempt()

    def close_attempt(self) -> None:
        self.last_attempt, self.attempt = self.attempt, []

    def surface(self, ev: dict[str, Any], nbytes: int) -> None:
        op, src, seq = ev.get("surfaceOp"), ev.get("sourceEventSeqs"), ev["seq"]
        if src is not None and (len(set(src)) != len(src) or any(s >= seq or s < 0 for s in src) or not src):
            self.fail(ev, "sourceEventSeqs not unique, non-empty and earlier")
        if ev["type"] == "assistant/message":
            self.check_assistant(ev)
        if ev["type"] == "tool/result" and op == "append":
            result = ev["data"]["message"]["content"]
            if len(result) != 1 or src is None or self.calls.get(src[0]) != result[0]["toolCallId"]:
                self.fail(ev, "tool/result does not cite its tool/call")
        if op == "append":
            self.nodes.append(seq)
        elif isinstance(op, dict) and list(op) == ["op", "start", "end"] and op["op"] == "replace":
            if op["start"] not in self.live or op["end"] not in self.live:
                self.fail(ev, f"replace names a dead node {op}")
            i, j = self.nodes.index(op["start"]), self.nodes.index(op["end"])
            shadowed = self.nodes[i:j + 1]
            if i > j or src is None or not set(shadowed) <= set(src):
                self.fail(ev, "replace range inverted or shadowed nodes not cited")
            if ev["type"] == "tool/result":
                old = self.live[shadowed[0]]
                if len(shadowed) != 1 or old["type"] != "tool/result" or masked(old["data"]) != masked(ev["data"]):
                    self.fail(ev, "tool-result replace must rewrite one tool/result's text only")
            for s in shadowed:
                del self.live[s]
                self.surface_bytes -= self.node_bytes.pop(s)
            self.nodes[i:j + 1] = [seq]
        else:
            self.fail(ev, f"bad surfaceOp {op!r}")
        self.live[seq] = ev if ev["type"] == "tool/result" else {"type": ev["type"]}
        self.node_bytes[seq] = nbytes
        self.surface_bytes += nbytes
        self.max_surface = max(self.max_surface, self.surface_bytes)

    def check_assistant(self, ev: dict[str, Any]) -> None:
        chunks = self.last_attempt
        if ev["sourceEventSeqs"] != [c["seq"] for c in chunks]:
            self.fail(ev, "assistant/message does not cite exactly its attempt's chunks")
        streamed: dict[int, dict[str, Any]] = {}
        for c in chunks:
            chunk = c["data"]["chunk"]
            if chunk["type"] == "block-start":
                kind = chunk["blockType"]
                streamed[chunk["index"]] = {"type": kind, "text": ""} if kind != "tool-call" else {
                    "type": kind, "id": None, "name": None, "arguments": ""}
            elif chunk["type"] in ("text-delta", "reasoning-delta"):
                streamed[chunk["index"]]["text"] += chunk["text"]
            elif chunk["type"] == "tool-call-delta":
                block = streamed[chunk["index"]]
                block["id"], block["name"] = chunk["id"], chunk.get("name")
                block["arguments"] += chunk["argumentsDelta"]
            elif chunk["type"] == "block-end" and chunk["block"] != streamed[chunk["index"]]:
                self.fail(c, "block-end differs from its deltas")
        if ev["data"]["message"]["content"] != [streamed[i] for i in sorted(streamed)]:
            self.fail(ev, "assistant content differs from the streamed blocks")
        self.last_attempt = []


def main(path: Path) -> int:
    checker = Checker()
    lines = iter_lines(path)
    try:
        header = orjson.loads(next(lines))
        if list(header) != HEADER_KEYS or header["version"] != 0 or header["type"] != "session":
            raise CheckError(f"bad header line {header}")
        for line in lines:
            checker.record(line)
        if checker.turn is not None:
            raise CheckError("log ends inside an open turn")
    except CheckError as err:
        print(f"{path}: FAIL: {err}", file=sys.stderr)
        return 1
    total = sum(checker.bytes_by.values())
    chunk_bytes = sum(n for k, n in checker.bytes_by.items() if k in PACKED_TYPES or k == "assistant/chunk")
    print(f"{path}: OK: {checker.seq:,} events in {sum(checker.count_by.values()):,} lines, "
          f"{checker.requests:,} requests, {len(checker.headers)} headers, "
          f"{checker.count_by['compaction/summary']} compactions, {checker.count_by['compaction/prune']} prunes")
    print(f"  chunk streams {chunk_bytes / total:.1%} of {total:,} bytes; live surface peak "
          f"{checker.max_surface:,} B; request volume (sum of surface bytes per dispatch) "
          f"{checker.request_volume:,} B")
    for kind, n in checker.bytes_by.most_common(8):
        print(f"  {kind:22} {n / total:6.1%} {checker.count_by[kind]:>10,} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
