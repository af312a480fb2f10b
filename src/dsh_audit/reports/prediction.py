"""Expected cache reads for cache-report, in time linear in the log.

The provider caches every prompt and the answer it generated, in whole blocks. A request that extends its
predecessor (same header, the surface only grew: the fold's `extends_previous`) can read what the provider itself
counted for the predecessor: its prompt (inputTokens + cacheReadTokens) and, within one turn, its output too.
Across turns it cannot: DeepSeek's template drops the reasoning of earlier turns, so the shared prefix ends with
the previous prompt. A change of model starts a cold cache.

Only where the prompt changed otherwise (a header change, a compaction, a fork) or the predecessor logged no
usage are tokens counted. The prompt is rendered as DeepSeek's V4 chat template renders the body the DeepSeek
adapter would send (deepseek_wire), one segment per surface message after the head; each message is converted
once and each of its renderings tokenized once, a prompt that only grew is rendered again from its last user
turn on, the previous prompt and answer are compared with this one segment by segment, and only the first
differing segment token by token.
Scrubbed parts of a header are replaced by supplied real content or left out and named, never guessed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..deepseek_wire import (
    USER_SIDE,
    TemplateMode,
    head_segment,
    render_messages,
    template_mode,
    to_wire_body,
    wire_history_message,
    wire_prompt_text,
)
from ..errors import DshAuditError
from ..fold import RebuiltRequest, RequestParts
from ..header import HeaderSnapshot, is_placeholder
from ..model_calls import answer_message
from ..readers.found import read_found
from ..tokens import common_prefix_length, count_tokens, token_ids

# Tokens the provider counts beyond the template's text, where in the prompt is not known (so expected reads,
# which are prefixes, leave them out): the median of (logged prompt - template count) over the 10 requests with
# real DeepSeek usage of the lyteboat logs (tests/fixtures/wild); checked on the corpus's pwsh-tool-turn
# (docs/cache-report.md, "Prompt count"; benchmarks/prompt_calibration.py prints both).
PROVIDER_FRAMING_TOKENS = 27

# How an expected read was found (the `expectedBasis` column).
FROM_USAGE, TOKENIZED, MODEL_CHANGE = "previous-usage", "tokenized", "model-change"


@dataclass(frozen=True, slots=True)
class RealHeader:
    """Real content supplied for a scrubbed header, and where it came from."""

    system: str | None = None
    tools: list[Any] | None = None
    origin: str = "supplied"


SIDECAR_LIMIT = 16 * 1024 * 1024   # bytes: a saved prompt or tool schemas, never more


def sidecar_header(log: Path) -> RealHeader:
    """The pinned-scenario sidecars beside a log (the saved prompt gained a trailing newline: drop it). Read
    only with --sidecars, and only as regular files directly in the log's own folder (see `read_sidecar`)."""
    if str(log) == "-":   # standard input has no folder
        return RealHeader(origin="sidecar")
    prompts = sorted(log.parent.glob("system-prompt*.expected.md"))
    schemas = sorted(log.parent.glob("tool-schemas*.expected.json"))
    system = read_sidecar(prompts[0]).removesuffix("\n") if prompts else None
    tools: Any = None
    if schemas:
        try:
            tools = json.loads(read_sidecar(schemas[0]))
        except json.JSONDecodeError as error:
            raise DshAuditError(f"sidecar is not JSON: {error.msg} (line {error.lineno}, column {error.colno})",
                                path=str(schemas[0])) from None
        except RecursionError:
            raise DshAuditError("sidecar is not JSON dsh-audit can read: nested too deep",
                                path=str(schemas[0])) from None
    if isinstance(tools, dict):  # keyed by header reason; the first is the initial header's
        tools = next(iter(tools.values()), None)
    return RealHeader(system, tools if isinstance(tools, list) else None, "sidecar")


def read_sidecar(path: Path, limit: int = SIDECAR_LIMIT) -> str:
    """A sidecar's text. A file planted beside a log must not put another file into the report, nor hang the
    run: it is read as readers.found reads a file dsh-audit found itself (never through a symbolic link, only a
    regular file), at most `limit` bytes, UTF-8. Any failure is a one-line error naming the sidecar (exit 2)."""
    data = read_found(path, limit=limit, what="sidecar",
                      hint="--sidecars reads only regular files directly beside the log")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DshAuditError(f"sidecar is not UTF-8 text (byte {error.start})", path=str(path)) from None


@dataclass(slots=True)
class Expectation:
    """What one request could read from the cache, before rounding down to whole blocks."""

    prefix_tokens: int | None = None
    basis: str | None = None        # FROM_USAGE | TOKENIZED | MODEL_CHANGE; None: first request, or unknowable
    approximate: bool = False       # counted on a prompt whose scrubbed parts are left out
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Envelope:
    """A header's part of the prompt: its system prompt and tools on the wire, and what is missing from them."""

    system: list[str]
    tools: list[Any] | None
    surface_system: str | None      # real content for a "{{system}}" surface head (v3 on)
    notes: tuple[str, ...]
    approximate: bool
    mode: TemplateMode


