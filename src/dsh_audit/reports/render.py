"""Writing a report: machine formats (CSV, JSON, JSON Lines, Parquet) of one row kind each, with a named and
versioned column schema, or the report's own human view. The one output path every report shares.

JSON is one document: {"schema": NAME, "version": N, "rows": [...]}; JSON Lines one row object per line;
Parquet carries the schema name and version in its metadata; CSV is its header and rows. `--out FILE`
infers the format from the file's extension when no --format is given.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from ..errors import DshAuditError
from ..text import printable_row

FORMATS = ("table", "csv", "json", "jsonl", "parquet")
_BY_EXTENSION = {".csv": "csv", ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet",
                 ".txt": "table"}


def rows_frame(rows: list[dict[str, Any]], schema: dict[str, Any]) -> pl.DataFrame:
    """Report rows as a DataFrame. Arrow strings are UTF-8, which a lone surrogate from a log is not: then the
    rows are made printable (\\uXXXX) first. The common case pays nothing."""
    try:
        return pl.DataFrame(rows, schema=schema, orient="row")
    except UnicodeEncodeError:
        return pl.DataFrame([printable_row(row) for row in rows], schema=schema, orient="row")


def output_format(fmt: str | None, out: Path | None) -> str:
    """The format asked for, else the one `out`'s extension names, else the table."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise DshAuditError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
        return fmt
    if out is None:
        return "table"
    inferred = _BY_EXTENSION.get(out.suffix.lower())
    if inferred is None:
        raise DshAuditError(f"cannot tell the format from the extension {out.suffix or '(none)'!r}; give --format "
                            f"({', '.join(FORMATS)}) or use {', '.join(_BY_EXTENSION)}", path=str(out))
    return inferred


def _check_destination(out: Path) -> None:
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise DshAuditError(f"the folder {parent} does not exist (create it first)", path=str(out))
    if out.is_dir():
        raise DshAuditError("is a directory; --out takes a file", path=str(out))


def write_frame(frame: pl.DataFrame, fmt: str, out: Path | None, *, schema: str, version: int,
                table: Callable[[], str]) -> None:
    """Write one row kind to `out`, or to stdout when `out` is None (Parquet is binary: it needs a file).
    `table` renders the human view, called only when that is the format."""
    if out is not None:
        _check_destination(out)
    if fmt == "parquet":
        if out is None:
            raise DshAuditError("--format parquet needs --out FILE")
        frame.write_parquet(out, metadata={"dsh-audit-schema": schema, "dsh-audit-schema-version": str(version)})
        return
    if fmt == "csv":
        text = frame.write_csv()
    elif fmt == "json":
        text = json.dumps({"schema": schema, "version": version, "rows": frame.to_dicts()},
                          ensure_ascii=False, indent=1) + "\n"
    elif fmt == "jsonl":
        text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in frame.to_dicts())
    elif fmt == "table":
        text = table()
    else:
        raise DshAuditError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if out is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        out.write_text(text, encoding="utf-8")
