"""`audit query`: the fleet's questions (dsh_audit.fleet.query) over a dataset `audit export` wrote, the answer
handed to the sink asked for."""

from __future__ import annotations

from pathlib import Path

import click
from click.core import ParameterSource

from ..reports.render import FORMATS
from . import EXIT_CLEAN
from .options import (
    COLOR_OPTION,
    OUT_OPTION,
    WIDE_OPTION,
    chosen_filter,
    filter_options,
    format_option,
    this_terminal,
)

# fleet.query.QUESTIONS and WASTE_BY, spelled here so that `--help` starts without polars
QUESTIONS = ("totals", "waste", "breaks", "status")
WASTE_BY = ("model", "project", "day")
SCHEMA_VERSION = 1


@click.command("query", epilog="""\b
Examples:
  audit query fleet/                               totals, as audit cache-report --rows totals gives them
  audit query fleet/ --question waste --by project  cache waste per project (the sessions' cwd), worst first
  audit query fleet/ --question breaks             collapses by the header change before them
  audit query fleet/ --question status --json      verification per generation
  audit query fleet/ --since 7d --model deepseek-v4-pro   totals of that model's calls of the last 7 days
Exit codes: 0 answered, 2 not a dataset (or a newer dsh-audit's), unwritable --out or bad usage, 3 internal
error.""")
@click.argument("dataset", type=click.Path(path_type=Path))   # a file or no folder: one line, from the dataset
@click.option("--question", type=click.Choice(QUESTIONS), default="totals", show_default=True,
              help="totals: cache-report's; waste: hit ratio and what collapses lost per --by; breaks: collapses "
                   "by the header change last before them; status: verify's verdicts per generation.")
@click.option("--by", type=click.Choice(WASTE_BY), default="model", show_default=True,
              help="The groups of --question waste (refused with another question): model, project (cwd) or day (UTC).")
@filter_options
@format_option(*FORMATS, default=None, more="Without --format, --out's extension decides, else the table.")
@OUT_OPTION
@WIDE_OPTION
@COLOR_OPTION
def query(dataset: Path, question: str, by: str, since: str | None, until: str | None, timezone: str | None,
          models: tuple[str, ...], projects: tuple[str, ...], fmt: str | None, out: Path | None, wide: bool,
          color: str | None) -> int:
    """Answer a fleet question over a DATASET written by audit export: totals, cache waste per model,
    project or day, the header changes before collapses, verification status. --since/--until, --model and
    --project count only the calls they keep, as cache-report does (status: the logs that keep any, and every
    unreadable one)."""
    from ..fleet import query as fleet
    from ..reports.query_view import render
    from ..reports.render import check_frame_output, write_frame
    from ..sinks import output_format

    by_given = click.get_current_context().get_parameter_source("by") not in (None, ParameterSource.DEFAULT)
    if by_given and question != "waste":   # refused, not silently ignored
        raise click.UsageError(f"--by groups --question waste; --question {question} has no groups")
    counted = chosen_filter(since, until, timezone, models, projects)
    chosen = output_format(fmt, out, FORMATS)
    check_frame_output(chosen, out, [])
    answer = {"totals": lambda: fleet.totals(dataset, counted), "waste": lambda: fleet.waste(dataset, by, counted),
              "breaks": lambda: fleet.breaks(dataset, counted),
              "status": lambda: fleet.status(dataset, counted)}[question]()

    def view() -> str:
        term = this_terminal()
        return term.show(render(answer, term, wide=wide))

    write_frame(answer, chosen, out, schema=f"dsh-audit/query/{question}", version=SCHEMA_VERSION, table=view)
    return EXIT_CLEAN
