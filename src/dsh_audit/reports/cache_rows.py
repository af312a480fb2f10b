"""The row kinds cache-report writes, apart from the report itself: the command line offers them as choices
without loading polars (dsh_audit.reports.cache_report)."""

ROW_KINDS = ("requests", "logs", "totals")
