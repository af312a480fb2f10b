"""Token prices: what each logged model call cost, at DeepSeek's price for its model and the time it ran.

The table (reports/data/deepseek-prices.json, or a file of the same shape given with --prices) lists each
model's peak rates in USD per 1M tokens: cache-hit input, cache-miss input, output. Off-peak rates are the
peak rates times `offPeakFactor`. Peak hours are given in one UTC offset, on some weekdays, except listed
holidays (DeepSeek: Beijing time, Monday to Friday 09:00-12:00 and 14:00-18:00, not China's statutory holidays).
A call is priced by the time of its event, at the prices of the period in force then (the table's newest
period from its `from`, the `earlier` ones before it); a log without times (committed fixtures) is priced at
the newest period off-peak, and the report says so. Sources: docs/prices.md.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta, timezone
from functools import cache
from importlib import resources
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import DshAuditError
from ..readers.jsonvalue import JsonProblem, JsonTooDeep, parse_json
from ..vocabulary import validate_document

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

MAX_PRICE = 1_000_000.0       # USD per perTokens tokens: data/prices.schema.json says why
MAX_TABLE_BYTES = 1 << 20     # DeepSeek's table is 2 kB
# The last moment a calendar places in any UTC offset: a day short of datetime's year 9999. A logged time after
# it (valid up to 2**53 ms, the year 287396) is priced off-peak, and the tier says why.
LATEST_MS = int(datetime(9999, 12, 30, tzinfo=UTC).timestamp() * 1000)


@dataclass(frozen=True, slots=True)
class Prices:
    """USD per `per_tokens` tokens."""

    cache_hit: float
    cache_miss: float
    output: float
    per_tokens: int = 1_000_000

    def cost(self, miss_tokens: int, hit_tokens: int, output_tokens: int) -> float:
        return (hit_tokens * self.cache_hit + miss_tokens * self.cache_miss
                + output_tokens * self.output) / self.per_tokens

    def scaled(self, factor: float) -> Prices:
        return Prices(self.cache_hit * factor, self.cache_miss * factor, self.output * factor, self.per_tokens)


@dataclass(frozen=True, slots=True)
class PeakHours:
    offset: timezone
    weekdays: frozenset[int]                  # ISO weekdays, Monday = 1
    hours: tuple[tuple[time, time], ...]      # [start, end) in local time
    holidays: tuple[tuple[date, date], ...]   # [first, last] local dates billed off-peak all day

    def is_peak(self, time_ms: int) -> bool:
        local = datetime.fromtimestamp(time_ms / 1000, UTC).astimezone(self.offset)
        if local.isoweekday() not in self.weekdays or any(first <= local.date() <= last
                                                          for first, last in self.holidays):
            return False
        return any(start <= local.time() < end for start, end in self.hours)


@dataclass(frozen=True, slots=True)
class Priced:
    """The price applied to one call: which table row, which tier, the rates."""

    model: str       # the row used (a model the table lists, or the fallback, saying so)
    tier: str        # "peak" | "off-peak" | "off-peak (no time logged)" | "off-peak (time past the year 9999)" | "flat"
    prices: Prices


@dataclass(frozen=True, slots=True)
class PriceTable:
    """The prices of one period, from `since_ms` (None: from the start), and the `earlier` periods (oldest first)
    that price a call logged before it."""

    models: dict[str, Prices]                 # peak rates
    aliases: dict[str, str]
    fallback: str
    off_peak_factor: float
    peak: PeakHours | None
    source: str
    since_ms: int | None = None
    earlier: tuple[PriceTable, ...] = ()

    def period(self, time_ms: int | None) -> PriceTable:
        """The period a call logged at `time_ms` falls in: the latest one begun by then (the oldest before any
        began); a call without a time is priced at this, the newest one."""
        if time_ms is None or time_ms <= 0 or self.since_ms is None or time_ms >= self.since_ms or not self.earlier:
            return self
        return next((older for older in reversed(self.earlier)
                     if older.since_ms is None or time_ms >= older.since_ms), self.earlier[0])

    def price(self, model: str | None, time_ms: int | None) -> Priced:
        period = self.period(time_ms)
        if period is not self:
            return period.price(model, time_ms)
        name = self.aliases.get(str(model), str(model))
        row = name if name in self.models else self.fallback
        if len(self.models) == 1 and self.peak is None:   # one flat rate for every model
            return Priced(row, "flat", self.models[row])
        shown = row if row == model else (f"{row} (as {model})" if name in self.models
                                          else f"{row} (no price for {model})")
        peak = self.models[row]
        if self.peak is None:
            return Priced(shown, "flat", peak)
        if time_ms is None or time_ms <= 0:
            return Priced(shown, "off-peak (no time logged)", peak.scaled(self.off_peak_factor))
        if time_ms > LATEST_MS:
            return Priced(shown, "off-peak (time past the year 9999)", peak.scaled(self.off_peak_factor))
        if self.peak.is_peak(time_ms):
            return Priced(shown, "peak", peak)
        return Priced(shown, "off-peak", peak.scaled(self.off_peak_factor))


def flat_table(prices: Prices) -> PriceTable:
    """One set of rates for every model at every hour (--price-hit/--price-miss/--price-output)."""
    return PriceTable({"configured": prices}, {}, "configured", 1.0, None, "configured on the command line")


def _clock(text: str) -> time:
    hours, minutes = text.split(":")
    return time(int(hours), int(minutes))


def _days(spec: str, pointer: str) -> tuple[date, date]:
    first, _, last = spec.partition("..")
    try:
        start = date.fromisoformat(first)
        end = date.fromisoformat(last) if last else start
    except ValueError as error:
        raise ValueError(f"{pointer}: {error}") from None
    if end < start:
        raise ValueError(f"{pointer}: the range ends before it starts")
    return start, end


def _offset(text: str) -> timezone:
    sign = -1 if text.startswith("-") else 1
    hours, minutes = text.lstrip("+-").split(":")
    return timezone(sign * timedelta(hours=int(hours), minutes=int(minutes)))


@cache
def _table_schema() -> Draft202012Validator:
    from jsonschema import Draft202012Validator  # on first use: importing this module stays cheap

    text = resources.files(__package__).joinpath("data", "prices.schema.json").read_text(encoding="utf-8")
    return Draft202012Validator(json.loads(text))


def _named_models(document: dict[str, Any], pointer: str = "") -> None:
    """The fallback and every alias must name a model the period prices."""
    models = document["models"]
    if document["fallback"] not in models:
        raise ValueError(f"{pointer}/fallback: {document['fallback']!r} is not one of the models")
    for alias, name in document.get("aliases", {}).items():
        if name not in models:
            raise ValueError(f"{pointer}/aliases/{alias.replace('~', '~0').replace('/', '~1')}: {name!r} is not one "
                             "of the models")


def _since(text: str | None, pointer: str) -> int | None:
    if text is None:
        return None
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError as error:
        raise ValueError(f"{pointer}/from: {error}") from None


def _period(document: dict[str, Any], pointer: str, per: int, origin: str) -> PriceTable:
    """One period of a table: its models, aliases, fallback, off-peak factor, peak hours and start."""
    _named_models(document, pointer)
    models = {name: Prices(float(rates["cacheHit"]), float(rates["cacheMiss"]), float(rates["output"]), per)
              for name, rates in document["models"].items()}
    peak = document.get("peak")
    hours = None if peak is None else PeakHours(
        _offset(peak["utcOffset"]), frozenset(peak["weekdays"]),
        tuple((_clock(start), _clock(end)) for start, end in peak["hours"]),
        tuple(_days(spec, f"{pointer}/peak/holidays/{index}") for index, spec in enumerate(peak.get("holidays", []))))
    return PriceTable(models, dict(document.get("aliases", {})), document["fallback"],
                      float(document.get("offPeakFactor", 1.0)), hours, str(document.get("source", origin)),
                      _since(document.get("from"), pointer))


def _in_order(periods: list[PriceTable]) -> None:
    """Periods oldest first, each begun after the one before; only the oldest may have no start."""
    for index, (before, after) in enumerate(pairwise(periods)):
        where = f"/earlier/{index + 1}" if index + 1 < len(periods) - 1 else ""
        if after.since_ms is None:
            raise ValueError(f"{where}/from: only the oldest period may have no start")
        if before.since_ms is not None and after.since_ms <= before.since_ms:
            raise ValueError(f"{where}/from: a period must begin after the one before it")


def parse_table(document: Any, origin: str, *, against_schema: bool = True) -> PriceTable:
    """A price table from its JSON document, checked against data/prices.schema.json (unless `against_schema`
    is false: the bundled table, which tests check); a malformed one is a one-line DshAuditError naming `origin`
    and the field (a JSON pointer). The document is the newest period; `earlier` the periods before it, oldest
    first."""
    problems = validate_document(_table_schema(), document) if against_schema else []
    try:
        if problems:
            raise ValueError(str(problems[0]))
        per = int(document.get("perTokens", 1_000_000))
        earlier = [_period(period, f"/earlier/{index}", per, origin)
                   for index, period in enumerate(document.get("earlier", []))]
        newest = _period(document, "", per, origin)
        _in_order([*earlier, newest])
    except ValueError as error:
        raise DshAuditError(f"not a price table: {error}", path=origin) from None
    return replace(newest, earlier=tuple(earlier))


@cache
def default_table() -> PriceTable:
    """DeepSeek's table, bundled: tests/test_prices.py checks it against the schema, so a run need not load
    jsonschema for it (0.05 s of every cache-report)."""
    text = resources.files(__package__).joinpath("data", "deepseek-prices.json").read_text(encoding="utf-8")
    return parse_table(json.loads(text), "deepseek-prices.json", against_schema=False)


def _regular_file_bytes(path: Path) -> bytes:
    """The bytes of `path`, a regular file of at most MAX_TABLE_BYTES. Opened without blocking, so that a named
    pipe is refused rather than waited on, and a device (/dev/zero) never read."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise DshAuditError("the price table is not a regular file (a pipe, a device or a socket)",
                                path=str(path))
        data = file.read(MAX_TABLE_BYTES + 1)
    if len(data) > MAX_TABLE_BYTES:
        raise DshAuditError(f"the price table is larger than {MAX_TABLE_BYTES} bytes, more than a table needs",
                            path=str(path))
    return data


def load_table(path: Path) -> PriceTable:
    """A --prices file: a regular file of at most MAX_TABLE_BYTES, JSON nested at most MAX_DEPTH deep (no NaN or
    Infinity literal), a price table by data/prices.schema.json."""
    try:
        data = _regular_file_bytes(path)
    except OSError as error:
        raise DshAuditError(f"cannot read the price table: {error.strerror}", path=str(path)) from None
    try:
        document = parse_json(data)
    except (JsonProblem, JsonTooDeep) as error:
        raise DshAuditError(f"not a price table: {error}", path=str(path)) from None
    return parse_table(document, str(path))
