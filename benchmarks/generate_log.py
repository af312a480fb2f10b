"""Write a deterministic synthetic dsh session log in the real persisted JSONL form (explicit seq and time).

    python benchmarks/generate_log.py --size 10MB --out benchmarks/data/s10.jsonl [--seed 1] [--zstd]
    python benchmarks/generate_log.py --check benchmarks/data/s10.jsonl

The event mix follows the current writer (spec §6.1, the snapshot fixtures): inbox splices, turn/step
brackets, user messages appended after step/start, an initial request/header (plus one mid-session `change`
adding a tool), request/context, streamed chunks packed into `*-chunks` rows as the writer does (runs of >= 3
same-block deltas, split where a write batch ends), assistant/message citing its chunk seqs, tool/call +
tool/result pairs, a tool-result prune and a compaction checkpoint. Sizes count uncompressed JSONL bytes
(MB = 10**6). See README.md.

`--generation 3` writes the same session (same seed, turns, texts, compactions) as a native format-v3 log: one
event per row, each attempt's chunks embedded in its settlement's `stream`, the system prompt as a surface
`system/message` head, `{op, startSeq, endSeq}` replaces, dense seqs. `--size` then names the v0 twin's size.
`--generation 4` writes it as a native format-v4 log: as v3, with tool results as tool-role messages, message
sources naming their producer, and the tool-registry `developer/message` that follows the header adding a tool.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import re
import sys
import time as wallclock
import uuid
from collections import deque
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import zstandard

import synth_content as synth
from dsh_audit.deepseek_wire import to_wire_body, wire_prompt_segments
from dsh_audit.tokens import count_tokens
from logio import PACKED_TYPES

PROVIDER, MODEL = "deepseek-official", "deepseek-v4-pro"
CONFIG = {"provider": PROVIDER, "model": MODEL, "reasoningEffort": "high", "maxTokens": 256000}
ADAPTER_DEFAULTS = {"reasoningEffort": True, "maxTokens": True}
CWD = "/work/x"
SYSTEM_PLUGIN = "@deepseek-ai/dsh-system-prompt"
CACHE_BLOCK = 128          # tokens: the corpus's logged reads are all multiples of it
SHORT_BY_A_BLOCK = 0.3     # share of reads one block below what was there to read (14 of 45 in the corpus)
EVICTION = 0.005           # share of extending calls whose cache was evicted: a read of 0, no logged cause
PRUNE_THRESHOLD = 12_000  # chars of tool output above which a result may be pruned
PRUNE_KEEP = 2_000  # chars kept at each end of a pruned result
PRUNE_MARKER = "\n\n[... middle of this tool output was pruned to save context ...]\n\n"
CHECKPOINT_PREAMBLE = ("Synthetic checkpoint: the earlier part of this conversation was condensed below. "
                       "Continue from the messages that follow.\n\n<compacted-summary>")
SIZE_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*(KB|MB|GB|B)?$", re.IGNORECASE)
UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9}


def parse_size(text: str) -> int:
    match = SIZE_RE.match(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"bad size {text!r}: use e.g. 10MB, 100MB, 1GB")
    return int(float(match.group(1)) * UNITS[(match.group(2) or "B").upper()])



def head_tokens(system: str, tools: list[Any]) -> int:
    """Tokens of the prompt's head as DeepSeek's V4 template renders it (the system prompt, then the template's
    tool block): what a compaction or a tool appended at the end keeps cached. Counted, not estimated, as
    cache-report counts it at a prefix break."""
    body = to_wire_body({"model": MODEL, "system": system, "tools": tools, "messages": [], **CONFIG})
    return count_tokens(wire_prompt_segments(body)[0])

class LogWriter:
    """Appends events with contiguous seq and monotone time; lines are flushed in batches (zstd: one frame each).

    The simulation always speaks v0 (seqs, packed rows, chunk events), and `raw_bytes` always counts the v0
    bytes, so that size targets, surface budgets and compaction points are the same in every generation. With a
    translator attached (v3 or v4), the v0 lines are only measured, and the translator writes its rows instead.
    """

    def __init__(self, out: BinaryIO, rng: random.Random, compress: bool, t0: int) -> None:
        self.out, self.rng = out, rng
        self.zstd = zstandard.ZstdCompressor(level=3, write_checksum=True) if compress else None
        self.seq, self.time = 0, t0
        self.raw_bytes = 0  # v0 JSONL bytes of the session, whatever generation is written
        self.out_bytes = 0  # JSONL bytes actually written
        self.batch: list[bytes] = []
        self.dt_pool = rng.choices([0, 0, 0, 0, 1, 1, 2, 24, 27, 29, 31, 58], k=1 << 16)
        self.translator: V3Translator | None = None

    def line(self, obj: dict[str, Any]) -> int:
        data = orjson.dumps(obj) + b"\n"
        self.raw_bytes += len(data)
        if self.translator is None:
            self.batch.append(data)
            self.out_bytes += len(data)
        else:
            self.translator.take(obj)
        return len(data)

    def put(self, obj: dict[str, Any]) -> None:
        """Write one row as is (the header, or a row of the translated generation)."""
        data = orjson.dumps(obj) + b"\n"
        self.batch.append(data)
        self.out_bytes += len(data)

    def flush(self) -> None:
        if not self.batch:
            return
        blob = b"".join(self.batch)
        self.out.write(self.zstd.compress(blob) if self.zstd else blob)
        self.batch = []

    def event(self, type_: str, data: dict[str, Any], src: list[int] | None = None,
              op: Any = None) -> tuple[int, int]:
        """Append one event; returns (seq, line bytes). Key order matches the writer's."""
        self.time += self.rng.choice((0, 1, 1, 2, 3, 5))
        obj: dict[str, Any] = {"type": type_, "seq": self.seq, "time": self.time, "data": data}
        if src is not None:
            obj["sourceEventSeqs"] = src
        if op is not None:
            obj["surfaceOp"] = op
        self.seq += 1
        return obj["seq"], self.line(obj)

    def chunk(self, turn: int, step: int, chunk: dict[str, Any]) -> int:
        return self.event("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk})[0]

    def delta_run(self, turn: int, step: int, kind: str, index: int, pieces: list[str],
                  call: tuple[str, str] | None = None) -> None:
        """Stream one block's deltas. A write batch may end mid-run; each piece of >= 3 deltas packs into a row."""
        cuts = [0, len(pieces)]
        if len(pieces) > 6 and self.rng.random() < 0.25:
            cuts[1:1] = sorted(self.rng.sample(range(1, len(pieces)), self.rng.choice((1, 1, 2))))
        for lo, hi in itertools.pairwise(cuts):
            self.segment(turn, step, kind, index, pieces[lo:hi], call)
            if hi < len(pieces):
                self.flush()

    def segment(self, turn: int, step: int, kind: str, index: int, pieces: list[str],
                call: tuple[str, str] | None) -> None:
        if len(pieces) < 3:
            for piece in pieces:
                if call is None:
                    chunk = {"type": kind, "index": index, "text": piece}
                else:
                    chunk = {"type": kind, "index": index, "id": call[0], "name": call[1], "argumentsDelta": piece}
                self.time += self.rng.choice((0, 1, 27))
                self.seq += 1
                self.line({"type": "assistant/chunk", "seq": self.seq - 1, "time": self.time,
                           "data": {"turn": turn, "step": step, "chunk": chunk}})
            return
        at = self.rng.randrange(len(self.dt_pool) - len(pieces))
        dt = self.dt_pool[at:at + len(pieces) - 1]
        self.time += 1
        data: dict[str, Any] = {"turn": turn, "step": step, "index": index, "dt": dt}
        if call is None:
            data["texts"] = pieces
            row_type = "text-chunks" if kind == "text-delta" else "reasoning-chunks"
        else:
            data["id"], data["name"], data["args"] = call[0], call[1], pieces
            row_type = "tool-call-chunks"
        self.line({"type": row_type, "seq0": self.seq, "time0": self.time, "data": data})
        self.seq += len(pieces)
        self.time += sum(dt)


REFERENCED = frozenset({"user/message", "assistant/message", "tool/result", "tool/call", "agent/inbox/spliced",
                        "compaction/start", "compaction/summary"})  # the only events a later event cites


class V3Translator:
    """Writes the simulated v0 event stream as a native format-v3 log, row by row, as it is produced.

    - Chunks leave the top level: each attempt's chunks become the `stream` of its settlement, the
      `assistant/message` (which loses `sourceEventSeqs`) or, for an attempt that ended without one, an
      `assistant/attempt {turn, step, stream}` at its last chunk's time. Stream records are packed as the v2+
      writer packs them: every text/reasoning/tool-call delta goes into a `*-chunks` record, extending the last
      record when type, index (and id/name) match, so one block's deltas are one record; other chunks are raw
      `{type:'chunk', time, chunk}`.
    - The system prompt is the surface head: a `system/message` right after the first `step/start`; request
      headers carry no `system`.
    - Seqs are dense again (chunks took seqs in v0); every reference is renumbered; replaces are spelled
      `{op, startSeq, endSeq}`.
    """

    def __init__(self, writer: LogWriter, session_id: str, system: str) -> None:
        self.w = writer
        self.seq = 0
        self.remap: dict[int, int] = {}
        self.stream: list[dict[str, Any]] = []
        self.stream_end = 0  # time of the pending stream's last chunk
        self.attempt: tuple[int, int] = (0, 0)
        self.terminal = False
        self.system: str | None = system
        self.system_id = "system-" + str(uuid.uuid5(uuid.NAMESPACE_URL, f"dsh-bench:{session_id}:system"))

    def take(self, obj: dict[str, Any]) -> None:
        kind = obj["type"]
        if kind in PACKED_TYPES:
            data = obj["data"]
            self.attempt = (data["turn"], data["step"])
            if kind == "tool-call-chunks":
                record = {"type": kind, "time0": obj["time0"], "index": data["index"], "dt": list(data["dt"]),
                          "id": data["id"], "name": data["name"], "args": list(data["args"])}
            else:
                record = {"type": kind, "time0": obj["time0"], "index": data["index"], "dt": list(data["dt"]),
                          "texts": list(data["texts"])}
            self.pack(record, obj["time0"] + sum(data["dt"]))
        elif kind == "assistant/chunk":
            data = obj["data"]
            self.attempt = (data["turn"], data["step"])
            self.chunk(obj["time"], data["chunk"])
        elif kind == "assistant/message":
            data = obj["data"]
            if not self.stream or self.attempt != (data["turn"], data["step"]):
                raise RuntimeError(f"v0 seq {obj['seq']}: assistant/message without its attempt's chunks")
            self.remap[obj["seq"]] = self.seq
            self.emit({"type": kind, "seq": self.seq, "time": obj["time"], "data": {**data, "stream": self.stream},
                       "surfaceOp": obj["surfaceOp"]})
            self.stream = []
        else:
            if self.stream:
                self.settle_attempt()
            self.event(obj)

    def chunk(self, time: int, chunk: dict[str, Any]) -> None:
        ctype = chunk["type"]
        if ctype in ("text-delta", "reasoning-delta"):
            packed = "text-chunks" if ctype == "text-delta" else "reasoning-chunks"
            self.pack({"type": packed, "time0": time, "index": chunk["index"], "dt": [], "texts": [chunk["text"]]},
                      time)
        elif ctype == "tool-call-delta" and chunk["id"] != "" and chunk.get("name") != "":
            record = {"type": "tool-call-chunks", "time0": time, "index": chunk["index"], "dt": [], "id": chunk["id"]}
            if "name" in chunk:
                record["name"] = chunk["name"]
            record["args"] = [chunk["argumentsDelta"]]
            self.pack(record, time)
        else:
            self.stream.append({"type": "chunk", "time": time, "chunk": chunk})
            self.stream_end = time
            self.terminal = ctype == "finish"

    def pack(self, record: dict[str, Any], last_time: int) -> None:
        """Append a packed record, merged into the last one when the v2 writer would (same type, index, id, name)."""
        prev = self.stream[-1] if self.stream else None
        if (prev is not None and prev["type"] == record["type"] and prev["index"] == record["index"]
                and (record["type"] != "tool-call-chunks"
                     or (prev["id"] == record["id"] and prev.get("name") == record.get("name")
                         and ("name" in prev) == ("name" in record)))):
            payload = "args" if record["type"] == "tool-call-chunks" else "texts"
            prev["dt"].append(record["time0"] - self.stream_end)
            prev["dt"].extend(record["dt"])
            prev[payload].extend(record[payload])
        else:
            self.stream.append(record)
        self.stream_end = last_time
        self.terminal = False

    def settle_attempt(self) -> None:
        """An attempt that ended without a message (a failed finish): `assistant/attempt` at its last chunk."""
        if not self.terminal:
            raise RuntimeError("a non-chunk event interrupts an unfinished attempt")
        turn, step = self.attempt
        self.emit({"type": "assistant/attempt", "seq": self.seq, "time": self.stream_end,
                   "data": {"turn": turn, "step": step, "stream": self.stream}})
        self.stream = []

    def event(self, obj: dict[str, Any]) -> None:
        kind, data, m = obj["type"], obj["data"], self.remap
        if kind in REFERENCED:
            m[obj["seq"]] = self.seq
        if kind == "request/header":
            data = {**data, "header": {k: v for k, v in data["header"].items() if k != "system"}}
        elif kind in ("compaction/summary", "compaction/prune"):
            span = data["shadowedRange"]
            data = {**data, "shadowedRange": {"start": m[span["start"]], "end": m[span["end"]]},
                    "shadowedSeqs": [m[s] for s in data["shadowedSeqs"]]}
        elif kind == "session/title":
            data = {**data, "messageSeqs": [m[s] for s in data["messageSeqs"]]}
        elif kind == "command/done" and "sourceEventSeq" in data:
            data = {**data, "sourceEventSeq": m[data["sourceEventSeq"]]}
        out: dict[str, Any] = {"type": kind, "seq": self.seq, "time": obj["time"], "data": data}
        if "sourceEventSeqs" in obj:
            out["sourceEventSeqs"] = [m[s] for s in obj["sourceEventSeqs"]]
        op = obj.get("surfaceOp")
        if isinstance(op, dict):
            out["surfaceOp"] = {"op": "replace", "startSeq": m[op["start"]], "endSeq": m[op["end"]]}
        elif op is not None:
            out["surfaceOp"] = op
        self.emit(out)
        if kind == "step/start" and self.system is not None:
            message = {"id": self.system_id, "role": "system", "source": {"kind": "plugin", "plugin": SYSTEM_PLUGIN},
                       "content": [{"type": "text", "text": self.system}]}
            self.emit({"type": "system/message", "seq": self.seq, "time": obj["time"],
                       "data": {"turn": data["turn"], "step": data["step"], "message": message},
                       "surfaceOp": "append"})
            self.system = None

    def emit(self, obj: dict[str, Any]) -> None:
        self.w.put(obj)
        self.seq += 1

    def finish(self) -> None:
        if self.stream:
            self.settle_attempt()


PRODUCERS = {SYSTEM_PLUGIN: "runtime-context", "compact": "compact-checkpoint"}   # v3 plugin -> v4 producer kind


class V4Translator(V3Translator):
    """Writes the simulated session as a native format-v4 log: the v3 rows (V3Translator), each as v4 writes it.

    - A tool result is a tool-role message, `{role:'tool', source, toolCallId, content, isError, id}`: the v3
      wrapper's one tool-result block lifted into the message (the native writer's key order).
    - Message sources name their producer: `system-prompt` on the system head, `runtime-context` and
      `compact-checkpoint` on the user messages v3 attributes to a plugin.
    - The mid-session `change` header that adds a tool is followed by the tool-registry `developer/message`
      announcing it (`headerSeq` names that header), in the open step: a surface node v0 and v3 lack. A later
      compaction over it shadows and cites it too (the translator keeps the v4 surface for that).
    """

    def __init__(self, writer: LogWriter, session_id: str, system: str) -> None:
        super().__init__(writer, session_id, system)
        self.session_id = session_id
        self.open_step: tuple[int, int] = (0, 0)
        self.tool_names: list[str] = []
        self.nodes: list[int] = []      # the live v4 surface, by seq
        self.developer: set[int] = set()   # its developer/message nodes

    def emit(self, obj: dict[str, Any]) -> None:
        kind, data = obj["type"], obj.get("data")
        if kind == "step/start":
            self.open_step = (data["turn"], data["step"])
        elif kind == "system/message":
            message = data["message"]
            data = {**data, "message": {"role": "system", "content": message["content"],
                                        "source": {"kind": "system-prompt"}, "id": message["id"]}}
        elif kind == "user/message" and data["source"]["kind"] == "plugin":
            source = data["source"]
            producer = PRODUCERS[source["plugin"]]   # the kind keeps its place; the plugin key goes
            data = {**data, "source": {key: (producer if key == "kind" else value) for key, value in source.items()
                                       if key != "plugin"}}
        elif kind == "tool/result":
            message = data["message"]
            [result] = message["content"]
            lifted = {"role": "tool", "source": message["source"], "toolCallId": result["toolCallId"],
                      "content": result["content"]}
            if "isError" in result:
                lifted["isError"] = result["isError"]
            data = {**data, "message": {**lifted, "id": message["id"]}}
        elif kind == "compaction/summary":
            span = self.span(data["shadowedRange"]["start"], data["shadowedRange"]["end"])
            data = {**data, "shadowedSeqs": span}
        obj = {**obj, "data": data}
        op = obj.get("surfaceOp")
        if isinstance(op, dict):
            span = self.span(op["startSeq"], op["endSeq"])
            if self.developer.intersection(span):   # v0 cites what it shadows; v0 has no developer node
                cited = [s for s in obj["sourceEventSeqs"] if s not in span]
                obj["sourceEventSeqs"] = [*cited, *span]
            i = self.nodes.index(op["startSeq"])
            self.nodes[i:i + len(span)] = [self.seq]
            self.developer.difference_update(span)
        elif op == "append":
            self.nodes.append(self.seq)
        super().emit(obj)
        if kind == "request/header":
            self.announce(obj)

    def span(self, start: int, end: int) -> list[int]:
        i, j = self.nodes.index(start), self.nodes.index(end)
        return self.nodes[i:j + 1]

    def announce(self, header: dict[str, Any]) -> None:
        """The developer/message after a header that changes the tool set: what it adds and removes."""
        names = [tool["name"] for tool in header["data"]["header"].get("tools", [])]
        before, self.tool_names = self.tool_names, names
        if header["data"]["reason"] == "initial":
            return
        content = [*({"type": "tool-addition", "toolName": name} for name in names if name not in before),
                   *({"type": "tool-removal", "toolName": name} for name in before if name not in names)]
        if not content:
            return
        turn, step = self.open_step
        uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"dsh-bench:{self.session_id}:developer:{header['seq']}"))
        data: dict[str, Any] = {"turn": turn, "step": step, "message": {
            "source": {"kind": "tool-registry"}, "content": content, "role": "developer", "id": uid}}
        if any(block["type"] == "tool-addition" for block in content):
            data["headerSeq"] = header["seq"]
        self.developer.add(self.seq)
        self.emit({"type": "developer/message", "seq": self.seq, "time": header["time"], "data": data,
                   "surfaceOp": "append"})


