"""`audit golden update|check DIR`: pin the rebuilt requests of a directory of logs, and fail CI when they change.
Exit codes: 0 same, 1 changed, 2 unreadable log, missing golden file or unwritable output (see cli/__init__.py)."""

from __future__ import annotations

import time
from pathlib import Path

import click

from ..errors import DshAuditError
from ..golden import check, collect, golden_document, golden_path, write_golden
from ..junit import cases_from_diffs, write_junit
from ..output import check_output
from ..readers.discover import Skipped
from ..reports import golden_view
from ..sinks import show
from ..text import printable
from . import EXIT_CLEAN, EXIT_FINDINGS, EXIT_UNREADABLE
from .options import COLOR_OPTION, JUNIT_OPTION, format_option, prefix_option, tell_skipped, this_terminal

DIRECTORY = click.Path(path_type=Path, exists=True, file_okay=False)


@click.group(epilog="""\b
Examples:
  audit golden update logs/                       pin the digests of every request below logs/
  audit golden update --full logs/                pin the bodies too (a check shows each change's text)
  audit golden check --junit out.xml logs/        a CI gate: a changed, added or removed request fails
Exit codes: 0 same, 1 a request changed, 2 unreadable input, no golden file, an unwritable output or bad
usage, 3 internal error, 130 interrupted.""")
def golden() -> None:
    """Golden-log CI mode: pin every log's rebuilt request digests in DIR/dsh-audit.golden.json."""


@golden.command()
@click.argument("directory", type=DIRECTORY)
@click.option("--full", is_flag=True, help="Also pin the request bodies (each message stored once), so a check "
              "shows the text of what changed.")
@prefix_option("Checks reuse this choice.")
def update(directory: Path, full: bool, message_prefix: str) -> int:
    """Rebuild every log under DIRECTORY and (re)write its golden file. Nothing is written if a log is unreadable."""
    check_output(golden_path(directory), inputs=[directory], what="the golden file",   # before the work
                 follow_links=False)
    skipped: list[Skipped] = []
    entries = list(collect(directory, full=full, message_prefix=message_prefix, skipped=skipped))
    tell_skipped(skipped)
    unreadable = [entry for entry in entries if entry.error is not None]
    for entry in unreadable:
        click.echo(printable(f"audit: {entry.error}"), err=True)
    if unreadable:
        raise DshAuditError(f"{len(unreadable)} unreadable log(s); golden file not written")
    target = write_golden(directory, golden_document(entries, full=full, message_prefix=message_prefix))
    older = f", {len(skipped)} older generation(s) skipped" if skipped else ""
    click.echo(printable(f"wrote {target}: {len(entries)} log(s), {sum(len(e.requests) for e in entries)} "
                         f"request(s){older}"))
    return EXIT_CLEAN


@golden.command(name="check")
@click.argument("directory", type=DIRECTORY)
@format_option("table", "junit")
@JUNIT_OPTION
@COLOR_OPTION
def check_command(directory: Path, fmt: str, junit_file: Path | None, color: str | None) -> int:
    """Rebuild every log under DIRECTORY and compare with its golden file: the requests that changed, and (with
    a --full golden file) each change's text once, however many requests have it."""
    inputs = [directory, golden_path(directory)]
    check_output(junit_file, inputs=inputs, what="the JUnit report", create_folder=True)   # before the work
    started = time.perf_counter()
    diffs = check(directory)
    elapsed = (time.perf_counter() - started) / max(len(diffs), 1)
    changed = sum(diff.status in ("changed", "added", "removed") for diff in diffs)
    unreadable = sum(diff.status == "unreadable" for diff in diffs)
    if fmt == "table":
        term = this_terminal()
        show(term, golden_view.render(diffs, str(golden_path(directory)), term))
    cases = cases_from_diffs(directory, diffs, seconds=elapsed)
    for target in (junit_file, Path("-") if fmt == "junit" else None):
        if target is not None:
            write_junit(target, "dsh-audit golden check", cases, inputs=inputs)
    return EXIT_UNREADABLE if unreadable else EXIT_FINDINGS if changed else EXIT_CLEAN
