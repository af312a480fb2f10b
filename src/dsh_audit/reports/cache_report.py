"""`audit cache-report`: one row per logged model call — the loop's requests, the compaction summary calls, the
session-title call and the side calls a product logged as events of its own — with its logged usage, the cache
read it could have had, collapses and their logged causes, and what it cost; then one row per log and one of
totals. Three DataFrames, one row kind each (CacheReport).

Expected read (dsh_audit.reports.prediction): a request that extends its predecessor can read what the provider
counted for the predecessor's prompt (and, within one turn, its answer); elsewhere the shared prefix is counted
with the tokenizer. Rounded down to whole cache blocks: the given size, else 128 unless a log's own reads are not
multiples of it (`measure_block`).

A collapse is a read below `collapse_ratio` of the predecessor's read or of the expected read. Its cost is what
the reads it lost (against the predecessor's read, or the expected one if more) cost more at the miss price
than they would have at the hit price.
"""

from __future__ import annotations

import io
import json
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from itertools import islice
from pathlib import Path
from typing import Any

import polars as pl

from .. import stopping
from ..deepseek_wire import to_wire_body
from ..errors import DshAuditError
from ..fastpath import Doubt, fast_calls
from ..findings import Finding
from ..fold import Cause, RebuiltRequest
from ..model_calls import Call, OtherCall, SideCalls, json_int, other_call
from ..readers import open_logs
from ..readers.discover import Skipped, Unreadable, read_each
from ..readers.objects import RemoteSource
from ..records import LogSource
from ..surface import derive_message
from ..tokens import count_tokens
from ..walker import Walked, Walker
from .cache_rows import ROW_KINDS
from .numbers import check_numbers, checked_total, is_count
from .prediction import Predictor, RealHeader, sidecar_header, wire_body
from .prices import PriceTable, default_table
from .render import rows_frame
from .sums import exact_sum

_ROW_BATCH = 2048
_STACK_EVERY = 64   # logs' frames per stacked frame (_Stack)
SCHEMA_VERSION = 4   # of the columns below; docs/cache-report.md says what each holds, and what changed

# Logged cause kinds (fold.Cause.kind) as the report names them.
CAUSE_NAMES = {"initial": "first-request", "resume": "resume", "end-seed": "resume-or-fork",
               "header-change": "header-change", "options-change": "options-change", "model-change": "model-change",
               "replace": "compaction-replace",
               "system-change": "system-prompt-change"}
UNEXPLAINED = "unexplained"
UNLOGGED = "unlogged-model-call"

REQUEST_COLUMNS: dict[str, Any] = {
    "log": pl.String, "generation": pl.Int64, "sessionId": pl.String, "kind": pl.String, "turn": pl.Int64,
    "step": pl.Int64, "attempt": pl.Int64, "seq": pl.Int64, "timeMs": pl.Int64, "provider": pl.String,
    "model": pl.String, "inherited": pl.Boolean, "inputTokens": pl.Int64, "cacheReadTokens": pl.Int64,
    "outputTokens": pl.Int64, "reasoningTokens": pl.Int64, "estimatedTokens": pl.Int64, "hitRatio": pl.Float64,
    "expectedBasis": pl.String,
    "expectedPrefixTokens": pl.Int64, "expectedCacheReadTokens": pl.Int64, "previousCacheReadTokens": pl.Int64,
    "withinBlock": pl.Boolean,
    "approximate": pl.Boolean, "collapse": pl.Boolean, "cause": pl.String, "causeDetail": pl.String,
    "collapseCostUsd": pl.Float64, "costUsd": pl.Float64, "priceModel": pl.String, "priceTier": pl.String,
    "note": pl.String,
}
# Kept while a log is read, dropped once the block size is known: the judgement needs them.
_WORKING_COLUMNS: dict[str, Any] = {"_first": pl.Boolean, "_missPremium": pl.Float64, "_block": pl.Int64}
_SUMS = ("inputTokens", "cacheReadTokens", "outputTokens", "reasoningTokens")
LOG_COLUMNS: dict[str, Any] = {
    "log": pl.String, "generation": pl.Int64, "sessionId": pl.String, "model": pl.String, "requests": pl.Int64,
    "compactionCalls": pl.Int64, "otherCalls": pl.Int64, "sideCalls": pl.Int64, "sideCallTokens": pl.Int64,
    **{name: pl.Int64 for name in _SUMS}, "hitRatio": pl.Float64,
    "collapses": pl.Int64, "unexplained": pl.Int64, "collapseCostUsd": pl.Float64,
    "predictionsCompared": pl.Int64, "predictionsWithinBlock": pl.Int64, "costUsd": pl.Float64,
    "approximate": pl.Boolean, "notes": pl.String,
}
TOTAL_COLUMNS: dict[str, Any] = {"logs": pl.Int64, **{k: v for k, v in LOG_COLUMNS.items()
                                                     if k not in ("log", "generation", "sessionId", "model",
                                                                  "notes")},
                                 "cacheBlock": pl.Int64, "cacheBlockBasis": pl.String}


