"""The fast verifier: decide, in one pass, that a log has no finding at all, and compute its request digests.

Each line is decoded by its type's generated decoder (dsh_audit.fastpath.types: schema, envelope and surface rules
checked in C while parsing), then one loop keeps the state of the request fold (dsh_audit.fold, whose dispatch state,
fold.Dispatches, and surface, surface.Surface, it holds as the fold does), the structural checks
(dsh_audit.structure), admission (dsh_audit.admission) and the migration notes (dsh_audit.successors) for the shapes
it covers, and asks the rules they ask (dsh_audit.rules). It never words a finding: wherever the full verifier would
report anything (an error, a warning or a note), or a shape is not covered, it raises Doubt and the caller runs the
full verifier. Being stricter than the full verifier is always allowed; being more lenient never is.

Message bytes: a request digest hashes the JSON.stringify bytes of each message. The stored bytes of the message
(msgspec.Raw) are used when provably identical (`message_bytes` says why); otherwise they are serialized as the
fold does (dsh_audit.jsjson).

Model calls (opt-in, for cache-report: dsh_audit.fastpath.calls): each request is then built as the fold's
RebuiltRequest, its body by reference, and handed out with its answer when it closes, beside the compaction,
response and title calls (dsh_audit.model_calls). Off, as for verify, the loop does nothing more than a pointer
comparison.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import msgspec
import orjson

from .. import rules
from ..digest_spool import DigestLines, DigestSpool
from ..fold import (
    Cause,
    Dispatches,
    RebuiltRequest,
    RequestParts,
    RunningDigest,
    end_seed_cause,
    header_causes,
    priced_usage,
    replace_cause,
)
from ..generations import Generation
from ..header import HeaderSnapshot, snapshot, system_text
from ..jsjson import dumps_bytes
from ..model_calls import Call, StoredMessage, other_call
from ..readers import packed
from ..readers.jsonvalue import deeper_than, parse_json
from ..readers.packed import over_member_cap
from ..records import RequestDigest
from ..shape import header_problem
from ..surface import EMPTY_PROJECTS_NOTHING, Surface, SurfaceError, check_cited
from .lines import Doubt
from .types import FLAGS, FastTypes, MessageType, fast_types, seq_run

UNSET = msgspec.UNSET
_DECODE_ERRORS = (msgspec.ValidationError, msgspec.DecodeError)
_ENCODE_INTO = msgspec.json.Encoder().encode_into
_SCRATCH = bytearray()   # msgspec's writing of the message being proved: only its length is read
_CONTROL_ESCAPE = re.compile(rb"\\u00").search   # re finds it faster than `in` (its prefix scan skips better)
# Types some rule of the fold or the checks reads: each has a handler below, or (image/offload) is left to the full
# verifier. Every other known type is only checked against its schema.
_FOLDED = frozenset({
    "turn/start", "turn/end", "step/start", "step/end", "request/header", "request/context", "session/end-seed",
    "assistant/chunk", "tool/result", "assistant/attempt", "system/message", "developer/message",
    "assistant/message", "tool/call", "user/message", "image/offload", "subagent/descriptor", "compaction/end"})


def message_bytes(raw: msgspec.Raw, kind: MessageType, prove: bool = True, *, spelling: bool = True
                  ) -> tuple[Any, Any]:
    """(the typed message, the JSON.stringify bytes of it): the stored bytes when provably those, else serialized.
    Without `prove` (no digest is computed, so no byte is hashed) the stored bytes stand for it unproved. Without
    `spelling` (cache-report, which only parses them) bytes that provably hold JSON.stringify's value do: those
    of a provable type with no `Any` position written otherwise, the rest of the proof being about spelling.

    The proof: msgspec writes every string (checked for every code point), safe integer and literal as
    JSON.stringify does, and JSON.stringify's text is the shortest of all JSON texts of a value (whitespace, a
    duplicate key, "-0", an escape where a character or a shorter escape would do: each only lengthens it). Two
    same-length spellings remain, and are excluded: a control character's \\u00XX escape in upper case (any
    stored \\u00 sends the message to the serializer) and the values msgspec itself writes otherwise (floats,
    integers beyond 2**53, array-index keys, which JS lists first: a provable type has none, an `Any` position is
    checked while decoding). So stored bytes as long as msgspec's writing of the decoded message are
    JSON.stringify's, byte for byte."""
    if kind.anyish:   # `Any` positions report what msgspec would write otherwise (types.plain) while decoding
        FLAGS.active, FLAGS.unplain = True, 0
        try:
            message = kind.decoder.decode(raw)
        except _DECODE_ERRORS:
            raise Doubt("message shape") from None
        finally:
            FLAGS.active = False
    else:
        try:
            message = kind.decoder.decode(raw)
        except _DECODE_ERRORS:
            raise Doubt("message shape") from None
    stored = raw   # hashed as it is (Raw is a buffer over the line, which the surface then keeps alive)
    if not prove:
        return message, stored
    if (kind.provable and not (kind.anyish and FLAGS.unplain)
            and (not spelling or (_CONTROL_ESCAPE(stored) is None
                                  and (_ENCODE_INTO(message, _SCRATCH), len(_SCRATCH))[1] == len(stored)))):
        return message, stored
    return message, dumps_bytes(orjson.loads(memoryview(raw)))


