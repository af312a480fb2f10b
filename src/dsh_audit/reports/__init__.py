"""Reports as polars DataFrames (header-diff, cache-report), their terminal views and the machine formats."""

from .cache_report import CacheOptions, CacheReport, agreement, build_cache_report
from .header_diff import build_header_diff, diff_headers
from .prices import Prices, PriceTable, default_table, load_table
from .render import write_frame

__all__ = ["CacheOptions", "CacheReport", "PriceTable", "Prices", "agreement", "build_cache_report",
           "build_header_diff", "default_table", "diff_headers", "load_table", "write_frame"]
