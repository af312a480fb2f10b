"""`audit report`: the HTML report (dsh_audit.reports.html) of the logs given. Options in, library frames out,
one file written. Nothing else."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import click

from ..output import check_output, is_stream, write_output
from ..reports.views import cost, count
from ..text import printable
from . import EXIT_CLEAN
from .options import (
    ALL_GENERATIONS_OPTION,
    ALLOW_EVENT_OPTION,
    LOGS_ARGUMENT,
    SESSION_OPTION,
    chosen_filter,
    chosen_paths,
    explain_targets,
    filter_options,
    filters_given,
    tell_left_out,
    tell_skipped,
    tell_unreadable,
)


def _generator() -> str:
    try:
        return f"dsh-audit {version('dsh-audit')}"
    except PackageNotFoundError:   # pragma: no cover - run from a source tree without metadata
        return "dsh-audit"


@click.command("report", epilog="""\b
Examples:
  audit report session.v3.jsonl -o report.html    one session: its plot, collapses and findings
  audit report ~/.dsh/sessions -o sessions.html   every session, with a sortable overview table
  audit report --session 3f2a -o 3f2a.html        the session whose id starts with 3f2a
  audit report fleet/ -o fleet.html               a dataset audit export wrote: the fleet's overview
The file is self-contained: open it from disk, it loads nothing from the network.
Exit codes: 0 written (a log that cannot be read is named in the page and left out), 2 nothing readable, an
unwritable output or bad usage, 3 internal error, 130 interrupted.""")
@LOGS_ARGUMENT
@SESSION_OPTION
@click.option("-o", "--out", required=True, type=click.Path(path_type=Path, allow_dash=True),
              help="The HTML file to write (its folder must exist; replaced atomically; - for stdout).")
@filter_options
@ALL_GENERATIONS_OPTION
@ALLOW_EVENT_OPTION
def report(logs: tuple[Path, ...], session: str | None, out: Path, since: str | None, until: str | None,
           timezone: str | None, models: tuple[str, ...], projects: tuple[str, ...], all_generations: bool,
           allow_events: tuple[str, ...]) -> int:
    """One self-contained HTML page for the LOGS (files or directories): per session, its requests' prompt
    tokens split into cache read and miss, each collapse marked with its logged cause, header changes and
    compactions on the same axis, the cumulative cost, and verify's findings; for several sessions the
    costliest collapses of all and a table of the sessions ranked by the cost lost to collapses, with when and
    where (cwd) each started, sortable by any column (over 25, only the 25 worst drawn). The figures are
    cache-report's, with its defaults and the same filters (--since/--until, --model, --project: the calls
    counted, and the sessions that keep any); verify's findings allow events as verify does. A dataset audit export
    wrote (the one LOGS given) is drawn from its tables: the fleet's overview, with the same filters."""
    from ..findings import allowed_events
    from ..fleet.report import dataset_parts, is_dataset
    from ..reports.html import page_names, render_report
    from ..reports.one_walk import narrowed, read_once
    from ..reports.ranking import session_prefixes

    allowed = allowed_events(allow_events)   # before the work: a bad pattern is bad usage
    counted = chosen_filter(since, until, timezone, models, projects)
    selection = chosen_paths(logs, session)
    paths, older = selection.paths, selection.superseded
    check_output(out, inputs=selection.inputs, what="the report")   # before the work
    if session is None and len(paths) == 1 and is_dataset(paths[0]):
        page = dataset_parts(paths[0], counted)
        cache, headers, findings, origins, read_count = (page.report, page.headers, page.findings, page.origins,
                                                         page.read_count)
        names = page_names(cache.logs, page.targets)
    else:
        # The cyclic collector stays on: paused over a whole home, each log's cycles were kept to the end (0.5 MB
        # a log: 1 GB over 1,000 small sessions). read_once pauses it for each log it reads.
        read = read_once(paths, all_generations=all_generations, superseded=older, allow_events=allowed)
        parts = narrowed(read, counted)
        cache, headers, findings, origins = parts.cache, parts.headers, parts.findings, parts.origins
        read_count = read.cache.logs.height
        # named among every log read, as cache-report names them: a short id picks one session with --session
        collapsed = set(cache.requests.filter(cache.requests["collapse"])["log"])   # the logs explain names
        prefixes = {label: prefix for label, prefix in session_prefixes(read.cache.logs).items()
                    if label in collapsed}
        names = page_names(read.cache.logs, explain_targets(logs, session, paths, prefixes))
    narrowing = filters_given(since, until, timezone, models, projects)
    filtered = (f"only the calls {narrowing} keeps; {read_count - cache.logs.height} of {read_count} "
                "session log(s) left out, none of their calls kept") if counted else ""
    document = render_report(cache, headers, findings, inputs=[str(p) for p in paths], names=names,
                             unreadable=cache.unreadable,
                             overview=cache.logs.height > 1 or any(p.is_dir() for p in paths), origins=origins,
                             generator=_generator(), filtered=filtered)
    size = write_output(out, document, inputs=selection.inputs, what="the report")   # never half a report
    totals = cache.totals.to_dicts()[0]
    skipped = f", {len(cache.skipped)} older generation(s) skipped" if cache.skipped else ""
    click.echo(printable(f"wrote {out} ({count(size)}B): {cache.logs.height} session log(s), "
                         f"{totals['requests']} request(s), {totals['collapses']} collapse(s), "
                         f"cost {cost(totals['costUsd'])}{skipped}"), err=is_stream(out))   # not into the page
    tell_left_out(read_count, cache.logs.height)
    tell_unreadable(cache.unreadable, listed=False)
    tell_skipped(cache.skipped)
    return EXIT_CLEAN
