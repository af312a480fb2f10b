"""`audit explain LOG TURN.STEP[#ATTEMPT]`: cache-report's verdict on a request, the first divergence between it
and what the cache could hold before it, and the logged event that explains it. Exit codes: 1 where that verdict
is an unexplained collapse (reports.verdict.unexplained, cache-report --fail-on-unexplained's test), else 0; 2
unreadable input, bad usage or no such request."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import DshAuditError
from . import EXIT_CLEAN, EXIT_FINDINGS
from .options import (
    COLOR_OPTION,
    LOG_ARGUMENT,
    SESSION_OPTION,
    format_option,
    one_log,
    parse_step,
    remote_options,
    this_terminal,
)


@click.command("explain", epilog="""\b
Examples:
  audit explain session.v3.jsonl 1.2#2    why request 1.2#2 did (not) extend what was cached before it
  audit explain --session 3f2a 4.1        the first attempt of turn 4, step 1
  audit explain s3://logs/a/session.v3.jsonl 2.1   a log in object storage, as cache-report names it
Exit codes: 0 no unexplained collapse, 1 a collapse cache-report calls unexplained (as
cache-report --fail-on-unexplained fails on it), 2 unreadable input, bad usage or no such request,
3 internal error, 130 interrupted.""")
@LOG_ARGUMENT
@click.argument("request", required=False, metavar="TURN.STEP[#ATTEMPT]")
@SESSION_OPTION
@format_option("table", "json")
@remote_options
@COLOR_OPTION
def explain(log: Path | str | None, request: str | None, session: str | None, fmt: str,
            storage_options: dict[str, str | bool], color: str | None) -> int:
    """Where request TURN.STEP[#ATTEMPT] of LOG first differs from what the provider could have cached before it
    (its predecessor's prompt and answer), the logged event that explains it, and cache-report's verdict on it:
    its read, the time since its predecessor, the cache block and what a collapse cost."""
    if session is not None and request is None and log is not None:   # `--session ID 1.2`: LOG is the request
        log, request = None, str(log)
    wanted = parse_step(request, "TURN.STEP[#ATTEMPT]")
    if wanted is None:
        raise DshAuditError("give the request to explain, TURN.STEP or TURN.STEP#ATTEMPT (as cache-report "
                            "and rebuild --format digest name it)")
    # the tokenizer and polars are imported here, not above: `audit explain --help` starts without them
    from ..explain import explain_request, explanation_document
    from ..readers import open_logs
    from ..sinks import print_json, show

    with one_log(log, session, storage_options) as path:
        sources = list(open_logs(path))
        if len(sources) != 1:   # a store of several sessions (or none): which one is not for us to guess
            raise DshAuditError(f"holds {len(sources)} sessions; name one as {path}#SESSION_ID", path=str(path))
        [source] = sources
        explanation = explain_request(source, *wanted)
    if fmt == "json":
        print_json(explanation_document(source.label, explanation))
    else:
        from ..reports.explain_view import render

        term = this_terminal()
        show(term, "\n".join(render(explanation, source.label, term)))
    return EXIT_FINDINGS if explanation.unexplained else EXIT_CLEAN
