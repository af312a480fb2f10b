"""`audit explain`: why one request did or did not extend what the provider could have cached before it.

The provider caches the previous request's prompt and the answer it generated. So a request is compared with
its predecessor's messages plus that answer *as the model generated it* (the blocks its chunks, or from v2 its
stream, completed), on the wire: both are rendered as the DeepSeek adapter POSTs them (deepseek_wire) and
compared part by part in prompt order: config, leading system message(s), tools, then each wire message. The
first part that differs is the divergence: where (wire message index and the logged message it renders, byte
offset in that part's serialization, byte offset in the wire body, token offset in the linearized prompt) and
a short excerpt of both sides. Messages ahead of it that differ only as logged (an id, a compaction's source)
are listed apart: they do not break the prefix. Then the logged events between the two requests that explain
it (seq, type, reason) — or "unlogged", with what the log would have needed to hold. A request the adapter
cannot render (another provider's, a scrubbed header, an image for an image model) is compared as logged.

What the provider did read is cache-report's to judge: the explanation carries cache-report's verdict on the
request's row (reports.verdict), in its words, and whether it is unexplained is that verdict's, so the two never
disagree about a request. With it come the row's facts: the time since the predecessor was sent, the cache block,
what the collapse cost, and for a collapse that is the provider's own the time weighed against the cache's
documented lifetime.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from .deepseek_wire import WireBody, to_wire_body, wire_history_message, wire_prompt_text
from .errors import DshAuditError
from .findings import Finding
from .fold import Cause, RebuiltRequest
from .jsjson import dumps_bytes
from .model_calls import Call, SideCalls
from .records import LogSource
from .reports.cache_report import UNEXPLAINED, CacheOptions, CallTaker, calls_frame, judge, with_block
from .reports.prediction import RealHeader
from .reports.verdict import Verdict, verdict
from .reports.views import duration
from .surface import derive_message
from .text import head, is_boundary, tail
from .tokens import common_prefix_length, token_ids
from .walker import Walked, Walker

EXCERPT = 40   # characters shown each side of a divergence
# The providers DeepSeek's adapter serves, as logs name them; another provider's wire body is not mirrored.
DEEPSEEK_PROVIDERS = frozenset({"deepseek", "deepseek-official"})
ABSENT = object()   # the request side of a cached message the request does not have

# The event type each logged cause stands for (fold.Cause.kind); a replace, and a system-change (a v3 head
# replaced, or a v0 header's system), name their own type first in their detail.
_CAUSE_TYPES = {"initial": "request/header", "resume": "request/header", "header-change": "request/header",
                "options-change": "request/header", "model-change": "request/header", "end-seed": "session/end-seed"}

# One comparable part: (name, logged message index, wire message index, cached side, request side).
_Part = tuple[str, int | None, int | None, Any, Any]


@dataclass(frozen=True, slots=True)
class Divergence:
    part: str                    # "config.<key>" | "system" | "tools" | "message"
    message_index: int | None    # with part "message": the index in the request's (logged) messages
    part_offset: int             # first differing byte in that part's JSON serialization
    body_offset: int             # first differing byte between the two bodies (wire bodies, or as logged)
    token_offset: int | None     # tokens of the linearized prompt they share (None: not linearizable)
    before: str                  # excerpt of what the cache held, around the divergence
    after: str                   # excerpt of what this request sent there
    generated: bool = False      # the cached side is the predecessor's answer as the model generated it
    wire_index: int | None = None   # compared on the wire, a system prompt or message: its index in the wire body


@dataclass(frozen=True, slots=True)
class LoggedCause:
    seq: int
    type: str
    reason: str


@dataclass(frozen=True, slots=True)
class LoggedOnly:
    message_index: int           # a message ahead of the divergence that differs as logged, alike on the wire
    fields: list[str]            # the (dotted) fields that differ: id, source.compactionId, …


@dataclass(slots=True)
class Explanation:
    name: str                                # turn.step#attempt of the request explained
    predecessor: str | None
    verdict: str                             # "first request" | "extends" | "explained" | "unlogged"
    divergence: Divergence | None = None
    causes: list[LoggedCause] = field(default_factory=list)
    needed: str | None = None                # for "unlogged": what the log would have needed
    appended: int = 0                        # messages this request adds after the cached ones
    basis: str | None = None                 # "wire" (the DeepSeek body) | "logged" (the fallback) | None (first)
    note: str | None = None                  # with basis "logged": why the wire was not compared
    logged_only: list[LoggedOnly] = field(default_factory=list)
    side_calls: list[int] = field(default_factory=list)   # seqs of the product's side calls since the predecessor
    cache: Verdict | None = None             # cache-report's verdict on the request's row (None: no such row)
    unexplained: bool = False                # that verdict is an unexplained collapse: exit 1, as cache-report's gate
    since_predecessor_ms: int | None = None  # from the predecessor's dispatch to this one's, by the log's event times
    cache_block: int | None = None           # tokens; the block cache-report judged the log by
    collapse_cost_usd: float | None = None   # cache-report's collapseCostUsd: what the collapse cost (None: none)
    evidence: str | None = None              # a collapse that is the provider's own: elapsed time against lifetime


def _name(request: RebuiltRequest) -> str:
    return f"{request.turn}.{request.step}#{request.attempt}"


def _cause(cause: Cause) -> LoggedCause:
    kind = _CAUSE_TYPES.get(cause.kind) or cause.detail.split(" ", 1)[0]
    return LoggedCause(cause.seq, kind, f"{cause.kind}: {cause.detail}")


def _excerpt(data: bytes, offset: int) -> str:
    """EXCERPT characters each side of byte `offset`, on whole characters: the offset may fall inside a CJK
    character's UTF-8, or between a base and its combining mark, or inside an emoji's ZWJ sequence."""
    while 0 < offset < len(data) and data[offset] & 0xC0 == 0x80:   # a continuation byte: back to its first
        offset -= 1
    before = data[:offset].decode("utf-8", "replace")
    text = before + data[offset:].decode("utf-8", "replace")
    at = len(before)
    while not is_boundary(text, at):
        at -= 1
    left, right = tail(text[:at], EXCERPT), head(text[at:], EXCERPT)
    return ("…" if len(left) < at else "") + left + right + ("…" if at + len(right) < len(text) else "")


class _Answer:
    """The blocks the model generated for the attempt being folded: block-end chunks, or a settlement's stream."""

    def __init__(self) -> None:
        self.blocks: list[Any] = []

    def observe(self, event: dict[str, Any]) -> None:
        data = _dict(event.get("data"))
        if event.get("type") == "assistant/chunk":
            self._chunk(_dict(data.get("chunk")))
        elif event.get("type") in ("assistant/message", "assistant/attempt"):
            stream = data.get("stream")
            for record in stream if isinstance(stream, list) else []:
                if isinstance(record, dict) and record.get("type") == "chunk":
                    self._chunk(_dict(record.get("chunk")))

    def _chunk(self, chunk: dict[str, Any]) -> None:
        if chunk.get("type") == "block-end":
            self.blocks.append(chunk.get("block"))


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def explain_request(source: LogSource, turn: int, step: int, attempt: int | None) -> Explanation:
    """Explain request turn.step#attempt (the step's first attempt when None) of one log, in one walk of it that
    also takes cache-report's calls (reports.cache_report.CallTaker) for its verdict: the walk goes on to the end
    of the log, whose reads measure the block the request is judged by, but builds no request body past the one
    explained."""
    previous: tuple[RebuiltRequest, Any | None] | None = None
    answer = _Answer()
    sides, since = SideCalls(), []   # the product's own calls since the predecessor (model_calls.side_call)
    calls = CallTaker(source.label)

    def noted(finding: Finding) -> None:
        sides.noted(finding)
        calls.noted(finding)

    walker = Walker(source, bodies=True, parts=True, on_finding=noted)
    calls.cut = walker.fold.seed_cut
    explained: Explanation | None = None
    refused: DshAuditError | None = None   # a number cache-report's rows cannot hold: raised once explained

    def steps() -> Iterator[Call]:
        nonlocal explained, refused
        for walked in walker:
            if explained is None:
                explained = explain_step(walked)
            if refused is None:
                try:
                    yield from calls.take(walked)
                except DshAuditError as error:
                    refused = error

    def explain_step(walked: Walked) -> Explanation | None:
        nonlocal previous, answer, since
        if (side := sides.of(walked.record)) is not None:
            since.append(side.seq)
        event = walked.event or {}
        answer.observe(event)
        request = walked.closed
        if request is None:
            return None
        if (request.turn, request.step) == (turn, step) and attempt in (None, request.attempt):
            explanation = _explain(request, previous)
            explanation.side_calls = since
            walker.fold.bodies = False   # no later request is compared
            return explanation
        logged = derive_message(event) if event.get("type") == "assistant/message" else None
        generated = {**logged, "content": answer.blocks} if isinstance(logged, dict) and answer.blocks else logged
        previous = (request, generated if logged is not None else None)
        answer, since = _Answer(), []
        return None

    options = CacheOptions()
    frame, block = with_block(calls_frame(source, options, RealHeader(options.system, options.tools), steps()),
                              options)
    if explained is None:
        wanted = f"{turn}.{step}" + (f"#{attempt}" if attempt is not None else "")
        raise DshAuditError(f"no request {wanted} in this log (audit rebuild --format digest lists them)",
                            path=source.label)
    if refused is not None:
        raise refused
    explained.cache_block = block
    return _with_usage(explained, judge(frame, options.collapse_ratio).to_dicts())


