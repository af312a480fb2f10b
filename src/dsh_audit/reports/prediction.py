"""Expected cache reads for cache-report, in time linear in the log.

The provider caches every prompt and the answer it generated, in whole blocks. A request that extends its
predecessor (same header, the surface only grew: the fold's `extends_previous`) can read what the provider itself
counted for the predecessor: its prompt (inputTokens + cacheReadTokens) and, within one turn, its output too.
Across turns it cannot: DeepSeek's template drops the reasoning of earlier turns, so the shared prefix ends with
the previous prompt. A change of model starts a cold cache.

Only where the prompt changed otherwise (a header change, a compaction, a fork) or the predecessor logged no
usage are tokens counted. The prompt is rendered as DeepSeek's V4 chat template renders the body the DeepSeek
adapter would send (deepseek_wire), one segment per surface message after the head; each message is converted
once and each of its renderings tokenized once, and only as far as a comparison reaches: the previous prompt and
answer are compared with this one segment by segment, and only the first differing segment token by token, and
of it only the lines up to where the two part (tokens.shared_tokens).
Scrubbed parts of a header are replaced by supplied real content or left out and named, never guessed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
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
from ..readers.jsonvalue import parse_json
from ..tokens import count_tokens, shared_tokens

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


@dataclass(frozen=True, slots=True, eq=False)
class _Envelope:
    """A header's part of the prompt: its system prompt and tools on the wire, and what is missing from them.
    Hashed by identity (eq=False): an envelope is made once per header and memoised as itself (_head_segment)."""

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


def _envelope(config_bytes: bytes, tail_bytes: bytes, real: RealHeader) -> _Envelope:
    """The envelope of a header's request parts (HeaderSnapshot.config_bytes, tail_bytes)."""
    body: dict[str, Any] = json.loads(b"{" + config_bytes + b'"messages":[]' + tail_bytes)
    notes, approximate = _with_real_header(body, real)
    wire = to_wire_body(body)
    system = [str(wire["messages"][0]["content"])] if "system" in body else []
    return _Envelope(system, wire.get("tools"), real.system, tuple(notes), approximate, template_mode(wire))


# A fleet's logs mostly share a few headers (one dsh release's system prompt and tools): their envelopes and head
# token counts are made once per process, not once per log (a small log's header was a fifth of its prediction).
SHARED_HEADS = 64


@lru_cache(maxsize=SHARED_HEADS)
def _bare_envelope(config_bytes: bytes, tail_bytes: bytes) -> _Envelope:
    """_envelope of a header's request parts with no real content supplied (it reads nothing else then). Shared:
    nothing changes an envelope once made."""
    return _envelope(config_bytes, tail_bytes, RealHeader())


@lru_cache(maxsize=SHARED_HEADS)
def _head_tokens(segment: str) -> int:
    return count_tokens(segment)