def _with_real_header(body: dict[str, Any], real: RealHeader) -> tuple[list[str], bool]:
    """Put supplied real content where the body's header part is scrubbed; (notes, approximate)."""
    notes: list[str] = []
    approximate = False
    if "system" in body and is_placeholder(body["system"]):
        if real.system is not None:
            body["system"] = real.system
            notes.append(f"system prompt from {real.origin} (log has {{{{system}}}})")
        else:
            notes.append("system prompt scrubbed ({{system}}): token counts exclude the real prompt")
            approximate = True
    tools = body.get("tools")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(tool, dict) for tool in tools)):
        if real.tools is not None:
            body["tools"] = real.tools
            notes.append(f"tools from {real.origin} (log has them scrubbed)")
        else:
            body.pop("tools")
            notes.append("tools scrubbed: their tokens are not counted")
            approximate = True
    return notes, approximate


def _envelope(header: HeaderSnapshot, real: RealHeader) -> _Envelope:
    body: dict[str, Any] = json.loads(b"{" + header.config_bytes + b'"messages":[]' + header.tail_bytes)
    notes, approximate = _with_real_header(body, real)
    wire = to_wire_body(body)
    system = [str(wire["messages"][0]["content"])] if "system" in body else []
    return _Envelope(system, wire.get("tools"), real.system, tuple(notes), approximate, template_mode(wire))


def _real_body(request: RebuiltRequest, real: RealHeader) -> dict[str, Any]:
    """The rebuilt request with supplied real content where its header (or v3 system head) is scrubbed."""
    if request.parts is None:
        raise DshAuditError("no request/header in force: no request body")
    body: dict[str, Any] = json.loads(request.parts.body())
    _with_real_header(body, real)
    messages = body["messages"]
    if real.system is not None and messages and messages[0].get("role") == "system":
        head = messages[0]
        if any(is_placeholder(block.get("text")) for block in head.get("content") or [] if isinstance(block, dict)):
            messages[0] = {**head, "content": [{"type": "text", "text": real.system}]}
    return body


def wire_body(request: RebuiltRequest, real: RealHeader) -> str | None:
    """The DeepSeek request body of one request as compact JSON, with supplied real content where the header
    is scrubbed; None without a header or when the adapter would refuse the request."""
    try:
        return json.dumps(to_wire_body(_real_body(request, real)), ensure_ascii=False, separators=(",", ":"))
    except DshAuditError:
        return None


@dataclass(slots=True)
class _Prompt:
    """A request's prompt as the template renders it: the head (header system prompt, leading system messages,
    tools), then one segment per later message. Its tokens are counted only as far as a comparison asks."""

    parts: RequestParts
    model: Any
    mode: TemplateMode
    absorbed: int               # leading messages the head holds
    segments: list[str]
    keys: list[Any]             # each segment's memo key (the head's: None)
    totals: list[int]           # totals[k]: tokens of segments[:k], for k up to as far as counted
    settled: int                # segments that stay as they are while the prompt only grows
    scrubbed_head: bool         # a "{{system}}" head with no real prompt supplied
    origin: RequestParts | None   # the prompt it grew from, whose first `reused` segments it shares
    reused: int


