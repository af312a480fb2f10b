"""Token prices: what each logged model call cost, at DeepSeek's price for its model and the time it ran.

The table (reports/data/deepseek-prices.json, or a file of the same shape given with --prices) lists each
model's peak rates in USD per 1M tokens: cache-hit input, cache-miss input, output. Off-peak rates are the
peak rates times `offPeakFactor`. Peak hours are given in one UTC offset, on some weekdays, except listed
holidays (DeepSeek: Beijing time, Monday to Friday 09:00-12:00 and 14:00-18:00, not China's statutory holidays).
A call is priced by the time of its event; a log without times (committed fixtures) is priced off-peak, and the
report says so. Sources: docs/prices.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, timezone
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import DshAuditError

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
    holidays: frozenset[date]                 # local dates billed off-peak all day

    def is_peak(self, time_ms: int) -> bool:
        local = datetime.fromtimestamp(time_ms / 1000, UTC).astimezone(self.offset)
        if local.isoweekday() not in self.weekdays or local.date() in self.holidays:
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
    models: dict[str, Prices]                 # peak rates
    aliases: dict[str, str]
    fallback: str
    off_peak_factor: float
    peak: PeakHours | None
    source: str

    def price(self, model: str | None, time_ms: int | None) -> Priced:
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


def _days(spec: str) -> list[date]:
    first, _, last = spec.partition("..")
    start = date.fromisoformat(first)
    end = date.fromisoformat(last) if last else start
    return [start + timedelta(days=k) for k in range((end - start).days + 1)]


def _offset(text: str) -> timezone:
    sign = -1 if text.startswith("-") else 1
    hours, minutes = text.lstrip("+-").split(":")
    return timezone(sign * timedelta(hours=int(hours), minutes=int(minutes)))


def parse_table(document: Any, origin: str) -> PriceTable:
    """A price table from its JSON document; a malformed one is a one-line DshAuditError naming `origin`."""
    try:
        per = int(document.get("perTokens", 1_000_000))
        models = {name: Prices(float(rates["cacheHit"]), float(rates["cacheMiss"]), float(rates["output"]), per)
                  for name, rates in document["models"].items()}
        peak = document.get("peak")
        hours = None if peak is None else PeakHours(
            _offset(peak["utcOffset"]), frozenset(int(day) for day in peak["weekdays"]),
            tuple((_clock(start), _clock(end)) for start, end in peak["hours"]),
            frozenset(day for spec in peak.get("holidays", []) for day in _days(spec)))
        fallback = str(document["fallback"])
        aliases = {str(alias): str(name) for alias, name in document.get("aliases", {}).items()}
        if fallback not in models or any(name not in models for name in aliases.values()):
            raise KeyError("fallback and aliases must name listed models")
        return PriceTable(models, aliases, fallback, float(document.get("offPeakFactor", 1.0)), hours,
                          str(document.get("source", origin)))
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise DshAuditError(f"not a price table: {error}", path=origin) from None


@cache
def default_table() -> PriceTable:
    text = resources.files(__package__).joinpath("data", "deepseek-prices.json").read_text(encoding="utf-8")
    return parse_table(json.loads(text), "deepseek-prices.json")


def load_table(path: Path) -> PriceTable:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise DshAuditError(f"cannot read the price table: {error}", path=str(path)) from None
    return parse_table(document, str(path))
