"""The output formats: one vocabulary for every command's `--format`, each name a sink that writes a command's
result one way. A command accepts the subset that fits what it makes, and its --help lists them from here;
where a command writes to `--out FILE`, the file's extension names the format when --format is not given.

The writers themselves stay beside what they write (reports.render for report rows, junit for JUnit XML,
reports/*_json for the documents): this module holds the names and the views' way to stdout."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from .errors import DshAuditError
from .text import printable

if TYPE_CHECKING:
    from .reports.views import Terminal


class Sink(msgspec.Struct, frozen=True):
    name: str
    summary: str                      # what it is, for --help
    extensions: tuple[str, ...] = ()  # of an --out file written in it


SINKS: dict[str, Sink] = {sink.name: sink for sink in (
    Sink("table", "for people, fitted to the terminal", (".txt",)),
    Sink("json", "one JSON document", (".json",)),
    Sink("jsonl", "one JSON value per line", (".jsonl", ".ndjson")),
    Sink("csv", "a header, then a row per line", (".csv",)),
    Sink("parquet", "Apache Parquet, binary: needs --out", (".parquet",)),
    Sink("junit", "JUnit XML, a test case per log", (".xml",)),
    Sink("digest", "a line per request: TURN.STEP#ATTEMPT, dispatch seq, sha256"),
)}


def described(names: tuple[str, ...]) -> str:
    """The formats `names` as --help lists them: `table (for people, ...), json (one JSON document)`."""
    return ", ".join(f"{name} ({SINKS[name].summary})" for name in names)


def output_format(fmt: str | None, out: Path | None, accepted: tuple[str, ...]) -> str:
    """The format asked for, else the one `out`'s extension names among `accepted`, else the table (also for
    `--out -`)."""
    from .output import is_stream  # here: a command's --help names the formats without loading the writers

    if fmt is not None:
        if fmt not in accepted:
            raise DshAuditError(f"unknown format {fmt!r}; expected one of {', '.join(accepted)}")
        return fmt
    if out is None or is_stream(out):
        return "table"
    by_extension = {extension: name for name in accepted for extension in SINKS[name].extensions}
    inferred = by_extension.get(out.suffix.lower())
    if inferred is None:
        raise DshAuditError(f"cannot tell the format from the extension {out.suffix or '(none)'!r}; give --format "
                            f"({', '.join(accepted)}) or use {', '.join(by_extension)}", path=str(out))
    return inferred


def show(term: Terminal, text: str) -> None:
    """A human view on stdout, made safe to print (`Terminal.show`). Written to sys.stdout itself, which `audit`
    set to escape what its encoding cannot show."""
    sys.stdout.write(term.show(text if text.endswith("\n") else text + "\n"))


def print_json(document: Any) -> None:
    """One JSON document on stdout, indented, log text in it made printable."""
    sys.stdout.write(printable(json.dumps(document, indent=2, ensure_ascii=False)) + "\n")
