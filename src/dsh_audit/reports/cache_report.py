"""`audit cache-report`: one row per logged model call — the loop's requests and the compaction summary calls —
with its logged usage, the cache read it could have had, collapses and their logged causes, and what it cost;
then one row per log and one of totals. Three DataFrames, one row kind each (CacheReport).

Prediction (dsh_audit.reports.prediction): the provider caches the tokens of earlier prompts *and* of the answers
it generated, at block granularity, so a request's predicted read is the common token prefix of (previous prompt
+ previous answer) with this prompt, rounded down to whole cache blocks. When this prompt keeps all of the
previous prompt and answer, the provider's own count of them is the better basis.

A collapse is a read below `collapse_ratio` of the predecessor's read or of the expected read. Its cost is what
the reads it lost (against the predecessor's read, or the expected one if more) cost more at the miss price
than they would have at the hit price.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import polars as pl

from ..errors import DshAuditError
from ..fold import Cause, RebuiltRequest
from ..readers import discover, open_logs
from ..records import LogSource
from ..surface import derive_message
from ..tokens import cacheable_tokens, common_prefix_length
from ..walker import Walker
from .prediction import Prompt, RealHeader, prompt_of, sidecar_header
from .prices import PriceTable, default_table

_ROW_BATCH = 2048
SCHEMA_VERSION = 2   # of the columns below; docs/cache-report.md says what each holds, and what changed

# Logged cause kinds (fold.Cause.kind) as the report names them.
CAUSE_NAMES = {"initial": "first-request", "resume": "resume", "end-seed": "resume-or-fork",
               "header-change": "header-change", "model-change": "model-change", "replace": "compaction-replace",
               "system-change": "system-prompt-change"}
UNEXPLAINED = "unexplained"

REQUEST_COLUMNS: dict[str, Any] = {
    "log": pl.String, "generation": pl.Int64, "sessionId": pl.String, "kind": pl.String, "turn": pl.Int64,
    "step": pl.Int64, "attempt": pl.Int64, "seq": pl.Int64, "timeMs": pl.Int64, "provider": pl.String,
    "model": pl.String, "inherited": pl.Boolean, "inputTokens": pl.Int64, "cacheReadTokens": pl.Int64,
    "outputTokens": pl.Int64, "reasoningTokens": pl.Int64, "hitRatio": pl.Float64, "promptTokens": pl.Int64,
    "predictedPrefixTokens": pl.Int64, "predictedCacheTokens": pl.Int64, "withinBlock": pl.Boolean,
    "loggedBasisCacheTokens": pl.Int64, "loggedBasisWithinBlock": pl.Boolean,
    "expectedCacheReadTokens": pl.Int64, "approximate": pl.Boolean, "collapse": pl.Boolean, "cause": pl.String,
    "causeDetail": pl.String, "collapseCostUsd": pl.Float64, "costUsd": pl.Float64, "priceModel": pl.String,
    "priceTier": pl.String, "wireSha256": pl.String, "note": pl.String,
}
_SUMS = ("inputTokens", "cacheReadTokens", "outputTokens", "reasoningTokens")
LOG_COLUMNS: dict[str, Any] = {
    "log": pl.String, "generation": pl.Int64, "sessionId": pl.String, "model": pl.String, "requests": pl.Int64,
    "compactionCalls": pl.Int64, "otherCalls": pl.Int64, **{name: pl.Int64 for name in _SUMS}, "hitRatio": pl.Float64,
    "collapses": pl.Int64, "unexplained": pl.Int64, "collapseCostUsd": pl.Float64,
    "predictionsCompared": pl.Int64, "predictionsWithinBlock": pl.Int64, "loggedBasisCompared": pl.Int64,
    "loggedBasisAgreeing": pl.Int64, "costUsd": pl.Float64, "approximate": pl.Boolean, "notes": pl.String,
}
TOTAL_COLUMNS: dict[str, Any] = {"logs": pl.Int64, **{k: v for k, v in LOG_COLUMNS.items()
                                                     if k not in ("log", "generation", "sessionId", "model",
                                                                  "notes")}}
ROW_KINDS = ("requests", "logs", "totals")


@dataclass(frozen=True, slots=True)
class CacheOptions:
    block: int = 64                 # cache-block granularity of the prediction (tokens)
    collapse_ratio: float = 0.5     # a collapse: reads < ratio x predecessor's reads, or < ratio x prediction
    prices: PriceTable | None = None   # None: DeepSeek's table (reports/data/deepseek-prices.json)
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

    @property
    def table(self) -> PriceTable:
        return self.prices if self.prices is not None else default_table()


@dataclass(slots=True)
class CacheReport:
    """The report: one row per logged model call, one per log, one of totals."""

    requests: pl.DataFrame
    logs: pl.DataFrame
    totals: pl.DataFrame

    def rows(self, kind: str) -> pl.DataFrame:
        if kind not in ROW_KINDS:
            raise DshAuditError(f"unknown row kind {kind!r}; expected one of {', '.join(ROW_KINDS)}")
        frame: pl.DataFrame = getattr(self, kind)
        return frame


# -- the calls of one log ---------------------------------------------------------------------------------
@dataclass(slots=True)
class OtherCall:
    """A logged model call with no rebuildable request: a compaction's one-shot summary call, or a response
    logged with neither a chunk nor a header in force (authored logs). Its usage and envelope are logged."""

    kind: str            # "compaction" | "response"
    seq: int
    time: int | None
    provider: str | None
    model: str | None
    usage: dict[str, Any] | None
    inherited: bool = False


Call = tuple[RebuiltRequest, Any | None] | OtherCall   # a request with the message answering it, or another call


def calls(source: LogSource, *, message_prefix: str = "legacy", bodies: bool = True) -> Iterator[Call]:
    """Every priced model call of one log, in log order. Findings are ignored: a log the reference would refuse
    still reports what it can."""
    walker = Walker(source, message_prefix=message_prefix, bodies=bodies, on_finding=lambda _finding: None)
    cut = walker.fold.seed_cut
    for walked in walker:
        event = walked.event or {}
        kind = event.get("type")
        if walked.closed is not None:
            yield walked.closed, derive_message(event) if kind == "assistant/message" else None
        elif walked.record is not None and kind in ("compaction/summary", "assistant/message"):
            other = _other_call(kind, event, walked.record.seq)
            if other is not None:
                other.inherited = cut is not None and other.seq < cut
                yield other


def _other_call(kind: str, event: dict[str, Any], seq: int) -> OtherCall | None:
    data = _dict(event.get("data"))
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else None
    time = _int(event.get("time"))
    if kind == "compaction/summary":
        return OtherCall("compaction", seq, time, _str(data.get("provider")), _str(data.get("model")), usage)
    if usage is None:   # a response that closed no request and logged no usage: nothing to price
        return None
    message = _dict(data.get("message"))
    origin = _dict(message.get("source"))
    return OtherCall("response", seq, time, _str(origin.get("provider")), _str(origin.get("model")), usage)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _usage_int(usage: dict[str, Any] | None, key: str) -> int | None:
    return _int((usage or {}).get(key))


def _causes(causes: list[Cause]) -> tuple[str | None, str | None]:
    if not causes:
        return None, None
    names = list(dict.fromkeys(CAUSE_NAMES.get(c.kind, c.kind) for c in causes))
    return "+".join(names), "; ".join(f"seq {c.seq}: {c.detail}" for c in causes)


def _ratio(reads: int | None, fresh: int | None) -> float | None:
    """Share of the prompt served from cache; `inputTokens` excludes the cached tokens."""
    if reads is None or fresh is None or reads + fresh == 0:
        return None
    return reads / (reads + fresh)


class _LogRows:
    """The request rows of one log, in order: each collapse is judged against its predecessor."""

    def __init__(self, source: LogSource, options: CacheOptions, real: RealHeader) -> None:
        self.source, self.options, self.real = source, options, real
        self.table = options.table
        self.base = {"log": source.label, "generation": source.generation.version,
                     "sessionId": str(source.header.get("id"))}
        self.first = True
        self.previous: Prompt | None = None
        self.previous_reads: int | None = None
        self.previous_total: int | None = None   # the provider's own count of previous prompt + answer

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for call in calls(self.source, message_prefix=self.options.message_prefix, bodies=self.options.predict):
            yield self._other(call) if isinstance(call, OtherCall) else self._request(*call)

    def _priced(self, model: str | None, time: int | None, usage: dict[str, Any] | None) -> dict[str, Any]:
        priced = self.table.price(model, time)
        fresh, reads, output = (_usage_int(usage, key) for key in ("inputTokens", "cacheReadTokens", "outputTokens"))
        return {"inputTokens": fresh, "cacheReadTokens": reads, "outputTokens": output,
                "reasoningTokens": _usage_int(usage, "reasoningTokens"), "hitRatio": _ratio(reads, fresh),
                "costUsd": None if usage is None else priced.prices.cost(fresh or 0, reads or 0, output or 0),
                "priceModel": priced.model, "priceTier": priced.tier}

    def _other(self, call: OtherCall) -> dict[str, Any]:
        why = ("compaction summary call: one-shot, outside the loop's cache lineage" if call.kind == "compaction"
               else "a response with no chunk and no request/header: priced from its usage, no request to rebuild")
        return {**self.base, "kind": call.kind, "seq": call.seq, "timeMs": call.time, "provider": call.provider,
                "model": call.model, "inherited": call.inherited, **self._priced(call.model, call.time, call.usage),
                "approximate": False, "collapse": False, "note": why + ("" if call.usage else "; no usage logged")}

    def _request(self, request: RebuiltRequest, answer: Any | None) -> dict[str, Any]:
        options = self.options
        prompt = prompt_of(request, answer, self.real) if options.predict else Prompt(
            notes=["no prediction (--no-predict)"], approximate=False)
        priced = self._priced(request.model, request.time, request.usage)
        reads = priced["cacheReadTokens"]
        notes = list(prompt.notes) + ([] if request.usage is not None else ["no usage logged"])
        prefix = predicted = logged_basis = None
        if prompt.ids is not None:
            context = None if self.previous is None else self.previous.with_answer or self.previous.ids
            prefix = 0 if context is None else common_prefix_length(context, prompt.ids)
            predicted = cacheable_tokens(prefix, options.block)
            # This prompt keeps all of the previous prompt and answer: the provider's own token count of them is
            # a better measure than our template's.
            if context is not None and prefix == len(context) and self.previous_total is not None:
                logged_basis = cacheable_tokens(self.previous_total, options.block)
        expected = logged_basis if logged_basis is not None else predicted
        if expected is None and not self.first:
            expected = self.previous_reads
        cause, detail = _causes(request.causes)
        collapse = reads is not None and not self.first and (
            (self.previous_reads is not None and reads < options.collapse_ratio * self.previous_reads)
            or (expected is not None and reads < options.collapse_ratio * expected))
        if self.first and cause is None:
            cause = "first-request"
        if collapse and cause is None:
            cause = UNEXPLAINED
        row = {
            **self.base, "kind": "request", "turn": request.turn, "step": request.step, "attempt": request.attempt,
            "seq": request.dispatch_seq, "timeMs": request.time, "provider": request.provider,
            "model": request.model, "inherited": request.inherited, **priced,
            "promptTokens": None if prompt.ids is None else len(prompt.ids),
            "predictedPrefixTokens": prefix, "predictedCacheTokens": predicted,
            "withinBlock": None if reads is None or predicted is None or self.first
            else abs(reads - predicted) < options.block,
            "loggedBasisCacheTokens": logged_basis,
            "loggedBasisWithinBlock": None if reads is None or logged_basis is None
            else abs(reads - logged_basis) < options.block,
            "expectedCacheReadTokens": expected, "approximate": prompt.approximate, "collapse": collapse,
            "cause": cause, "causeDetail": detail,
            "collapseCostUsd": self._collapse_cost(request, reads, expected) if collapse else None,
            "wireSha256": prompt.sha256, "note": "; ".join(notes) or None,
        }
        if options.wire:
            row["wireBody"] = prompt.body
        usage = request.usage
        fresh, output = _usage_int(usage, "inputTokens"), _usage_int(usage, "outputTokens")
        self.first = False
        self.previous, self.previous_reads = prompt, reads
        self.previous_total = None if fresh is None or output is None else fresh + (reads or 0) + output
        return row

    def _collapse_cost(self, request: RebuiltRequest, reads: int | None, expected: int | None) -> float | None:
        """What the collapse cost: the reads it lost — against what the predecessor read, or the expected read
        if that is more, within this prompt's size — at the miss price less the hit price. An explained break
        costs too: the cause says why, not that it was free."""
        basis = max(value for value in (expected, self.previous_reads, 0) if value is not None)
        if reads is None:
            return None
        missed = max(0, min(basis, reads + (_usage_int(request.usage, "inputTokens") or 0)) - reads)
        rates = self.table.price(request.model, request.time).prices
        return missed * (rates.cache_miss - rates.cache_hit) / rates.per_tokens


def log_rows(source: LogSource, options: CacheOptions, real: RealHeader | None = None) -> list[dict[str, Any]]:
    """The call rows of one log, in log order (`real`: content for scrubbed headers, default the options')."""
    return list(iter_log_rows(source, options, real))


def iter_log_rows(source: LogSource, options: CacheOptions, real: RealHeader | None = None
                  ) -> Iterator[dict[str, Any]]:
    """log_rows, streamed: a long log's rows need not all be held as Python dicts at once."""
    return iter(_LogRows(source, options, real if real is not None else RealHeader(options.system, options.tools)))


def _request_frame(rows: Iterator[dict[str, Any]], schema: dict[str, Any]) -> pl.DataFrame:
    """Rows to a DataFrame a batch at a time: memory holds the columns plus one batch of dicts."""
    batches = []
    while batch := list(islice(rows, _ROW_BATCH)):
        batches.append(pl.DataFrame(batch, schema=schema, orient="row"))
    return pl.concat(batches) if batches else pl.DataFrame(schema=schema)


def summarize(calls_frame: pl.DataFrame) -> dict[str, Any]:
    """Totals over own calls only: a child log's inherited requests were paid for by its parent."""
    own = calls_frame.filter(~pl.col("inherited"))
    requests = own.filter(pl.col("kind") == "request")
    compactions = own.filter(pl.col("kind") == "compaction")

    def total(column: str) -> int:
        return int(own[column].fill_null(0).sum())

    reads, fresh = total("cacheReadTokens"), total("inputTokens")
    compared = requests.filter(pl.col("withinBlock").is_not_null())
    basis = requests.filter(pl.col("loggedBasisWithinBlock").is_not_null())
    collapsed = requests.filter(pl.col("collapse"))
    return {
        "requests": requests.height, "compactionCalls": compactions.height,
        "otherCalls": own.height - requests.height - compactions.height,
        **{name: total(name) for name in _SUMS}, "hitRatio": _ratio(reads, fresh),
        "collapses": collapsed.height, "unexplained": collapsed.filter(pl.col("cause") == UNEXPLAINED).height,
        "collapseCostUsd": float(collapsed["collapseCostUsd"].fill_null(0).sum()),
        "predictionsCompared": compared.height, "predictionsWithinBlock": int(compared["withinBlock"].sum()),
        "loggedBasisCompared": basis.height, "loggedBasisAgreeing": int(basis["loggedBasisWithinBlock"].sum()),
        "costUsd": float(own["costUsd"].fill_null(0).sum()),
        "approximate": bool(own["approximate"].any()) if own.height else False,
    }


def _log_summary(source: LogSource, frame: pl.DataFrame) -> dict[str, Any]:
    models = frame.filter(pl.col("kind") == "request")["model"].drop_nulls().unique(maintain_order=True)
    notes = dict.fromkeys(note for row in frame["note"].drop_nulls() for note in row.split("; "))
    return {"log": source.label, "generation": source.generation.version, "sessionId": str(source.header.get("id")),
            "model": ", ".join(models.to_list()) or None, **summarize(frame), "notes": "; ".join(notes) or None}


def build_cache_report(paths: Iterable[str | os.PathLike[str]], options: CacheOptions = CacheOptions(), *,
                       on_log: Callable[[Path], None] | None = None, all_generations: bool = False) -> CacheReport:
    """Every logged model call of every log at `paths`, and the per-log and overall summaries.
    `on_log` is called once per file, after it is processed (progress reporting)."""
    schema = dict(REQUEST_COLUMNS)
    if options.wire:
        schema["wireBody"] = pl.String
    frames: list[pl.DataFrame] = []
    summaries: list[dict[str, Any]] = []
    supplied = RealHeader(options.system, options.tools)
    for file in discover(paths, all_generations=all_generations):
        real = sidecar_header(file) if options.sidecars else supplied
        for source in open_logs(file):
            frame = _request_frame(iter_log_rows(source, options, real), schema)
            frames.append(frame)
            summaries.append(_log_summary(source, frame))
        if on_log is not None:
            on_log(file)
    requests = pl.concat(frames) if frames else pl.DataFrame(schema=schema)
    totals = {"logs": len(summaries), **summarize(requests)}
    return CacheReport(requests, pl.DataFrame(summaries, schema=LOG_COLUMNS, orient="row"),
                       pl.DataFrame([totals], schema=TOTAL_COLUMNS, orient="row"))


def agreement(report: CacheReport, *, basis: str = "tokenizer") -> tuple[int, int]:
    """(agreeing, compared): own requests after the first of their log whose logged cacheReadTokens is
    within one block of the prediction — `tokenizer` (our template's common prefix) or `logged` (the
    provider's own count of the previous prompt + answer, when this prompt extends them)."""
    column = "withinBlock" if basis == "tokenizer" else "loggedBasisWithinBlock"
    rows = report.requests.filter(~pl.col("inherited") & pl.col(column).is_not_null())
    return int(rows[column].sum()), rows.height
