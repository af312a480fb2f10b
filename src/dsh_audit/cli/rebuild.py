"""`audit rebuild`: options in, the library writes the rebuilt requests of one log to stdout in the format asked."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import click

from ..errors import DshAuditError
from . import EXIT_CLEAN
from .options import SESSION_OPTION, chosen_log, format_option, parse_step, prefix_option


@click.command(epilog="""\b
Examples:
  audit rebuild session.v3.jsonl --step 1.2#2     one attempt, annotated (one JSON document)
  audit rebuild --session 3f2a --format jsonl     the exact bytes of every request, one per line
  audit rebuild LOG --format digest               turn.step#attempt, dispatch seq, sha256
Exit codes: 0 done, 1 a log dsh would refuse, 2 unreadable input, bad usage or no such step, 3 internal
error, 130 interrupted, 141 stdout closed early (| head).""")
@click.argument("log", required=False, type=click.Path(path_type=Path))
@SESSION_OPTION
@click.option("--step", "step_filter", metavar="TURN.STEP[#ATTEMPT]",
              help="Only the request(s) of this step, or this one attempt (the form --format digest prints).")
@format_option("json", "jsonl", "digest", default="json",
               more="json: each request annotated and indented; jsonl: the exact request bytes.")
@prefix_option()
def rebuild(log: Path | None, session: str | None, step_filter: str | None, fmt: str, message_prefix: str) -> int:
    """Print the exact request(s) the model saw, rebuilt from LOG (or the --session picked)."""
    from ..reports.rebuild_output import write_requests
    from ..verify import paused_gc

    wanted = parse_step(step_filter, "--step")
    path = chosen_log(log, session)
    # With --step, the few requests picked are held until one is found: a step that matches nothing is an
    # error with nothing on stdout, not an empty document before it.
    held = io.BytesIO() if wanted is not None else None
    with paused_gc():
        written = write_requests(path, wanted, fmt, message_prefix, held if held is not None else sys.stdout.buffer)
    if wanted is not None and not written:
        raise DshAuditError(f"no request {step_filter} in this log (audit rebuild --format digest lists them)",
                            path=str(path))
    if held is not None:
        sys.stdout.buffer.write(held.getvalue())
    return EXIT_CLEAN
