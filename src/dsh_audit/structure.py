"""Structural invariants that the fold itself does not need: turn/step enclosure, header placement and
reasons, tool call/result pairing, surface events the dispatched request could not have seen, and the rules
of the newer generations (settlements inside their step, the seeded cut's marker)."""

from __future__ import annotations

from collections.abc import Callable, Container
from typing import TYPE_CHECKING, Any

from .findings import Report
from .header import is_placeholder, system_text
from .readers.jsonvalue import MAX_SAFE_INTEGER
from .records import LogSource
from .seqlist import seq_facts
from .vocabulary import vocabulary

if TYPE_CHECKING:
    from .walker import Walked

LOG_ONLY_BEFORE_DISPATCH = ("request/header", "request/context")
# Surface types never late though logged between a header and its dispatch: the settlement itself, and a
# developer/message (v4), which follows the header it is bound to by design.
NEVER_LATE = frozenset({"assistant/message", "developer/message"})


def _turn_step(data: Any) -> tuple[Any, Any]:
    return (data.get("turn"), data.get("step")) if isinstance(data, dict) else (None, None)


_REPAIR_INPUTS = frozenset({"turn/start", "turn/end", "step/start", "step/end", "assistant/message", "tool/call",
                            "tool/result"})


class CrashRepair:
    """What the reference's load-time crash repair (interruptedTurnClosers in core/session repair.ts) would append
    to close an open tail turn: an error tool/result per unanswered call, then step/end, then an interrupted
    turn/end, with seqs continuing the log. Pending calls reset at every step/end and turn boundary, as there."""

    def __init__(self) -> None:
        self.turn: Any = None
        self.step: Any = None
        self.pending: dict[str, tuple[Any, int | None]] = {}   # call id -> (step, seq of its tool/call)

    def observe(self, kind: str, data: Any, seq: int) -> None:
        if kind not in _REPAIR_INPUTS:
            return
        data = data if isinstance(data, dict) else {}
        if kind in ("turn/start", "turn/end"):
            self.turn, self.step = (data.get("turn") if kind == "turn/start" else None), None
            self.pending.clear()
        elif kind == "step/start":
            self.step = data.get("step")
        elif kind == "step/end":
            self.step = None
            self.pending.clear()
        elif kind == "assistant/message":
            message = data.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and block.get("type") == "tool-call" and isinstance(block.get("id"), str):
                    self.pending[block["id"]] = (data.get("step"), None)
        elif kind == "tool/call" and isinstance(data.get("callId"), str) and data["callId"] in self.pending:
            self.pending[data["callId"]] = (self.pending[data["callId"]][0], seq)
        elif kind == "tool/result":
            message = data.get("message")
            source = message.get("source") if isinstance(message, dict) else None
            call_id = source.get("callId") if isinstance(source, dict) else None
            if isinstance(call_id, str):
                self.pending.pop(call_id, None)

    def closers(self, last_seq: int | None) -> list[str]:
        """The synthetic events, described; empty when no turn is open."""
        if self.turn is None or last_seq is None:
            return []
        seq = last_seq + 1
        described = []
        for call_id, (step, call_seq) in self.pending.items():
            code = "TOOL_NOT_STARTED" if call_seq is None else f"TOOL_OUTCOME_UNKNOWN, citing tool/call seq {call_seq}"
            described.append(f"seq {seq} tool/result isError for call {call_id!r} of step {step} ({code})")
            seq += 1
        if self.step is not None:
            described.append(f"seq {seq} step/end {self.turn}.{self.step}")
            seq += 1
        described.append(f"seq {seq} turn/end {self.turn} {{kind:'interrupted'}}")
        return described


_PACKED_PAYLOAD = {"text-chunks": "texts", "reasoning-chunks": "texts", "tool-call-chunks": "args"}


