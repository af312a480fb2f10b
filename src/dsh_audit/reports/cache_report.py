"""`audit cache-report`: one row per model request — the logged usage, the cache hit the reconstruction
predicts, collapses and their logged causes, and a cost estimate — plus summary rows per log and overall.

Prediction: the provider caches the tokens of earlier prompts *and* of the answers it generated, at block
granularity. So a request's predicted hit is the common token prefix of (previous prompt + previous answer)
with this prompt, as the DeepSeek adapter would send them (dsh_audit.deepseek_wire, mirroring
@deepseek-ai/dsh-llm-deepseek at dsh 0.1.1-rc.2), rounded down to whole cache blocks.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import polars as pl

from ..deepseek_wire import to_wire_body, wire_prompt_text
from ..errors import DshAuditError
from ..fold import Cause, RebuiltRequest
from ..readers import discover, open_logs
from ..records import LogSource
from ..surface import derive_message
from ..tokens import cacheable_tokens, common_prefix_length, token_ids
from ..walker import Walker
from .prices import Prices, price_for

_ROW_BATCH = 2048

# Logged cause kinds (fold.Cause.kind) as the report names them.
CAUSE_NAMES = {"initial": "first-request", "resume": "resume", "end-seed": "resume-or-fork",
               "header-change": "header-change", "model-change": "model-change", "replace": "compaction-replace",
               "system-change": "system-prompt-change"}
UNEXPLAINED = "unexplained"

REQUEST_COLUMNS: dict[str, Any] = {
    "row": pl.String, "log": pl.String, "generation": pl.Int64, "sessionId": pl.String, "turn": pl.Int64,
    "step": pl.Int64, "attempt": pl.Int64, "seq": pl.Int64, "provider": pl.String, "model": pl.String,
    "inherited": pl.Boolean,
    "requests": pl.Int64, "inputTokens": pl.Int64, "cacheReadTokens": pl.Int64, "outputTokens": pl.Int64,
    "reasoningTokens": pl.Int64, "hitRatio": pl.Float64, "promptTokens": pl.Int64,
    "predictedPrefixTokens": pl.Int64, "predictedCacheTokens": pl.Int64, "withinBlock": pl.Boolean,
    "loggedBasisCacheTokens": pl.Int64, "loggedBasisWithinBlock": pl.Boolean,
    "approximate": pl.Boolean, "collapse": pl.Boolean, "cause": pl.String, "causeDetail": pl.String,
    "collapses": pl.Int64, "unexplained": pl.Int64, "predictionsCompared": pl.Int64,
    "predictionsWithinBlock": pl.Int64,
    "loggedBasisCompared": pl.Int64, "loggedBasisAgreeing": pl.Int64, "costUsd": pl.Float64, "priceModel": pl.String,
    "wireSha256": pl.String, "note": pl.String,
}
TABLE_COLUMNS = ("row", "log", "generation", "turn", "step", "attempt", "seq", "model", "inputTokens",
                 "cacheReadTokens", "outputTokens", "hitRatio", "predictedCacheTokens", "withinBlock", "collapse",
                 "cause", "causeDetail", "costUsd", "note")


@dataclass(frozen=True, slots=True)
class CacheOptions:
    block: int = 64                 # cache-block granularity of the prediction (tokens)
    collapse_ratio: float = 0.5     # a collapse: reads < ratio x predecessor's reads, or < ratio x prediction
    prices: Prices | None = None    # one price set for every model; None: DeepSeek's per-model list
    message_prefix: str = "legacy"
    wire: bool = False              # keep the serialized DeepSeek body in a `wireBody` column
    system: str | None = None       # real system prompt to put where a log has "{{system}}"
    tools: list[Any] | None = None  # real tool schemas to put where a log has "{{tools}}" or names only
    sidecars: bool = False          # take them from system-prompt*.expected.md / tool-schemas*.expected.json
    predict: bool = True            # token prediction costs O(total request size); off: logged figures only

    def __post_init__(self) -> None:
        if self.block <= 0:
            raise DshAuditError(f"cache block must be a positive number of tokens, not {self.block}")
        if not 0 < self.collapse_ratio <= 1:
            raise DshAuditError(f"collapse threshold must be in (0, 1], not {self.collapse_ratio}")


@dataclass(slots=True)
class _Prompt:
    """The linear prompt of one request and of (request + its answer), as token ids."""

    ids: list[int] | None = None
    approximate: bool = True
    with_answer: list[int] | None = None
    sha256: str | None = None
    body: str | None = None
    notes: list[str] = field(default_factory=list)


def requests_with_answers(source: LogSource, *, message_prefix: str = "legacy", bodies: bool = True
                          ) -> Iterator[tuple[RebuiltRequest, Any | None]]:
    """Each rebuilt request with the assistant message that answered it, when one was logged.
    Findings are ignored: a log the reference would refuse still reports what it can."""
    for walked in Walker(source, message_prefix=message_prefix, bodies=bodies, on_finding=lambda _finding: None):
        if walked.closed is not None:
            event = walked.event or {}
            yield walked.closed, derive_message(event) if event.get("type") == "assistant/message" else None


@dataclass(frozen=True, slots=True)
class RealHeader:
    """Real content supplied for a scrubbed header, and where it came from."""

    system: str | None = None
    tools: list[Any] | None = None
    origin: str = "supplied"


def sidecar_header(log: Path) -> RealHeader:
    """The pinned-scenario sidecars beside a log (the saved prompt gained a trailing newline: drop it)."""
    prompts = sorted(log.parent.glob("system-prompt*.expected.md"))
    schemas = sorted(log.parent.glob("tool-schemas*.expected.json"))
    system = prompts[0].read_text(encoding="utf-8").removesuffix("\n") if prompts else None
    tools: Any = json.loads(schemas[0].read_text(encoding="utf-8")) if schemas else None
    if isinstance(tools, dict):  # keyed by header reason; the first is the initial header's
        tools = next(iter(tools.values()), None)
    return RealHeader(system, tools if isinstance(tools, list) else None, "sidecar")


def _wire_request(request: RebuiltRequest, real: RealHeader) -> tuple[dict[str, Any] | None, list[str], bool]:
    """The rebuilt request as a dict; scrubbed parts are replaced by supplied real content, or dropped and
    named in the notes (then the prediction is approximate) — never guessed."""
    if request.body is None:
        return None, ["no request/header in force: nothing to predict"], True
    body: dict[str, Any] = json.loads(request.body)
    notes, approximate = [], False
    if "system" in request.placeholders:
        if real.system is not None:
            messages = body["messages"]
            if "system" in body or not messages or messages[0].get("role") != "system":
                body["system"] = real.system
            else:   # v3 on: the prompt is the system/message head, messages[0]
                messages[0] = {**messages[0], "content": [{"type": "text", "text": real.system}]}
            notes.append(f"system prompt from {real.origin} (log has {{{{system}}}})")
        else:
            notes.append("system prompt scrubbed ({{system}}): token counts exclude the real prompt")
            approximate = True
    if "tools" in request.placeholders or ("tools" in body and not _tool_objects(body["tools"])):
        if real.tools is not None:
            body["tools"] = real.tools
            notes.append(f"tools from {real.origin} (log has them scrubbed)")
        else:
            body.pop("tools", None)
            notes.append("tools scrubbed: their tokens are not counted")
            approximate = True
    if request.prefix == "scrubbed":
        notes.append("messagePrefix scrubbed: its messages are not counted")
        approximate = True
    return body, notes, approximate


def _tool_objects(tools: Any) -> bool:
    return isinstance(tools, list) and all(isinstance(tool, dict) for tool in tools)


def _prompt(request: RebuiltRequest, answer: Any | None, real: RealHeader) -> _Prompt:
    body, notes, approximate = _wire_request(request, real)
    result = _Prompt(notes=notes, approximate=approximate)
    if body is None:
        return result
    try:
        wire = to_wire_body(body)
        result.ids = token_ids(wire_prompt_text(wire))
        if answer is not None:
            answered = to_wire_body({**body, "messages": [*body["messages"], answer]})
            result.with_answer = token_ids(wire_prompt_text(answered, generation_prompt=False))
    except DshAuditError as error:
        result.notes.append(f"no DeepSeek wire body: {error.message}")
        result.ids = result.with_answer = None
        result.approximate = True
        return result
    text = json.dumps(wire, ensure_ascii=False, separators=(",", ":"))
    result.sha256 = hashlib.sha256(text.encode()).hexdigest()
    result.body = text
    return result


def _usage_int(usage: dict[str, Any] | None, key: str) -> int | None:
    value = (usage or {}).get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _causes(causes: list[Cause]) -> tuple[str | None, str | None]:
    if not causes:
        return None, None
    names = list(dict.fromkeys(CAUSE_NAMES.get(c.kind, c.kind) for c in causes))
    return "+".join(names), "; ".join(f"seq {c.seq}: {c.detail}" for c in causes)


def log_rows(source: LogSource, options: CacheOptions, real: RealHeader | None = None) -> list[dict[str, Any]]:
    """The request rows of one log, in dispatch order (`real`: content for scrubbed headers, default the
    options' system/tools)."""
    return list(iter_log_rows(source, options, real))


def iter_log_rows(source: LogSource, options: CacheOptions, real: RealHeader | None = None
                  ) -> Iterator[dict[str, Any]]:
    """log_rows, streamed: a long log's rows need not all be held as Python dicts at once."""
    real = real if real is not None else RealHeader(options.system, options.tools)
    first = True
    previous: _Prompt | None = None
    previous_reads: int | None = None
    previous_total: int | None = None   # the provider's own count of previous prompt + answer
    for request, answer in requests_with_answers(source, message_prefix=options.message_prefix,
                                                 bodies=options.predict):
        prompt = _prompt(request, answer, real) if options.predict else _Prompt(
            notes=["no prediction (--no-predict)"], approximate=False)
        usage = request.usage
        reads = _usage_int(usage, "cacheReadTokens")
        fresh = _usage_int(usage, "inputTokens")
        output = _usage_int(usage, "outputTokens")
        notes = list(prompt.notes)
        prefix = predicted = logged_basis = None
        if prompt.ids is not None:
            context = None if previous is None else previous.with_answer or previous.ids
            prefix = 0 if context is None else common_prefix_length(context, prompt.ids)
            predicted = cacheable_tokens(prefix, options.block)
            # This prompt keeps all of the previous prompt and answer: the provider's own token count of
            # them is a better measure than our template's.
            if context is not None and prefix == len(context) and previous_total is not None:
                logged_basis = cacheable_tokens(previous_total, options.block)
        expected = logged_basis if logged_basis is not None else predicted
        if usage is None:
            notes.append("no usage logged")
        cause, detail = _causes(request.causes)
        collapse = reads is not None and not first and (
            (previous_reads is not None and reads < options.collapse_ratio * previous_reads)
            or (expected is not None and reads < options.collapse_ratio * expected))
        if first and cause is None:
            cause = "first-request"
        if collapse and cause is None:
            cause = UNEXPLAINED
        price_model, price = price_for(request.model, options.prices)
        cost = None if usage is None else price.cost(fresh or 0, reads or 0, output or 0)
        row = {
            "row": "request", "log": source.label, "generation": source.generation.version,
            "sessionId": str(source.header.get("id")),
            "turn": request.turn, "step": request.step, "attempt": request.attempt, "seq": request.dispatch_seq,
            "provider": request.provider, "model": request.model, "inherited": request.inherited, "requests": 1,
            "inputTokens": fresh, "cacheReadTokens": reads, "outputTokens": output,
            "reasoningTokens": _usage_int(usage, "reasoningTokens"),
            "hitRatio": _ratio(reads, fresh), "promptTokens": None if prompt.ids is None else len(prompt.ids),
            "predictedPrefixTokens": prefix, "predictedCacheTokens": predicted,
            "withinBlock": None if reads is None or predicted is None or first
            else abs(reads - predicted) < options.block,
            "loggedBasisCacheTokens": logged_basis,
            "loggedBasisWithinBlock": None if reads is None or logged_basis is None
            else abs(reads - logged_basis) < options.block,
            "approximate": prompt.approximate, "collapse": collapse, "cause": cause,
            "causeDetail": detail, "costUsd": cost, "priceModel": price_model, "wireSha256": prompt.sha256,
            "note": "; ".join(notes) or None,
        }
        if options.wire:
            row["wireBody"] = prompt.body
        yield row
        first = False
        previous, previous_reads = prompt, reads
        previous_total = None if fresh is None or output is None else fresh + (reads or 0) + output


def _request_frame(rows: Iterator[dict[str, Any]], schema: dict[str, Any]) -> pl.DataFrame:
    """Rows to a DataFrame a batch at a time: memory holds the columns plus one batch of dicts."""
    batches = []
    while batch := list(islice(rows, _ROW_BATCH)):
        batches.append(pl.DataFrame(batch, schema=schema, orient="row"))
    return pl.concat(batches) if batches else pl.DataFrame(schema=schema)


def _ratio(reads: int | None, fresh: int | None) -> float | None:
    """Share of the prompt served from cache; `inputTokens` excludes the cached tokens."""
    if reads is None or fresh is None or reads + fresh == 0:
        return None
    return reads / (reads + fresh)


def summarize(requests: pl.DataFrame, *, row: str, log: str | None) -> dict[str, Any]:
    """Totals over own requests only: a child log's inherited requests were paid for by its parent."""
    own = requests.filter(~pl.col("inherited"))

    def total(column: str) -> int:
        return int(own[column].fill_null(0).sum())

    reads, fresh = total("cacheReadTokens"), total("inputTokens")
    compared = own.filter(pl.col("withinBlock").is_not_null())
    basis = own.filter(pl.col("loggedBasisWithinBlock").is_not_null())
    return {
        "row": row, "log": log, "requests": own.height, "inputTokens": fresh, "cacheReadTokens": reads,
        "outputTokens": total("outputTokens"), "reasoningTokens": total("reasoningTokens"),
        "hitRatio": _ratio(reads, fresh), "collapses": int(own["collapse"].sum()),
        "unexplained": own.filter(pl.col("collapse") & (pl.col("cause") == UNEXPLAINED)).height,
        "predictionsCompared": compared.height, "predictionsWithinBlock": int(compared["withinBlock"].sum()),
        "loggedBasisCompared": basis.height, "loggedBasisAgreeing": int(basis["loggedBasisWithinBlock"].sum()),
        "costUsd": float(own["costUsd"].fill_null(0).sum()),
        "approximate": bool(own["approximate"].any()) if own.height else False,
    }


def build_cache_report(paths: Iterable[str | os.PathLike[str]], options: CacheOptions = CacheOptions(), *,
                       on_log: Callable[[Path], None] | None = None, all_generations: bool = False) -> pl.DataFrame:
    """Request rows of every log at `paths`, each log followed by its `log` summary row, then a `total` row.
    `on_log` is called once per file, after it is processed (progress reporting)."""
    schema = dict(REQUEST_COLUMNS)
    if options.wire:
        schema["wireBody"] = pl.String
    frames: list[pl.DataFrame] = []
    all_requests: list[pl.DataFrame] = []
    supplied = RealHeader(options.system, options.tools)
    for file in discover(paths, all_generations=all_generations):
        real = sidecar_header(file) if options.sidecars else supplied
        for source in open_logs(file):
            requests = _request_frame(iter_log_rows(source, options, real), schema)
            all_requests.append(requests)
            summary = {**summarize(requests, row="log", log=source.label), "generation": source.generation.version}
            frames += [requests, pl.DataFrame([summary], schema=schema, orient="row")]
        if on_log is not None:
            on_log(file)
    everything = pl.concat(all_requests) if all_requests else pl.DataFrame(schema=schema)
    frames.append(pl.DataFrame([summarize(everything, row="total", log=None)], schema=schema, orient="row"))
    return pl.concat(frames)


def request_rows(report: pl.DataFrame) -> pl.DataFrame:
    return report.filter(pl.col("row") == "request")


def agreement(report: pl.DataFrame, *, basis: str = "tokenizer") -> tuple[int, int]:
    """(agreeing, compared): own requests after the first of their log whose logged cacheReadTokens is
    within one block of the prediction — `tokenizer` (our template's common prefix) or `logged` (the
    provider's own count of the previous prompt + answer, when this prompt extends them)."""
    column = "withinBlock" if basis == "tokenizer" else "loggedBasisWithinBlock"
    rows = request_rows(report).filter(~pl.col("inherited") & pl.col(column).is_not_null())
    return int(rows[column].sum()), rows.height
