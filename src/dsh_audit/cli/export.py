"""`audit export`: SRC in, the library's export (dsh_audit.fleet.export) run into the dataset, its summary out
through a sink (the table or a JSON document)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from ..text import printable
from . import EXIT_CLEAN, EXIT_UNREADABLE
from .options import (
    ALL_GENERATIONS_OPTION,
    ALLOW_EVENT_OPTION,
    LOGS_ARGUMENT,
    chosen_engine,
    chosen_paths,
    engine_options,
    format_option,
    remote_options,
    this_terminal,
)

SCHEMA, SCHEMA_VERSION = "dsh-audit/export", 1


@click.command("export", epilog="""\b
Examples:
  audit export ~/.dsh/sessions --to fleet/        every session into the dataset fleet/ (made if new)
  audit export ci-logs/ --to fleet/ -j 4          four processes; run again: only new or changed logs are read
  audit export logs/ --to fleet/ --engine dask --address tcp://10.0.0.5:8786   on a Dask cluster
  audit query fleet/ --question waste --by model  then ask it (or read it with polars or DuckDB: docs/fleet.md)
Exit codes: 0 exported, 2 an input could not be read (it is a failed row of the logs table; everything else is
exported) or a log's cache figures could not be made (its cacheError, as cache-report says it), a dataset of a
newer dsh-audit, an unwritable dataset or bad usage, 3 internal error, 130 interrupted (what was written stays;
the next run completes it).""")
@LOGS_ARGUMENT
@click.option("--to", "to", required=True, metavar="DIR", type=click.Path(path_type=Path),   # a file: one line
              help="The dataset folder: made if new; a dataset made by audit export is updated in place.")
@engine_options
@format_option("table", "json", more="What the run did: logs new, replaced, unchanged, skipped, unreadable.")
@ALLOW_EVENT_OPTION
@ALL_GENERATIONS_OPTION
@remote_options
def export(logs: tuple[Path | str, ...], to: Path, jobs: int, engine: str, address: str | None, fmt: str,
           allow_events: tuple[str, ...], all_generations: bool, storage_options: dict[str, str | bool]) -> int:
    """Export every LOG (files or directories) into a hive-partitioned Parquet dataset: tables logs,
    requests, calls, findings and header_changes, partitioned by generation and date, with a manifest; a log
    already exported with the same content is skipped, a changed one replaces its rows."""
    from ..findings import allowed_events
    from ..fleet.export import export as export_logs
    from ..fleet.unit import ExportOptions

    allowed = allowed_events(allow_events)   # before the work: a bad pattern is bad usage
    choice = chosen_engine(engine, jobs, address)
    selection = chosen_paths(logs, None, storage_options=storage_options)
    summary = export_logs(selection.sources, to, options=ExportOptions(allowed),
                          engine=choice, all_generations=all_generations)
    if fmt == "json":
        sys.stdout.write(json.dumps({"schema": SCHEMA, "version": SCHEMA_VERSION, **summary.as_json()}, indent=2,
                                    ensure_ascii=False) + "\n")
    else:
        from ..reports.views import wrap

        width = this_terminal().width
        for line in (f"exported to {summary.dataset}: {summary.files} log file(s), {summary.new} new, "
                     f"{summary.replaced} replaced, {summary.unchanged} unchanged, {summary.skipped} skipped (as "
                     f"recorded), {len(summary.unreadable)} unreadable ({summary.kept} of them kept from an "
                     "earlier run)" + (f", {len(summary.without_cache)} without cache figures (cacheError in its "
                                       "logs row)" if summary.without_cache else "")
                     # what verify's summary says it passed over, in its words
                     + (f", {summary.older_generations} older generation(s) skipped"
                        if summary.older_generations else "")
                     + (f", {summary.ignored} file(s) that are not dsh logs ignored" if summary.ignored else ""),
                     f"{summary.sessions} session(s) in the dataset; cache block {summary.cache_block} "
                     f"({summary.cache_block_basis})"):
            click.echo("\n".join(wrap(line, width, "")))
    for name, why in (*summary.unreadable, *summary.without_cache):
        click.echo(printable(f"audit: {why}" if _names_input(why, name) else f"audit: {name}: {why}"), err=True)
    return EXIT_UNREADABLE if summary.unreadable or summary.without_cache else EXIT_CLEAN


def _names_input(why: str, name: str) -> bool:
    """`why` begins by naming the input `name` (its real or absolute path, or an object's URL): as it is, or as
    the reader was given it (a relative path, a path through a linked folder), followed by a colon."""
    return why.startswith(name) or any(
        char == ":" and name in (os.path.realpath(why[:end]), os.path.abspath(why[:end]))
        for end, char in enumerate(why) if end)