_MISSING = object()
_NO_PREFIX: list[bytes] = []   # the fast path folds no messagePrefix: every request shares this empty one


_SCALARS = frozenset({str, int, bool, float, type(None), type(UNSET), msgspec.Raw})


def within(value: Any, room: int, types: FastTypes) -> bool:
    """Whether a decoded value nests no deeper than `room` levels (a Struct, list or object is one level): by its
    generated type where that bounds it, walking only the fields that can nest without bound; False when it
    holds an untyped container (then the caller counts brackets as the readers do). A msgspec.Raw counts nothing:
    its owner checks it once decoded."""
    static = types.static_depth.get
    kind = type(value)
    depth = static(kind)
    if depth is not None:
        return bool(depth <= room)
    walk = types.walks.get(kind)
    if walk is None:
        if kind in _SCALARS:
            return True
        if kind is list and room > 0:
            return all(within(item, room - 1, types) for item in value)
        return False   # a dict of an `Any` position (or a list past the room)
    fixed, fields = walk
    if fixed > room:
        return False
    for name in fields:
        field = getattr(value, name)
        if type(field) is list:   # content blocks, say: most are of a bounded type
            if room < 2:
                return False
            for item in field:
                depth = static(type(item))
                if depth is None:
                    if not within(item, room - 2, types):
                        return False
                elif depth > room - 2:
                    return False
        elif type(field) not in _SCALARS and not within(field, room - 1, types):
            return False
    return True


def _log_only(event: Any, seq: int, line: bytes) -> None:
    """A known type that nothing folds or checks beyond its schema."""


def _projected(kind: str, message: Any, stored: Any) -> Any:
    """What a surface event's message projects to (dsh_audit.surface.derive_message): its bytes, or None."""
    return None if kind in EMPTY_PROJECTS_NOTHING and not message.content else stored



def _tool_data(line: bytes) -> Any:
    """A tool/result's data, from the line the surface keeps for it (parsed only when a rewrite is checked)."""
    return orjson.loads(line)["data"]



class _Request:
    __slots__ = ("attempt", "causes", "dispatch_seq", "extends_previous", "inherited", "sha256", "step", "turn")

    def __init__(self, turn: int, step: int, attempt: int, dispatch_seq: int, inherited: bool) -> None:
        self.turn, self.step, self.attempt, self.dispatch_seq = turn, step, attempt, dispatch_seq
        self.inherited = inherited
        self.sha256: str | None = None
        self.extends_previous = True
        self.causes: list[Cause] = []