# Why a collapse where the prompt extends what was cached, and no event was logged, is the provider's own.
PROVIDER_OWN = ("the prompt extends what was cached, so a collapse here is the provider's own (cache expiry or "
                "eviction): a break the log caused would show as a request/header change, a surface replace or a "
                "resume logged before it")
# DeepSeek's Context Caching guide (api-docs.deepseek.com/guides/kv_cache): a cache no longer in use is cleared
# "usually within a few hours to a few days", and hits are best-effort. It documents no shorter lifetime, so an
# entry unused for less than an hour is taken as not expired (docs/explain.md).
CACHE_LIFETIME = ("DeepSeek's Context Caching guide: a cache no longer in use is cleared within a few hours to a "
                  "few days")
EXPIRY_FLOOR_MS = 3_600_000


def _with_usage(explanation: Explanation, rows: list[dict[str, Any]]) -> Explanation:
    """The explanation with cache-report's verdict on the request (its row of `cache-report LOG`) and the row's
    facts: the time since its predecessor (the request row before it), what its collapse cost."""
    requests = [row for row in rows if row["kind"] == "request"]
    at = next((at for at, row in enumerate(requests)
               if f"{row['turn']}.{row['step']}#{row['attempt']}" == explanation.name), None)
    if at is None:
        return explanation
    row = requests[at]
    explanation.cache = verdict(row)
    explanation.unexplained = explanation.cache.unexplained
    explanation.collapse_cost_usd = row["collapseCostUsd"]
    before = requests[at - 1]["timeMs"] if at > 0 else None
    if before is not None and row["timeMs"] is not None:
        explanation.since_predecessor_ms = row["timeMs"] - before
    # No divergence, and no logged event cache-report takes as a cause (a change of request options is none).
    if explanation.divergence is None and row["cause"] == UNEXPLAINED:
        explanation.needed = PROVIDER_OWN
        if row["collapse"]:
            explanation.evidence = _evidence(explanation.since_predecessor_ms, explanation.predecessor)
    return explanation


