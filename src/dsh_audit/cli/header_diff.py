"""`audit header-diff`: options in, the library's DataFrame out, handed to the sink asked for."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..reports.render import FORMATS
from . import EXIT_CLEAN
from .options import (
    ALL_GENERATIONS_OPTION,
    COLOR_OPTION,
    LOGS_ARGUMENT,
    OUT_OPTION,
    SESSION_OPTION,
    WIDE_OPTION,
    chosen_log_filter,
    chosen_paths,
    filter_options,
    format_option,
    tell_filtered,
    tell_skipped,
    tell_unreadable,
    this_terminal,
)
from .progress_bar import byte_progress

if TYPE_CHECKING:
    from ..readers.discover import Skipped, Unreadable


@click.command("header-diff", epilog="""\b
Examples:
  audit header-diff session.jsonl                 what changed at each request/header
  audit header-diff --wide logs/                  every system-prompt diff line, every column
  audit header-diff --out changes.csv logs/       one row per changed field, as CSV
Exit codes: 0 done (a log that cannot be read is named and left out), 2 nothing readable, unwritable --out or
bad usage, 3 internal error, 130 interrupted.""")
@LOGS_ARGUMENT
@SESSION_OPTION
@format_option(*FORMATS, default=None, more="The machine formats hold a row per changed field. Without --format, "
               "--out's extension decides, else the table.")
@OUT_OPTION
@WIDE_OPTION
@filter_options
@ALL_GENERATIONS_OPTION
@COLOR_OPTION
def header_diff(logs: tuple[Path, ...], session: str | None, fmt: str | None, out: Path | None, wide: bool,
                since: str | None, until: str | None, timezone: str | None, models: tuple[str, ...],
                projects: tuple[str, ...], all_generations: bool, color: str | None) -> int:
    """What changed between consecutive request headers of each LOG (file or directory): config old -> new,
    tools added, removed or changed, the system prompt as a diff. From format v3 the prompt is the
    system/message head, and its changes are shown too. --since/--until, --model and --project take or leave
    whole logs, as verify does (by start time, cwd, first request's model), and say how many they leave out."""
    # polars and deepdiff are imported here, not above: `audit header-diff --help` starts without them
    from ..reports import header_view
    from ..reports.header_diff import SCHEMA_VERSION, build_header_diff
    from ..reports.render import check_frame_output, write_frame
    from ..sinks import output_format

    chosen = output_format(fmt, out, FORMATS)
    picked = chosen_log_filter(since, until, timezone, models, projects)
    selection = chosen_paths(logs, session)
    check_frame_output(chosen, out, selection.inputs)   # before the work
    unreadable: list[Unreadable] = []
    skipped: list[Skipped] = []
    left_out: list[tuple[str, str, str]] = []
    with byte_progress(selection.paths, "header-diff"):
        frame = build_header_diff(selection.paths, all_generations=all_generations, unreadable=unreadable,
                                  skipped=skipped, superseded=selection.superseded, select=picked or None,
                                  left_out=left_out)

    def view() -> str:
        term = this_terminal()
        return term.show(header_view.render(frame, term, wide=wide, unreadable=unreadable, skipped=skipped))

    write_frame(frame, chosen, out, schema="dsh-audit/header-diff", version=SCHEMA_VERSION, table=view,
                inputs=selection.inputs)
    tell_filtered(left_out)
    tell_unreadable(unreadable, listed=chosen == "table")
    tell_skipped([] if chosen == "table" else skipped)
    return EXIT_CLEAN
