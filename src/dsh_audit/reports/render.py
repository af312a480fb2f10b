"""Writing a report: machine formats (CSV, JSON, JSON Lines, Parquet) of one row kind each, with a named and
versioned column schema, or the report's own human view. The one output path every report shares.

JSON is one document: {"schema": NAME, "version": N, "rows": [...]}; JSON Lines one row object per line;
Parquet carries the schema name and version in its metadata; CSV is its header and rows. `--out FILE`
names the format by its extension when no --format is given (dsh_audit.sinks); `--out -` is stdout. Files
are written by dsh_audit.output's rules (docs/outputs.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..errors import DshAuditError
from ..output import check_output, library_sink, open_output
from ..text import printable_row

if TYPE_CHECKING:
    import polars as pl

FORMATS = ("table", "csv", "json", "jsonl", "parquet")   # the sinks (dsh_audit.sinks) report rows are written to


def rows_frame(rows: list[dict[str, Any]], schema: dict[str, Any]) -> pl.DataFrame:
    """Report rows as a DataFrame. Arrow strings are UTF-8, which a lone surrogate from a log is not: then the
    rows are made printable (\\uXXXX) first. The common case pays nothing."""
    import polars as pl  # here, not above: the command line imports this module for FORMATS

    try:
        return pl.DataFrame(rows, schema=schema, orient="row")
    except UnicodeEncodeError:
        return pl.DataFrame([printable_row(row) for row in rows], schema=schema, orient="row")


def rows_by(frame: pl.DataFrame, *columns: str) -> Callable[[tuple[Any, ...]], pl.DataFrame]:
    """The rows of `frame` with given values of `columns` (empty where none has them): one pass to split it,
    where a filter per log would scan every row once per log."""
    parts = frame.partition_by(list(columns), as_dict=True) if frame.height else {}
    empty = frame.clear()
    return lambda key: parts.get(key, empty)


def check_frame_output(fmt: str, out: Path | None, inputs: Iterable[Path]) -> None:
    """Refuse a bad destination before the report is built (dsh_audit.output's rules)."""
    if fmt == "parquet" and out is None:
        raise DshAuditError("--format parquet needs --out FILE (or --out - for stdout)")
    check_output(out, inputs=inputs, what="--out")


def _json_rows(frame: pl.DataFrame, schema: str, version: int, handle: IO[str]) -> None:
    """The document json.dumps({"schema", "version", "rows"}, indent=1) gives, written a row at a time."""
    head = json.dumps({"schema": schema, "version": version}, ensure_ascii=False, indent=1)
    handle.write(head[:-2] + ',\n "rows": [')
    for index, row in enumerate(frame.iter_rows(named=True)):
        text = json.dumps(row, ensure_ascii=False, indent=1).replace("\n", "\n  ")
        handle.write(("," if index else "") + "\n  " + text)
    handle.write("\n ]\n}\n" if frame.height else "]\n}\n")


def write_frame(frame: pl.DataFrame, fmt: str, out: Path | None, *, schema: str, version: int,
                table: Callable[[], str], inputs: Iterable[Path] = ()) -> None:
    """Write one row kind to `out`, or to stdout when `out` is None or `-` (Parquet is binary: it needs --out).
    `table` renders the human view, called only when that is the format. The file is written by
    dsh_audit.output's rules: beside it, then renamed; never onto one of `inputs`."""
    if fmt not in FORMATS:
        raise DshAuditError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    check_frame_output(fmt, out, inputs)
    if fmt == "parquet":
        with open_output(out, binary=True, inputs=inputs, what="--out") as binary, library_sink(binary) as sink:
            frame.write_parquet(sink, metadata={"dsh-audit-schema": schema,
                                                  "dsh-audit-schema-version": str(version)})
        return
    text = table() if fmt == "table" else None   # rendered before the output is opened: a failure writes nothing
    with open_output(out, inputs=inputs, what="--out") as handle:
        if text is not None:
            handle.write(text)
        elif fmt == "csv":
            handle.write(frame.write_csv())
        elif fmt == "json":
            _json_rows(frame, schema, version, handle)
        else:
            for row in frame.iter_rows(named=True):
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
