"""`audit golden update|check DIR`: pin the rebuilt requests of a directory of logs, and fail CI when they change.
Exit codes: 0 same, 1 changed, 2 unreadable log, missing golden file or unwritable output (see cli.py)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import click

from ..errors import DshAuditError
from ..golden import LogDiff, check, collect, golden_document, golden_path, write_golden
from ..junit import case_for_log, write_junit
from ..output import check_output
from ..readers.discover import Skipped
from ..reports.views import Terminal, terminal, wrap
from ..text import printable
from . import COLOR_OPTION, EXIT_CLEAN, EXIT_FINDINGS, EXIT_UNREADABLE, print_view, tell_skipped

DIRECTORY = click.Path(path_type=Path, exists=True, file_okay=False)


@click.group(epilog="""\b
Examples:
  audit golden update logs/                       pin the digests of every request below logs/
  audit golden update --full logs/                pin the request bodies too (per-path diffs on change)
  audit golden check --junit out.xml logs/        a CI gate: a changed, added or removed request fails
Exit codes: 0 same, 1 a request changed, 2 unreadable input, no golden file, an unwritable output or bad
usage, 3 internal error, 130 interrupted.""")
def golden() -> None:
    """Golden-log CI mode: pin every log's rebuilt request digests in DIR/dsh-audit.golden.json."""


@golden.command()
@click.argument("directory", type=DIRECTORY)
@click.option("--full", is_flag=True, help="Also pin the full request bodies, so a check names the differing "
              "message and JSON path.")
@click.option("--message-prefix", type=click.Choice(["legacy", "drop"]), default="legacy", show_default=True,
              help="How header.messagePrefix is rebuilt (see `audit verify --help`); checks reuse this choice.")
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


_DIGEST = re.compile(r"\b([0-9a-f]{12})[0-9a-f]{52}\b")


def _diff_lines(diff: LogDiff, term: Terminal) -> list[str]:
    """A log's status and path, then what changed, request by request, digests cut to their first 12 digits
    (the golden file and the JUnit report keep them whole)."""
    status = "ok" if diff.ok else diff.status if diff.status == "skipped" else diff.status.upper()
    lines = wrap(f"{status:<10} {diff.key}", term.width, "")
    colour = "green" if diff.ok else None if diff.status == "skipped" else "red"
    lines[0] = term.style(status, fg=colour, bold=colour == "red" or None) + lines[0][len(status):]
    for line in diff.lines:
        indent = "    " + " " * (len(line) - len(line.lstrip(" ")))
        lines += wrap(_DIGEST.sub(r"\1…", line.lstrip(" ")), term.width, indent)
    return lines


@golden.command(name="check")
@click.argument("directory", type=DIRECTORY)
@click.option("--junit", "junit_file", type=click.Path(path_type=Path, allow_dash=True),
              help="Also write a JUnit XML report (one test case per log) to this file (replaced atomically; "
                   "its folder is created; - for stdout).")
@COLOR_OPTION
def check_command(directory: Path, junit_file: Path | None, color: str | None) -> int:
    """Rebuild every log under DIRECTORY and compare with its golden file, with a per-step diff of what changed."""
    inputs = [directory, golden_path(directory)]
    check_output(junit_file, inputs=inputs, what="the JUnit report", create_folder=True)   # before the work
    started = time.perf_counter()
    diffs = check(directory)
    elapsed = (time.perf_counter() - started) / max(len(diffs), 1)
    changed = sum(diff.status in ("changed", "added", "removed") for diff in diffs)
    unreadable = sum(diff.status == "unreadable" for diff in diffs)
    skipped = sum(diff.status == "skipped" for diff in diffs)
    older = f", {skipped} older generation(s) skipped" if skipped else ""
    term = terminal()
    view = [line for diff in diffs for line in _diff_lines(diff, term)]
    view += [term.style(line, bold=True, fg="red" if changed or unreadable else None) for line in wrap(
        f"{len(diffs) - skipped} log(s) checked against {golden_path(directory)}: {changed} changed, {unreadable} "
        f"unreadable{older}", term.width, "")]
    print_view(term, "\n".join(view))
    if junit_file is not None:
        cases = [case_for_log(str(directory / diff.key), seconds=elapsed, details="\n".join(diff.lines),
                              error=diff.lines[0] if diff.status == "unreadable" else None,
                              skipped=diff.lines[0] if diff.status == "skipped" else None,
                              failure=None if diff.status in ("same", "unreadable", "skipped") else
                              f"{diff.status}: rebuilt requests differ from the golden file",
                              failure_type="golden-diff")
                 for diff in diffs]
        write_junit(junit_file, "dsh-audit golden check", cases, inputs=inputs)
    return EXIT_UNREADABLE if unreadable else EXIT_FINDINGS if changed else EXIT_CLEAN