def _evidence(elapsed_ms: int | None, predecessor: str | None) -> str:
    """A collapse that is the provider's own: which of expiry or eviction the time since the predecessor makes
    likely, against the cache's documented lifetime."""
    if elapsed_ms is None or elapsed_ms < 0:
        why = "not logged" if elapsed_ms is None else "negative by the log's times"
        return f"the time since {predecessor} is {why}: expiry cannot be weighed ({CACHE_LIFETIME})"
    sent = f"sent {duration(elapsed_ms)} after {predecessor}"
    if elapsed_ms < EXPIRY_FLOOR_MS:
        return (f"{sent}, well within the cache's documented lifetime, so expiry is unlikely: the cache is "
                "best-effort, and an eviction or a miss on the provider's side is the likelier cause "
                f"({CACHE_LIFETIME})")
    return f"{sent}, an hour or more: the cache may have expired ({CACHE_LIFETIME})"


def _explain(request: RebuiltRequest, previous: tuple[RebuiltRequest, Any | None] | None) -> Explanation:
    causes = [_cause(cause) for cause in request.causes if cause.kind != "initial"]
    if previous is None:
        return Explanation(_name(request), None, "first request", causes=causes)
    before_request, answer = previous
    explanation = Explanation(_name(request), _name(before_request), "extends", causes=causes)
    if request.body is None or before_request.body is None:
        raise DshAuditError(f"request {_name(request)} or its predecessor has no request/header in force: there is "
                            "no request to compare")
    _compare(explanation, before_request.body, request.body, answer)
    if explanation.divergence is None:
        if causes:
            explanation.verdict = "explained"   # logged as a break though the prefix held (a resume, say)
        return explanation
    explanation.verdict = "explained" if causes else "unlogged"
    if not causes:
        explanation.needed = _needed(explanation.divergence)
    return explanation


