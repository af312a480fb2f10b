"""Reports as polars DataFrames (header-diff, cache-report), their terminal views and the machine formats.

The names below load on first use (PEP 562): the terminal views (dsh_audit.reports.views) serve verify and the
session listing too, which must not wait for polars."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import exports

_HOMES = {
    "CacheOptions": "cache_report", "CacheReport": "cache_report", "agreement": "cache_report",
    "build_cache_report": "cache_report", "build_header_diff": "header_diff", "diff_headers": "header_diff",
    "PriceTable": "prices", "Prices": "prices", "default_table": "prices", "load_table": "prices",
    "write_frame": "render",
}
__all__ = ["CacheOptions", "CacheReport", "PriceTable", "Prices", "agreement", "build_cache_report",
           "build_header_diff", "default_table", "diff_headers", "load_table", "write_frame"]

if TYPE_CHECKING:
    from .cache_report import CacheOptions, CacheReport, agreement, build_cache_report
    from .header_diff import build_header_diff, diff_headers
    from .prices import Prices, PriceTable, default_table, load_table
    from .render import write_frame


__getattr__, __dir__ = exports(__name__, _HOMES, globals())