DEFAULT_BLOCK = 128   # tokens; its basis, measured on the project's real logs with usage:
BLOCK_BASIS = ("all 65 non-zero cache reads DeepSeek reported in the project's real logs (55 dsh corpus, 10 wild) "
               "are multiples of 128")


@dataclass(frozen=True, slots=True)
class CacheOptions:
    block: int | None = None        # cache-block size in tokens; None: each log's own (measure_block)
    collapse_ratio: float = 0.5     # a collapse: reads < ratio x predecessor's reads, or < ratio x expected
    prices: PriceTable | None = None   # None: DeepSeek's table (reports/data/deepseek-prices.json)
    message_prefix: str = "legacy"
    wire: bool = False              # keep the serialized DeepSeek body in a `wireBody` column (O(log x requests))
    system: str | None = None       # real system prompt to put where a log has "{{system}}"
    tools: list[Any] | None = None  # real tool schemas to put where a log has "{{tools}}" or names only
    sidecars: bool = False          # take them from system-prompt*.expected.md / tool-schemas*.expected.json
    predict: bool = True            # off: no tokenizing; prefix breaks get no expected read

    def __post_init__(self) -> None:
        if self.block is not None and self.block <= 0:
            raise DshAuditError(f"cache block must be a positive number of tokens, not {self.block}")
        if not 0 < self.collapse_ratio <= 1:
            raise DshAuditError(f"collapse threshold must be in (0, 1], not {self.collapse_ratio}")

    @property
    def table(self) -> PriceTable:
        return self.prices if self.prices is not None else default_table()


def measure_block(reads: Iterable[int]) -> int:
    """The cache block of one log: the default, unless one of its own non-zero reads is not a multiple of it;
    then the largest power of two dividing every one. Measured on the log alone, so a log is judged the same
    whatever other logs are read with it."""
    common = 0
    for value in reads:
        if value > 0:
            common = math.gcd(common, value)
    return DEFAULT_BLOCK if common % DEFAULT_BLOCK == 0 else common & -common


def report_block(blocks: list[tuple[str, int]]) -> tuple[int, str]:
    """The report's block and its basis from each log's (label, measured block): the default when no log's own
    reads contradict it, else the smallest block a log measured, naming the logs that measured one, in the order
    of their labels: the same words whatever the order the logs were read or exported in."""
    measured = sorted((label, block) for label, block in blocks if block != DEFAULT_BLOCK)
    if not measured:
        return DEFAULT_BLOCK, f"default: {BLOCK_BASIS}; none here contradicts it"
    named = ", ".join(f"{label} ({block})" for label, block in measured[:3]) + (
        f" and {len(measured) - 3} more" if len(measured) > 3 else "")
    return min(block for _, block in measured), (
        f"measured per log: {DEFAULT_BLOCK}, the default, in {len(blocks) - len(measured)} log(s); a smaller "
        f"block where a log's own non-zero reads are not all multiples of {DEFAULT_BLOCK}: {named}")