class SessionSim:
    """Drives turns and steps, tracking the live surface so that replaces name live nodes."""

    def __init__(self, writer: LogWriter, rng: random.Random, target: int, mode: str, budget: int) -> None:
        self.w, self.rng, self.target, self.mode, self.budget = writer, rng, target, mode, budget
        self.cache_rng = random.Random(0)   # its own stream: the session's content does not depend on the cache
        self.prose = synth.prose_pool(rng, 1 << 20)
        code = synth.code_line_pool(rng, 1 << 15)
        self.code = code
        self.files = [[f"{i + 1:6}\t{line}" for i, line in enumerate(code[k:k + 1500])]
                      for k in range(0, len(code) - 1500, 1000)]
        self.system = synth.system_prompt(rng, CWD)
        self.tools = synth.tool_schemas()
        self.header_bytes = len(json.dumps([self.system, self.tools]))
        self.head_tokens = head_tokens(self.system, self.tools)
        self.nodes: list[int] = []
        self.node_info: dict[int, tuple[int, bool]] = {}  # live seq -> (line bytes, ends a turn)
        self.surface_bytes = 0
        self.big_results: deque[tuple[int, dict[str, Any]]] = deque(maxlen=64)
        self.turn = 0
        self.header_logged = False
        self.changed = self.pruned = self.compacted = False
        self.break_prefix: int | None = self.head_tokens  # prompt tokens before the earliest break since the last call
        self.previous = (0, 0, 0)                # the previous call's prompt and output tokens, and its turn
        self.steer_seq: int | None = None
        self.stats = {"turns": 0, "steps": 0, "attempts": 0, "compactions": 0, "prunes": 0}

    # ids and text -----------------------------------------------------------------------------------------
    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def call_id(self, k: int) -> str:
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
        return f"call_{k:02d}_" + "".join(self.rng.choices(alphabet, k=24))

    def tokens(self, lo: int, hi: int) -> list[str]:
        n = int(min(hi, max(lo, self.rng.lognormvariate(0, 0.6) * (lo + hi) / 3)))
        at = self.rng.randrange(len(self.prose) - n)
        return self.prose[at:at + n]

    def fraction(self) -> float:
        return self.w.raw_bytes / self.target

    # surface -----------------------------------------------------------------------------------------------
    def append_node(self, seq: int, nbytes: int, ends_turn: bool = False) -> None:
        self.nodes.append(seq)
        self.node_info[seq] = (nbytes, ends_turn)
        self.surface_bytes += nbytes

    def user_message(self, text: str, source: dict[str, Any], src: list[int] | None = None,
                     op: Any = "append") -> tuple[int, int]:
        msg = {"content": [{"type": "text", "text": text}], "source": source, "role": "user", "id": self.uid()}
        return self.w.event("user/message", msg, src, op)

    # turns -------------------------------------------------------------------------------------------------
    def run(self) -> None:
        while self.fraction() < 0.995:
            self.run_turn()
            self.w.flush()

    def run_turn(self) -> None:
        self.turn += 1
        self.stats["turns"] += 1
        turn = self.turn
        prompt = {"content": [{"type": "text", "text": "".join(self.tokens(20, 400)).strip()}],
                  "source": {"kind": "user"}, "role": "user", "id": self.uid()}
        spliced = self.rng.random() < 0.9
        if spliced:
            self.w.event("agent/inbox/spliced", {"target": "next-turn", "start": 0, "inserted": [prompt]})
        self.w.event("turn/start", {"turn": turn})
        if spliced:
            self.w.event("agent/inbox/spliced", {"target": "next-turn", "start": 0, "removedCount": 1,
                                                  "inserted": []})
        tool_steps = self.rng.randint(1, 10)
        step = 0
        while True:
            step += 1
            final = step > tool_steps or self.fraction() >= 0.995
            self.run_step(turn, step, prompt if step == 1 else None, final)
            if final:
                break
        self.w.event("turn/end", {"turn": turn, "reason": {"kind": "completed"}})

    def run_step(self, turn: int, step: int, prompt: dict[str, Any] | None, final: bool) -> None:
        w = self.w
        self.stats["steps"] += 1
        if self.steer_seq is not None and prompt is None:
            w.event("agent/inbox/spliced", {"target": "next-step", "start": 0, "removedCount": 1, "inserted": []})
        w.event("step/start", {"turn": turn, "step": step})
        if prompt is not None:
            self.append_node(*w.event("user/message", prompt, None, "append"))
            if turn == 1:
                self.append_node(*self.user_message(
                    "Current runtime context (synthetic). File policy: workspace-write. Approvals: on-request.",
                    {"kind": "plugin", "plugin": SYSTEM_PLUGIN, "form": "snapshot",
                     "sections": [{"name": "sandbox:policy", "text": "File policy: workspace-write."}]}))
                w.event("session/title", {"title": "".join(prompt["content"][0]["text"][:40]).strip(),
                                          "messageSeqs": [self.nodes[0]], "source": {"kind": "fallback"}})
        elif self.steer_seq is not None:
            text = "".join(self.tokens(8, 60)).strip()
            self.append_node(*self.user_message(text, {"kind": "user"}, [self.steer_seq]))
            self.steer_seq = None
        overflow = False
        if self.mode == "once":
            if not self.pruned and self.fraction() >= 0.40:
                self.pruned = self.prune(turn)
            overflow = not self.compacted and self.fraction() >= 0.60
        elif self.surface_bytes > self.budget:
            # Pressure compaction runs before the request is built; overflow recovery runs after a failure.
            self.prune(turn)
            self.compact(turn)
        self.write_header()
        if overflow:
            # Attempt 1 fails with a context overflow; compaction lands; attempt 2 retries in the same step.
            self.stats["attempts"] += 1
            w.chunk(turn, step, {"type": "finish", "reason": {"kind": "error", "failure": {
                "message": "request exceeded the model context window", "code": "CONTEXT_WINDOW_EXCEEDED"}}})
            self.compacted = self.compact(turn)
        self.attempt(turn, step, final)
        if not final and self.rng.random() < 0.05:
            inserted = {"content": [{"type": "text", "text": "".join(self.tokens(8, 60)).strip()}],
                        "source": {"kind": "user"}, "role": "user", "id": self.uid()}
            self.steer_seq = w.event("agent/inbox/spliced", {"target": "next-step", "start": 0,
                                                            "inserted": [inserted]})[0]
        w.event("step/end", {"turn": turn, "step": step})

    def write_header(self) -> None:
        if not self.header_logged or (not self.changed and self.fraction() >= 0.25):
            reason = "initial" if not self.header_logged else "change"
            if reason == "change":   # the new tool goes last: the prompt is kept up to the old tool list's end
                self.broke(self.header_bytes)
                self.tools = [*self.tools, synth.added_tool_schema()]
                self.changed = True
                self.header_bytes = len(json.dumps([self.system, self.tools]))
                self.head_tokens = head_tokens(self.system, self.tools)
            header = {"config": dict(CONFIG), "adapterDefaults": dict(ADAPTER_DEFAULTS), "system": self.system,
                      "tools": self.tools}
            self.w.event("request/header", {"header": header, "reason": reason})
            if reason == "initial":
                self.w.event("request/context", {"provider": PROVIDER, "model": MODEL, "contextWindow": 1_000_000})
            self.header_logged = True

    # one model call ----------------------------------------------------------------------------------------
    def attempt(self, turn: int, step: int, final: bool) -> None:
        w = self.w
        self.stats["attempts"] += 1
        first = w.seq
        blocks: list[dict[str, Any]] = []
        out_tokens = reasoning_tokens = 0
        if self.rng.random() < 0.9:
            pieces = self.tokens(40, 1200)
            reasoning_tokens = len(pieces)
            blocks.append(self.stream_text(turn, step, len(blocks), "reasoning", pieces))
        if final or self.rng.random() < 0.3:
            pieces = self.tokens(60, 900) if final else self.tokens(8, 80)
            out_tokens += len(pieces)
            blocks.append(self.stream_text(turn, step, len(blocks), "text", pieces))
        calls: list[tuple[str, str, str]] = []
        if not final:
            for k in range(self.rng.choices((1, 2, 3), weights=(70, 22, 8))[0]):
                name, args = self.tool_args()
                call = (self.call_id(k), name, args)
                calls.append(call)
                index = len(blocks)
                w.chunk(turn, step, {"type": "block-start", "index": index, "blockType": "tool-call"})
                pieces = synth.split_json_tokens(args)
                out_tokens += len(pieces)
                w.delta_run(turn, step, "tool-call-delta", index, pieces, (call[0], name))
                blocks.append({"type": "tool-call", "id": call[0], "name": name, "arguments": args})
        for index, block in enumerate(blocks):
            w.chunk(turn, step, {"type": "block-end", "index": index, "block": block})
        usage = self.usage(turn, out_tokens + reasoning_tokens, reasoning_tokens)
        w.chunk(turn, step, {"type": "usage", "usage": usage})
        w.chunk(turn, step, {"type": "finish", "reason": {"kind": "tool-calls" if calls else "stop"}})
        message = {"role": "assistant", "content": blocks,
                   "source": {"kind": "model", "provider": PROVIDER, "model": MODEL}, "id": self.uid()}
        seq, nbytes = w.event("assistant/message", {"turn": turn, "step": step, "message": message, "usage": usage},
                              list(range(first, w.seq)), "append")
        self.append_node(seq, nbytes, ends_turn=final)
        for call_id, name, args in calls:
            call_seq = w.event("tool/call", {"turn": turn, "step": step, "callId": call_id, "name": name,
                                             "arguments": args})[0]
            if name == "todo_write":
                w.event("todo/write", {"todos": json.loads(args)["todos"]})
            text = self.tool_output(name)
            data = {"turn": turn, "step": step, "message": {
                "source": {"kind": "tool", "callId": call_id},
                "content": [{"type": "tool-result", "toolCallId": call_id, "content": [{"type": "text", "text": text}],
                             "isError": False}],
                "role": "user", "id": self.uid()}}
            seq, nbytes = w.event("tool/result", data, [call_seq], "append")
            self.append_node(seq, nbytes)
            if len(text) > PRUNE_THRESHOLD:
                self.big_results.append((seq, data))

    def stream_text(self, turn: int, step: int, index: int, kind: str, pieces: list[str]) -> dict[str, Any]:
        self.w.chunk(turn, step, {"type": "block-start", "index": index, "blockType": kind})
        self.w.delta_run(turn, step, f"{kind}-delta", index, pieces)
        return {"type": kind, "text": "".join(pieces)}

    def usage(self, turn: int, output: int, reasoning: int) -> dict[str, int]:
        """What a block-granular prefix cache would report (the model cache-report expects, which the corpus
        shows): after a break, the part of the prompt before it; else the previous prompt and, within a turn,
        its output; in whole 128-token blocks, often one block less, and now and then nothing (an eviction)."""
        prompt = (self.surface_bytes + self.header_bytes) // 4   # tokens, by the ~4 bytes per token rule
        previous_prompt, previous_output, previous_turn = self.previous
        if self.break_prefix is not None:
            shared = self.break_prefix
        else:
            shared = previous_prompt + (previous_output if turn == previous_turn else 0)
        cached = min(shared, prompt) // CACHE_BLOCK * CACHE_BLOCK
        if self.break_prefix is None and self.cache_rng.random() < EVICTION:
            cached = 0
        elif cached and self.cache_rng.random() < SHORT_BY_A_BLOCK:
            cached -= CACHE_BLOCK
        self.break_prefix = None
        self.previous = (prompt, output, turn)
        return {"inputTokens": prompt - cached, "outputTokens": output, "cacheReadTokens": cached,
                "reasoningTokens": reasoning}

    # tools -------------------------------------------------------------------------------------------------
    def tool_args(self) -> tuple[str, str]:
        rng, name = self.rng, self.rng.choice(synth.CODE_NAMES)
        names = ["read"] * 5 + ["bash"] * 4 + ["grep"] * 2 + ["edit"] * 2 + ["write", "todo_write"]
        if self.changed:
            names.append("lsp_query")
        tool = rng.choice(names)
        path = f"src/app/{name}.py"
        args: dict[str, Any]
        if tool == "read":
            args = {"path": path}
        elif tool == "bash":
            cmd = rng.choice([f"pytest -q tests/unit/test_{name}.py", f"rg -n '{name}' src", "git diff --stat",
                              f"python -m app.{name} --check", "ls -la src/app"])
            args = {"command": cmd, "description": "".join(self.tokens(3, 10)).strip()}
        elif tool == "grep":
            args = {"pattern": name, "path": "src"}
        elif tool == "edit":
            old, new = rng.sample(self.code, 2)
            args = {"path": path, "old_string": old, "new_string": new}
        elif tool == "write":
            at = rng.randrange(len(self.code) - 200)
            args = {"path": path, "content": "\n".join(self.code[at:at + rng.randint(20, 160)])}
        elif tool == "todo_write":
            args = {"todos": [{"content": "".join(self.tokens(4, 12)).strip(), "status": s}
                              for s in ("completed", "in_progress", "pending")]}
        else:
            args = {"path": path, "line": rng.randint(1, 400), "kind": "references"}
        return tool, json.dumps(args, ensure_ascii=False)

    def tool_output(self, tool: str) -> str:
        rng = self.rng
        if tool == "read":
            lines = rng.choice(self.files)
            n = rng.randint(400, 1400) if rng.random() < 0.06 else rng.randint(15, 160)
            return "\n".join(lines[:n])
        if tool in ("bash", "grep", "lsp_query"):
            at = rng.randrange(len(self.code) - 80)
            body = self.code[at:at + rng.randint(3, 60)]
            if tool == "grep":
                body = [f"src/app/{rng.choice(synth.CODE_NAMES)}.py:{rng.randint(1, 900)}:{x}" for x in body]
            return "\n".join(body) + f"\n[exit 0, {rng.randint(1, 4000)} ms]" * (tool == "bash")
        if tool == "todo_write":
            return "Task list updated (3 items)."
        return f"Updated the file ({rng.randint(1, 9)} replacement, {rng.randint(100, 9000)} bytes)."

    # surface rewrites --------------------------------------------------------------------------------------
    def prune(self, turn: int) -> bool:
        """Replace the newest live over-budget tool result with a head+tail copy (single-node replace)."""
        live = [(seq, data) for seq, data in self.big_results if seq in self.node_info]
        if not live:
            return False
        seq, data = live[-1]
        self.big_results.clear()
        text = data["message"]["content"][0]["content"][0]["text"]
        self.w.event("compaction/prune", {"shadowedRange": {"start": seq, "end": seq}, "shadowedSeqs": [seq],
                                          "shadowedTokenCount": len(text) // 4})
        result = dict(data["message"]["content"][0])
        result["content"] = [{"type": "text", "text": text[:PRUNE_KEEP] + PRUNE_MARKER + text[-PRUNE_KEEP:]}]
        replacement = {**data, "message": {**data["message"], "content": [result]}}
        new_seq, nbytes = self.w.event("tool/result", replacement, [seq], {"op": "replace", "start": seq, "end": seq})
        index = self.nodes.index(seq)
        self.splice(index, index, new_seq, nbytes)
        self.stats["prunes"] += 1
        self.broke(self.header_bytes + sum(self.node_info[node][0] for node in self.nodes[:index]))
        return True

    def compact(self, turn: int) -> bool:
        """Summarize the oldest half of the surface (ending on a turn boundary) into one checkpoint message."""
        half = len(self.nodes) // 2
        ends = [i for i in range(half, 0, -1) if self.node_info[self.nodes[i]][1]]
        if not ends:
            return False
        j = ends[0]
        shadowed = self.nodes[: j + 1]
        cid = self.uid()
        start_seq = self.w.event("compaction/start", {"compactionId": cid, "turn": turn})[0]
        summary = [{"type": "text", "text": "".join(self.tokens(200, 900)).strip()}]
        tokens = sum(self.node_info[s][0] for s in shadowed) // 4
        summary_seq = self.w.event("compaction/summary", {
            "compactionId": cid, "summary": summary, "rawOutput": summary, "llmStreamCall": True,
            "shadowedRange": {"start": shadowed[0], "end": shadowed[-1]}, "shadowedSeqs": shadowed,
            "shadowedTokenCount": tokens, "provider": PROVIDER, "model": MODEL, "maxTokens": 8192,
            "usage": {"inputTokens": tokens, "outputTokens": 600}})[0]
        content = [{"type": "text", "text": CHECKPOINT_PREAMBLE}, *summary,
                   {"type": "text", "text": "</compacted-summary>"}]
        msg = {"content": content, "source": {"kind": "plugin", "plugin": "compact", "compactionId": cid},
               "role": "user", "id": self.uid()}
        seq, nbytes = self.w.event("user/message", msg, [start_seq, summary_seq, *shadowed],
                                   {"op": "replace", "start": shadowed[0], "end": shadowed[-1]})
        self.splice(0, j, seq, nbytes)
        self.w.event("compaction/end", {"compactionId": cid, "turn": turn})
        self.stats["compactions"] += 1
        self.broke(self.header_bytes)
        return True

    def broke(self, prefix_bytes: int) -> None:
        """The prompt changes after its first `prefix_bytes` bytes (a header change, a compaction, a prune): the
        header's counted tokens, then the ~4 bytes per token rule for the messages kept."""
        tokens = self.head_tokens + (prefix_bytes - self.header_bytes) // 4
        self.break_prefix = tokens if self.break_prefix is None else min(self.break_prefix, tokens)

    def splice(self, i: int, j: int, seq: int, nbytes: int) -> None:
        for old in self.nodes[i:j + 1]:
            self.surface_bytes -= self.node_info.pop(old)[0]
        self.nodes[i:j + 1] = [seq]
        self.node_info[seq] = (nbytes, False)
        self.surface_bytes += nbytes


def generate(out_path: Path, size: int, seed: int, compress: bool, mode: str, budget: int,
             generation: int = 0) -> dict[str, Any]:
    rng = random.Random(seed)
    t0 = 1_780_000_000_000 + rng.randrange(10**9)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with open(out_path, "wb", buffering=1 << 20) as out:
        writer = LogWriter(out, rng, compress, t0)
        sim = SessionSim(writer, rng, size, mode, budget)
        session_id = sim.uid()
        header = {"type": "session", "version": 0, "id": session_id, "createdAt": t0, "cwd": CWD,
                  "delegationDepth": 0}
        if generation:  # the v0 header still counts in raw_bytes: the v3/v4 twin stops where v0 does
            writer.raw_bytes += len(orjson.dumps(header)) + 1
            writer.put({"type": "session", "version": generation, "id": session_id, "createdAt": t0, "cwd": CWD,
                        "isSeeded": False, "delegationDepth": 0})
        else:
            writer.line(header)
        writer.flush()  # the header is alone in the first zstd frame
        if generation:
            writer.translator = (V4Translator if generation == 4 else V3Translator)(writer, session_id, sim.system)
        sim.run()
        if writer.translator is not None:
            writer.translator.finish()
        writer.flush()
    events = writer.translator.seq if writer.translator is not None else writer.seq
    return {**sim.stats, "events": events, "raw_bytes": writer.out_bytes, "v0_bytes": writer.raw_bytes}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=parse_size, help="uncompressed target: 10MB, 100MB, 1GB (MB = 10**6)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--zstd", action="store_true", help="write concatenated zstd frames (.jsonl.zstd)")
    parser.add_argument("--compaction", choices=("once", "pressure"), default="once",
                        help="once: one prune + one overflow compaction; pressure: compact whenever the "
                             "surface exceeds --context-kb (keeps request bodies bounded on large logs)")
    parser.add_argument("--context-kb", type=int, default=800, help="surface budget for --compaction pressure")
    parser.add_argument("--generation", type=int, choices=(0, 3, 4), default=0,
                        help="log format to write: 0 (packed chunk rows), or 3 or 4 (the same session as native "
                             "v3 or v4; --size is then the v0 twin's size)")
    parser.add_argument("--check", type=Path, metavar="PATH", help="validate a log instead of writing one")
    args = parser.parse_args(argv)
    if args.check:
        import check_log

        return check_log.main(args.check)
    if args.size is None or args.out is None:
        parser.error("--size and --out are required (or use --check PATH)")
    started = wallclock.perf_counter()
    stats = generate(args.out, args.size, args.seed, args.zstd, args.compaction, args.context_kb * 1000,
                     args.generation)
    elapsed = wallclock.perf_counter() - started
    disk = args.out.stat().st_size
    target = f"{stats['raw_bytes'] / args.size:.1%} of target" if args.generation == 0 else (
        f"v{args.generation}; the v0 twin is {stats['v0_bytes']:,} bytes, "
        f"{stats['v0_bytes'] / args.size:.1%} of target")
    print(f"wrote {args.out}: {stats['raw_bytes']:,} JSONL bytes ({target}), "
          f"{disk:,} on disk, {stats['events']:,} events, {stats['turns']} turns, {stats['steps']} steps, "
          f"{stats['attempts']} attempts, {stats['compactions']} compactions, {stats['prunes']} prunes "
          f"in {elapsed:.1f}s ({stats['raw_bytes'] / elapsed / 1e6:.0f} MB/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
