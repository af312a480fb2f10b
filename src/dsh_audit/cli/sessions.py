"""`audit sessions`: the sessions in dsh's session root, ranked as --sort says (dsh_audit.sessions), handed to
the table or the JSON sink. Exit codes: 0 listed (a log that cannot be read is a row with its error, a folder
that cannot be listed is named under the table), 2 when the root itself cannot be read."""

from __future__ import annotations

import os
from pathlib import Path

import click

from ..readers.home import HOME_ENV, require_root, session_root
from . import EXIT_CLEAN
from .options import (
    COLOR_OPTION,
    MODEL_OPTION,
    PROJECT_OPTION,
    SINCE_OPTION,
    TIMEZONE_OPTION,
    UNTIL_OPTION,
    chosen_filter,
    format_option,
    sort_option,
    this_terminal,
    top_option,
)


@click.command(epilog="""\b
Examples:
  audit sessions                       the sessions under $DSH_HOME/sessions (else ~/.dsh/sessions)
  audit sessions --top 5 --format json
  audit sessions --sort recent --top 5   the five most recently active (only they are read in full)
  audit verify --session 3f2a          then read one of them by the start of its id
Exit codes: 0 listed (an unreadable log is a row with its error, a folder that cannot be listed a line under
the table), 2 the root cannot be read, 3 internal error, 130 interrupted.""")
@click.option("--root", type=click.Path(path_type=Path), default=None,
              help=f"Session root to list (default: ${HOME_ENV}/sessions, else ~/.dsh/sessions, as dsh keeps them).")
@format_option("table", "json")
@sort_option("lost")
@top_option("--limit")
@SINCE_OPTION
@UNTIL_OPTION
@TIMEZONE_OPTION
@MODEL_OPTION
@PROJECT_OPTION
@COLOR_OPTION
def sessions(root: Path | None, fmt: str, sort: str | None, top: int | None, since: str | None, until: str | None,
             timezone: str | None, models: tuple[str, ...], projects: tuple[str, ...], color: str | None) -> int:
    """List the sessions dsh keeps, those whose cache collapses cost most first (or as --sort ranks them): id,
    last activity, generation, requests, hit ratio, cost, what collapses lost, size, cwd. --since/--until pick
    them by their last activity, --project by their cwd, --model by the model of their first request.

    Pass an id (or its start) to another command with --session."""
    from ..sessions import in_filter, list_sessions, priced, sessions_document
    from ..sinks import print_json, show

    chosen = root if root is not None else session_root(os.environ)
    require_root(chosen, other=None if root is not None else "use --root")
    picked = chosen_filter(since, until, timezone, models, projects)
    scan = list_sessions(chosen, limit=top, tally=priced, sort=sort or "lost",
                         kept=in_filter(picked) if picked else None)
    if fmt == "json":
        print_json(sessions_document(scan, chosen))
    else:
        from ..reports import sessions_view

        term = this_terminal()
        show(term, sessions_view.render(scan, chosen, term))
    return EXIT_CLEAN
