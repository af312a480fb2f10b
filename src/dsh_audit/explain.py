"""`audit explain`: why one request did or did not extend what the provider could have cached before it.

The provider caches the previous request's prompt and the answer it generated. So a request is compared with
its predecessor's messages plus that answer *as the model generated it* (the blocks its chunks, or from v2 its
stream, completed), part by part in prompt order: config, system prompt, tools, then each message. The first
part that differs is the divergence: where (message index, byte offset in that part's serialization, byte
offset in the request body, token offset in the linearized prompt) and a short excerpt of both sides. Then the
logged events between the two requests that explain it (seq, type, reason) — or "unexplained", with what the
log would have needed to hold.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .errors import DshAuditError
from .fold import Cause, RebuiltRequest
from .jsjson import dumps_bytes
from .records import LogSource
from .surface import derive_message
from .tokens import common_prefix_length
from .walker import Walker

EXCERPT = 40   # characters shown each side of a divergence

# The event type each logged cause stands for (fold.Cause.kind); a replace, and a system-change (a v3 head
# replaced, or a v0 header's system), name their own type first in their detail.
_CAUSE_TYPES = {"initial": "request/header", "resume": "request/header", "header-change": "request/header",
                "options-change": "request/header", "model-change": "request/header", "end-seed": "session/end-seed"}


@dataclass(frozen=True, slots=True)
class Divergence:
    part: str                    # "config.<key>" | "system" | "tools" | "message"
    message_index: int | None    # with part "message": the index in the request's messages
    part_offset: int             # first differing byte in that part's JSON serialization
    body_offset: int             # first differing byte between the two request bodies
    token_offset: int | None     # tokens of the linearized prompt they share (None: not linearizable)
    before: str                  # excerpt of what the cache held, around the divergence
    after: str                   # excerpt of what this request sent there
    generated: bool = False      # the cached side is the predecessor's answer as the model generated it


@dataclass(frozen=True, slots=True)
class LoggedCause:
    seq: int
    type: str
    reason: str


@dataclass(slots=True)
class Explanation:
    name: str                                # turn.step#attempt of the request explained
    predecessor: str | None
    verdict: str                             # "first request" | "extends" | "explained" | "unexplained"
    divergence: Divergence | None = None
    causes: list[LoggedCause] = field(default_factory=list)
    needed: str | None = None                # for "unexplained": what the log would have needed
    appended: int = 0                        # messages this request adds after the cached ones


def _name(request: RebuiltRequest) -> str:
    return f"{request.turn}.{request.step}#{request.attempt}"


def _cause(cause: Cause) -> LoggedCause:
    kind = _CAUSE_TYPES.get(cause.kind) or cause.detail.split(" ", 1)[0]
    return LoggedCause(cause.seq, kind, f"{cause.kind}: {cause.detail}")


def _excerpt(data: bytes, offset: int) -> str:
    """About EXCERPT bytes each side of `offset`, widened to whole UTF-8 characters (a byte offset may fall
    inside a CJK character)."""
    start, end = max(0, offset - EXCERPT), min(len(data), offset + EXCERPT)
    while start > 0 and data[start] & 0xC0 == 0x80:   # a continuation byte: back to the character's first
        start -= 1
    while end < len(data) and data[end] & 0xC0 == 0x80:
        end += 1
    text = data[start:end].decode("utf-8", "replace")
    return ("…" if start else "") + text + ("…" if end < len(data) else "")


def _parts(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(name, before, after) of the parts the prompt holds ahead of the messages, in that order: each config key
    (either side's), the system prompt (up to v2), the tools."""
    keys = dict.fromkeys(key for body in (before, after) for key in body if key not in ("messages", "system", "tools"))
    return [*((f"config.{key}", before.get(key), after.get(key)) for key in keys),
            *((key, before.get(key), after.get(key)) for key in ("system", "tools"))]


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
    """Explain request turn.step#attempt (the step's first attempt when None) of one log."""
    previous: tuple[RebuiltRequest, Any | None] | None = None
    answer = _Answer()
    walker = Walker(source, bodies=True, on_finding=lambda _finding: None)
    for walked in walker:
        event = walked.event or {}
        answer.observe(event)
        request = walked.closed
        if request is None:
            continue
        if (request.turn, request.step) == (turn, step) and attempt in (None, request.attempt):
            return _explain(request, previous)
        logged = derive_message(event) if event.get("type") == "assistant/message" else None
        generated = {**logged, "content": answer.blocks} if isinstance(logged, dict) and answer.blocks else logged
        previous = (request, generated if logged is not None else None)
        answer = _Answer()
    wanted = f"{turn}.{step}" + (f"#{attempt}" if attempt is not None else "")
    raise DshAuditError(f"no request {wanted} in this log (audit rebuild --format digest lists them)",
                        path=source.label)


