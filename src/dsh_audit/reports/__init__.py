"""Reports as polars DataFrames (header-diff, cache-report) and the renderer both share."""

from .cache_report import CacheOptions, agreement, build_cache_report
from .header_diff import build_header_diff, diff_headers
from .prices import DEFAULT_PRICES, Prices
from .render import write_frame

__all__ = ["DEFAULT_PRICES", "CacheOptions", "Prices", "agreement", "build_cache_report", "build_header_diff",
           "diff_headers", "write_frame"]
