"""`audit verify`: options in, every log verified by the library, its reports handed to a sink (the table,
verify's JSON document, JUnit XML); the exit code says whether any log failed."""

from __future__ import annotations

import sys
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import click

from . import EXIT_CLEAN, EXIT_FINDINGS, EXIT_UNREADABLE
from .options import (
    ALL_GENERATIONS_OPTION,
    ALLOW_EVENT_OPTION,
    COLOR_OPTION,
    IGNORE_OPTION,
    JUNIT_OPTION,
    LOGS_ARGUMENT,
    SESSION_OPTION,
    chosen_engine,
    chosen_log_filter,
    chosen_paths,
    engine_options,
    filter_options,
    format_option,
    ignored,
    prefix_option,
    remote_options,
    this_terminal,
)

if TYPE_CHECKING:
    from ..verify import LogReport


@click.command(epilog="""\b
Examples:
  audit verify                          every session in dsh's session root
  audit verify --session 3f2a           the one session whose id starts with 3f2a
  audit verify --strict --junit out.xml logs/     a CI gate: warnings fail too, a JUnit report
  audit verify --strict --allow-event 'acme/*' logs/   the product's own ignorable events accepted
  audit verify --strict --ignore placeholder-header fixtures/   scrubbed fixtures accepted
  audit verify --engine dask --address tcp://10.0.0.5:8786 logs/   on a Dask cluster
Exit codes: 0 clean, 1 findings, 2 unreadable input, unwritable --junit or bad usage, 3 internal error,
130 interrupted.""")
@LOGS_ARGUMENT
@SESSION_OPTION
@format_option("table", "json", "junit")
@click.option("--strict", is_flag=True, help="Warnings (placeholders, ignorable unknown events, torn tails) fail too.")
@ALLOW_EVENT_OPTION
@IGNORE_OPTION
@engine_options
@JUNIT_OPTION
@filter_options
@ALL_GENERATIONS_OPTION
@prefix_option()
@remote_options
@COLOR_OPTION
def verify(logs: tuple[Path | str, ...], session: str | None, fmt: str, strict: bool, allow_events: tuple[str, ...],
           ignore_codes: tuple[str, ...], jobs: int, engine: str, address: str | None, message_prefix: str,
           junit_file: Path | None, since: str | None, until: str | None, timezone: str | None,
           models: tuple[str, ...], projects: tuple[str, ...], all_generations: bool,
           storage_options: dict[str, str | bool], color: str | None) -> int:
    """Rebuild every request of each LOG (file or directory) and check every invariant.

    Every dsh log generation (format v0 to v4) is read; in a directory, each log's newest generation. A LOG may
    also be an object-storage URL (s3://bucket/prefix) or @LIST, a file of them. With no LOG, the sessions in
    dsh's session root. --since/--until, --model and --project pick logs by their session header (start time,
    cwd) and first request's model; each log left out is listed and counted, never dropped silently."""
    from ..findings import allowed_events
    from ..output import check_output
    from ..verify import verify_paths
    from .progress_bar import byte_progress

    allowed = allowed_events(allow_events)
    accepted = ignored(ignore_codes)
    picked = chosen_log_filter(since, until, timezone, models, projects)
    choice = chosen_engine(engine, jobs, address)
    chosen = chosen_paths(logs, session, storage_options=storage_options)
    paths = chosen.paths
    check_output(junit_file, inputs=chosen.inputs, what="the JUnit report", create_folder=True)   # before the work
    # Read in this process (one worker, or one local file): a progress bar by bytes. A Dask worker's reads are not
    # seen.
    single = engine == "local" and (jobs == 1 or (chosen.given is None and len(paths) == 1 and paths[0].is_file()))
    reports: list[LogReport] = []
    with byte_progress(paths, "verify") if single else nullcontext():
        found = verify_paths(chosen.sources, message_prefix=message_prefix, engine=choice,
                             keep_requests=fmt == "json",   # the table shows counts only
                             all_generations=all_generations, superseded=chosen.superseded,
                             allow_events=allowed, ignore=accepted, select=picked.outside if picked else None)
        if fmt == "json":
            from ..reports.verify_json import write_document

            write_document(found, reports, strict, sys.stdout)
        else:
            reports.extend(found)
    if fmt == "table":
        from ..reports import verify_view
        from ..sinks import show

        term = this_terminal()
        show(term, verify_view.render(reports, paths, term, strict=strict))
    if junit_file is not None or fmt == "junit":
        from ..junit import cases_from_reports, write_junit

        cases = cases_from_reports(reports, strict=strict)
        for target in (junit_file, Path("-") if fmt == "junit" else None):
            if target is not None:
                write_junit(target, "dsh-audit verify", cases, inputs=chosen.inputs)
    if any(r.read_error for r in reports):
        return EXIT_UNREADABLE
    return EXIT_FINDINGS if any(r.failed(strict) for r in reports) else EXIT_CLEAN