def _explain(request: RebuiltRequest, previous: tuple[RebuiltRequest, Any | None] | None) -> Explanation:
    causes = [_cause(cause) for cause in request.causes if cause.kind != "initial"]
    if previous is None:
        return Explanation(_name(request), None, "first request", causes=causes)
    before_request, answer = previous
    explanation = Explanation(_name(request), _name(before_request), "extends", causes=causes)
    if request.body is None or before_request.body is None:
        raise DshAuditError(f"request {_name(request)} or its predecessor has no request/header in force: there is "
                            "no request to compare")
    before, after = json.loads(before_request.body), json.loads(request.body)
    cached_messages = [*before["messages"], *([answer] if answer is not None else [])]
    explanation.divergence = _divergence(before, after, cached_messages, before_request.body, request.body,
                                         answer_index=len(before["messages"]) if answer is not None else None)
    if explanation.divergence is None:
        explanation.appended = len(after["messages"]) - len(cached_messages)
        if causes:
            explanation.verdict = "explained"   # logged as a break though the prefix held (a resume, say)
        else:
            explanation.needed = ("a collapse at this request is the provider's own (cache expiry or eviction): a "
                                  "break the log caused would show as a request/header change, a surface replace "
                                  "or a resume logged before it")
        return explanation
    explanation.verdict = "explained" if causes else "unexplained"
    if not causes:
        explanation.needed = _needed(explanation.divergence)
    return explanation


def _needed(divergence: Divergence) -> str:
    if divergence.generated:
        return (f"message {divergence.message_index} as logged differs from the answer the model generated (its "
                "chunks): an edit the log does not record; a surface replace of that message would have recorded it")
    if divergence.part == "message":
        return (f"message {divergence.message_index} changed with no logged event: a surface replace (compaction, "
                "tool-result rewrite) naming it, before this request")
    return f"{divergence.part} changed with no logged event: a request/header snapshot before this request"


def _divergence(before: dict[str, Any], after: dict[str, Any], cached: list[Any], before_body: bytes,
                after_body: bytes, *, answer_index: int | None) -> Divergence | None:
    body_offset = common_prefix_length(before_body, after_body)
    for part, old, new in _parts(before, after):
        old_bytes, new_bytes = dumps_bytes(old), dumps_bytes(new)
        if old_bytes != new_bytes:
            offset = common_prefix_length(old_bytes, new_bytes)
            return Divergence(part, None, offset, body_offset, _token_offset(before, after, cached),
                              _excerpt(old_bytes, offset), _excerpt(new_bytes, offset))
    for index, old in enumerate(cached):
        new = after["messages"][index] if index < len(after["messages"]) else None
        old_bytes, new_bytes = dumps_bytes(old), dumps_bytes(new)
        if old_bytes != new_bytes:
            offset = common_prefix_length(old_bytes, new_bytes)
            return Divergence("message", index, offset, body_offset, _token_offset(before, after, cached),
                              _excerpt(old_bytes, offset), _excerpt(new_bytes, offset) if new is not None else
                              "(no message: the request has fewer)", generated=index == answer_index)
    return None


def _token_offset(before: dict[str, Any], after: dict[str, Any], cached: list[Any]) -> int | None:
    """Tokens of the DeepSeek prompt both sides share (the predecessor's prompt plus its answer)."""
    from .deepseek_wire import to_wire_body, wire_prompt_text
    from .tokens import token_ids

    try:
        old = wire_prompt_text(to_wire_body({**before, "messages": cached}), generation_prompt=False)
        new = wire_prompt_text(to_wire_body(after))
    except DshAuditError:   # a scrubbed header or an image the text-only path refuses
        return None
    return common_prefix_length(token_ids(old), token_ids(new))