@lru_cache(maxsize=SHARED_HEADS)
def _head_segment(envelope: _Envelope, system: tuple[str, ...]) -> str:
    """head_segment of an envelope's tools and these system texts, rendered once per process for each (a shared
    envelope's tools are rendered once, not once per log)."""
    return head_segment(system, envelope.tools, envelope.mode)


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
    tools), then one segment per later message. Its segments are rendered, and their tokens counted, only as far
    as a comparison asks (a prefix break usually parts near the head, whatever the length of the prompt)."""

    parts: RequestParts
    model: Any
    mode: TemplateMode
    absorbed: int               # leading messages the head holds
    length: int                 # segments in all: the head and one per message after the absorbed ones
    segments: list[str]         # rendered so far
    keys: list[Any]             # each segment's memo key (the head's: None)
    totals: list[int]           # totals[k]: tokens of segments[:k], for k up to as far as counted
    before: str | None          # the role of the last wire message ahead of the next segment to render
    last_user: int | None       # the last message with a user or tool wire message (-1: none); None: not sought
    scrubbed_head: bool         # a "{{system}}" head with no real prompt supplied


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
        self._head_memo: tuple[_Envelope, list[str], str] | None = None   # the last head rendered, and of what
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
        index = 0
        while index < min(old.length, new.length) and self.segment(old, index) == self.segment(new, index):
            index += 1
        if index < old.length:
            ending = self.segment(old, index)
        else:   # the previous prompt is all shared: the cache holds the answer after it
            ending = "" if answer is None else answer_segment(answer, previous.model, old.mode)
        following = self.segment(new, index) if index < new.length else ""
        expected = self.tokens_before(old, index) + shared_tokens(ending, following)
        return Expectation(expected, TOKENIZED, approximate, notes)

    def prompt(self, parts: RequestParts, model: Any) -> _Prompt:
        """The prompt of a request, its head rendered; its other segments come as `segment` asks for them."""
        last = self._last
        if last is not None and last.parts is parts and last.model == model:
            return last
        head, absorbed, scrubbed = self._head(parts, model)
        self._last = _Prompt(parts, model, self._envelope_of(parts.header).mode, absorbed,
                             1 + len(parts) - absorbed, [head], [None], [0], None, None, scrubbed)
        return self._last

    def segment(self, prompt: _Prompt, index: int) -> str:
        """The prompt's segment `index`, rendering the ones before it first (each needs the role before it)."""
        segments = prompt.segments
        while len(segments) <= index:
            self._render_next(prompt)
        return segments[index]

    def rendered(self, prompt: _Prompt) -> list[str]:
        """Every segment of the prompt."""
        if prompt.length > 1:
            self.segment(prompt, prompt.length - 1)
        return prompt.segments

    def tokens_before(self, prompt: _Prompt, index: int) -> int:
        """The tokens of the prompt's first `index` segments, each segment counted once per rendering in the log."""
        totals = prompt.totals
        while len(totals) <= index:
            k = len(totals) - 1
            segment = self.segment(prompt, k)
            key = prompt.keys[k]
            if key is None:
                if self._head_count[0] != segment:   # the same head, rendered again after a surface change
                    self._head_count = (segment, _head_tokens(segment))
                count = self._head_count[1]
            else:
                count = self._counts.get(key, -1)
                if count < 0:
                    count = self._counts[key] = count_tokens(segment)
            totals.append(totals[-1] + count)
        return totals[index]

    def _render_next(self, prompt: _Prompt) -> None:
        """Render the prompt's next message. The template renders a message by the roles around it and by whether
        a user or tool message comes later: found by looking only as far ahead as the first message that has a
        wire message, and once per prompt back from its end for the last user or tool message."""
        parts, model = prompt.parts, prompt.model
        position = prompt.absorbed + len(prompt.segments) - 1
        message = parts.message(position)
        after = None
        for later in range(position + 1, len(parts)):
            wire = self._wire_of(parts.message(later), model)
            if wire:
                after = wire[0].get("role")
                break
        if prompt.last_user is None:
            prompt.last_user = next((k for k in range(len(parts) - 1, prompt.absorbed - 1, -1) if any(
                wire.get("role") in USER_SIDE for wire in self._wire_of(parts.message(k), model))), -1)
        later_user = position < prompt.last_user
        before = prompt.before
        key = (message, before in USER_SIDE, after, later_user, prompt.mode)
        segment = self._segments.get(key)
        wire = self._wire_of(message, model)
        if segment is None:
            segment = self._segments[key] = "".join(render_messages(
                wire, prompt.mode, before=before, after=after, later_user=later_user))
        prompt.segments.append(segment)
        prompt.keys.append(key)
        if wire:
            prompt.before = wire[-1].get("role")

    def _envelope_of(self, header: HeaderSnapshot) -> _Envelope:
        if self._envelope is None or self._envelope[0] is not header:
            real = self.real
            supplied = real.system is not None or real.tools is not None
            envelope = (_envelope(header.config_bytes, header.tail_bytes, real) if supplied
                        else _bare_envelope(header.config_bytes, header.tail_bytes))
            self._envelope = (header, envelope)
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
        if self._head_memo is None or self._head_memo[0] is not envelope or self._head_memo[1] != system:
            self._head_memo = (envelope, system, _head_segment(envelope, tuple(system)))
        return self._head_memo[2], index, scrubbed

    def _wire_of(self, message: bytes, model: Any) -> list[Any]:
        """A message's wire messages, converted once per message."""
        wire = self._wire.get(message)
        if wire is None:
            wire = self._wire[message] = wire_history_message(parse_json(message), model)
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
    predictor = Predictor(real)
    return "".join(predictor.rendered(predictor.prompt(request.parts, request.model)))


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
    return predictor.tokens_before(prompt, prompt.length) + PROVIDER_FRAMING_TOKENS


def reference_prompt(request: RebuiltRequest, real: RealHeader) -> str:
    """The one-shot linearization of the request's whole wire body, for tests of the segment-wise one."""
    return wire_prompt_text(to_wire_body(_real_body(request, real)))
