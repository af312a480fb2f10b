"""Self-check of a generated log (independent of dsh_audit): `python benchmarks/generate_log.py --check PATH`.

Checks the on-disk form (header line, envelope key order, packed-row shape, contiguous seq, monotone time)
and the semantics the generator promises: surface ops name live nodes, replaces cite what they shadow, a
tool-result replace changes only the masked text, assistant/message cites exactly its attempt's chunks and
matches the streamed blocks, tool results cite their tool/call, compactions and titles name live nodes, turns
and steps nest, headers go initial → change. Prints a byte breakdown and the request-volume estimate the
benchmark will face.

Format v3 logs (`generate_log.py --generation 3`) get the same checks, read the v3 way: one event per row (no
packed rows, no top-level chunks); each attempt's chunks are the `stream` of its settlement (`assistant/message`
without `sourceEventSeqs`, or `assistant/attempt` for a failed attempt), packed canonically (every delta in a
`*-chunks` record, no two adjacent records the v2 writer would have merged); the system prompt is a
`system/message` head, node 0, that no replace or compaction shadows; headers carry no `system`; replaces are
`{op, startSeq, endSeq}`.

Format v4 logs (`--generation 4`) are read as v3, and: a tool result is a tool-role message whose toolCallId is its
source's callId (a rewrite changes only its content); sources name their producer (`system-prompt` on the head,
no `plugin` kind); a `developer/message` (tool-registry source, tool-addition/removal blocks) follows, in the open
step, each header that changes the tool set, naming it by `headerSeq` when it adds a tool, and announcing exactly
that change.
"""

from __future__ import annotations

import copy
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from logio import PACKED_TYPES, expand, expand_stream, iter_lines

EVENT_KEYS = ("type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp")
HEADER_KEYS = {0: ["type", "version", "id", "createdAt", "cwd", "delegationDepth"],
               3: ["type", "version", "id", "createdAt", "cwd", "isSeeded", "delegationDepth"],
               4: ["type", "version", "id", "createdAt", "cwd", "isSeeded", "delegationDepth"]}
SURFACE = {0: {"user/message", "assistant/message", "tool/result"},
           3: {"user/message", "assistant/message", "tool/result", "system/message"},
           4: {"user/message", "assistant/message", "tool/result", "system/message", "developer/message"}}
REPLACE_KEYS = {0: ["op", "start", "end"], 3: ["op", "startSeq", "endSeq"], 4: ["op", "startSeq", "endSeq"]}
SETTLEMENTS = {"assistant/message", "assistant/attempt"}
SYSTEM_SOURCE = {3: {"kind": "plugin", "plugin": "@deepseek-ai/dsh-system-prompt"}, 4: {"kind": "system-prompt"}}
SYSTEM_KEYS = {3: ["id", "role", "source", "content"], 4: ["role", "content", "source", "id"]}
TOOL_MESSAGE_KEYS = ["role", "source", "toolCallId", "content", "isError", "id"]
STREAM_KEYS = {"chunk": ["type", "time", "chunk"], "text-chunks": ["type", "time0", "index", "dt", "texts"],
               "reasoning-chunks": ["type", "time0", "index", "dt", "texts"],
               "tool-call-chunks": ["type", "time0", "index", "dt", "id", "name", "args"]}
RAW_CHUNKS = {"block-start", "block-end", "usage", "finish"}
ROW_DATA_KEYS = {"text-chunks": ["turn", "step", "index", "dt", "texts"],
                 "reasoning-chunks": ["turn", "step", "index", "dt", "texts"],
                 "tool-call-chunks": ["turn", "step", "index", "dt", "id", "name", "args"]}


class CheckError(Exception):
    pass


def masked(data: dict[str, Any]) -> dict[str, Any]:
    """A tool result's data with its text masked: v4's message content, or the content of v0-v3's one block."""
    clone = copy.deepcopy(data)
    if clone["message"]["role"] == "tool":
        clone["message"]["content"] = None
    else:
        clone["message"]["content"][0]["content"] = None
    return clone


