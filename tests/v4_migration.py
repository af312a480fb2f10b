"""A test-only v3 -> v4 session-log migration (no official v4 code is on npm).

Written for tests/test_v4.py from the upstream algorithm: the README and sources of
`packages/session/session-format-v3-to-v4` (zsagi1368/deepseek-harness-zDSH; research notes /tmp/research/v3v4-rules.md
§2.2-§2.3). Nothing here is upstream code. Per source event, in order:

1. interrupted-turn closer: a `turn/start` for turn k+1 that follows a non-empty `next-turn` `agent/inbox/spliced`
   while turn k is open with no open step gets `turn/end {turn: k, reason: interrupted}` (the start's time) first;
   every later seq moves by one and the same-log references are remapped;
2. unknown ignorable event types become `plugin:<type>` (only their seq moves); unknown required types refuse;
3. message sources `{kind:'plugin', plugin:X}` become producer kinds (rename table below);
4. the v3 `tool/result` wrapper becomes a tool-role message, keys in the order the upstream lift writes them:
   role, source, toolCallId, content, isError?, id, plugin:message:*, plugin:result:*;
5. unknown content tags become `plugin:<tag>` (message content, compaction summary/rawOutput, PTC dispatch content,
   queued team messages, stream block-start/block-end);
6. header `version` 3 -> 4, every other header field unchanged.

**Skipped:** the parent `subagent/catalog` completion. Upstream appends one catalog fact per direct child that lacks
one, from child evidence the caller supplies; this migration supplies the deliberately empty set (the README's
"isolated transcript replay"), so it appends nothing. Catalogs never enter a request.

**Refused** (V4MigrationRefused), rather than guessed: whatever upstream refuses that this code can see (unknown
required types, `deferLoading` in a v3 tool, malformed or nested tool-result wrappers, a non-string `plugin`, an empty
source kind, an inherited end-seed in an unseeded log, a delivery marker claiming generation 4) and what it does
not implement: a generation-3 delivery marker naming another Session (upstream admits one before a seed cut),
rows without a dense integer seq (a projected snapshot, with no seq or time on any row, is migrated with
seq = row index and written back projected), range-encoded references that would need remapping, a `tool/result`
whose message is not a v3 user-role wrapper, and a `tool-result` block anywhere but a `tool/result` wrapper (v4
admission refuses it there).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dsh_audit.jsjson import dumps_bytes

Event = dict[str, Any]


class V4MigrationRefused(Exception):
    """The v3 log holds something this test migration does not convert."""


# The fixed released-v3 event vocabulary (upstream extension-identities.ts): 58 names.
RELEASED_V3_EVENT_TYPES = frozenset({
    "agent-preset/selected", "agent/inbox/spliced", "approval/asked", "approval/decided", "approval/policy",
    "assistant/attempt", "assistant/message", "command/done", "command/run", "compaction/end", "compaction/prune",
    "compaction/start", "compaction/summary", "deliverables/presented", "feedback/message-delete",
    "feedback/message-put", "feedback/record", "goal/change", "hook/invoked", "hook/result", "image/offload",
    "llm/retry", "llm/retry-started", "model/selection", "permission/preset", "plan/mode", "request/context",
    "request/header", "sandbox/mode", "schedule/change", "session-log-deepseek/delivery-accepted",
    "session/end-seed", "session/title", "session/title-llm-request", "step/end", "step/start", "subagent/catalog",
    "subagent/descriptor", "subagent/model-selection-policy", "system/message", "team/member",
    "team/message/delivered", "team/message/queued", "team/task", "todo/write", "tool-workflow/agent-end",
    "tool-workflow/agent-start", "tool-workflow/run-end", "tool-workflow/run-start", "tool/call",
    "tool/ptc-dispatch", "tool/ptc-dispatch-start", "tool/result", "turn/end", "turn/start", "user/message",
    "web/deepseek-search-llm-request", "workspace/changes",
})
assert len(RELEASED_V3_EVENT_TYPES) == 58

V3_BLOCK_TYPES = frozenset({"text", "reasoning", "image", "file", "tool-call", "tool-result"})

# Plugin names whose v4 producer kind differs from the name (the system-prompt plugin depends on the role).
RENAMED_PRODUCERS = {
    "compact": "compact-checkpoint",
    "tools-code-mode": "ptc-mode",
    "tools-ptc": "ptc-mode",
    "dsh-compaction-basic": "compact-basic",
    "@deepseek-ai/dsh-system-prompt": "runtime-context",
}
SYSTEM_PROMPT_PLUGIN = "@deepseek-ai/dsh-system-prompt"
SAME_NAME_PRODUCERS = frozenset({
    "agent-instructions", "session-reference", "team-message", "goal", "skill-invocation", "skill-catalog",
    "coordinator", "subagent-report", "subagent-settled", "webhook", "agent-message", "model-selection",
    "plan-mode", "time-context", "tmux-context", "user-approval", "repeat-tool-reminder", "tool-cordis",
    "cordis-host-runner", "tool-goal", "tool-jobs", "hooks-codex", "hooks-claude-code", "schedule",
    "dsh-session-title-llm",
})
assert len(SAME_NAME_PRODUCERS) == 25

MESSAGE_OWN_KEYS = ("id", "role", "source", "content")           # others -> plugin:message:<key>
WRAPPER_OWN_KEYS = ("type", "toolCallId", "content", "isError")  # others -> plugin:result:<key>


def producer_kind(plugin: str, role: Any) -> str:
    if plugin == SYSTEM_PROMPT_PLUGIN and role == "system":
        return "system-prompt"
    if plugin in RENAMED_PRODUCERS:
        return RENAMED_PRODUCERS[plugin]
    if plugin in SAME_NAME_PRODUCERS:
        return plugin
    return "plugin:" + plugin


def convert_source(source: dict[str, Any], role: Any, where: str) -> dict[str, Any]:
    """A v3 message source in its v4 form: plugin wrappers become the producer's kind, the rest is kept."""
    kind = source.get("kind")
    if not isinstance(kind, str) or not kind:
        raise V4MigrationRefused(f"{where}: message source needs a non-empty kind")
    if kind != "plugin":
        return source
    plugin = source.get("plugin")
    if not isinstance(plugin, str):
        raise V4MigrationRefused(f"{where}: plugin source without a string plugin")
    new_kind = producer_kind(plugin, role)
    if len(source) == 2:
        return {"kind": new_kind}
    return {key: (new_kind if key == "kind" else value) for key, value in source.items() if key != "plugin"}