@dataclass(slots=True)
class CacheReport:
    """The report: one row per logged model call, one per log, one of totals; and the cache block used."""

    requests: pl.DataFrame
    logs: pl.DataFrame
    totals: pl.DataFrame
    block: int = DEFAULT_BLOCK      # the block every log was judged by, or the smallest one a log measured
    block_basis: str = ""
    unreadable: list[Unreadable] = field(default_factory=list)   # logs left out, each with why (read_each)
    skipped: list[Skipped] = field(default_factory=list)         # older generations left out, as dsh does
    cwds: dict[str, str | None] = field(default_factory=dict)    # each log's header.cwd: its project (filters)

    def rows(self, kind: str) -> pl.DataFrame:
        if kind not in ROW_KINDS:
            raise DshAuditError(f"unknown row kind {kind!r}; expected one of {', '.join(ROW_KINDS)}")
        frame: pl.DataFrame = getattr(self, kind)
        return frame


# -- the calls of one log ---------------------------------------------------------------------------------
# The events that stand for a call of their own (model_calls.other_call), where they close no request.
OTHER_CALL_EVENTS = ("compaction/summary", "session/title-llm-request", "assistant/message")


def calls(source: LogSource, *, message_prefix: str = "legacy", parts: bool = True) -> Iterator[Call]:
    """Every logged model call of one log, in log order, by the full walk. Findings are ignored: a log the
    reference would refuse still reports what it can. `parts`: keep each request's body by reference
    (RequestParts)."""
    taker = CallTaker(source.label)
    walker = Walker(source, message_prefix=message_prefix, parts=parts, on_finding=taker.noted)
    taker.cut = walker.fold.seed_cut
    for walked in walker:
        yield from taker.take(walked)