def _compare(explanation: Explanation, before_body: bytes, after_body: bytes, answer: Any | None) -> None:
    """The first divergence on the wire, with the messages ahead of it that differ only as logged; as logged,
    with a note saying why, where the adapter cannot render a side. With none, how many messages are appended."""
    before, after = json.loads(before_body), json.loads(after_body)
    cached = {**before, "messages": [*before["messages"], *([answer] if answer is not None else [])]}
    answer_index = len(before["messages"]) if answer is not None else None
    try:
        wire = _wire_body(cached), _wire_body(after)
    except DshAuditError as error:
        explanation.basis, explanation.note = "logged", f"compared as logged, not on the wire: {error.message}"
        explanation.divergence = _first(_logged_parts(before, after, cached["messages"]),
                                        common_prefix_length(before_body, after_body),
                                        lambda: _token_offset(cached, after), answer_index)
    else:
        explanation.basis = "wire"
        explanation.divergence = _first(_wire_parts(cached, *wire), common_prefix_length(*map(dumps_bytes, wire)),
                                        lambda: _prompt_tokens(*wire), answer_index)
        explanation.logged_only = _logged_only(cached["messages"], after["messages"], explanation.divergence)
    if explanation.divergence is None:
        explanation.appended = len(after["messages"]) - len(cached["messages"])


def _needed(divergence: Divergence) -> str:
    if divergence.generated:
        return (f"message {divergence.message_index} as logged differs from the answer the model generated (its "
                "chunks): an edit the log does not record; a surface replace of that message would have recorded it")
    if divergence.part == "message":
        return (f"message {divergence.message_index} changed with no logged event: a surface replace (compaction, "
                "tool-result rewrite) naming it, before this request")
    return f"{divergence.part} changed with no logged event: a request/header snapshot before this request"


def _wire_body(request: dict[str, Any]) -> WireBody:
    """What the DeepSeek adapter POSTs for a rebuilt request; DshAuditError when another provider's adapter sends
    it or the adapter's text-only path cannot render it (a scrubbed header, an image for an image model)."""
    if request.get("provider") not in DEEPSEEK_PROVIDERS:
        raise DshAuditError(f"provider {json.dumps(request.get('provider'))} is not one DeepSeek's adapter serves")
    return to_wire_body(request)


def _config(old: dict[str, Any], new: dict[str, Any], skip: tuple[str, ...]) -> Iterator[_Part]:
    """Each key of either body but those in `skip`, in order: what the prompt holds ahead of the messages."""
    for key in dict.fromkeys(key for body in (old, new) for key in body if key not in skip):
        yield f"config.{key}", None, None, old.get(key), new.get(key)