class Predictor:
    """The expected cache read of each request of one log, fed in log order."""

    def __init__(self, real: RealHeader, *, tokenize: bool = True) -> None:
        self.real, self.tokenize = real, tokenize
        self.previous: RebuiltRequest | None = None
        self.previous_answer: Any = None
        self._wire: dict[bytes, list[Any]] = {}                          # message -> its wire messages
        self._segments: dict[tuple[Any, ...], str] = {}    # (message, context) -> its segment
        self._counts: dict[tuple[Any, ...], int] = {}      # (message, context) -> its segment's tokens
        self._head_count: tuple[str, int] = ("", 0)
        self._surface: list[bytes] | None = None                         # the surface list the memos were pruned to
        self._envelope: tuple[HeaderSnapshot, _Envelope] | None = None
        self._last: _Prompt | None = None                                # the prompt rendered last
        self._extends_previous = True   # whether the requests since `previous` all extended their predecessor

    def expect(self, request: RebuiltRequest, answer: Any | None) -> Expectation:
        """`previous` is the last request the provider answered: one answered with an error and no usage (an
        HTTP 500, a refusal, a torn stream) may never have been read, so it seeds no expectation; the requests
        after it are judged against the one before it (the end-to-end tests' server-errors scenario)."""
        previous, previous_answer = self.previous, self.previous_answer
        extends = request.extends_previous and self._extends_previous
        if request.usage is None and request.finish == "error":
            self._extends_previous = extends
        else:
            self.previous, self.previous_answer, self._extends_previous = request, answer, True
        if previous is None:   # what the provider held before the log began is not logged
            return Expectation()
        if (request.provider, request.model) != (previous.provider, previous.model):
            return Expectation(0, MODEL_CHANGE)
        usage = previous.usage or {}
        fresh, reads, output = (_count(usage.get(key)) for key in ("inputTokens", "cacheReadTokens", "outputTokens"))
        if extends and fresh is not None and reads is not None:
            same_turn = previous_answer is not None and request.turn == previous.turn
            return Expectation(fresh + reads + (output or 0 if same_turn else 0), FROM_USAGE)
        if not self.tokenize:
            return Expectation(notes=["not tokenized (--no-predict)"])
        try:
            return self.count_shared(previous, previous_answer, request)
        except DshAuditError as error:
            return Expectation(approximate=True, notes=[f"no DeepSeek wire body: {error.message}"])
        finally:
            self._prune(request.parts)

    # -- tokenized: the previous prompt and answer against this prompt, segment by segment ---------------------
    def count_shared(self, previous: RebuiltRequest, answer: Any | None, request: RebuiltRequest) -> Expectation:
        """The tokens `request` shares with the previous prompt and its answer, counted segment by segment."""
        before, now = previous.parts, request.parts
        if before is None or now is None:
            return Expectation(notes=["no request/header in force: nothing to tokenize"])
        envelope = self._envelope_of(now.header)
        notes, approximate = list(envelope.notes), envelope.approximate
        if request.prefix == "scrubbed":
            notes.append("messagePrefix scrubbed: its messages are not counted")
            approximate = True
        old = self.prompt(before, previous.model)
        new = self.prompt(now, request.model)
        if new.scrubbed_head:
            notes.append("system prompt scrubbed ({{system}}): token counts exclude the real prompt")
            approximate = True
        index = new.reused if new.origin is old.parts and new.model == old.model else 0
        while index < min(len(old.segments), len(new.segments)) and old.segments[index] == new.segments[index]:
            index += 1
        if index < len(old.segments):
            ending = old.segments[index]
        else:   # the previous prompt is all shared: the cache holds the answer after it
            ending = "" if answer is None else answer_segment(answer, previous.model, old.mode)
        following = new.segments[index] if index < len(new.segments) else ""
        expected = self.tokens_before(old, index) + common_prefix_length(token_ids(ending), token_ids(following))
        return Expectation(expected, TOKENIZED, approximate, notes)

    def prompt(self, parts: RequestParts, model: Any) -> _Prompt:
        """The prompt of a request, rendered from the last one rendered where it only grew (same header, the
        same surface list, more messages): only the segments from its last user turn on can change."""
        last = self._last
        if last is not None and last.parts is parts and last.model == model:
            return last
        grown = (last is not None and last.model == model and last.parts.header is parts.header
                 and last.parts.prefix is parts.prefix and last.parts.surface is parts.surface
                 and last.parts.count <= parts.count and last.settled > 0)
        self._last = self._render(parts, model, last if grown else None)
        return self._last

    def tokens_before(self, prompt: _Prompt, index: int) -> int:
        """The tokens of the prompt's first `index` segments, each segment counted once per rendering in the log."""
        totals = prompt.totals
        while len(totals) <= index:
            k = len(totals) - 1
            key, segment = prompt.keys[k], prompt.segments[k]
            if key is None:
                if self._head_count[0] is not segment:
                    self._head_count = (segment, count_tokens(segment))
                count = self._head_count[1]
            else:
                count = self._counts.get(key, -1)
                if count < 0:
                    count = self._counts[key] = count_tokens(segment)
            totals.append(totals[-1] + count)
        return totals[index]

    def _render(self, parts: RequestParts, model: Any, grown_from: _Prompt | None) -> _Prompt:
        mode = self._envelope_of(parts.header).mode
        if grown_from is None:
            head, absorbed, scrubbed = self._head(parts, model)
            keys: list[Any] = [None]   # the head has no memo key
            segments, totals, start, kept = [head], [0], absorbed, 0
        else:
            absorbed, scrubbed, kept = grown_from.absorbed, grown_from.scrubbed_head, grown_from.settled
            segments, keys = grown_from.segments[:kept], grown_from.keys[:kept]
            totals = grown_from.totals[:kept + 1]
            start = absorbed + kept - 1
        roles = [[message.get("role") for message in self._wire_of(parts.message(k), model)]
                 for k in range(start, len(parts))]
        before = None   # the role of the last wire message ahead of `start` (a message may have none)
        for k in range(start - 1, absorbed - 1, -1):
            wire = self._wire_of(parts.message(k), model)
            if wire:
                before = wire[-1].get("role")
                break
        after: list[str | None] = [None] * len(roles)
        later_user = [False] * len(roles)
        for k in range(len(roles) - 2, -1, -1):
            after[k] = roles[k + 1][0] if roles[k + 1] else after[k + 1]
            later_user[k] = later_user[k + 1] or any(role in USER_SIDE for role in roles[k + 1])
        settled = len(segments)
        for k, wire_roles in enumerate(roles):
            message = parts.message(start + k)
            key = (message, before in USER_SIDE, after[k], later_user[k], mode)
            segment = self._segments.get(key)
            if segment is None:
                segment = self._segments[key] = "".join(render_messages(
                    self._wire_of(message, model), mode, before=before, after=after[k], later_user=later_user[k]))
            if any(role in USER_SIDE for role in wire_roles):
                settled = len(segments)   # from the last user turn on, a longer prompt may render differently
            segments.append(segment)
            keys.append(key)
            before = wire_roles[-1] if wire_roles else before
        return _Prompt(parts, model, mode, absorbed, segments, keys, totals, settled if len(segments) > 1 else 0,
                       scrubbed, None if grown_from is None else grown_from.parts, kept)

    def _envelope_of(self, header: HeaderSnapshot) -> _Envelope:
        if self._envelope is None or self._envelope[0] is not header:
            self._envelope = (header, _envelope(header, self.real))
        return self._envelope[1]

    def _head(self, parts: RequestParts, model: Any) -> tuple[str, int, bool]:
        """The head segment (header system prompt, leading system messages, tools), how many messages it
        absorbed (the template puts every leading system message in the system area), and whether it holds a
        scrubbed system prompt with no real one supplied."""
        envelope = self._envelope_of(parts.header)
        system, scrubbed = list(envelope.system), False
        index = 0
        while index < len(parts):
            wire = self._wire_of(parts.message(index), model)
            if any(message.get("role") != "system" for message in wire):
                break
            for message in wire:
                content = str(message.get("content") or "")
                if is_placeholder(content):
                    scrubbed = envelope.surface_system is None
                    content = envelope.surface_system or content
                system.append(content)
            index += 1
        return head_segment(system, envelope.tools, envelope.mode), index, scrubbed

    def _wire_of(self, message: bytes, model: Any) -> list[Any]:
        """A message's wire messages, converted once per message."""
        wire = self._wire.get(message)
        if wire is None:
            wire = self._wire[message] = wire_history_message(json.loads(message), model)
        return wire

    def _prune(self, parts: RequestParts | None) -> None:
        """Keep only the current surface's messages in the memos once the surface is replaced (a compaction)."""
        if parts is None or parts.surface is self._surface:
            return
        self._surface = parts.surface
        keep = set(parts.surface) | set(parts.prefix)
        self._wire = {message: wire for message, wire in self._wire.items() if message in keep}
        self._segments = {key: segment for key, segment in self._segments.items() if key[0] in keep}
        self._counts = {key: count for key, count in self._counts.items() if key[0] in keep}