def _messages(event: Event) -> list[tuple[Any, Any]]:
    """(container, key) of every message slot the source walk visits: the message is container[key]."""
    data = event.get("data")
    if not isinstance(data, dict):
        return []
    kind = event["type"]
    if kind == "user/message":
        return [({"data": data}, "data")]
    if kind in ("system/message", "assistant/message", "tool/result"):
        if not isinstance(data.get("message"), dict):
            raise V4MigrationRefused(f"seq {event['seq']}: {kind} without a message object")
        return [(data, "message")]
    key = {"agent/inbox/spliced": "inserted", "session/title-llm-request": "messages"}.get(kind)
    if key is None:
        return []
    messages = data.get(key)
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise V4MigrationRefused(f"seq {event['seq']}: {kind}.{key} must be an array of message objects")
    return [(messages, i) for i in range(len(messages))]


def _rewrite_sources(event: Event) -> Event:
    where = f"seq {event['seq']} {event['type']}"
    event = json.loads(json.dumps(event))   # private copy; key order is kept
    for container, key in _messages(event):
        message = container[key]   # for user/message the event's own data object, changed in place
        source = message.get("source")
        if isinstance(source, dict):
            message["source"] = convert_source(source, message.get("role"), where)   # the key keeps its place
    return event


def lift_tool_result(message: dict[str, Any], where: str) -> dict[str, Any]:
    """The v3 wrapper message {source, content:[tool-result], role:'user', id} as a v4 tool-role message."""
    if message.get("role") != "user":
        raise V4MigrationRefused(f"{where}: tool/result message is not a v3 user-role wrapper")
    source, content, message_id = message.get("source"), message.get("content"), message.get("id")
    call_id = source.get("callId") if isinstance(source, dict) else None
    wrapper = content[0] if isinstance(content, list) and len(content) == 1 else None
    if not (isinstance(message_id, str) and message_id and isinstance(source, dict) and source.get("kind") == "tool"
            and isinstance(call_id, str) and call_id and isinstance(wrapper, dict)
            and wrapper.get("type") == "tool-result" and wrapper.get("toolCallId") == call_id):
        raise V4MigrationRefused(f"{where}: needs exactly one tool-result wrapper matching its tool source")
    is_error = wrapper.get("isError")
    if "isError" in wrapper and not isinstance(is_error, bool):
        raise V4MigrationRefused(f"{where}: tool-result isError must be boolean")
    inner = wrapper.get("content")
    if not isinstance(inner, list):
        raise V4MigrationRefused(f"{where}: tool-result content must be an array")
    if any(isinstance(block, dict) and block.get("type") == "tool-result" for block in inner):
        raise V4MigrationRefused(f"{where}: nested tool-result")
    lifted: dict[str, Any] = {"role": "tool", "source": source, "toolCallId": call_id, "content": inner}
    if "isError" in wrapper:
        lifted["isError"] = is_error
    lifted["id"] = message_id
    lifted.update((f"plugin:message:{k}", v) for k, v in message.items() if k not in MESSAGE_OWN_KEYS)
    lifted.update((f"plugin:result:{k}", v) for k, v in wrapper.items() if k not in WRAPPER_OWN_KEYS)
    return lifted


