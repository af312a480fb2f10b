"""The incremental request fold: admitted events in, one rebuilt request per dispatched attempt out.

Where an attempt is dispatched depends on the log's generation (schemas/generations.json):
* v0/v1, "first-chunk": at the attempt's first `assistant/chunk`; a `finish` chunk (or a change of
  turn/step, or the step's `assistant/message`) closes it.
* v2 and later, "settlement": at the event that settles it, `assistant/message` or `assistant/attempt`,
  whose embedded `data.stream` holds the chunks.
Its messages are the surface before that event, its header the latest `request/header` before it. Events
arrive lifted to the newest vocabulary (dsh_audit.upcast); what the model saw is never rewritten. Each surface
event is projected once; each request's sha256 continues a running hash of the shared prefix, so digests of
all N requests cost O(log size), not O(N x log size).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from .findings import Finding, Report
from .generations import Generation
from .header import (
    OPTION_FIELDS,
    HeaderSnapshot,
    changed_fields,
    is_placeholder,
    same_envelope,
    same_prompt,
    snapshot,
    system_text,
)
from .jsjson import dumps_bytes
from .records import LogRecord
from .rules import extends, prefix_break_problem
from .surface import Surface, SurfaceError
from .vocabulary import vocabulary

CLOSES_ATTEMPT = ("assistant/message", "step/start", "step/end", "turn/start", "turn/end")
SETTLEMENTS = ("assistant/message", "assistant/attempt")


class Cause(msgspec.Struct, frozen=True):
    """A logged event that explains why a request is not an append-extension of its predecessor."""

    kind: str  # "header-change" | "options-change" | "model-change" | "resume" | "initial" | "replace" |
    #            "system-change" | "end-seed"
    seq: int
    detail: str = ""


class RequestParts(msgspec.Struct, frozen=True):
    """A request body by reference: O(1) to keep, O(request) to serialize, so a consumer that needs few bodies
    (cache-report at prefix breaks) builds only those. `surface` is the surface's message list, taken with
    `Surface.pinned_visible`: the surface appends to it in place but never changes what it holds (a replace
    after it was taken swaps in a new list), so its first `count` messages stay as they were dispatched."""

    header: HeaderSnapshot
    prefix: list[bytes]      # the header's prepended messages (v0 messagePrefix), serialized
    surface: list[bytes]
    count: int

    def message(self, index: int) -> bytes:
        prefixed = len(self.prefix)
        return self.prefix[index] if index < prefixed else self.surface[index - prefixed]

    def __len__(self) -> int:
        return len(self.prefix) + self.count

    def body(self) -> bytes:
        messages = b",".join([*self.prefix, *self.surface[:self.count]])
        return b"{" + self.header.config_bytes + b'"messages":[' + messages + b"]" + self.header.tail_bytes


@dataclass(slots=True)
class RebuiltRequest:
    turn: int
    step: int
    attempt: int
    dispatch_seq: int
    bound: str                          # "first-chunk" | "first-response-event" | "settlement"
    dispatch_type: str                  # the type of the event at the dispatch seq
    time: int | None                    # the dispatch event's time (epoch ms); None when not logged
    header_seq: int | None
    sha256: str | None                  # None when no header is in force
    message_count: int
    inherited: bool = False             # belongs to the parent lineage of a child log
    owner: str | None = None            # session that dispatched it: the parent's id for an inherited request
    body: bytes | None = None
    parts: RequestParts | None = None   # kept when the fold is asked for them
    extends_previous: bool = True
    causes: list[Cause] = field(default_factory=list)
    placeholders: list[str] = field(default_factory=list)
    prefix: str = "none"                # "none" | "prepended" | "scrubbed" | "dropped"
    provider: str | None = None
    model: str | None = None
    usage: dict[str, Any] | None = None
    finish: str | None = None
    line: int | None = None


OnFinding = Callable[[Finding], None]


def header_causes(old: HeaderSnapshot | None, new: HeaderSnapshot, seq: int) -> list[Cause]:
    """Why the next request may not extend the last one, when header `new` (at `seq`) follows `old`: the first
    header; a resume (a new process: a boundary whatever it restates); a changed system prompt (named as a v3
    head's replacement is); other changed fields (the model's or provider's is a model change; request options
    alone are an options change, which leaves the prompt as it was). None of them: []."""
    if old is None:
        return [Cause(new.reason, seq, "first request/header")]
    causes = []
    if new.reason == "resume":
        causes.append(Cause("resume", seq, "resume header" + (" identical to its predecessor"
                                                              if same_envelope(old, new) else "")))
    if not same_envelope(old, new):
        fields = changed_fields(old.header, new.header)
        if old.message_prefix != new.message_prefix:
            fields.append("messagePrefix")
        if "system" in fields:   # the same word as a v3 system/message head replaced: one event, one name
            fields.remove("system")
            causes.append(Cause("system-change", seq, f"request/header {new.reason}: system"))
        if fields or not causes:
            kind = ("model-change" if "config.model" in fields or "config.provider" in fields
                    else "options-change" if fields and set(fields) <= OPTION_FIELDS else "header-change")
            causes.append(Cause(kind, seq, f"{new.reason}: " + ", ".join(fields)))
    return causes


def replace_cause(kind: str, seq: int, shadowed: list[int]) -> Cause:
    """Why the next request may not extend the last one after a surface replace (a v3 system head's replacement
    is a system change)."""
    what = "system-change" if kind == "system/message" else "replace"
    return Cause(what, seq, f"{kind} replaced surface nodes {shadowed[0]}..{shadowed[-1]} ({len(shadowed)} node(s))")


def end_seed_cause(seq: int) -> Cause:
    """A session/end-seed: a resume or fork boundary."""
    return Cause("end-seed", seq, "resume/fork boundary (session/end-seed)")


def priced_usage(settles: bool, logged: Any, streamed: Any) -> Any:
    """The usage a request is priced with (None: none logged), in both engines (cache-report's calls): v2 on, its
    settlement's own `data.usage`, else the last usage chunk of its embedded stream; v0/v1, the last usage chunk
    of its attempt, else the usage of the assistant/message that closes it."""
    first, second = (logged, streamed) if settles else (streamed, logged)
    return first if first is not None else second


class Dispatches:
    """The dispatch state both engines keep, this fold and the fast verifier (fastpath.verifier) alike: attempts
    numbered within the open step, the causes logged since the last request, and what the next request is
    compared with to say whether it extends it (the prefix-break rule). Where and when an attempt is dispatched
    stays each engine's own walk over its events; what a dispatch is numbered and attributed is decided here."""

    __slots__ = ("causes", "count", "numbered", "previous_count", "previous_header")

    def __init__(self) -> None:
        self.numbered: dict[tuple[int, int], int] = {}   # the open step's attempts (0: an untraced response)
        self.causes: list[Cause] = []     # logged since the last request: why the next one may not extend it
        self.previous_header: HeaderSnapshot | None = None
        self.previous_count = 0           # the visible messages the last request was sent with
        self.count = 0                    # requests dispatched (an untraced response is none)

    def step_started(self) -> None:
        """A step or turn starts: attempts are numbered within a step, so only the open step's are kept."""
        self.numbered.clear()

    def chunkless(self, step: tuple[int, int]) -> bool:
        """Whether a step's response, with no attempt open (v0/v1), is the step's first and only dispatch (bound
        "first-response-event"): none of the step's attempts was dispatched before it."""
        return step not in self.numbered

    def untraced(self, step: tuple[int, int]) -> None:
        """A response with no request to rebuild (no chunk and no header in force): the step dispatched none."""
        self.numbered[step] = 0

    def number(self, step: tuple[int, int]) -> int:
        """The attempt a dispatch of `step` is: 1 for its first."""
        attempt = self.numbered.get(step, 0) + 1
        self.numbered[step] = attempt
        return attempt

    def attribute(self, header: HeaderSnapshot | None, surface: Surface) -> tuple[bool, list[Cause], str | None]:
        """A request is dispatched with `surface`'s visible messages: whether it extends the last request (the
        same prompt, request options aside, as the cache is on the prompt, and the messages that one was sent
        with, none of them changed by a replace since), the causes logged since, and the prefix-break problem, if
        any. The surface is then settled: its next changes are counted against this request."""
        causes, self.causes = self.causes, []
        first = self.count == 0
        visible_count = len(surface.visible)
        extends_previous = (not first and same_prompt(header, self.previous_header)
                            and extends(visible_count, surface.changed_from, self.previous_count))
        self.previous_header, self.previous_count = header, visible_count
        self.count += 1
        surface.settled()
        return extends_previous, causes, prefix_break_problem(first, extends_previous, causes)


def logged_usage(data: Any) -> dict[str, Any] | None:
    """An event's logged `data.usage`, when it is an object."""
    usage = data.get("usage") if isinstance(data, dict) else None
    return usage if isinstance(usage, dict) else None


class RunningDigest:
    """sha256 of successive request bodies, continuing one running hash while requests only append: started
    again when the header snapshot (which fixes config and prefix; compared by identity, as seqs repeat in a
    malformed log) or the surface generation changes, or the surface shrank."""

    def __init__(self) -> None:
        self._hash: Any = None
        self._key: tuple[int, HeaderSnapshot] | None = None   # (surface generation, header) hashed so far
        self._count = 0            # surface messages hashed so far
        self._primed = False       # a message (of the prefix or the surface) is in: the next needs a comma
        self._closing = b""

    def digest(self, header: HeaderSnapshot, prefix: list[bytes], generation: int, visible: list[bytes]) -> str:
        key = self._key
        if key is None or key[0] != generation or key[1] is not header or self._count > len(visible):
            self._hash = hashlib.sha256(b"{" + header.config_bytes + b'"messages":[' + b",".join(prefix))
            self._key, self._count, self._primed = (generation, header), 0, bool(prefix)
            self._closing = b"]" + header.tail_bytes
        running = self._hash
        for message in visible[self._count:]:
            if self._primed:
                running.update(b",")
            running.update(message)
            self._primed = True
        self._count = len(visible)
        final = running.copy()
        final.update(self._closing)
        return str(final.hexdigest())


class RequestFold:
    """The request fold of one log. `seed_cut`: events below this seq were inherited from the parent session
    (None: not a seeded child, or the cut is unknown); the walker finds it by the generation's rule."""

    def __init__(self, header: dict[str, Any], *, generation: Generation, report: Report,
                 message_prefix: str = "legacy", bodies: bool = False, parts: bool = False,
                 seed_cut: int | None = None) -> None:
        self.session_id = str(header.get("id"))
        parent = header.get("parentSession")
        self.parent_id = parent if isinstance(parent, str) else None
        self.seed_cut = seed_cut
        self.generation = generation
        self.settles = generation.dispatch == "settlement"
        self.surface_types = vocabulary(generation.version).surface_types
        self.message_prefix_mode = message_prefix
        self.bodies = bodies
        self.parts = parts
        self.finding = report
        self.surface = Surface(protect_head=generation.system_prompt == "surface")
        self.header: HeaderSnapshot | None = None
        self.open_attempt: tuple[int, int] | None = None
        self.dispatches = Dispatches()
        self.current: RebuiltRequest | None = None
        self.compactions: dict[str, tuple[int, int, int]] = {}   # open compaction id -> (start seq, messages, bytes)
        self._running = RunningDigest()
        self._prefix: tuple[HeaderSnapshot, list[bytes]] | None = None  # a header and its serialized prefix

    # -- the fold ---------------------------------------------------------------------------------------
    def feed(self, record: LogRecord, event: dict[str, Any] | None) -> RebuiltRequest | None:
        """Fold one admitted event (None: its loader refused or skipped it); return the request attempt that
        this event closed, if any."""
        if event is None:
            return None
        seq = record.seq
        kind = event["type"]
        if self.settles and kind in SETTLEMENTS:
            return self._on_settlement(event, seq, record.line)
        if kind == "assistant/message":
            return self._on_assistant_message(event, seq, record.line)
        closed: RebuiltRequest | None = None
        if kind in CLOSES_ATTEMPT:
            closed = self._close_attempt()
            if kind in ("step/start", "turn/start"):
                self.dispatches.step_started()
        elif kind == "assistant/chunk":
            step = self._chunk_step(event)
            if step != self.open_attempt:
                closed = self._close_attempt()
            if self.open_attempt is None and step is not None:
                self._dispatch(step, seq, "first-chunk", record.line, time=event.get("time"))
                self.open_attempt = step
            self._observe_chunk(event)
        elif kind in self.surface_types:
            self._apply_surface(event, seq)
        elif kind == "request/header":
            self._apply_header(event, seq)
        elif kind == "image/offload":
            # A message projection (upstream's SessionMessageProjection): it rewrites earlier messages by rules a
            # plugin owns. The reference refuses to derive messages without that interpreter; so do we.
            self.finding("unsupported-projection", "image/offload rewrites earlier messages through its plugin's "
                         "projection, which dsh-audit does not interpret: later requests cannot be rebuilt exactly",
                         seq=seq, event_type=kind, rejects=True)
        elif kind == "session/end-seed":
            # Only the seed cut says, before the fact, which requests a child inherited; an end-seed without
            # it (a resumed process of the same session) is a boundary, not a change of owner.
            self.dispatches.causes.append(end_seed_cause(seq))
        elif kind in ("compaction/start", "compaction/summary", "compaction/end"):
            self._on_compaction(kind, event.get("data"), seq)
        return closed

    def _on_compaction(self, kind: str, data: Any, seq: int) -> None:
        """A compaction that ends in error with no summary logged: dsh may have made the summary call and then
        rejected what it returned ("summary is not smaller than the shadowed content"). That call is real, and
        its usage is in no event: say so, with what the log tells of its size."""
        compaction = data.get("compactionId") if isinstance(data, dict) else None
        if not isinstance(compaction, str):
            return
        if kind == "compaction/start":
            visible = self.surface.visible
            self.compactions[compaction] = (seq, len(visible), sum(map(len, visible)))
        elif kind == "compaction/summary":
            self.compactions.pop(compaction, None)
        elif compaction in self.compactions:
            start, messages, size = self.compactions.pop(compaction)
            error = data.get("error") if isinstance(data, dict) else None
            if isinstance(error, str):
                self.finding("unlogged-model-call", f"compaction {json.dumps(compaction)} (started at seq {start}) "
                             f"ended in error with no summary logged ({json.dumps(error)[:200]}): if dsh made its "
                             f"summary call, that call's usage is not logged; its prompt held at most the "
                             f"{messages} message(s), {size:,} bytes as logged, of the surface then",
                             seq=seq, event_type=kind, severity="warning")

    def _on_settlement(self, event: dict[str, Any], seq: int, line: int) -> RebuiltRequest | None:
        """v2 and later: the event that settles an attempt dispatches it too. The request is the surface and
        header before it; its usage and finish are in the embedded stream; a message then joins the surface."""
        data = event.get("data")
        stream = data.get("stream") if isinstance(data, dict) else None
        step = self._chunk_step(event)
        if step is not None:   # an empty stream with no header in force is a chunkless, authored response
            self._dispatch(step, seq, "settlement", line, traced=bool(stream), event_type=event["type"],
                           time=event.get("time"))
        if self.current is not None:
            for record in stream if isinstance(stream, list) else ():
                chunk = record.get("chunk") if isinstance(record, dict) and record.get("type") == "chunk" else None
                if isinstance(chunk, dict):
                    self._observe_chunk_body(chunk)
            self.current.usage = priced_usage(True, logged_usage(data), self.current.usage)
        if event["type"] == "assistant/message":
            self._apply_surface(event, seq)
        return self._close_attempt()

    def _on_assistant_message(self, event: dict[str, Any], seq: int, line: int) -> RebuiltRequest | None:
        """The step's response: bound a chunkless step here, attach usage, join the surface, close."""
        step = self._chunk_step(event)
        if self.current is None and step is not None and self.dispatches.chunkless(step):
            self._dispatch(step, seq, "first-response-event", line, event_type="assistant/message",
                           time=event.get("time"))
        if self.current is not None:
            self.current.usage = priced_usage(False, logged_usage(event.get("data")), self.current.usage)
        self._apply_surface(event, seq)
        return self._close_attempt()

    def finish(self) -> RebuiltRequest | None:
        """End of log: return the still-open attempt, if any."""
        return self._close_attempt()

    # -- surface and header -----------------------------------------------------------------------------
    def _apply_surface(self, event: dict[str, Any], seq: int) -> None:
        op = event.get("surfaceOp")
        kind = event["type"]
        try:
            if op == "append":
                self.surface.append(seq, event)
            elif op is None:
                self.finding("surface-op-missing", f'session event "{kind}" is surface-eligible and requires a '
                             "surfaceOp marker", seq=seq, event_type=kind, rejects=True)
            elif (isinstance(op, dict) and set(op) == {"op", "startSeq", "endSeq"} and op["op"] == "replace"
                  and all(isinstance(op[k], int) and not isinstance(op[k], bool) and op[k] >= 0
                          for k in ("startSeq", "endSeq"))):
                self.dispatches.causes.append(replace_cause(kind, seq, self.surface.replace(seq, event, op)))
            else:
                self.finding("surface-op-invalid", f'session event "{kind}" carries an invalid surfaceOp',
                             seq=seq, event_type=kind, rejects=True)
        except SurfaceError as error:
            self.finding(error.code, str(error), seq=seq, event_type=kind, rejects=True)

    def _apply_header(self, event: dict[str, Any], seq: int) -> None:
        data = event["data"]
        new = snapshot(seq, data, system=self.generation.system_prompt == "header",
                       prefix=self.generation.message_prefix)
        self.dispatches.causes += header_causes(self.header, new, seq)
        self.header = new

    # -- attempts ----------------------------------------------------------------------------------------
    @staticmethod
    def _chunk_step(event: dict[str, Any]) -> tuple[int, int] | None:
        data = event.get("data")
        if not isinstance(data, dict):
            return None
        turn, step = data.get("turn"), data.get("step")
        return (turn, step) if isinstance(turn, int) and isinstance(step, int) else None

    def _observe_chunk(self, event: dict[str, Any]) -> None:
        data = event.get("data")   # an envelope without data is a finding, not a reason to stop folding
        chunk = data.get("chunk") if isinstance(data, dict) else None
        if isinstance(chunk, dict) and self.current is not None:
            self._observe_chunk_body(chunk)

    def _observe_chunk_body(self, chunk: dict[str, Any]) -> None:
        assert self.current is not None
        if chunk.get("type") == "usage" and isinstance(chunk.get("usage"), dict):
            self.current.usage = chunk["usage"]
        elif chunk.get("type") == "finish":
            reason = chunk.get("reason")
            self.current.finish = str(reason.get("kind")) if isinstance(reason, dict) else None
            self.open_attempt = None

    def _close_attempt(self) -> RebuiltRequest | None:
        self.open_attempt = None
        closed, self.current = self.current, None
        return closed

    def _dispatch(self, step: tuple[int, int], seq: int, bound: str, line: int, *, traced: bool = True,
                  event_type: str = "assistant/chunk", time: Any = None) -> None:
        if (bound == "first-response-event" or not traced) and self.header is None:
            # The loop logs at least one chunk per dispatched attempt; a chunkless response with no header in
            # force (authored fixtures) leaves no request to rebuild. The reference finds no dispatch here either.
            self.finding("untraced-response", f"step {step[0]}.{step[1]} has a response but no chunk and no "
                         "request/header: no dispatched request can be rebuilt", seq=seq,
                         event_type=event_type, severity="warning")
            self.dispatches.untraced(step)
            return
        attempt = self.dispatches.number(step)
        header = self.header
        request = RebuiltRequest(turn=step[0], step=step[1], attempt=attempt, dispatch_seq=seq, bound=bound,
                                 dispatch_type=event_type, time=time if type(time) is int else None,
                                 header_seq=header.seq if header else None, sha256=None,
                                 message_count=len(self.surface.visible), line=line,
                                 inherited=self.seed_cut is not None and seq < self.seed_cut)
        request.owner = self.parent_id if request.inherited and self.parent_id else self.session_id
        if header is None:
            self.finding("no-header", f"no request/header before dispatch seq {seq}: the request's envelope "
                         "(provider, model, system, tools) is not in the log", seq=seq,
                         event_type=event_type, rejects=True)
        else:
            config = header.header.get("config") or {}
            request.provider, request.model = config.get("provider"), config.get("model")
            head = self.surface.head_message   # v3 on: a "{{system}}" token in the system head
            request.placeholders = list(header.placeholders) + (
                ["system"] if head is not None and is_placeholder(system_text(head)) else [])
            prefix = self._prefix_messages(header, request)
            request.sha256 = self._digest(header, prefix)
            if self.bodies or self.parts:
                visible = self.surface.pinned_visible()   # a later replace leaves this list as it is
                parts = RequestParts(header, prefix, visible, len(visible))
                request.parts = parts if self.parts else None
                request.body = parts.body() if self.bodies else None
        self._attribute(request, header)
        self.current = request

    def _prefix_messages(self, header: HeaderSnapshot, request: RebuiltRequest) -> list[bytes]:
        prefix = header.message_prefix
        if prefix is None or prefix == []:
            return []
        if self.message_prefix_mode == "drop":
            request.prefix = "dropped"
            return []
        if is_placeholder(prefix) or not isinstance(prefix, list):
            request.prefix = "scrubbed"
            return []
        request.prefix = "prepended"
        if self._prefix is None or self._prefix[0] is not header:   # serialized once per header snapshot
            self._prefix = (header, [dumps_bytes(message) for message in prefix])
        return self._prefix[1]

    def _digest(self, header: HeaderSnapshot, prefix: list[bytes]) -> str:
        return self._running.digest(header, prefix, self.surface.generation, self.surface.visible)

    def _attribute(self, request: RebuiltRequest, header: HeaderSnapshot | None) -> None:
        """Is this request an append-extension of the previous one? If not, name the logged causes."""
        request.extends_previous, request.causes, problem = self.dispatches.attribute(header, self.surface)
        if problem is not None and header is not None:
            self.finding("prefix-break", problem, seq=request.dispatch_seq, event_type=request.dispatch_type)