class Checker:
    def __init__(self, generation: int = 0) -> None:
        self.gen = generation
        self.surface_types = SURFACE[generation]
        self.replace_keys = REPLACE_KEYS[generation]
        self.seq = 0
        self.time = self.prev_time = -1
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
        self.stream_bytes = 0  # v3: bytes of the embedded chunk streams
        self.user_seqs: set[int] = set()  # user/message seqs a session/title may cite
        self.head: int | None = None  # v3: seq of the system/message at surface node 0
        self.tool_change: tuple[int, set[str], set[str]] | None = None  # v4: header seq, tools added, removed

    def fail(self, event: dict[str, Any], why: str) -> None:
        raise CheckError(f"seq {event.get('seq')}: {event.get('type')}: {why}")

    def record(self, line: bytes) -> None:
        obj = orjson.loads(line)
        kind = obj.get("type")
        if self.gen >= 3 and (kind in PACKED_TYPES or kind == "assistant/chunk"):
            raise CheckError(f"seq {obj.get('seq', self.seq)}: {kind}: not a format v{self.gen} row (chunks live in "
                             "streams)")
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
        self.prev_time, self.time = self.time, ev["time"]
        kind, data = ev["type"], ev["data"]
        if kind == "assistant/chunk":
            self.chunk(ev)
        elif self.attempt:
            self.close_attempt()
        if self.gen >= 3 and kind in SETTLEMENTS:
            nbytes -= self.settlement(ev)
        if self.tool_change is not None and kind != "developer/message":
            self.fail(ev, f"the tools change of header seq {self.tool_change[0]} is not announced next")
        if kind in self.surface_types:
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
        elif kind in ("compaction/summary", "compaction/prune"):
            self.check_shadowed(ev)
        elif kind == "session/title":
            if not data["messageSeqs"] or not set(data["messageSeqs"]) <= self.user_seqs:
                self.fail(ev, "messageSeqs do not cite earlier user/message events")
        elif kind == "request/header":
            if self.gen >= 3 and (list(data["header"]) != [k for k in ("config", "adapterDefaults", "tools")
                                                            if k in data["header"]]):
                self.fail(ev, f"v{self.gen} header keys {list(data['header'])} (no system: it is a system/message)")
            want = "initial" if not self.headers else "change"
            if data["reason"] != want:
                self.fail(ev, f"reason {data['reason']}, expected {want}")
            if self.headers and orjson.dumps(self.headers[-1]) == orjson.dumps(data["header"]):
                self.fail(ev, "change header equals the previous one")
            if self.gen == 4 and self.headers:
                before = {tool["name"] for tool in self.headers[-1].get("tools", [])}
                after = {tool["name"] for tool in data["header"].get("tools", [])}
                if before != after:
                    self.tool_change = (ev["seq"], after - before, before - after)
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

    def settlement(self, ev: dict[str, Any]) -> int:
        """v3: validate the settlement's embedded stream and replay its chunks as the v0 chunk events; returns the
        stream's bytes (left out of the surface byte count, so the request-volume estimate matches the v0 twin's)."""
        data = ev["data"]
        want = (["turn", "step", "message", "usage", "stream"] if ev["type"] == "assistant/message"
                else ["turn", "step", "stream"])
        if list(data) != [k for k in want if k != "usage" or "usage" in data]:
            self.fail(ev, f"data keys {list(data)}")
        if ev["type"] == "assistant/message" and "sourceEventSeqs" in ev:
            self.fail(ev, "assistant/message embeds its stream and cannot carry sourceEventSeqs")
        stream = data["stream"]
        if not stream:
            self.fail(ev, "empty stream")
        prev: dict[str, Any] | None = None
        for record in stream:
            kind = record.get("type")
            keys = STREAM_KEYS.get(kind)
            if keys is None or list(record) != [k for k in keys if k != "name" or "name" in record]:
                self.fail(ev, f"stream record keys {list(record)}")
            if kind == "chunk":
                ctype = record["chunk"]["type"]
                if ctype not in RAW_CHUNKS and not (ctype == "tool-call-delta" and (
                        record["chunk"]["id"] == "" or record["chunk"].get("name") == "")):
                    self.fail(ev, f"raw {ctype} chunk: the v2+ writer packs deltas")
            else:
                members = record["args" if kind == "tool-call-chunks" else "texts"]
                if not members or len(record["dt"]) != len(members) - 1 or any(
                        not isinstance(d, int) or d < 0 for d in record["dt"]):
                    self.fail(ev, f"{kind}: {len(members)} members, dt {len(record['dt'])}")
                if kind == "tool-call-chunks" and not record["id"]:
                    self.fail(ev, "tool-call-chunks without an id")
                if prev is not None and prev["type"] == kind and prev["index"] == record["index"] and (
                        kind != "tool-call-chunks" or (prev["id"], prev.get("name"), "name" in prev)
                        == (record["id"], record.get("name"), "name" in record)):
                    self.fail(ev, f"{kind}: adjacent records the writer would have merged")
            prev = record
        chunks = expand_stream(stream)
        last_time = self.prev_time
        for time, chunk in chunks:
            if not isinstance(time, int) or time < last_time or time > ev["time"]:
                self.fail(ev, "stream times not monotone within the settlement's time")
            last_time = time
            self.chunk({"type": "assistant/chunk", "seq": ev["seq"], "time": time,
                        "data": {"turn": data["turn"], "step": data["step"], "chunk": chunk}})
        if self.attempt:
            self.fail(ev, "stream does not end with a finish chunk")
        failed = chunks[-1][1]["reason"]["kind"] == "error"
        if ev["type"] == "assistant/attempt" and (not failed or ev["time"] != last_time):
            self.fail(ev, "assistant/attempt: not a failed attempt settled at its last chunk")
        if ev["type"] == "assistant/message" and failed:
            self.fail(ev, "assistant/message settles a failed attempt")
        if ev["type"] == "assistant/attempt":
            self.last_attempt = []
        nbytes = len(orjson.dumps(stream)) + len(',"stream":')
        self.stream_bytes += nbytes
        return nbytes

    def check_shadowed(self, ev: dict[str, Any]) -> None:
        """A compaction's shadowedSeqs are an exact, live, contiguous surface span matching its shadowedRange."""
        data = ev["data"]
        seqs, span = data["shadowedSeqs"], data["shadowedRange"]
        if not seqs or seqs[0] != span["start"] or seqs[-1] != span["end"] or seqs[0] not in self.live:
            self.fail(ev, "shadowedRange does not bound shadowedSeqs, or names a dead node")
        i = self.nodes.index(seqs[0])
        if self.nodes[i:i + len(seqs)] != seqs:
            self.fail(ev, "shadowedSeqs are not an exact current surface span")
        if self.head is not None and i == 0:
            self.fail(ev, "compaction shadows the protected system head")

    def surface(self, ev: dict[str, Any], nbytes: int) -> None:
        op, src, seq = ev.get("surfaceOp"), ev.get("sourceEventSeqs"), ev["seq"]
        if src is not None and (len(set(src)) != len(src) or any(s >= seq or s < 0 for s in src) or not src):
            self.fail(ev, "sourceEventSeqs not unique, non-empty and earlier")
        if ev["type"] == "assistant/message":
            self.check_assistant(ev)
        elif ev["type"] == "user/message":
            self.user_seqs.add(seq)
        elif ev["type"] == "system/message":
            self.check_system(ev)
        elif ev["type"] == "developer/message":
            self.check_developer(ev)
        if self.gen == 4 and ev["type"] != "assistant/message":
            source = (ev["data"] if ev["type"] == "user/message" else ev["data"]["message"])["source"]
            if source["kind"] == "plugin" or "plugin" in source:
                self.fail(ev, "a v4 source names its producer, never a plugin")
        if (self.gen >= 3 and ev["type"] in ("assistant/message", "tool/result") and op == "append"
                and (ev["data"]["turn"], ev["data"]["step"]) != (self.turn, self.step)):
            self.fail(ev, "does not match the open turn and step")
        if ev["type"] == "tool/result" and op == "append":
            message = ev["data"]["message"]
            if self.gen == 4:
                if (list(message) != [k for k in TOOL_MESSAGE_KEYS if k != "isError" or "isError" in message]
                        or message["role"] != "tool" or message["toolCallId"] != message["source"]["callId"]):
                    self.fail(ev, "v4 tool/result is not a tool-role message of its call")
                call_id = message["toolCallId"]
            else:
                result = message["content"]
                call_id = result[0]["toolCallId"] if len(result) == 1 else None
            if src is None or self.calls.get(src[0]) != call_id:
                self.fail(ev, "tool/result does not cite its tool/call")
        if op == "append":
            self.nodes.append(seq)
        elif isinstance(op, dict) and list(op) == self.replace_keys and op["op"] == "replace":
            start, end = op[self.replace_keys[1]], op[self.replace_keys[2]]
            if start not in self.live or end not in self.live:
                self.fail(ev, f"replace names a dead node {op}")
            i, j = self.nodes.index(start), self.nodes.index(end)
            shadowed = self.nodes[i:j + 1]
            if i > j or src is None or not set(shadowed) <= set(src):
                self.fail(ev, "replace range inverted or shadowed nodes not cited")
            if self.head is not None and i == 0 and (ev["type"] != "system/message" or j != 0):
                self.fail(ev, "replace shadows the system head (only a system/message over exactly it may)")
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

    def check_system(self, ev: dict[str, Any]) -> None:
        """v3: the system prompt head, appended as node 0 inside the first open step (the generator writes one)."""
        data = ev["data"]
        message = data["message"]
        if (list(data) != ["turn", "step", "message"] or list(message) != SYSTEM_KEYS[self.gen]
                or message["role"] != "system" or message["source"] != SYSTEM_SOURCE[self.gen] or not message["id"]):
            self.fail(ev, "system/message shape")
        if (data["turn"], data["step"]) != (self.turn, self.step):
            self.fail(ev, "system/message outside its open step")
        if self.head is not None or self.nodes or ev.get("surfaceOp") != "append":
            self.fail(ev, "system/message is not the appended first surface node")
        if self.headers:
            self.fail(ev, "system head after the first request/header")
        self.head = ev["seq"]

    def check_developer(self, ev: dict[str, Any]) -> None:
        """v4: the tool-registry notice of the header just logged, in its open step, announcing exactly its change."""
        data, change = ev["data"], self.tool_change
        message = data["message"]
        if change is None or ev.get("surfaceOp") != "append":
            self.fail(ev, "developer/message without a tools change to announce")
        assert change is not None
        header_seq, added, removed = change
        blocks = message["content"]
        if (list(message) != ["source", "content", "role", "id"] or message["source"] != {"kind": "tool-registry"}
                or message["role"] != "developer" or not message["id"]
                or {b["toolName"] for b in blocks if b["type"] == "tool-addition"} != added
                or {b["toolName"] for b in blocks if b["type"] == "tool-removal"} != removed
                or len(blocks) != len(added) + len(removed)):
            self.fail(ev, "developer/message does not announce its header's tools change")
        if data.get("headerSeq") != (header_seq if added else None):
            self.fail(ev, f"headerSeq {data.get('headerSeq')!r}: the change header is seq {header_seq}")
        if (data["turn"], data["step"]) != (self.turn, self.step):
            self.fail(ev, "developer/message outside its open step")
        self.tool_change = None

    def check_assistant(self, ev: dict[str, Any]) -> None:
        chunks = self.last_attempt
        if self.gen == 0 and ev["sourceEventSeqs"] != [c["seq"] for c in chunks]:
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
    lines = iter_lines(path)
    try:
        header = orjson.loads(next(lines))
        version = header.get("version")
        if (version not in HEADER_KEYS or list(header) != HEADER_KEYS[version] or header["type"] != "session"
                or header.get("isSeeded", False) is not False):
            raise CheckError(f"bad header line {header}")
        checker = Checker(version)
        for line in lines:
            checker.record(line)
        if checker.turn is not None:
            raise CheckError("log ends inside an open turn")
        if version >= 3 and checker.head is None:
            raise CheckError("no system/message head")
    except CheckError as err:
        print(f"{path}: FAIL: {err}", file=sys.stderr)
        return 1
    total = sum(checker.bytes_by.values())
    chunk_bytes = checker.stream_bytes + sum(n for k, n in checker.bytes_by.items()
                                             if k in PACKED_TYPES or k == "assistant/chunk")
    print(f"{path}: OK: format v{version}, {checker.seq:,} events in {sum(checker.count_by.values()):,} lines, "
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