class FastVerifier:
    """One log: `feed` it the raw lines after the header (in batches, to take `model_calls` out as they come),
    then `finish` returns the dispatched requests. `message_prefix` (the fold's mode) changes nothing here: a
    header with a messagePrefix is a doubt."""

    def __init__(self, header: dict[str, Any], generation: Generation, message_prefix: str, *,
                 keep_requests: bool = True, model_calls: bool = False, digest_lines: bool = False) -> None:
        if not generation.fast_path:
            raise Doubt(f"generation v{generation.version}")
        self.types: FastTypes = fast_types(generation.version)
        self.generation = generation
        self.settles = generation.dispatch == "settlement"
        self.tool_message = generation.tool_result == "tool-message"   # v4: the result is the message itself
        self.header_system = generation.system_prompt == "header"
        self.protect_head = generation.system_prompt == "surface"
        self.start_key, self.end_key = generation.replace_keys
        if generation.seed_cut == "seedLength":
            cut = header.get("seedLength")
            self.seed_cut = cut if isinstance(cut, int) and not isinstance(cut, bool) else None
        else:
            if header.get("isSeeded") is True:
                raise Doubt("seeded child (its cut needs a second pass)")
            self.seed_cut = None
        self.events = 0
        self.keep_requests = keep_requests   # off: only counted, so memory stays bounded by the live surface
        # Request digests only where an output shows them: kept requests and rebuild's digest lines. Neither
        # verify's table nor cache-report (model calls) shows one, and hashing every request's body was a fifth of
        # cache-report's CPU. Model calls still hold bytes of each message's JSON.stringify value, which
        # cache-report parses.
        self.digests = keep_requests or digest_lines
        self.stringified = keep_requests or model_calls or digest_lines
        self.requests = DigestSpool()   # their digests, when kept (verify --format json)
        self.lines = DigestLines() if digest_lines else None   # rebuild --format digest's lines, as printed
        # the fold
        self.header: HeaderSnapshot | None = None
        self.open_attempt: tuple[int, int] | None = None
        self.dispatches = Dispatches()
        self.current: _Request | RebuiltRequest | None = None
        self._running = RunningDigest()
        # the surface
        self.surface = Surface(protect_head=self.protect_head, tool_data=_tool_data)
        # the structural checks
        self.turn: int | None = None
        self.step: int | None = None
        self.headers_seen = 0
        self.header_seqs: set[int] = set()         # v4: what a developer/message's headerSeq may name
        self.instance_anchored = False
        self.calls: dict[str, int] = {}
        self.pre_dispatch: int | None = None
        self.pending_kind = ""                     # what logged `pre_dispatch`: request/header or request/context
        self.attempt_open = False
        self.late: tuple[str, int | None] | None = None   # the first late surface event's pending kind and seq
        self.blocks: dict[int, Any] = {}
        self.finish_kind: str | None = None
        self.declared_tools: frozenset[str] | None = None
        chunk_types = self.types.chunk_classes
        self.finish_class, self.block_end_class = chunk_types.get("finish"), chunk_types.get("block-end")
        self.tool_row_class = self.types.packed.get("tool-call-chunks")
        self.tag = self.types.tags.get
        self.tool_call_classes = frozenset(cls for cls, tag in self.types.tags.items() if tag == "tool-call")
        self.max_depth = 0       # the readers' depth cap (0: none), set by feed
        self.step_seen = False   # successors: a surface event before the first step/start (v0-v2)
        self.last_line = b"\n"
        # cache-report's calls (dsh_audit.fastpath.calls): each request as the fold rebuilds it, with its answer,
        # and the other priced calls, in log order; taken out by the caller between feeds
        self.model_calls: list[Call] | None = [] if model_calls else None
        self.usage_class = chunk_types.get("usage") if model_calls else None
        # header-diff's snapshots (reports.fast_walk): told of every event that may change the header in force or
        # the system head; the turn and step last started, as header-diff dates a snapshot (a turn or step ended
        # since still dates it)
        self.on_header: Callable[[int], None] | None = None
        self.last_turn: int | None = None
        self.last_step: int | None = None
        self.session_id = str(header.get("id"))
        parent = header.get("parentSession")
        self.parent_id = parent if isinstance(parent, str) else None
        self.table = self._handlers()
        self.packed_classes = tuple(cls for cls, handler in self.table.items() if handler is None)

    @property
    def request_count(self) -> int:
        return self.dispatches.count

    # -- the loop ------------------------------------------------------------------------------------------
    def _handlers(self) -> dict[type, Any]:
        """Struct of a line -> its handler; None: a packed row."""
        handlers = {
            "assistant/chunk": self._chunk_line, "assistant/message": self._assistant_message,
            "tool/result": self._tool_result, "user/message": self._user_message, "tool/call": self._tool_call,
            "step/start": self._step_start, "step/end": self._step_end, "turn/start": self._turn_start,
            "turn/end": self._turn_end, "request/header": self._request_header,
            "request/context": self._request_context, "session/end-seed": self._end_seed,
            "assistant/attempt": self._assistant_attempt, "system/message": self._system_message,
            "developer/message": self._developer_message, "subagent/descriptor": self._descriptor,
            "compaction/end": self._compaction_end}
        if self.model_calls is not None:
            handlers["compaction/summary"] = self._compaction_summary
            handlers["session/title-llm-request"] = self._title_request
        table: dict[type, Any] = {}
        for kind, cls in self.types.events.items():
            handler = handlers.get(kind)
            if handler is None and kind not in _FOLDED:
                handler = _log_only
            if handler is not None:
                table[cls] = handler
        if self.generation.packed_chunk_rows:
            for cls in self.types.packed.values():
                table[cls] = None
        return table

    def feed(self, lines: Iterable[bytes], *, max_line: int | None = None, max_depth: int | None = None) -> None:
        """The next lines after the header (a trailing newline is whitespace to the decoders), in as many calls
        as the caller likes. `max_line`, `max_depth`: the readers' caps (dsh_audit.readers.limits), past which
        the full verifier reports a read error."""
        table = self.table
        chunk_class = self.types.events.get("assistant/chunk")
        packed_classes = self.packed_classes
        tool_row = self.tool_row_class
        decode = self.types.line.decode
        decode_error = _DECODE_ERRORS
        lookup = table.get
        finish, block_end, usage = self.finish_class, self.block_end_class, self.usage_class
        missing = _MISSING
        expected = self.events
        line = self.last_line
        deep = self.types.deep if max_depth is not None else frozenset()
        depth = max_depth if max_depth is not None else 0
        self.max_depth = depth
        types = self.types
        long_line = 2 * depth if depth else 1 << 62   # shorter lines hold too few brackets to nest that deep
        cap = max_line if max_line is not None else 1 << 62
        scanned = packed.SCANNED_LINE_BYTES
        for line in lines:
            if len(line) > scanned and over_member_cap(line) is not None:   # the full verifier refuses it unparsed
                raise Doubt("a packed run over the member cap")
            try:
                event = decode(line)
            except decode_error as error:   # a shape its generated type refuses, or a type it has no decoder for
                raise Doubt(f"line shape: {str(error)[:100]}") from None
            if len(line) > cap:
                raise Doubt("a line over the line cap")
            cls = type(event)
            if cls is chunk_class:   # the commonest line: one raw chunk (v0/v1)
                seq = event.seq
                if seq != expected:
                    raise Doubt("seq not contiguous or absent")
                expected = seq + 1
                data = event.data
                chunk = data.chunk
                chunk_type = type(chunk)
                if chunk_type is block_end or chunk_type is finish:   # the chunks that can nest without bound
                    if len(line) > long_line and not within(event, depth, types):
                        self._depth_check(line)
                    if chunk_type is finish or (data.turn, data.step) != self.open_attempt:
                        self._chunk(data.turn, data.step, seq, chunk, event.time)
                    else:
                        self.blocks[seq] = chunk.block
                elif (data.turn, data.step) != self.open_attempt:
                    self._chunk(data.turn, data.step, seq, chunk, event.time)
                elif chunk_type is usage:   # only with model_calls: the open attempt's usage
                    self._usage(chunk.usage)
                continue
            if cls in packed_classes:   # a packed run of delta chunks (v0/v1)
                seq = event.seq0
                if seq != expected or event.time0 is UNSET:
                    raise Doubt("packed row seq")
                data = event.data
                count = len(data.dt) + 1   # the tightened decoder bounds seq0, time0 and the gaps (types.py)
                if count != len(data.args if cls is tool_row else data.texts):
                    raise Doubt("packed row gaps")
                expected = seq + count
                if (data.turn, data.step) != self.open_attempt:   # else nothing changes: deltas of an open attempt
                    self._chunk(data.turn, data.step, seq, None, event.time0)
                continue
            if cls in deep and len(line) > long_line and not within(event, depth, types):   # messages: in handlers
                self._depth_check(line)
            handler = lookup(cls, missing)
            if handler is missing:
                raise Doubt("an event type the fast path does not fold")
            seq = event.seq
            if seq != expected:
                raise Doubt("seq not contiguous or absent")
            expected = seq + 1
            handler(event, seq, line)
        self.events = expected   # seqs run contiguously from 0: one per event, a packed row's members included
        self.last_line = line

    def finish(self, *, check_newline: bool = False) -> DigestSpool:
        """The end of the log: the dispatched requests (when kept). `check_newline`: the lines kept their
        newline, and the last one must have it."""
        if self.model_calls is not None:
            self._close()   # the attempt still open, as the fold hands it out at the end
        if check_newline and not self.last_line.endswith(b"\n"):
            raise Doubt("unterminated final line")
        if self.events == 0:
            raise Doubt("empty log")
        if self.calls:
            raise Doubt(rules.unanswered_call_problem(next(iter(self.calls)), self.turn is not None))
        if problem := rules.open_turn_problem(self.turn):
            raise Doubt(problem)
        return self.requests

    def _depth_check(self, line: bytes) -> None:
        """The readers' depth cap, as they test it: a long line with many brackets is walked."""
        depth = self.max_depth
        if len(line) > 2 * depth and line.count(b"[") + line.count(b"{") > depth \
                and deeper_than(orjson.loads(line), depth):
            raise Doubt("JSON nested deeper than the depth cap")

    def _message(self, raw: msgspec.Raw, kind: str, above: int, line: bytes) -> tuple[Any, Any]:
        """A surface event's message, typed, and its bytes; `above`: the levels of the line above the message."""
        message, stored = message_bytes(raw, self.types.messages[kind], self.stringified, spelling=self.digests)
        if self.max_depth and len(line) > 2 * self.max_depth \
                and not within(message, self.max_depth - above, self.types):
            self._depth_check(line)
        return message, stored

    # -- chunks ----------------------------------------------------------------------------------------------
    def _chunk_line(self, event: Any, seq: int, line: bytes) -> None:
        data = event.data
        self._chunk(data.turn, data.step, seq, data.chunk, event.time)

    def _chunk(self, turn: int, step: int, seq: int, chunk: Any, time: Any) -> None:
        """A delta run (chunk None) or one raw chunk of a first-chunk generation (v0/v1); `time`: its time."""
        key = (turn, step)
        # the fold
        if key != self.open_attempt:
            self._close()
        if self.open_attempt is None:
            self._dispatch(key, seq, "first-chunk", "assistant/chunk", time)
            self.open_attempt = key
        kind = None if chunk is None else self.tag(type(chunk))
        if kind == "finish" and self.current is not None:
            self.open_attempt = None
            if isinstance(self.current, RebuiltRequest):
                self.current.finish = self.tag(type(chunk.reason))
        elif kind == "usage":
            self._usage(chunk.usage)
        # the structural checks
        if self.late:
            raise Doubt(rules.late_problem(*self.late, self.generation.dispatch))
        self.attempt_open = kind != "finish"
        self.pre_dispatch = None
        if kind == "block-end":
            self.blocks[seq] = chunk.block
        elif kind == "finish":
            self.finish_kind = self.tag(type(chunk.reason))
        if problem := rules.outside_step_problem("assistant/chunk", turn, step, self.turn, self.step):
            raise Doubt(problem)

    # -- turns and steps ---------------------------------------------------------------------------------------
    def _close(self) -> None:
        if isinstance(self.current, RebuiltRequest):
            assert self.model_calls is not None
            self.model_calls.append((self.current, None))
        self.current = None
        self.open_attempt = None

    def _boundary(self) -> None:
        self.attempt_open = False
        self.late = None
        self.pre_dispatch = None

    def _turn_start(self, event: Any, seq: int, line: bytes) -> None:
        self._close()
        self.dispatches.step_started()
        if problem := rules.turn_start_problem(self.turn):
            raise Doubt(problem)
        self.turn, self.step = self.last_turn, self.last_step = event.data.turn, None
        self.attempt_open = False
        self.late = None

    def _turn_end(self, event: Any, seq: int, line: bytes) -> None:
        self._close()
        if problem := rules.turn_end_problem(event.data.turn, self.turn) or rules.step_left_open_problem(self.step):
            raise Doubt(problem)
        self.turn = self.step = None
        self._boundary()

    def _step_start(self, event: Any, seq: int, line: bytes) -> None:
        self._close()
        self.dispatches.step_started()
        data = event.data
        if problem := rules.step_start_turn_problem(data.turn, self.turn) or rules.step_start_step_problem(self.step):
            raise Doubt(problem)
        self.step = self.last_step = data.step
        self._boundary()
        self.step_seen = True

    def _step_end(self, event: Any, seq: int, line: bytes) -> None:
        self._close()
        data = event.data
        if problem := rules.step_end_problem(data.turn, data.step, self.turn, self.step):
            raise Doubt(problem)
        self.step = None
        self._boundary()

    def _tool_call(self, event: Any, seq: int, line: bytes) -> None:
        data = event.data
        if problem := rules.outside_step_problem("tool/call", data.turn, data.step, self.turn, self.step):
            raise Doubt(problem)

    def _descriptor(self, event: Any, seq: int, line: bytes) -> None:
        if self.generation.descriptor_refused_by and getattr(event.data, "version", None) != 3:
            raise Doubt("descriptor version the v0->v1 migration refuses")

    # -- headers -------------------------------------------------------------------------------------------
    def _request_header(self, event: Any, seq: int, line: bytes) -> None:
        stored = orjson.loads(line)   # rare and large: the full verifier's own dict, for its own helpers
        if header_problem(stored) is not None:
            raise Doubt("request/header shape")
        data = stored["data"]
        header = data["header"]
        if problem := rules.retired_system_problem(self.protect_head, header, self.generation.label):
            raise Doubt(problem)
        # the structural checks
        problem = (rules.header_placement_problem(self.turn)
                   or rules.anchor_problem(self.instance_anchored, self.headers_seen, data.get("reason")))
        if problem is not None:
            raise Doubt(problem)
        self.instance_anchored = True
        self.headers_seen += 1
        self.header_seqs.add(seq)
        if not self.attempt_open:
            self.pre_dispatch, self.pending_kind = seq, "request/header"
        if problem := rules.placeholder_problem(header):
            raise Doubt(problem)
        self.declared_tools = rules.declared_tools(header.get("tools"))
        # the fold (dsh_audit.fold.RequestFold._apply_header)
        new = snapshot(seq, data, system=self.header_system, prefix=self.generation.message_prefix)
        if new.message_prefix is not None and new.message_prefix != []:
            raise Doubt("header messagePrefix")
        self.dispatches.causes += header_causes(self.header, new, seq)
        self.header = new
        if self.on_header is not None:
            self.on_header(seq)

    def _request_context(self, event: Any, seq: int, line: bytes) -> None:
        if not self.attempt_open:
            self.pre_dispatch, self.pending_kind = seq, "request/context"

    def _end_seed(self, event: Any, seq: int, line: bytes) -> None:
        self.dispatches.causes.append(end_seed_cause(seq))
        self.instance_anchored = False
        if self.generation.seed_cut == "inherited-end-seed" and getattr(event.data, "inherited", None) is True:
            raise Doubt("inherited end-seed marker")

    # -- surface events ------------------------------------------------------------------------------------
    def _surface_common(self, kind: str) -> None:
        """What every surface event meets in the structural checks and the migration notes."""
        if self.late is None and rules.is_late(kind, self.pre_dispatch, self.attempt_open):
            self.late = (self.pending_kind, self.pre_dispatch)
        if not self.step_seen and self.generation.early_surface_refused_by:
            raise Doubt("surface event before the first step (migration note)")

    def _user_message(self, event: Any, seq: int, line: bytes) -> None:
        _, stored = self._message(event.data, "user/message", 1, line)
        self._surface_common("user/message")
        self._apply(event, seq, "user/message", stored, line)

    def _tool_result(self, event: Any, seq: int, line: bytes) -> None:
        data = event.data
        message, stored = self._message(data.message, "tool/result", 2, line)
        call_id = message.source.callId
        # v4: a tool-role message; until then a user message of one tool-result block (dsh_audit.shape)
        answered = message.toolCallId if self.tool_message else message.content[0].toolCallId
        if problem := rules.tool_call_ids_problem(answered, call_id):
            raise Doubt(problem)
        rewrite = event.surfaceOp != "append"
        if not rewrite:
            if data.error is not UNSET and (problem := rules.unflagged_error_problem(
                    self.generation.error_needs_flag, orjson.loads(memoryview(stored)))):
                raise Doubt(problem)
            if problem := rules.tool_pairing_problem(self.calls.pop(call_id, None), call_id):
                raise Doubt(problem)
        self._surface_common("tool/result")
        if not rewrite and (problem := rules.outside_step_problem(
                "tool/result", data.turn, data.step, self.turn, self.step)):
            raise Doubt(problem)
        self._apply(event, seq, "tool/result", stored, line)

    def _system_message(self, event: Any, seq: int, line: bytes) -> None:
        data = event.data
        message, stored = self._message(data.message, "system/message", 2, line)
        if problem := rules.step_mismatch_problem("system/message", data.turn, data.step, self.turn, self.step):
            raise Doubt(problem)
        prompt = {"system": system_text(orjson.loads(memoryview(stored)))}   # v3 on: scrubbed in the system head
        if problem := rules.placeholder_problem(prompt):
            raise Doubt(problem)
        self._surface_common("system/message")
        self._apply(event, seq, "system/message", _projected("system/message", message, stored), line)
        if self.on_header is not None:
            self.on_header(seq)

    @property
    def system_head(self) -> Any:
        """From v3: the serialized message of the system head (surface node 0), or None (no head, or an empty
        one), as the walker's system_head is its parsed message."""
        surface = self.surface
        if not (surface.protect_head and surface.head_is_system and surface.nodes):
            return None
        return surface.messages.get(surface.nodes[0])

    def _compaction_end(self, event: Any, seq: int, line: bytes) -> None:
        """A compaction that ended in error may have made a model call whose usage is not logged: the fold's
        unlogged-model-call warning, which the full verifier words."""
        if event.data.error is not UNSET:
            raise Doubt("compaction ended in error (unlogged-model-call)")

    def _developer_message(self, event: Any, seq: int, line: bytes) -> None:
        """v4: a tool-change notice, in its step, bound to an earlier header (structure: parsed, it is rare)."""
        data = event.data
        message, stored = self._message(data.message, "developer/message", 2, line)
        problem = (rules.step_mismatch_problem("developer/message", data.turn, data.step, self.turn, self.step)
                   or rules.developer_header_problem(orjson.loads(line)["data"], self.header_seqs))
        if problem is not None:
            raise Doubt(problem)
        self._surface_common("developer/message")
        self._apply(event, seq, "developer/message", _projected("developer/message", message, stored), line)

    def _assistant_message(self, event: Any, seq: int, line: bytes) -> None:
        data = event.data
        message, stored = self._message(data.message, "assistant/message", 2, line)
        if event.surfaceOp != "append":
            raise Doubt("assistant/message replace")
        key = (data.turn, data.step)
        content = message.content
        # the fold
        if self.settles:
            stream = data.stream
            self._dispatch(key, seq, "settlement", "assistant/message", event.time, traced=bool(stream))
        elif self.current is None and self.dispatches.chunkless(key):
            self._dispatch(key, seq, "first-response-event", "assistant/message", event.time)
        self._apply(event, seq, "assistant/message", _projected("assistant/message", message, stored), line)
        if self.model_calls is not None:
            self._answered(data, seq, line, None if not content else StoredMessage(bytes(data.message)))
        self._close()
        # the structural checks
        if self.late:
            raise Doubt(rules.late_problem(*self.late, self.generation.dispatch))
        self.attempt_open = False
        self.pre_dispatch = None
        generation = self.generation
        if problem := rules.assistant_sources_problem(generation.assistant_sources,
                                                      event.sourceEventSeqs is not UNSET, generation.label):
            raise Doubt(problem)
        if self.settles:
            self._stream_blocks(stream)
        declared = self.declared_tools
        tool_calls = self.tool_call_classes
        for block in content:
            if type(block) in tool_calls:
                self.calls.setdefault(block.id, seq)
                if problem := rules.undeclared_tool_problem(declared, block.id, block.name):
                    raise Doubt(problem)
        if rules.matches_chunks(data.interrupted is not UNSET, self.finish_kind):
            self._match_blocks(event, content)
        self.blocks, self.finish_kind = {}, None
        if not self.step_seen and self.generation.early_surface_refused_by:
            raise Doubt("surface event before the first step (migration note)")
        if problem := rules.outside_step_problem("assistant/message", data.turn, data.step, self.turn, self.step):
            raise Doubt(problem)

    def _match_blocks(self, event: Any, content: list[Any]) -> None:
        ordered = sorted(self.blocks.items())
        if self.settles:
            blocks = [block for _, block in ordered]
        else:
            sources = event.sourceEventSeqs
            if sources is UNSET or not sources:
                return
            blocks = rules.cited_blocks(ordered, sources, *seq_run(sources))
        if problem := rules.chunk_mismatch_problem(self.settles, blocks, content):
            raise Doubt(problem)

    def _stream_blocks(self, stream: Any) -> None:
        """v2 on: an embedded stream's packed records and the blocks it completed (structure._check_stream and
        _stream_blocks)."""
        blocks: list[Any] = []
        finish = None
        for record in stream:
            tag = self.tag(type(record))
            if tag == "chunk":
                chunk = record.chunk
                kind = self.tag(type(chunk))
                if kind == "block-end":
                    blocks.append(chunk.block)
                elif kind == "finish":
                    finish = self.tag(type(chunk.reason))
            else:
                members = record.args if tag == "tool-call-chunks" else record.texts
                if problem := rules.packed_record_problem(tag, len(members), record.dt, record.time0):
                    raise Doubt(problem)
        self.blocks = dict(enumerate(blocks))
        self.finish_kind = finish

    def _assistant_attempt(self, event: Any, seq: int, line: bytes) -> None:
        data = event.data
        key = (data.turn, data.step)
        self._dispatch(key, seq, "settlement", "assistant/attempt", event.time, traced=bool(data.stream))
        if self.model_calls is not None:
            self._answered(data, seq, line, None)
        self._close()
        if self.late:
            raise Doubt(rules.late_problem(*self.late, self.generation.dispatch))
        self._stream_blocks(data.stream)
        self.blocks, self.finish_kind = {}, None   # an attempt's stream is checked, not matched against a message
        self.attempt_open = False
        self.pre_dispatch = None
        if problem := rules.step_mismatch_problem("assistant/attempt", data.turn, data.step, self.turn, self.step):
            raise Doubt(problem)

    # -- the surface (dsh_audit.surface.Surface) -----------------------------------------------------------
    def _apply(self, event: Any, seq: int, kind: str, message: Any, line: bytes) -> None:
        op = event.surfaceOp
        if self.model_calls is not None and message is not None:
            message = bytes(message)   # RequestParts hands out bytes (a Raw pins its whole line and hashes not)
        sources = event.sourceEventSeqs
        facts = None
        if sources is not UNSET:
            if not sources:
                if problem := rules.empty_sources_problem(kind):
                    raise Doubt(problem)
            else:
                facts = seq_run(sources)
                if problem := rules.later_source_problem(sources, facts[1], seq):
                    raise Doubt(problem)
        try:
            if op == "append":
                self.surface.push(seq, kind, message, line)
                return
            start, end = getattr(op, self.start_key), getattr(op, self.end_key)
            shadowed = self.surface.splice(seq, kind, start, end,
                                           lambda shadowed: check_cited(shadowed, sources, facts), message, line)
        except SurfaceError as error:
            raise Doubt(str(error)) from None
        self.dispatches.causes.append(replace_cause(kind, seq, shadowed))

    # -- dispatch (dsh_audit.fold.RequestFold._dispatch, _digest, _attribute) -----------------------------------
    def _dispatch(self, step: tuple[int, int], seq: int, bound: str, kind: str, time: Any, *,
                  traced: bool = True) -> None:
        """`kind`, `time`: the type and time of the dispatching event (for model_calls)."""
        header = self.header
        if header is None:
            raise Doubt("no header in force")
        if header.placeholders:
            raise Doubt("placeholder header")
        attempt = self.dispatches.number(step)
        inherited = self.seed_cut is not None and seq < self.seed_cut
        request: _Request | RebuiltRequest
        if self.model_calls is None:
            request = _Request(step[0], step[1], attempt, seq, inherited)
        else:
            request = self._rebuilt(header, step, attempt, seq, bound, kind, time, inherited)
        if self.digests:
            request.sha256 = self._digest(header)
        request.extends_previous, request.causes, problem = self.dispatches.attribute(header, self.surface)
        if problem is not None:
            raise Doubt(problem)
        if self.lines is not None:
            self.lines.append(request)
        elif self.keep_requests and self.model_calls is None:   # its digest is complete: kept as it is
            self.requests.append(RequestDigest.of(request))
        self.current = request

    def _digest(self, header: HeaderSnapshot) -> str:
        surface = self.surface
        return self._running.digest(header, _NO_PREFIX, surface.generation, surface.visible)

    # -- cache-report's calls (model_calls): what the fold's RebuiltRequest holds, and the other priced calls ---
    def _rebuilt(self, header: HeaderSnapshot, step: tuple[int, int], attempt: int, seq: int, bound: str,
                 kind: str, time: Any, inherited: bool) -> RebuiltRequest:
        """The request as the fold rebuilds it (dsh_audit.fold.RequestFold._dispatch), its body by reference: the
        surface list is only appended to in place (a replace builds a new one), as RequestParts needs. No
        messagePrefix and no placeholder reach here (both are doubts); `line` is not counted."""
        visible = self.surface.pinned_visible()
        config = header.header.get("config") or {}
        owner = self.parent_id if inherited and self.parent_id else self.session_id
        return RebuiltRequest(turn=step[0], step=step[1], attempt=attempt, dispatch_seq=seq, bound=bound,
                              dispatch_type=kind, time=time if type(time) is int else None, header_seq=header.seq,
                              sha256=None, message_count=len(visible), inherited=inherited, owner=owner,
                              parts=RequestParts(header, _NO_PREFIX, visible, len(visible)),
                              provider=config.get("provider"), model=config.get("model"))

    def _usage(self, usage: Any) -> None:
        """A usage chunk of the open attempt (v0/v1): the last one is its usage, as in the fold."""
        if isinstance(self.current, RebuiltRequest):
            self.current.usage = msgspec.to_builtins(usage)

    def _answered(self, data: Any, seq: int, line: bytes, answer: StoredMessage | None) -> None:
        """A settlement or a step's response (before `_close`): the request it closes gets its usage (v0/v1: the
        chunks' if logged, else the message's; v2 on: the event's, else the stream's last) and its answer. A
        response closing none (v0/v1, its step's attempts closed before it) is a call of its own."""
        assert self.model_calls is not None
        current = self.current
        if not isinstance(current, RebuiltRequest):
            other = other_call("assistant/message", parse_json(line), seq)
            if other is not None:
                other.inherited = self.seed_cut is not None and seq < self.seed_cut
                self.model_calls.append(other)
            return
        logged = getattr(data, "usage", None)
        logged = None if logged is UNSET else logged
        if self.settles:
            streamed, current.finish = self._stream_usage(data.stream)
        else:
            streamed = current.usage   # its chunks' last, kept plain already
        usage = priced_usage(self.settles, logged, streamed)
        if usage is not None and usage is not current.usage:
            current.usage = msgspec.to_builtins(usage)
        self.model_calls.append((current, answer))
        self.current = None

    def _stream_usage(self, stream: Any) -> tuple[Any, str | None]:
        """v2 on: the last usage and the last finish reason of an embedded stream (None: none)."""
        usage, finish = None, None
        for record in stream:
            if self.tag(type(record)) == "chunk":
                kind = self.tag(type(record.chunk))
                if kind == "usage":
                    usage = record.chunk.usage
                elif kind == "finish":
                    finish = self.tag(type(record.chunk.reason))
        return usage, finish

    def _compaction_summary(self, event: Any, seq: int, line: bytes) -> None:
        """A compaction's summary call: priced from its own line, as cache_report.calls reads it."""
        self._other_call("compaction/summary", seq, line)

    def _title_request(self, event: Any, seq: int, line: bytes) -> None:
        """The session-title call: its request rebuilt from its own line, as cache_report.calls reads it."""
        self._other_call("session/title-llm-request", seq, line)

    def _other_call(self, kind: str, seq: int, line: bytes) -> None:
        assert self.model_calls is not None
        other = other_call(kind, parse_json(line), seq)
        assert other is not None
        other.inherited = self.seed_cut is not None and seq < self.seed_cut
        self.model_calls.append(other)