def _tag(block: Any, where: str) -> Any:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise V4MigrationRefused(f"{where}: content blocks need a string type")
    if block["type"] == "tool-result":
        raise V4MigrationRefused(f"{where}: a tool-result block outside a tool/result wrapper")
    if block["type"] in V3_BLOCK_TYPES:
        return block
    return {**block, "type": "plugin:" + block["type"]}


def _content(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise V4MigrationRefused(f"{where}: content must be an array")
    return [_tag(block, f"{where}[{i}]") for i, block in enumerate(value)]


def _migrate_content(event: Event) -> Event:
    where = f"seq {event['seq']} {event['type']}"
    kind = event["type"]
    data = event.get("data")
    if not isinstance(data, dict):
        return event
    for container, key in _messages(event):
        container[key] = {**container[key], "content": _content(container[key].get("content"), where)}
        if kind == "user/message":
            data = event["data"] = container[key]
    if kind == "compaction/summary":
        data["summary"] = _content(data.get("summary"), where + ".summary")
        if "rawOutput" in data:
            data["rawOutput"] = _content(data["rawOutput"], where + ".rawOutput")
    elif kind == "tool/ptc-dispatch" and "content" in data:
        data["content"] = _content(data["content"], where + ".content")
    elif kind == "team/message/queued" and isinstance(data.get("message"), dict):
        data["message"] = {**data["message"], "content": _content(data["message"].get("content"), where)}
    elif kind == "request/header" and isinstance(data.get("header"), dict):
        tools = data["header"].get("tools")
        for i, tool in enumerate(tools if isinstance(tools, list) else []):
            if isinstance(tool, dict) and "deferLoading" in tool:
                raise V4MigrationRefused(f"{where}: header.tools[{i}] carries deferLoading, defined only in v4")
    elif kind in ("assistant/message", "assistant/attempt") and isinstance(data.get("stream"), list):
        stream = []
        for i, entry in enumerate(data["stream"]):
            chunk = entry.get("chunk") if isinstance(entry, dict) and entry.get("type") == "chunk" else None
            if isinstance(chunk, dict) and chunk.get("type") == "block-end":
                entry = {**entry, "chunk": {**chunk, "block": _tag(chunk.get("block"), f"{where}.stream[{i}]")}}
            elif isinstance(chunk, dict) and chunk.get("type") == "block-start":
                block_type = chunk.get("blockType")
                if not isinstance(block_type, str):
                    raise V4MigrationRefused(f"{where}.stream[{i}]: blockType must be a string")
                if block_type == "tool-result":
                    raise V4MigrationRefused(f"{where}.stream[{i}]: a tool-result stream block")
                if block_type not in V3_BLOCK_TYPES:
                    entry = {**entry, "chunk": {**chunk, "blockType": "plugin:" + block_type}}
            stream.append(entry)
        data["stream"] = stream
    return event


def _remap(event: Event, target: int, mapping: list[int]) -> Event:
    """References to earlier events of the same log, moved to their v4 seqs (only when this event moved)."""
    if target == event["seq"]:
        return event
    source_seq = event["seq"]

    def ref(value: Any) -> int:
        if type(value) is not int or not 0 <= value < source_seq:
            raise V4MigrationRefused(f"seq {source_seq}: reference {value!r} is not a plain earlier seq")
        return mapping[value]

    def refs(value: Any) -> list[int]:
        if not isinstance(value, list):
            raise V4MigrationRefused(f"seq {source_seq}: references must be an array")
        return [ref(item) for item in value]

    event = json.loads(json.dumps(event))
    data = event.get("data")
    kind = event["type"]
    if kind == "command/done" and isinstance(data, dict) and "sourceEventSeq" in data:
        data["sourceEventSeq"] = ref(data["sourceEventSeq"])
    elif kind in ("compaction/summary", "compaction/prune") and isinstance(data, dict):
        shadowed = data.get("shadowedRange")
        if not isinstance(shadowed, dict):
            raise V4MigrationRefused(f"seq {source_seq}: {kind} without shadowedRange")
        shadowed["start"], shadowed["end"] = ref(shadowed.get("start")), ref(shadowed.get("end"))
        data["shadowedSeqs"] = refs(data.get("shadowedSeqs"))
    elif kind in ("session/title", "session/title-llm-request") and isinstance(data, dict):
        data["messageSeqs"] = refs(data.get("messageSeqs"))
    elif kind == "image/offload" and isinstance(data, dict):
        targets = data.get("targets")
        if not isinstance(targets, list) or not all(isinstance(t, dict) for t in targets):
            raise V4MigrationRefused(f"seq {source_seq}: image/offload targets must be objects")
        for item in targets:
            item["seq"] = ref(item.get("seq"))
    if "sourceEventSeqs" in event:
        event["sourceEventSeqs"] = refs(event["sourceEventSeqs"])
    op = event.get("surfaceOp")
    if isinstance(op, dict):
        op["startSeq"], op["endSeq"] = ref(op.get("startSeq")), ref(op.get("endSeq"))
    event["seq"] = target
    return event


def _check_delivery(data: Any, seq: int, session_id: Any) -> None:
    """A delivery marker is kept unchanged (its coordinates are generation-qualified, never remapped). Refused: a
    v3 marker claiming generation 4 (upstream), and a generation-3 marker naming another Session (not handled)."""
    if not isinstance(data, dict):
        raise V4MigrationRefused(f"seq {seq}: delivery marker data must be an object")
    generation = data.get("sessionFormatVersion", 0)
    if generation == 4:
        raise V4MigrationRefused(f"seq {seq}: format v3 delivery marker claims target format v4")
    if generation == 3:
        through = data.get("throughSeq")
        if data.get("sessionId") != session_id:
            raise V4MigrationRefused(f"seq {seq}: a delivery marker naming another Session is not handled")
        if type(through) is not int or not 0 <= through < seq:
            raise V4MigrationRefused(f"seq {seq}: delivery throughSeq must precede its marker")


class _Closer:
    """Upstream's interrupted-turn evidence: open turn, no open step, previous event a next-turn splice."""

    def __init__(self) -> None:
        self.turn: int | None = None
        self.step_open = False
        self.spliced = False

    def observe(self, event: Event) -> int | None:
        data: dict[str, Any] = event["data"] if isinstance(event.get("data"), dict) else {}
        kind = event["type"]
        closes = (self.turn if kind == "turn/start" and self.turn is not None and not self.step_open
                  and self.spliced and data.get("turn") == self.turn + 1 else None)
        inserted = data.get("inserted")
        self.spliced = (kind == "agent/inbox/spliced" and data.get("target") == "next-turn"
                        and isinstance(inserted, list) and len(inserted) > 0)
        if kind == "turn/start" and type(data.get("turn")) is int:
            self.turn = data["turn"]
        elif kind == "turn/end":
            self.turn = None
        elif kind == "step/start":
            self.step_open = True
        elif kind == "step/end":
            self.step_open = False
        return closes


def migrate_events(header: dict[str, Any], events: list[Event]) -> tuple[dict[str, Any], list[Event], set[int]]:
    """(v4 header, v4 events, positions of the output events that are unchanged source events)."""
    if header.get("version") != 3:
        raise V4MigrationRefused(f"header version {header.get('version')!r} is not 3")
    seeded = header.get("isSeeded") is True
    closer = _Closer()
    mapping: list[int] = []
    out: list[Event] = []
    untouched: set[int] = set()
    for index, event in enumerate(events):
        if type(event.get("seq")) is not int or event["seq"] != index:
            raise V4MigrationRefused(f"event {index}: v3 source events must carry dense integer seqs")
        kind = event.get("type")
        if not isinstance(kind, str):
            raise V4MigrationRefused(f"seq {index}: event type must be a string")
        interrupted = closer.observe(event)
        if interrupted is not None:
            out.append({"type": "turn/end", "seq": len(out), "time": event.get("time"),
                        "data": {"turn": interrupted, "reason": {"kind": "interrupted"}}})
        target = len(out)
        data = event.get("data")
        if kind == "session/end-seed" and isinstance(data, dict) and data.get("inherited") is True and not seeded:
            raise V4MigrationRefused(f"seq {index}: an unseeded v3 log holds an inherited end-seed marker")
        if kind == "session-log-deepseek/delivery-accepted":
            _check_delivery(data, index, header.get("id"))
        if event.get("ignorable") is True and kind not in RELEASED_V3_EVENT_TYPES:
            mapping.append(target)
            out.append({**event, "type": "plugin:" + kind, "seq": target, "ignorable": True})
            continue
        if kind not in RELEASED_V3_EVENT_TYPES:
            raise V4MigrationRefused(f"format v3 contains unknown event type {json.dumps(kind)} at seq {index}")
        moved = _remap(event, target, mapping)
        mapping.append(target)
        converted = _rewrite_sources(moved)
        if kind == "tool/result":
            if not isinstance(data, dict):
                raise V4MigrationRefused(f"seq {index}: tool/result data must be an object")
            converted = json.loads(json.dumps(converted))
            converted["data"]["message"] = lift_tool_result(converted["data"]["message"], f"seq {index} tool/result")
        converted = _migrate_content(json.loads(json.dumps(converted)))
        if converted == event and list(converted) == list(event) and dumps_bytes(converted) == dumps_bytes(event):
            untouched.add(len(out))
        out.append(converted)
    return {**header, "version": 4}, out, untouched


def migrate_bytes(text: bytes) -> bytes:
    """A v3 JSONL log (one header line, one event per line) as v4 JSONL. Unchanged events keep their bytes; the
    others are written as JSON.stringify would (dsh_audit.jsjson)."""
    lines = [line for line in text.split(b"\n") if line.strip()]
    if not lines:
        raise V4MigrationRefused("empty log")
    header = json.loads(lines[0])
    events = [json.loads(line) for line in lines[1:]]
    # A projected snapshot (loop-snapshot fixtures: no seq/time on any row) is migrated with seq = row index and
    # written back projected; a log mixing both forms is refused.
    projected = bool(events) and not any("seq" in event or "time" in event for event in events)
    if projected:
        events = [{"type": e.get("type"), "seq": i, "time": 0, **{k: v for k, v in e.items() if k != "type"}}
                  for i, e in enumerate(events)]
    new_header, converted, untouched = migrate_events(header, events)
    out = [dumps_bytes(new_header)]
    for position, event in enumerate(converted):
        if projected:
            event = {k: v for k, v in event.items() if k not in ("seq", "time")}
        # an untouched event kept its seq, so it is the source line of that index
        out.append(lines[1 + position] if position in untouched else dumps_bytes(event))
    return b"\n".join(out) + b"\n"


def v4_name(v3_name: str) -> str:
    """session.v3.jsonl -> session.v4.jsonl, session.1.v3.jsonl -> session.1.v4.jsonl."""
    if not v3_name.endswith(".v3.jsonl"):
        raise V4MigrationRefused(f"{v3_name}: not a v3 log name")
    return v3_name.removesuffix(".v3.jsonl") + ".v4.jsonl"


def migrate_file(source: Path, out_dir: Path) -> Path:
    """Write the v4 successor of `source` into out_dir (created) and return its path."""
    target = Path(out_dir) / v4_name(Path(source).name)
    data = migrate_bytes(Path(source).read_bytes())
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target