def _wire_parts(cached: dict[str, Any], old: WireBody, new: WireBody) -> Iterator[_Part]:
    """The two wire bodies in prompt order: config, the leading system message(s), the tools, the other messages;
    each wire message named by the logged message it renders (None: the header's system prompt)."""
    model = cached.get("model")
    origins = [*([None] if "system" in cached else []),
               *(index for index, message in enumerate(cached["messages"])
                 for _ in wire_history_message(message, model))]
    old_messages, new_messages = old["messages"], new["messages"]
    lead = min(_leading_systems(old_messages), _leading_systems(new_messages))

    def message(at: int) -> _Part:
        origin = origins[at]
        return ("system" if origin is None else "message", origin, at, old_messages[at],
                new_messages[at] if at < len(new_messages) else ABSENT)

    yield from _config(old, new, ("messages", "tools"))
    yield from map(message, range(lead))
    yield "tools", None, None, old.get("tools"), new.get("tools")
    yield from map(message, range(lead, len(old_messages)))


def _leading_systems(messages: list[Any]) -> int:
    return next((at for at, message in enumerate(messages) if message.get("role") != "system"), len(messages))


def _logged_parts(before: dict[str, Any], after: dict[str, Any], cached: list[Any]) -> Iterator[_Part]:
    """The two request bodies as logged, in prompt order: config, system prompt (up to v2), tools, messages."""
    yield from _config(before, after, ("messages", "system", "tools"))
    for key in ("system", "tools"):
        yield key, None, None, before.get(key), after.get(key)
    for index, old in enumerate(cached):
        yield "message", index, None, old, after["messages"][index] if index < len(after["messages"]) else ABSENT


def _first(parts: Iterable[_Part], body_offset: int, tokens: Callable[[], int | None],
           answer_index: int | None) -> Divergence | None:
    """The first part whose two sides' JSON differ: where, and an excerpt of both sides."""
    for part, index, wire_index, old, new in parts:
        old_bytes, new_bytes = dumps_bytes(old), b"" if new is ABSENT else dumps_bytes(new)
        if old_bytes != new_bytes:
            offset = common_prefix_length(old_bytes, new_bytes)
            return Divergence(part, index, offset, body_offset, tokens(), _excerpt(old_bytes, offset),
                              "(no message: the request has fewer)" if new is ABSENT else _excerpt(new_bytes, offset),
                              generated=part == "message" and index == answer_index, wire_index=wire_index)
    return None


def _logged_only(cached: list[Any], sent: list[Any], divergence: Divergence | None) -> list[LoggedOnly]:
    """The messages ahead of the divergence (all, when there is none) that differ as logged: on the wire they are
    alike, or the divergence would be there."""
    limit = len(cached) if divergence is None else divergence.message_index if divergence.part == "message" else 0
    return [LoggedOnly(index, _fields(old, new) or ["key order"])
            for index, (old, new) in enumerate(zip(cached[:limit], sent, strict=False))
            if dumps_bytes(old) != dumps_bytes(new)]


def _fields(old: Any, new: Any, path: str = "") -> list[str]:
    """The dotted paths at which two logged values differ, down through objects (an array is one field)."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return [path] if dumps_bytes(old) != dumps_bytes(new) else []
    fields: list[str] = []
    for key in dict.fromkeys([*old, *new]):
        name = f"{path}.{key}" if path else key
        fields += _fields(old[key], new[key], name) if key in old and key in new else [name]
    return fields


def _prompt_tokens(old: WireBody, new: WireBody) -> int:
    """Tokens of the DeepSeek prompt both sides share (the predecessor's prompt plus its answer)."""
    return common_prefix_length(token_ids(wire_prompt_text(old, generation_prompt=False)),
                                token_ids(wire_prompt_text(new)))


def _token_offset(cached: dict[str, Any], after: dict[str, Any]) -> int | None:
    """`_prompt_tokens` for the logged comparison: None where the adapter's text-only path refuses a side."""
    try:
        return _prompt_tokens(to_wire_body(cached), to_wire_body(after))
    except DshAuditError:   # a scrubbed header or an image the text-only path refuses
        return None


def explanation_document(label: str, explanation: Explanation) -> dict[str, Any]:
    """`audit explain --format json`: its tag, the log, then every field of the explanation."""
    return {"schema": "dsh-audit/explain", "version": 1, "log": label, **asdict(explanation)}