def stream_record_problem(record: Any) -> str | None:
    """What the schema cannot say about a packed stream record (v2 on), as the v0 codec says it of a packed
    row: one dt gap between consecutive members, and member times that stay safe integers."""
    kind = record.get("type") if isinstance(record, dict) else None
    payload = _PACKED_PAYLOAD.get(kind) if isinstance(kind, str) else None
    if payload is None:
        return None
    members, gaps, time0 = record.get(payload), record.get("dt"), record.get("time0")
    if not isinstance(members, list) or not isinstance(gaps, list) or not set(map(type, gaps)) <= {int}:
        return None   # a shape the schema reports
    if len(gaps) != len(members) - 1:
        return f"{record['type']} record has {len(gaps)} dt gaps for {len(members)} members"
    if type(time0) is int and gaps and not -MAX_SAFE_INTEGER <= time0 + sum(gaps) <= MAX_SAFE_INTEGER:
        return f"{record['type']} record member times leave the safe integers"
    return None


def _stream_blocks(data: Any) -> tuple[list[Any], str | None]:
    """The blocks an embedded stream (v2 on) completed, in order, and its finish reason kind."""
    stream = data.get("stream") if isinstance(data, dict) else None
    blocks: list[Any] = []
    finish = None
    for record in stream if isinstance(stream, list) else ():
        chunk = record.get("chunk") if isinstance(record, dict) and record.get("type") == "chunk" else None
        if not isinstance(chunk, dict):
            continue
        if chunk.get("type") == "block-end":
            blocks.append(chunk.get("block"))
        elif chunk.get("type") == "finish":
            reason = chunk.get("reason")
            finish = reason.get("kind") if isinstance(reason, dict) else None
    return blocks, finish


def flags_error(message: Any) -> bool:
    """A tool result message flagged as an error: v4 on the message, v3 on its one tool-result block."""
    if not isinstance(message, dict):
        return False
    if message.get("role") == "tool":
        return message.get("isError") is True
    content = message.get("content")
    block = content[0] if isinstance(content, list) and content and isinstance(content[0], dict) else {}
    return block.get("isError") is True


