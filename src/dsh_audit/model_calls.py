"""The model calls of a log, as cache-report reads them: each rebuilt request with the message that answered
it, and the calls no loop request stands for (OtherCall). Both the walk (reports.cache_report.calls) and the
fast path (fastpath.calls) build them, by the same rules, from the same helpers here.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .findings import Finding
from .fold import RebuiltRequest, logged_usage
from .readers.jsonvalue import parse_json
from .records import LogRecord


class OtherCall(msgspec.Struct):
    """A logged model call outside the loop's requests: a compaction's one-shot summary call (its usage and
    envelope logged), a response logged with neither a chunk nor a header in force (authored logs: its usage
    logged), the session's title call (its request logged, never its usage: `title_request`), or a side call a
    product built on dsh logged as an ignorable event of its own (`side_call`: its text, never its usage)."""

    kind: str            # "compaction" | "response" | "title" | "side"
    seq: int
    time: int | None
    provider: str | None
    model: str | None
    usage: dict[str, Any] | None
    inherited: bool = False
    note: str | None = None   # what the report says of it, where its kind alone does not say enough
    request: dict[str, Any] | None = None   # a title call's request, rebuilt as logged
    texts: tuple[str, ...] = ()   # a side call's system, prompt and output, as logged: what its size is counted from


class StoredMessage:
    """An answering message kept as its stored JSON bytes, parsed as the readers parse a line only when read:
    the fast path then parses no answer that prediction never reads (it reads one only at a prefix break)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def value(self) -> Any:
        return parse_json(self.data)


Call = tuple[RebuiltRequest, Any | None] | OtherCall   # a request with the message answering it, or another call


def answer_message(answer: Any) -> Any:
    """The answering message itself, whether the walk derived it or the fast path stored it."""
    return answer.value() if isinstance(answer, StoredMessage) else answer


def other_call(kind: str, event: dict[str, Any], seq: int) -> OtherCall | None:
    """The call a compaction/summary, a session/title-llm-request, or an assistant/message that closed no
    request, stands for (None: a response with no usage logged, which has nothing to price)."""
    data = _dict(event.get("data"))
    usage = logged_usage(data)
    time = json_int(event.get("time"))
    if kind == "session/title-llm-request":
        route = _dict(data.get("route"))
        return OtherCall("title", seq, time, _str(route.get("provider")), _str(route.get("model")), None,
                         request=title_request(data))
    if kind == "compaction/summary":
        return OtherCall("compaction", seq, time, _str(data.get("provider")), _str(data.get("model")), usage)
    if usage is None:
        return None
    origin = _dict(_dict(data.get("message")).get("source"))
    return OtherCall("response", seq, time, _str(origin.get("provider")), _str(origin.get("model")), usage)


# The fields of an event's data that record a model call: the request's text, and the outcome.
SIDE_CALL_REQUEST = ("system", "prompt")
SIDE_CALL_OUTCOME = ("output", "failure")


def side_call(event: dict[str, Any], seq: int) -> OtherCall | None:
    """The model call an ignorable event of a type dsh does not know records, recognised by its shape alone (the
    product and its type's name do not matter): `data.prompt` a string, the prompt sent, `data.system` a string
    if present, and an outcome, `data.output` a string (the answer) or `data.failure` (the call failed). The
    model is `data.route.{provider,model}`, else `data.{provider,model}`. None: the event records no call."""
    data = _dict(event.get("data"))
    if event.get("ignorable") is not True or not isinstance(data.get("prompt"), str) \
            or not isinstance(data.get("system", ""), str) \
            or not (isinstance(data.get("output"), str) or "failure" in data):
        return None
    route = _dict(data.get("route")) or data
    kind = _str(event.get("type")) or "?"
    texts = tuple(text for key in ("system", "prompt", "output") if isinstance(text := data.get(key), str))
    outcome = "" if isinstance(data.get("output"), str) else ", and failed (data.failure: no output logged)"
    return OtherCall("side", seq, json_int(event.get("time")), _str(route.get("provider")), _str(route.get("model")),
                     None, note=f"side call logged as {kind}: a model call outside dsh's loop, not priced (its "
                                f"usage is not logged){outcome}", texts=texts)


class SideCalls:
    """Finds the side calls of a walk: the loader reports each event it skips as unknown and ignorable
    (`unknown-ignorable`, with its seq) while admitting it, just before the walk hands out that event's step;
    `noted` takes those findings, `of` the step's stored event, which is then a side call or nothing."""

    FINDING = "unknown-ignorable"

    def __init__(self) -> None:
        self._skipped: int | None = None

    def noted(self, finding: Finding) -> None:
        if finding.code == self.FINDING and finding.seq is not None:
            self._skipped = finding.seq

    def of(self, record: LogRecord | None) -> OtherCall | None:
        seq, self._skipped = self._skipped, None
        if seq is None or record is None or record.seq != seq:
            return None
        return side_call(record.event, seq)


def title_request(data: dict[str, Any]) -> dict[str, Any]:
    """The request dsh's title provider hands the LLM service (dsh-session-title-llm, generateSessionTitleWithLlm:
    its route, system, messages and maxTokens, purpose session-title), from the session/title-llm-request it logs
    just before the call: keys in deepseek_wire's order, each only where the log has it. Its usage is in no
    event: the provider reads the stream for the title alone, and session/title (source provider) names only
    the route, in every generation (schemas/events/**/session.title*.schema.json)."""
    route = _dict(data.get("route"))
    request: dict[str, Any] = {key: route[key] for key in ("provider", "model") if key in route}
    request.update((key, data[key]) for key in ("reasoningEffort", "maxTokens", "messages", "system") if key in data)
    return request


def json_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
