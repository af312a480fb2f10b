"""Writing a report DataFrame as a table, CSV, JSON or Parquet: the one output path both reports share."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from ..errors import DshAuditError

FORMATS = ("table", "csv", "json", "parquet")


def render_table(frame: pl.DataFrame, columns: Sequence[str] | None = None) -> str:
    """All rows, the chosen columns, strings unabridged: a report is read whole, not sampled."""
    shown = frame.select([c for c in columns if c in frame.columns]) if columns else frame
    with pl.Config(tbl_rows=-1, tbl_cols=-1, fmt_str_lengths=200, tbl_width_chars=10_000,
                   tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True):
        return str(shown)


def write_frame(frame: pl.DataFrame, fmt: str, out: Path | None, *,
                table_columns: Sequence[str] | None = None) -> None:
    """Write `frame` to `out`, or to stdout when `out` is None (Parquet is binary: it needs a file)."""
    if fmt not in FORMATS:
        raise DshAuditError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if fmt == "parquet":
        if out is None:
            raise DshAuditError("--format parquet needs --out FILE")
        frame.write_parquet(out)
        return
    if fmt == "csv":
        text = frame.write_csv()
    elif fmt == "json":
        text = frame.write_json() + "\n"
    else:
        text = render_table(frame, table_columns) + "\n"
    if out is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        out.write_text(text, encoding="utf-8")
