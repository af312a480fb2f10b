"""Structural invariants that the fold itself does not need: turn/step enclosure, header placement and
reasons, tool call/result pairing, surface events the dispatched request could not have seen, and the rules
of the newer generations (settlements inside their step, the seeded cut's marker)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .findings import Report
from .header import system_text
from .records import LogSource
from .rules import (
    anchor_problem,
    assistant_sources_problem,
    chunk_mismatch_problem,
    cited_blocks,
    declared_tools,
    developer_header_problem,
    header_placement_problem,
    is_late,
    late_problem,
    matches_chunks,
    open_turn_problem,
    outside_step_problem,
    packed_record_problem,
    placeholder_problem,
    step_end_problem,
    step_left_open_problem,
    step_mismatch_problem,
    step_start_step_problem,
    step_start_turn_problem,
    tool_pairing_problem,
    turn_end_problem,
    turn_start_problem,
    unanswered_call_problem,
    undeclared_tool_problem,
    unflagged_error_problem,
)
from .seqlist import seq_facts
from .vocabulary import vocabulary

if TYPE_CHECKING:
    from .walker import Walked

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
    return packed_record_problem(kind, len(members), gaps, time0 if type(time0) is int else None)


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


class StructureChecker:
    """A walk check (dsh_audit.walker.Check) of one log of the given generation."""

    def __init__(self, report: Report, source: LogSource) -> None:
        self.report = report
        self.generation = generation = source.generation
        header = source.header
        self.settles = generation.dispatch == "settlement"
        words = vocabulary(generation.version)
        self.surface_types = words.surface_types
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
        self.late: list[tuple[int, str, str, int | None]] = []   # surface events between a header and a dispatch
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
        if kind in self.surface_types and is_late(kind, self.pre_dispatch_log_only, self.attempt_open):
            self.late.append((seq, kind, self._pending_kind, self.pre_dispatch_log_only))
        if kind in ("turn/start", "step/start", "step/end", "turn/end"):
            self.attempt_open = False
            self.late.clear()   # no dispatch followed: no request included them
        if not isinstance(event.get("surfaceOp"), dict):   # a replacement keeps the turn/step of what it replaces
            self._check_enclosed(kind, data, seq)

    # -- turns and steps --------------------------------------------------------------------------------
    def _on_turn_start(self, data: Any, seq: int) -> None:
        if problem := turn_start_problem(self.turn):
            self.report("turn-enclosure", problem, seq=seq, event_type="turn/start")
        self.turn, self.step = (data.get("turn") if isinstance(data, dict) else None), None

    def _on_turn_end(self, data: Any, seq: int) -> None:
        turn = data.get("turn") if isinstance(data, dict) else None
        if problem := turn_end_problem(turn, self.turn):
            self.report("turn-enclosure", problem, seq=seq, event_type="turn/end")
        if problem := step_left_open_problem(self.step):
            self.report("step-enclosure", problem, seq=seq, event_type="turn/end")
        self.turn = self.step = None
        self.pre_dispatch_log_only = None

    def _on_step_start(self, data: Any, seq: int) -> None:
        turn, step = _turn_step(data)
        if problem := step_start_turn_problem(turn, self.turn):
            self.report("step-enclosure", problem, seq=seq, event_type="step/start")
        if problem := step_start_step_problem(self.step):
            self.report("step-enclosure", problem, seq=seq, event_type="step/start")
        self.step = step
        self.pre_dispatch_log_only = None

    def _on_step_end(self, data: Any, seq: int) -> None:
        turn, step = _turn_step(data)
        if problem := step_end_problem(turn, step, self.turn, self.step):
            self.report("step-enclosure", problem, seq=seq, event_type="step/end")
        self.step = None
        self.pre_dispatch_log_only = None

    def _check_enclosed(self, kind: str, data: Any, seq: int) -> None:
        if kind not in ("assistant/chunk", "assistant/message", "tool/call", "tool/result"):
            return
        turn, step = _turn_step(data)
        problem = outside_step_problem(kind, turn, step, self.turn, self.step)
        if problem is None:
            return
        stray = repr((turn, step, self.turn, self.step))   # repr: a malformed turn may be an unhashable list
        if stray not in self.unenclosed:
            self.unenclosed.add(stray)   # once per stray step, not per chunk
            self.report("step-enclosure", problem, seq=seq, event_type=kind)

    # -- headers and dispatch ---------------------------------------------------------------------------
    def _on_request_header(self, data: Any, seq: int) -> None:
        reason = data.get("reason") if isinstance(data, dict) else None
        if problem := header_placement_problem(self.turn):
            self.report("header-placement", problem, seq=seq, event_type="request/header")
        if problem := anchor_problem(self.instance_anchored, self.headers_seen, reason):
            self.report("instance-anchor", problem, seq=seq, event_type="request/header")
        self.instance_anchored = True
        self.headers_seen += 1
        self.header_seqs.add(seq)
        self._mark_pre_dispatch(seq, "request/header")
        header = data.get("header") if isinstance(data, dict) else None
        tools = header.get("tools") if isinstance(header, dict) else None
        self._check_placeholders(header, seq)
        self.declared_tools = declared_tools(tools)

    def _on_system_message(self, data: Any, seq: int) -> None:
        self._check_in_step("system/message", data, seq)
        message = data.get("message") if isinstance(data, dict) else None
        # v3 on: the prompt is scrubbed in the system head
        self._check_placeholders({"system": system_text(message)}, seq, "system/message")

    def _check_in_step(self, kind: str, data: Any, seq: int) -> None:
        """v3 on: the prompt (system/message) and tool updates (developer/message) belong to the open step whose
        request they shape."""
        turn, step = _turn_step(data)
        if problem := step_mismatch_problem(kind, turn, step, self.turn, self.step):
            self.report("system-step", problem, seq=seq, event_type=kind)

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
        if problem := placeholder_problem(header):
            self.placeholder_reported = True
            self.report("placeholder-header", problem, seq=seq, event_type=event_type, severity="warning")

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
            self.report("late-surface-event", late_problem(pending_kind, pending_seq, self.generation.dispatch),
                        seq=seq, event_type=kind)
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
        turn, step = _turn_step(data)
        if problem := step_mismatch_problem("assistant/attempt", turn, step, self.turn, self.step):
            self.report("attempt-step", problem, seq=seq, event_type="assistant/attempt")

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
        generation = self.generation
        if problem := assistant_sources_problem(generation.assistant_sources,
                                                event is not None and "sourceEventSeqs" in event, generation.label):
            self.report("assistant-provenance", problem, seq=seq, event_type="assistant/message", rejects=True)
        if self.settles:
            self._check_stream(data, seq, "assistant/message")
            blocks, self.finish_kind = _stream_blocks(data)
            self.blocks = dict(enumerate(blocks))
        message = data.get("message") if isinstance(data, dict) else None
        content = (message or {}).get("content") or []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool-call" and isinstance(block.get("id"), str):
                self.calls.setdefault(block["id"], seq)
                problem = undeclared_tool_problem(self.declared_tools, block["id"], block.get("name"))
                if problem is not None:
                    self.report("tool-undeclared", problem, seq=seq, event_type="assistant/message")
        self._check_content_matches_chunks(data, content, seq, event)
        self.blocks, self.finish_kind = {}, None

    def _check_content_matches_chunks(self, data: Any, content: list[Any], seq: int,
                                      event: dict[str, Any] | None) -> None:
        """A completed message's content is exactly the blocks its cited chunks (v2 on: its stream) completed,
        in order."""
        if not matches_chunks(bool(isinstance(data, dict) and data.get("interrupted")), self.finish_kind):
            return
        if self.settles:
            blocks = [block for _, block in sorted(self.blocks.items())]
        else:
            sources = (event or {}).get("sourceEventSeqs")
            if not isinstance(sources, list) or not sources:
                return
            facts = seq_facts(sources)   # described once, shared with the schema and provenance checks
            blocks = cited_blocks(sorted(self.blocks.items()), sources, facts.low, facts.high, facts.contiguous)
        if problem := chunk_mismatch_problem(self.settles, blocks, content):
            self.report("message-chunk-mismatch", problem, seq=seq, event_type="assistant/message")

    def _on_tool_result(self, data: Any, seq: int) -> None:
        message = data.get("message") if isinstance(data, dict) else None
        if isinstance(data, dict) and "error" in data \
                and (problem := unflagged_error_problem(self.generation.error_needs_flag, message)):
            self.report("tool-result-error", problem, seq=seq, event_type="tool/result")
        source = (message or {}).get("source") or {}
        call_id = source.get("callId") if isinstance(source, dict) else None
        if not isinstance(call_id, str):
            return
        # answered calls are dropped: memory stays bounded
        if problem := tool_pairing_problem(self.calls.pop(call_id, None), call_id):
            self.report("tool-pairing", problem, seq=seq, event_type="tool/result")

    def finish(self, last_seq: int | None) -> None:
        if self.seeded and self.seed_markers == 0:
            self.report("seed-marker", "a seeded session (header isSeeded) has no inherited session/end-seed "
                        "marker: its inherited cut is unknown", seq=None, event_type=None, rejects=True)
        open_turn = self.turn is not None
        for call_id, seq in self.calls.items():
            self.report("tool-pairing", unanswered_call_problem(call_id, open_turn), seq=seq,
                        event_type="assistant/message", severity="warning" if open_turn else "error")
        if problem := open_turn_problem(self.turn):
            closers = self.repair.closers(last_seq)
            self.report("open-turn", f"{problem}; on load the reference's crash repair would append "
                        + (", ".join(closers) or "nothing"), seq=last_seq, event_type=None, severity="warning")