def developer_header_problem(data: Any, header_seqs: Container[int]) -> str | None:
    """v4: a developer/message with tool additions names, by headerSeq, an earlier request/header (one of
    `header_seqs`), and carries no headerSeq without them. What is wrong, or None. Whether that header declares
    the added tools is not checked (docs/v4.md, "Not verified")."""
    message = data.get("message") if isinstance(data, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    adds = any(isinstance(block, dict) and block.get("type") == "tool-addition"
               for block in (content if isinstance(content, list) else ()))
    header_seq = data.get("headerSeq") if isinstance(data, dict) else None
    if adds and not (type(header_seq) is int and header_seq in header_seqs):
        return f"developer/message adds tools but its headerSeq {header_seq!r} names no earlier request/header"
    if not adds and header_seq is not None:
        return "developer/message must omit headerSeq without tool additions"
    return None


class StructureChecker:
    """A walk check (dsh_audit.walker.Check) of one log of the given generation."""

    def __init__(self, report: Report, source: LogSource) -> None:
        self.report = report
        self.generation = generation = source.generation
        header = source.header
        self.settles = generation.dispatch == "settlement"
        words = vocabulary(generation.version)
        self.surface_types = words.surface_types
        self.forbids_sources = words.forbids_sources
        self.header_seqs: set[int] = set()   # v4: a developer/message binds to an earlier request/header
        # v2 on: a seeded child must carry its inherited cut marker (a v0/v1 header names the cut instead)
        self.seeded = generation.seed_cut == "inherited-end-seed" and header.get("isSeeded") is True
        self.seed_markers = 0
        self.turn: int | None = None
        self.step: int | None = None
        self.headers_seen = 0
        self.instance_anchored = False   # the current loop instance has logged its initial/resume snapshot
        self.calls: dict[str, int] = {}          # unanswered tool-call id -> seq of the message that made it
        self.pre_dispatch_log_only: int | None = None  # seq of a header/context awaiting this attempt's chunk
        self.attempt_open = False
        self._pending_kind = ""
        self.late: list[tuple[int, str, str, int]] = []   # surface events between a header and a dispatch
        self.blocks: dict[int, Any] = {}          # seq -> completed block of a block-end chunk, since the last message
        self.finish_kind: str | None = None
        self.unenclosed: set[str] = set()      # repr of (turn, step, open turn, open step) already reported
        self.declared_tools: frozenset[str] | None = None   # tool names of the header in force (None: unknown)
        self.placeholder_reported = False   # placeholder headers are reported once per log
        self.repair = CrashRepair()
        self._handlers: dict[str, Callable[[Any, int], None]] = {
            "turn/start": self._on_turn_start, "turn/end": self._on_turn_end, "step/start": self._on_step_start,
            "step/end": self._on_step_end, "request/header": self._on_request_header,
            "request/context": self._on_request_context, "session/end-seed": self._on_session_end_seed,
            "assistant/chunk": self._on_assistant_chunk, "tool/result": self._on_tool_result,
            "assistant/attempt": self._on_assistant_attempt, "system/message": self._on_system_message,
            "developer/message": self._on_developer_message}

    def observe(self, walked: Walked) -> None:
        event = walked.event
        if event is None or walked.record is None:
            return
        seq = walked.record.seq
        kind = event["type"]
        data = event.get("data")
        self.repair.observe(kind, data, seq)
        if kind == "assistant/message":
            self._on_assistant_message(data, seq, event)
        elif not (kind == "tool/result" and isinstance(event.get("surfaceOp"), dict)):   # a rewrite, not an answer
            handler = self._handlers.get(kind)
            if handler is not None:
                handler(data, seq)
        # A surface event that lands between the header and the dispatch is reported once a dispatch does follow.
        if kind in self.surface_types and self.pre_dispatch_log_only is not None and not self.attempt_open \
                and kind not in NEVER_LATE:
            self.late.append((seq, kind, self._pending_kind, self.pre_dispatch_log_only))
        if kind in ("turn/start", "step/start", "step/end", "turn/end"):
            self.attempt_open = False
            self.late.clear()   # no dispatch followed: no request included them
        if not isinstance(event.get("surfaceOp"), dict):   # a replacement keeps the turn/step of what it replaces
            self._check_enclosed(kind, data, seq)

    # -- turns and steps --------------------------------------------------------------------------------
    def _on_turn_start(self, data: Any, seq: int) -> None:
        if self.turn is not None:
            self.report("turn-enclosure", f"turn/start while turn {self.turn} is still open", seq=seq,
                        event_type="turn/start")
        self.turn, self.step = (data.get("turn") if isinstance(data, dict) else None), None

    def _on_turn_end(self, data: Any, seq: int) -> None:
        turn = data.get("turn") if isinstance(data, dict) else None
        if self.turn is None or turn != self.turn:
            self.report("turn-enclosure", f"turn/end for turn {turn} but the open turn is {self.turn}", seq=seq,
                        event_type="turn/end")
        if self.step is not None:
            self.report("step-enclosure", f"turn/end while step {self.step} is still open", seq=seq,
                        event_type="turn/end")
        self.turn = self.step = None
        self.pre_dispatch_log_only = None

    def _on_step_start(self, data: Any, seq: int) -> None:
        turn, step = _turn_step(data)
        if self.turn is None or turn != self.turn:
            self.report("step-enclosure", f"step/start of turn {turn} outside that turn", seq=seq,
                        event_type="step/start")
        if self.step is not None:
            self.report("step-enclosure", f"step/start while step {self.step} is still open", seq=seq,
                        event_type="step/start")
        self.step = step
        self.pre_dispatch_log_only = None

    def _on_step_end(self, data: Any, seq: int) -> None:
        turn, step = _turn_step(data)
        if self.step is None or (turn, step) != (self.turn, self.step):
            self.report("step-enclosure", f"step/end for {turn}.{step} but the open step is "
                        f"{self.turn}.{self.step}", seq=seq, event_type="step/end")
        self.step = None
        self.pre_dispatch_log_only = None

    def _check_enclosed(self, kind: str, data: Any, seq: int) -> None:
        if kind not in ("assistant/chunk", "assistant/message", "tool/call", "tool/result"):
            return
        turn, step = _turn_step(data)
        if (turn, step) == (self.turn, self.step):
            return
        stray = repr((turn, step, self.turn, self.step))   # repr: a malformed turn may be an unhashable list
        if stray not in self.unenclosed:
            self.unenclosed.add(stray)   # once per stray step, not per chunk
            self.report("step-enclosure", f"{kind} for step {turn}.{step} outside it (open step: "
                        f"{self.turn}.{self.step})", seq=seq, event_type=kind)

    # -- headers and dispatch ---------------------------------------------------------------------------
    def _on_request_header(self, data: Any, seq: int) -> None:
        reason = data.get("reason") if isinstance(data, dict) else None
        if self.turn is None:
            self.report("header-placement", "request/header logged outside any turn", seq=seq,
                        event_type="request/header")
        if not self.instance_anchored:
            expected = "resume" if self.headers_seen else "initial"
            if reason != expected:
                self.report("instance-anchor", f"a loop instance's first request/header must have reason "
                            f"'{expected}', got '{reason}'", seq=seq, event_type="request/header")
            self.instance_anchored = True
        elif reason == "initial":
            self.report("instance-anchor", "reason 'initial' on a log that already has a request/header",
                        seq=seq, event_type="request/header")
        self.headers_seen += 1
        self.header_seqs.add(seq)
        self._mark_pre_dispatch(seq, "request/header")
        header = data.get("header") if isinstance(data, dict) else None
        tools = header.get("tools") if isinstance(header, dict) else None
        self._check_placeholders(header, seq)
        if tools is None or tools == []:
            self.declared_tools = frozenset()
        elif isinstance(tools, list) and all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools):
            self.declared_tools = frozenset(t["name"] for t in tools)
        else:
            self.declared_tools = None   # a placeholder such as "{{tools}}": the real tool set is not in the log

    def _on_system_message(self, data: Any, seq: int) -> None:
        self._check_in_step("system/message", data, seq)
        message = data.get("message") if isinstance(data, dict) else None
        if is_placeholder(system_text(message)):   # v3 on the prompt is scrubbed in the system head
            self._check_placeholders({"system": system_text(message)}, seq, "system/message")

    def _check_in_step(self, kind: str, data: Any, seq: int) -> None:
        """v3 on: the prompt (system/message) and tool updates (developer/message) belong to the open step whose
        request they shape."""
        if self.step is None or _turn_step(data) != (self.turn, self.step):
            turn, step = _turn_step(data)
            self.report("system-step", f"{kind} for step {turn}.{step} does not match an open turn and step "
                        f"(open: {self.turn}.{self.step})", seq=seq, event_type=kind)

    def _on_developer_message(self, data: Any, seq: int) -> None:
        self._check_in_step("developer/message", data, seq)
        problem = developer_header_problem(data, self.header_seqs)
        if problem is not None:
            self.report("developer-header", problem, seq=seq, event_type="developer/message")

    def _check_placeholders(self, header: Any, seq: int, event_type: str = "request/header") -> None:
        """Scrubbed logs (snapshot normalization) carry "{{system}}"-style tokens: the rebuilt bytes are then
        those of the scrubbed log, not what the model saw. A warning, so --strict can refuse such logs."""
        if self.placeholder_reported or not isinstance(header, dict):
            return
        fields = [key for key in ("system", "tools", "messagePrefix") if is_placeholder(header.get(key))]
        if fields:
            self.placeholder_reported = True
            self.report("placeholder-header", f"{'/'.join(fields)} are normalization placeholders: the request "
                        "bytes are those of the scrubbed log, not what the model saw (reported once per log)",
                        seq=seq, event_type=event_type, severity="warning")

    def _on_request_context(self, data: Any, seq: int) -> None:
        self._mark_pre_dispatch(seq, "request/context")

    def _mark_pre_dispatch(self, seq: int, kind: str) -> None:
        if not self.attempt_open:
            self.pre_dispatch_log_only, self._pending_kind = seq, kind

    def _on_session_end_seed(self, data: Any, seq: int) -> None:
        self.instance_anchored = False    # what follows is a new loop instance (resume or fork)
        marks_cut = isinstance(data, dict) and data.get("inherited") is True
        if self.generation.seed_cut == "inherited-end-seed" and marks_cut:
            self.seed_markers += 1
            if not self.seeded:
                self.report("seed-marker", "an unseeded session (header isSeeded false) carries an inherited "
                            "session/end-seed marker", seq=seq, event_type="session/end-seed", rejects=True)

    def _dispatched(self) -> None:
        """An attempt was dispatched (its first chunk, or its settlement from v2): the surface events logged
        since its header are in the rebuilt request, though the loop built the request before them."""
        for seq, kind, pending_kind, pending_seq in self.late:
            self.report("late-surface-event", f"surface event logged after the step's {pending_kind} "
                        f"(seq {pending_seq}) but before its dispatch: the request was built before it, yet the "
                        f"{self.generation.dispatch} boundary includes it", seq=seq, event_type=kind)
        self.late.clear()

    def _check_stream(self, data: Any, seq: int, kind: str) -> None:
        stream = data.get("stream") if isinstance(data, dict) else None
        for index, record in enumerate(stream if isinstance(stream, list) else ()):
            problem = stream_record_problem(record)
            if problem is not None:
                self.report("stream-record", f"data.stream[{index}]: {problem}", seq=seq, event_type=kind)

    def _on_assistant_attempt(self, data: Any, seq: int) -> None:
        """v2 on: a failed attempt's settlement. It must belong to the open turn and step."""
        self._dispatched()
        self._check_stream(data, seq, "assistant/attempt")
        self.attempt_open = False
        self.pre_dispatch_log_only = None
        if _turn_step(data) != (self.turn, self.step) or self.step is None:
            turn, step = _turn_step(data)
            self.report("attempt-step", f"assistant/attempt for step {turn}.{step} does not match an open turn "
                        f"and step (open: {self.turn}.{self.step})", seq=seq, event_type="assistant/attempt")

    def _on_assistant_chunk(self, data: Any, seq: int) -> None:
        chunk = data.get("chunk") if isinstance(data, dict) else None
        kind = chunk.get("type") if isinstance(chunk, dict) else None
        self._dispatched()
        self.attempt_open = kind != "finish"
        self.pre_dispatch_log_only = None
        if kind == "block-end" and isinstance(chunk, dict):
            self.blocks[seq] = chunk.get("block")
        elif kind == "finish" and isinstance(chunk, dict):
            reason = chunk.get("reason")
            self.finish_kind = reason.get("kind") if isinstance(reason, dict) else None

    # -- tool pairing -----------------------------------------------------------------------------------
    def _on_assistant_message(self, data: Any, seq: int, event: dict[str, Any] | None = None) -> None:
        self._dispatched()
        self.attempt_open = False
        self.pre_dispatch_log_only = None
        if "assistant/message" in self.forbids_sources and event is not None and "sourceEventSeqs" in event:
            self.report("assistant-provenance", f"format {self.generation.label} assistant/message carries "
                        "sourceEventSeqs; from v2 its chunks are embedded in data.stream instead",
                        seq=seq, event_type="assistant/message", rejects=True)
        if self.settles:
            self._check_stream(data, seq, "assistant/message")
            blocks, self.finish_kind = _stream_blocks(data)
            self.blocks = dict(enumerate(blocks))
        message = data.get("message") if isinstance(data, dict) else None
        content = (message or {}).get("content") or []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool-call" and isinstance(block.get("id"), str):
                self.calls.setdefault(block["id"], seq)
                name = block.get("name")
                if self.declared_tools is not None and (not isinstance(name, str) or name not in self.declared_tools):
                    self.report("tool-undeclared", f"tool call {block['id']!r} names tool {name!r}, which the "
                                "request/header in force does not declare", seq=seq, event_type="assistant/message")
        self._check_content_matches_chunks(data, content, seq, event)
        self.blocks, self.finish_kind = {}, None

    def _check_content_matches_chunks(self, data: Any, content: list[Any], seq: int,
                                      event: dict[str, Any] | None) -> None:
        """A completed message's content is exactly the blocks its cited chunks (v2 on: its stream) completed,
        in order."""
        if (isinstance(data, dict) and data.get("interrupted")) or self.finish_kind not in ("stop", "tool-calls"):
            return
        if self.settles:
            blocks = [block for _, block in sorted(self.blocks.items())]
            if blocks and blocks != content:
                self.report("message-chunk-mismatch", "assistant/message content differs from the blocks its "
                            "stream completed: the logged message was edited, or its stream was",
                            seq=seq, event_type="assistant/message")
            return
        sources = (event or {}).get("sourceEventSeqs")
        if not isinstance(sources, list) or not sources:
            return
        facts = seq_facts(sources)   # described once, shared with the schema and provenance checks
        ordered = sorted(self.blocks.items())
        if facts.contiguous:         # the usual citation, a run of chunk seqs: no set needed
            blocks = [block for seq, block in ordered if facts.low <= seq <= facts.high]
        else:
            try:
                cited = set(sources)
            except TypeError:        # unhashable entries (a surface-provenance finding already): skip them
                cited = {s for s in sources if isinstance(s, int)}
            blocks = [block for seq, block in ordered if seq in cited]
        if blocks and blocks != content:
            self.report("message-chunk-mismatch", "assistant/message content differs from the blocks its cited "
                        "chunks completed: the logged message was edited, or its chunks were",
                        seq=seq, event_type="assistant/message")

    def _on_tool_result(self, data: Any, seq: int) -> None:
        message = data.get("message") if isinstance(data, dict) else None
        if isinstance(data, dict) and "error" in data and self.generation.error_needs_flag \
                and not flags_error(message):
            self.report("tool-result-error", "tool/result carries error metadata for a result not flagged isError",
                        seq=seq, event_type="tool/result")
        source = (message or {}).get("source") or {}
        call_id = source.get("callId") if isinstance(source, dict) else None
        if not isinstance(call_id, str):
            return
        if self.calls.pop(call_id, None) is None:   # answered calls are dropped: memory stays bounded
            self.report("tool-pairing", f"tool/result for call {call_id!r}, which no unanswered tool call of an "
                        "assistant message awaits (never made, or answered already)", seq=seq,
                        event_type="tool/result")

    def finish(self, last_seq: int | None) -> None:
        if self.seeded and self.seed_markers == 0:
            self.report("seed-marker", "a seeded session (header isSeeded) has no inherited session/end-seed "
                        "marker: its inherited cut is unknown", seq=None, event_type=None, rejects=True)
        open_turn = self.turn is not None
        for call_id, seq in self.calls.items():
            self.report("tool-pairing", f"tool call {call_id!r} has no tool/result"
                        + (" (the turn is still open: the log was cut off; the reference's load-time "
                           "repair would close it)" if open_turn else ""),
                        seq=seq, event_type="assistant/message",
                        severity="warning" if open_turn else "error")
        if open_turn:
            closers = self.repair.closers(last_seq)
            self.report("open-turn", f"log ends inside turn {self.turn}: the session was cut off; on load the "
                        "reference's crash repair would append " + (", ".join(closers) or "nothing"),
                        seq=last_seq, event_type=None, severity="warning")