def answer_segment(answer: Any, model: Any, mode: TemplateMode) -> str:
    """The answer as the provider cached it after its prompt: generated after the assistant-turn opener, so
    with its reasoning when thinking; `answer` may be kept as its stored bytes (model_calls.StoredMessage)."""
    wire = wire_history_message(answer_message(answer), model)
    return "".join(render_messages(wire, mode, before="user"))


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def linear_prompt(request: RebuiltRequest, real: RealHeader) -> str:
    """The whole prompt of one request, from the same segments the predictor compares."""
    if request.parts is None:
        raise DshAuditError("no request/header in force: no prompt")
    return "".join(Predictor(real).prompt(request.parts, request.model).segments)


def prompt_tokens(request: RebuiltRequest, real: RealHeader) -> int | None:
    """The calibrated size of one request's prompt: the template's tokens plus the provider's own framing, to
    compare with the prompt its usage reports (inputTokens + cacheReadTokens). None where part of the prompt is
    scrubbed and no real content was supplied: what was sent is not known."""
    if request.parts is None:
        raise DshAuditError("no request/header in force: no prompt")
    predictor = Predictor(real)
    prompt = predictor.prompt(request.parts, request.model)
    if prompt.scrubbed_head or predictor._envelope_of(request.parts.header).approximate or request.prefix == "scrubbed":
        return None
    return predictor.tokens_before(prompt, len(prompt.segments)) + PROVIDER_FRAMING_TOKENS


def reference_prompt(request: RebuiltRequest, real: RealHeader) -> str:
    """The one-shot linearization of the request's whole wire body, for tests of the segment-wise one."""
    return wire_prompt_text(to_wire_body(_real_body(request, real)))
