"""Token prices for the cost estimate: USD per million tokens, cache-hit input, cache-miss input, output.

Default: DeepSeek's published list (https://api-docs.deepseek.com/quick_start/pricing, the page listing
DeepSeek-V4-Flash-0731 and DeepSeek-V4-Pro-0813, flat rates before the peak/off-peak billing announced for
2026-08-16). Models not on the list are priced as deepseek-v4-flash and say so in `priceModel`.
"""

from __future__ import annotations

from dataclasses import dataclass

PER_TOKENS = 1_000_000


@dataclass(frozen=True, slots=True)
class Prices:
    cache_hit: float
    cache_miss: float
    output: float

    def cost(self, miss_tokens: int, hit_tokens: int, output_tokens: int) -> float:
        return (hit_tokens * self.cache_hit + miss_tokens * self.cache_miss + output_tokens * self.output) / PER_TOKENS


DEFAULT_PRICES: dict[str, Prices] = {
    "deepseek-v4-flash": Prices(cache_hit=0.0028, cache_miss=0.14, output=0.28),
    "deepseek-v4-pro": Prices(cache_hit=0.003625, cache_miss=0.435, output=0.87),
}
FALLBACK_MODEL = "deepseek-v4-flash"


def price_for(model: str | None, override: Prices | None) -> tuple[str, Prices]:
    """(which price row was used, the prices) for one request's model."""
    if override is not None:
        return "configured", override
    if model in DEFAULT_PRICES:
        return str(model), DEFAULT_PRICES[str(model)]
    return f"{FALLBACK_MODEL} (no published price for {model})", DEFAULT_PRICES[FALLBACK_MODEL]