class CallTaker:
    """The model calls of one walk, step by step: `noted` is given every finding of the walk, `take` each step as
    it is taken (with `cut`, the walk's inherited cut, set once the walk is built); a number a report's rows
    cannot hold raises (reports.numbers)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.cut: int | None = None
        self.unlogged: list[Finding] = []   # the fold's unlogged-model-call warnings: calls made, usage not logged
        self.sides = SideCalls()   # a product's own calls, logged as events dsh skips

    def noted(self, finding: Finding) -> None:
        if finding.code == UNLOGGED:
            self.unlogged.append(finding)
        self.sides.noted(finding)

    def take(self, walked: Walked) -> Iterator[Call]:
        cut = self.cut
        if walked.record is not None:
            check_numbers(walked.record, walked.event, self.label)
        if (side := self.sides.of(walked.record)) is not None:
            side.inherited = cut is not None and side.seq < cut
            yield side
        event = walked.event or {}
        kind = event.get("type")
        while self.unlogged:
            seq = self.unlogged.pop(0).seq or 0
            yield OtherCall("compaction", seq, json_int(event.get("time")), None, None, None,
                            inherited=cut is not None and seq < cut,
                            note="a compaction that ended in error with no summary logged: if dsh made its summary "
                                 "call (it does when it rejects the summary), that call is not priced: its usage is "
                                 "not logged (verify: unlogged-model-call)")
        if walked.closed is not None:
            yield walked.closed, derive_message(event) if kind == "assistant/message" else None
        elif walked.record is not None and kind in OTHER_CALL_EVENTS:
            other = other_call(kind, event, walked.record.seq)
            if other is not None:
                other.inherited = cut is not None and other.seq < cut
                yield other


def _usage_int(usage: dict[str, Any] | None, key: str) -> int | None:
    value = (usage or {}).get(key)
    return int(value) if is_count(value) else None


def _causes(causes: list[Cause]) -> tuple[str | None, str | None]:
    if not causes:
        return None, None
    names = list(dict.fromkeys(CAUSE_NAMES.get(c.kind, c.kind) for c in causes))
    return "+".join(names), "; ".join(f"seq {c.seq}: {c.detail}" for c in causes)


# A new process or a fork: the provider's cache may be cold however the prompt continues.
BOUNDARIES = frozenset({"resume", "end-seed"})


def _request_cause(request: RebuiltRequest) -> tuple[str | None, str | None]:
    """The logged causes that can explain a collapse at `request`, named, and the detail of every logged one.
    Where the prompt extends its predecessor's (a change of request options, a rewrite of what was never sent),
    only a boundary can; the rest is logged beside it as no prefix break."""
    if not request.extends_previous:
        return _causes(request.causes)
    cause, detail = _causes([c for c in request.causes if c.kind in BOUNDARIES])
    _, moot = _causes([c for c in request.causes if c.kind not in BOUNDARIES])
    if moot is not None:
        detail = "; ".join(part for part in (detail, f"logged, no prefix break: {moot}") if part)
    return cause, detail


def _ratio(reads: int | None, fresh: int | None) -> float | None:
    """Share of the prompt served from cache; `inputTokens` excludes the cached tokens."""
    if reads is None or fresh is None or reads + fresh == 0:
        return None
    return reads / (reads + fresh)


# What a row of each other call's kind says of it (OtherCall.note where the kind does not say enough).
OTHER_NOTES = {
    "compaction": "compaction summary call: one-shot, outside the loop's cache lineage",
    "response": "a response with no chunk and no request/header: priced from its usage, no request to rebuild",
    "title": "session-title call: one-shot, outside the loop's cache lineage (its request rebuilt from "
             "session/title-llm-request)",
}
NO_TITLE_USAGE = "title call not priced: the log does not carry its usage (no event records it)"
NO_ESTIMATE = "side call's size not counted (--no-predict: no tokenizer)"
# The provider ids of DeepSeek's adapter: its one route at dsh 0.1.1-rc.2 (llm-deepseek PROVIDER), and the id
# older logs give it (the corpus's apps/web snapshots).
DEEPSEEK_ROUTES = frozenset({"deepseek-official", "deepseek"})


def title_wire_body(call: OtherCall) -> str | None:
    """A title call's DeepSeek body as compact JSON: its request with purpose session-title (thinking disabled,
    max_tokens its maxTokens). None for any other call, a route not DeepSeek's, or a request the adapter would
    refuse."""
    if call.request is None or call.provider not in DEEPSEEK_ROUTES:
        return None
    try:
        body = to_wire_body(call.request, purpose="session-title")
    except DshAuditError:
        return None
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


class _LogRows:
    """The call rows of one log, in order, with what the judgement of each request needs once the block size is
    known: whether it is the log's first request and the premium of a missed token; and its predecessor's read,
    which a collapse is judged against and shown with."""

    def __init__(self, source: LogSource, options: CacheOptions, real: RealHeader, log_calls: Iterable[Call]
                 ) -> None:
        self.source, self.options, self.real, self.calls = source, options, real, log_calls
        self.table = options.table
        self.base = {"log": source.label, "generation": source.generation.version,
                     "sessionId": str(source.header.get("id"))}
        self.predictor = Predictor(real, tokenize=options.predict)
        self.first = True
        self.previous_reads: int | None = None

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for call in self.calls:
            yield self._other(call) if isinstance(call, OtherCall) else self._request(*call)

    def _priced(self, model: str | None, time: int | None, usage: dict[str, Any] | None) -> dict[str, Any]:
        priced = self.table.price(model, time)
        fresh, reads, output = (_usage_int(usage, key) for key in ("inputTokens", "cacheReadTokens", "outputTokens"))
        rates = priced.prices
        return {"inputTokens": fresh, "cacheReadTokens": reads, "outputTokens": output,
                "reasoningTokens": _usage_int(usage, "reasoningTokens"), "hitRatio": _ratio(reads, fresh),
                "costUsd": None if usage is None else rates.cost(fresh or 0, reads or 0, output or 0),
                "priceModel": priced.model, "priceTier": priced.tier,
                "_missPremium": (rates.cache_miss - rates.cache_hit) / rates.per_tokens}

    def _other(self, call: OtherCall) -> dict[str, Any]:
        notes = [call.note or OTHER_NOTES[call.kind]]
        if call.kind == "title" and call.provider not in DEEPSEEK_ROUTES:
            notes.append(f"title call routed to {call.provider}, not DeepSeek's adapter: no DeepSeek wire body")
        if call.usage is None and call.kind != "side":   # a side call's note says so
            notes.append(NO_TITLE_USAGE if call.kind == "title" else "no usage logged")
        estimated = None
        if call.kind == "side":
            if self.options.predict:
                estimated = sum(count_tokens(text) for text in call.texts)
            else:
                notes.append(NO_ESTIMATE)
        row = {**self.base, "kind": call.kind, "seq": call.seq, "timeMs": call.time, "provider": call.provider,
               "model": call.model, "inherited": call.inherited, **self._priced(call.model, call.time, call.usage),
               "estimatedTokens": estimated, "approximate": False, "collapse": False, "note": "; ".join(notes),
               "_first": False}
        if self.options.wire:
            row["wireBody"] = title_wire_body(call)
        return row

    def _request(self, request: RebuiltRequest, answer: Any | None) -> dict[str, Any]:
        expected = self.predictor.expect(request, answer)
        priced = self._priced(request.model, request.time, request.usage)
        notes = expected.notes + ([] if request.usage is not None else ["no usage logged"])
        cause, detail = _request_cause(request)
        if self.first:   # nothing before it was sent: what set up its prompt (a v3 system/message head) is detail
            cause = "first-request"
        row = {
            **self.base, "kind": "request", "turn": request.turn, "step": request.step, "attempt": request.attempt,
            "seq": request.dispatch_seq, "timeMs": request.time, "provider": request.provider,
            "model": request.model, "inherited": request.inherited, **priced,
            "expectedBasis": expected.basis, "expectedPrefixTokens": expected.prefix_tokens,
            "approximate": expected.approximate, "cause": cause, "causeDetail": detail,
            "note": "; ".join(notes) or None, "_first": self.first, "previousCacheReadTokens": self.previous_reads,
        }
        if self.options.wire:
            row["wireBody"] = wire_body(request, self.real)
        self.first, self.previous_reads = False, priced["cacheReadTokens"]
        return row


def log_rows(source: LogSource, options: CacheOptions, real: RealHeader | None = None) -> list[dict[str, Any]]:
    """The judged call rows of one log, in log order (`real`: content for scrubbed headers, default the
    options'); the block is the options' or measured from this log alone."""
    return judged_frame(source, options, real).to_dicts()


def judged_frame(source: LogSource, options: CacheOptions, real: RealHeader | None = None) -> pl.DataFrame:
    """`log_rows` as a frame, which `summarize` sums."""
    frame = _log_frame(source, options, real if real is not None else RealHeader(options.system, options.tools))
    return judge(with_block(frame, options)[0], options.collapse_ratio)


def judged_rows(frame: pl.DataFrame, options: CacheOptions) -> list[dict[str, Any]]:
    """One log's unjudged rows (calls_frame) judged by the options' block, else by the log's own."""
    return judge(with_block(frame, options)[0], options.collapse_ratio).to_dicts()


def iter_log_rows(source: LogSource, options: CacheOptions, real: RealHeader | None = None
                  ) -> Iterator[dict[str, Any]]:
    """The call rows of one log as they are read: logged figures, prices, causes and unrounded expectations,
    but no judgement yet (that needs the block size: `judge`)."""
    real = real if real is not None else RealHeader(options.system, options.tools)
    return iter(_LogRows(source, options, real, calls(source, message_prefix=options.message_prefix)))


def _log_frame(source: LogSource, options: CacheOptions, real: RealHeader) -> pl.DataFrame:
    """The unjudged rows of one log. The fast path reads the log where it can (dsh_audit.fastpath.fast_calls,
    about the speed of verify's); where it doubts, the rows built so far are dropped and the log is walked in
    full, as verify falls back to the full verifier."""
    fast = fast_calls(source, message_prefix=options.message_prefix)
    if fast is not None:
        try:
            return calls_frame(source, options, real, fast)
        except Doubt:
            pass
    return calls_frame(source, options, real, calls(source, message_prefix=options.message_prefix))


def _schema(options: CacheOptions) -> dict[str, Any]:
    """The columns of the unjudged rows."""
    return {**REQUEST_COLUMNS, **_WORKING_COLUMNS, **({"wireBody": pl.String} if options.wire else {})}


def calls_frame(source: LogSource, options: CacheOptions, real: RealHeader, log_calls: Iterable[Call]
                ) -> pl.DataFrame:
    """The unjudged rows of the calls of one log (`real`: content for scrubbed headers)."""
    return _frame(iter(_LogRows(source, options, real, log_calls)), _schema(options))


def _frame(rows: Iterator[dict[str, Any]], schema: dict[str, Any]) -> pl.DataFrame:
    """Rows in a frame, a batch at a time: memory holds the columns plus one batch of dicts. In dispatch order:
    a request is handed out when it closes, so a call made while it was open (the compaction an overflow
    triggered) came first; requests keep their own order, which the judgement of each reads."""
    batches = []
    while batch := list(islice(rows, _ROW_BATCH)):
        batches.append(rows_frame(batch, schema))
    return pl.concat(batches).sort("seq", maintain_order=True) if batches else pl.DataFrame(schema=schema)


def with_block(frame: pl.DataFrame, options: CacheOptions) -> tuple[pl.DataFrame, int]:
    """One log's unjudged rows with the cache block they are judged by: the options', else the log's own."""
    block = options.block or measure_block(frame["cacheReadTokens"].drop_nulls())
    return frame.with_columns(_block=pl.lit(block, pl.Int64)), block


def judge(frame: pl.DataFrame, ratio: float) -> pl.DataFrame:
    """Round the expected reads to whole blocks (each row's log's `_block`) and judge each request: within one
    block of the logged read? a collapse (below `ratio` of its predecessor's read or of the expected one)? what
    it cost?"""
    request, block = pl.col("kind") == "request", pl.col("_block")
    reads, previous = pl.col("cacheReadTokens"), pl.col("previousCacheReadTokens")
    expected = (pl.col("expectedPrefixTokens") // block) * block
    frame = frame.with_columns(expectedCacheReadTokens=expected)
    expected = pl.col("expectedCacheReadTokens")
    collapse = (request & ~pl.col("_first") & reads.is_not_null()
                & ((previous.is_not_null() & (reads < ratio * previous))
                   | (expected.is_not_null() & (reads < ratio * expected)))).fill_null(False)
    # The reads it lost: against the predecessor's read, or the expected one if more, within this prompt.
    lost = pl.min_horizontal(pl.max_horizontal(expected, previous, pl.lit(0)),
                             reads + pl.col("inputTokens").fill_null(0)) - reads
    return frame.with_columns(
        withinBlock=pl.when(request & ~pl.col("_first")).then((reads - expected).abs() <= block),
        collapse=collapse,
        cause=pl.when(collapse & pl.col("cause").is_null()).then(pl.lit(UNEXPLAINED)).otherwise(pl.col("cause")),
        collapseCostUsd=pl.when(collapse).then(pl.max_horizontal(lost, pl.lit(0)) * pl.col("_missPremium")),
    ).drop(list(_WORKING_COLUMNS))


_OWN = ~pl.col("inherited")
_REQUEST = _OWN & (pl.col("kind") == "request")
_SIDE = _OWN & (pl.col("kind") == "side")
_COLLAPSED = _REQUEST & pl.col("collapse")
# Every figure `summarize` gives, in one select: a pass of polars over the calls where filtering them for each
# figure cost about ten (a small log's few calls). Token sums are summed wider than the column: an Int64 sum wraps
# silently. A cost sums the priced calls alone: none priced (no usage logged) is not a cost of $0. Costs are listed
# and summed exactly (math.fsum, correctly rounded): polars adds floats chunk by chunk, so its sum's last digits
# hung on the order of the logs given and on how their rows were split, where a dataset's must equal this one.
_SUMMED = {
    "own": _OWN.sum(), "requests": _REQUEST.sum(), "compactionCalls": (_OWN & (pl.col("kind") == "compaction")).sum(),
    "sideCalls": _SIDE.sum(), "sideCallTokens": pl.col("estimatedTokens").filter(_SIDE).sum(),
    "sideUnestimated": pl.col("estimatedTokens").filter(_SIDE).null_count(),
    **{name: pl.col(name).filter(_OWN).cast(pl.Int128).fill_null(0).sum() for name in _SUMS},
    "collapses": _COLLAPSED.sum(),
    "unexplained": pl.col("cause").filter(_COLLAPSED).eq(UNEXPLAINED).fill_null(False).sum(),
    "collapseCostUsd": pl.col("collapseCostUsd").filter(_COLLAPSED).drop_nulls().implode(),
    "predictionsCompared": pl.col("withinBlock").filter(_REQUEST).is_not_null().sum(),
    "predictionsWithinBlock": pl.col("withinBlock").filter(_REQUEST).sum(),
    "costUsd": pl.col("costUsd").filter(_OWN).drop_nulls().implode(),
    "approximate": pl.col("approximate").filter(_OWN).any(),
}


def summarize(calls_frame: pl.DataFrame | pl.LazyFrame, log: str | None = None) -> dict[str, Any]:
    """Totals over own calls only: a child log's inherited requests were paid for by its parent. `log` names the
    one log summed, if one is. A lazy frame (a dataset's calls) is collected as its sums."""
    summed = calls_frame.select(**_SUMMED)
    return _summary((summed.collect() if isinstance(summed, pl.LazyFrame) else summed).row(0, named=True), log)


def _summary(sums: dict[str, Any], log: str | None) -> dict[str, Any]:
    """`summarize`'s figures from the row of _SUMMED."""
    totals = {name: checked_total(int(sums[name]), name, log) for name in _SUMS}
    return {
        "requests": sums["requests"], "compactionCalls": sums["compactionCalls"],
        "otherCalls": sums["own"] - sums["requests"] - sums["compactionCalls"] - sums["sideCalls"],
        "sideCalls": sums["sideCalls"],
        "sideCallTokens": int(sums["sideCallTokens"]) if sums["sideUnestimated"] == 0 else None,
        **totals, "hitRatio": _ratio(totals["cacheReadTokens"], totals["inputTokens"]),
        "collapses": sums["collapses"], "unexplained": sums["unexplained"],
        "collapseCostUsd": exact_sum(sums["collapseCostUsd"], 0.0), "predictionsCompared": sums["predictionsCompared"],
        "predictionsWithinBlock": int(sums["predictionsWithinBlock"] or 0),
        "costUsd": exact_sum(sums["costUsd"], None), "approximate": bool(sums["approximate"]),
    }


@dataclass(frozen=True, slots=True)
class _LogRead:
    """What the summary of a log needs of it once read: its name and its number of rows in the report. Not the
    LogSource, which holds its reader's buffers (about 0.2 MB a log, 200 MB over a home of 1,000 sessions)."""

    label: str
    generation: int
    session_id: str
    rows: int
    block: int   # the cache block its rows are judged by


def log_summary(label: str, generation: int | None, session_id: str, frame: pl.DataFrame) -> dict[str, Any]:
    """The per-log row of one log's calls (`frame`): `summarize`'s figures, in the same pass its models."""
    sums = frame.select(**_SUMMED, models=pl.col("model").filter(pl.col("kind") == "request").drop_nulls()
                        .unique(maintain_order=True).implode()).row(0, named=True)
    notes = dict.fromkeys(note for row in frame["note"].drop_nulls() for note in row.split("; "))
    return {"log": label, "generation": generation, "sessionId": session_id,
            "model": ", ".join(sums["models"]) or None, **_summary(sums, label), "notes": "; ".join(notes) or None}


def build_cache_report(paths: Iterable[str | os.PathLike[str] | RemoteSource],
                       options: CacheOptions = CacheOptions(), *,
                       on_log: Callable[[Path], None] | None = None, all_generations: bool = False,
                       superseded: Mapping[Path, Path] | None = None) -> CacheReport:
    """Every logged model call of every log at `paths`, and the per-log and overall summaries; a log that cannot
    be read is left out and named in `unreadable`, an older generation skipped in `skipped` (with `superseded`:
    readers.discover.read_each). `on_log` is called once per file read (progress reporting). Each log is judged
    by the given block, else by its own (`measure_block`), so alone or among others a log reads the same."""
    supplied = RealHeader(options.system, options.tools)
    frames = CacheFrames(options)
    cwds: dict[str, str | None] = {}

    def frames_of(file: Path, found_in: Path | None) -> None:
        stopping.check()   # a stop Python could not raise where it landed ends the run here, not at its end
        real = sidecar_header(file) if options.sidecars else supplied
        read = [(source, _log_frame(source, options, real)) for source in open_logs(file, found_in=found_in)]
        if on_log is not None:
            on_log(file)
        for source, frame in read:   # only once the whole file is read: a file that fails leaves nothing behind
            frames.add(source.label, source.generation.version, str(source.header.get("id")), frame)
            cwd = source.header.get("cwd")
            cwds[source.label] = cwd if isinstance(cwd, str) else None

    _, unreadable, skipped = read_each(paths, frames_of, all_generations=all_generations, superseded=superseded)
    return replace(frames.finish(unreadable, skipped), cwds=cwds)


class CacheFrames:
    """The report being built: the unjudged frames of the logs read, file by file, in order; then judged
    (`finish`) once every log is read, which its cache block needs."""

    def __init__(self, options: CacheOptions) -> None:
        self.options = options
        self.stacked = _Stack()
        self.read: list[_LogRead] = []

    def add(self, label: str, generation: int, session_id: str, unjudged: pl.DataFrame) -> None:
        """The unjudged rows of one log (calls_frame), in the report's order of logs."""
        frame, block = with_block(unjudged, self.options)
        self.stacked.push(frame)
        self.read.append(_LogRead(label, generation, session_id, frame.height, block))

    def finish(self, unreadable: list[Unreadable], skipped: list[Skipped]) -> CacheReport:
        options, read = self.options, self.read
        unjudged = self.stacked.frame(_schema(options))
        if options.block is not None:
            block, basis = options.block, "given (--block)"
        else:
            block, basis = report_block([(log.label, log.block) for log in read])
        requests = judge(unjudged, options.collapse_ratio)   # row by row: the logs judged at once
        summaries, offset = [], 0
        for log in read:
            summaries.append(log_summary(log.label, log.generation, log.session_id, requests.slice(offset, log.rows)))
            offset += log.rows
        totals = {"logs": len(summaries), **summarize(requests), "cacheBlock": block, "cacheBlockBasis": basis}
        return CacheReport(requests, rows_frame(summaries, LOG_COLUMNS),
                           pl.DataFrame([totals], schema=TOTAL_COLUMNS, orient="row"), block, basis, unreadable,
                           skipped)


class _Stack:
    """The logs' frames stacked into one as they are read, every _STACK_EVERY logs. A frame per log costs polars
    about 60 KB of buffers whatever its rows (60 MB over 1,000 small logs), and pl.concat keeps each part's
    string buffers alive; written through Arrow IPC in memory, the stack holds only the bytes its rows use
    (about 5 KB a small log)."""

    def __init__(self) -> None:
        self._stacked: list[pl.DataFrame] = []
        self._pending: list[pl.DataFrame] = []

    def push(self, frame: pl.DataFrame) -> None:
        self._pending.append(frame)
        if len(self._pending) >= _STACK_EVERY:
            buffer = io.BytesIO()
            pl.concat(self._pending).write_ipc(buffer)
            buffer.seek(0)
            self._stacked.append(pl.read_ipc(buffer))
            self._pending.clear()

    def frame(self, schema: dict[str, Any]) -> pl.DataFrame:
        frames = [*self._stacked, *self._pending]
        return pl.concat(frames, rechunk=True) if frames else pl.DataFrame(schema=schema)


def agreement(report: CacheReport, *, basis: str | None = None) -> tuple[int, int]:
    """(agreeing, compared): own requests after the first of their log whose logged cacheReadTokens is within
    one block of the expected read; `basis` narrows them to one expectedBasis (e.g. "previous-usage")."""
    rows = report.requests.filter(~pl.col("inherited") & pl.col("withinBlock").is_not_null())
    if basis is not None:
        rows = rows.filter(pl.col("expectedBasis") == basis)
    return int(rows["withinBlock"].sum()), rows.height
