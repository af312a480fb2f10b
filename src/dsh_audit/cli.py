"""The `audit` command line: parses options, calls the library, renders. Exit codes: 0 clean, 1 findings,
2 unreadable input or bad usage."""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path
from typing import Any, ClassVar

import click

from .errors import DshAuditError
from .readers import open_logs
from .reconstruct import iter_requests
from .verify import LogReport, paused_gc, summary, verify_paths

EXIT_CLEAN, EXIT_FINDINGS, EXIT_UNREADABLE = 0, 1, 2
PREFIX_OPTION = click.option(
    "--message-prefix", type=click.Choice(["legacy", "drop"]), default="legacy", show_default=True,
    help="Older logs carry header.messagePrefix: 'legacy' prepends it as the old writers sent it; 'drop' "
         "ignores it as the current reference does.")


ALL_GENERATIONS_OPTION = click.option(
    "--all-generations", is_flag=True,
    help="In a directory, read every generation of each log (session.jsonl, session.v2.jsonl, ...), not only "
         "the newest one, which is the one dsh reads.")


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def printable(text: str) -> str:
    """Lone surrogates (legal in a JS string, so in a log) as \\uXXXX escapes: valid in JSON text and
    printable on a UTF-8 terminal."""
    return _LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def _fail(error: DshAuditError) -> None:
    click.echo(printable(f"audit: {error}"), err=True)
    sys.exit(error.exit_code)


class _LazyGroup(click.Group):
    """Subcommands that live in their own modules are imported when used: `verify` and `rebuild` start
    without loading polars or the tokenizer's vocabulary."""

    lazy: ClassVar[dict[str, str]] = {"cache-report": "report_commands:cache_report",
                                      "header-diff": "report_commands:header_diff",
                                      "golden": "golden_commands:golden"}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.lazy:
            return super().get_command(ctx, cmd_name)
        module, _, attribute = self.lazy[cmd_name].partition(":")
        command: click.Command = getattr(importlib.import_module(f"{__package__}.{module}"), attribute)
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dsh-audit")
def main() -> None:
    """Audit dsh session logs offline: every model request rebuilt from the log, every invariant checked."""


@main.command()
@click.argument("logs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--strict", is_flag=True, help="Warnings (placeholders, ignorable unknown events, torn tails) fail too.")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=0, show_default=True,
              help="Processes for a directory of logs (0: one per core). Output order does not depend on it.")
@click.option("--junit", "junit_file", type=click.Path(path_type=Path, dir_okay=False),
              help="Also write a JUnit XML report (one test case per log) to this file.")
@ALL_GENERATIONS_OPTION
@PREFIX_OPTION
def verify(logs: tuple[Path, ...], fmt: str, strict: bool, jobs: int, message_prefix: str,
           junit_file: Path | None, all_generations: bool) -> None:
    """Rebuild every request of each LOG (file or directory) and check every invariant.

    Every dsh log generation (format v0 to v4) is read; in a directory, each log's newest generation."""
    try:
        reports = list(verify_paths(logs, message_prefix=message_prefix, jobs=jobs or None,
                                    keep_requests=fmt == "json",   # the table shows counts only
                                    all_generations=all_generations))
    except DshAuditError as error:
        _fail(error)
        return
    if junit_file is not None:
        from .junit import cases_from_reports, write_junit
        write_junit(junit_file, "dsh-audit verify", cases_from_reports(reports, strict=strict))
    if fmt == "json":
        document = {"summary": summary(reports, strict), "logs": [_report_json(r, strict) for r in reports]}
        click.echo(printable(json.dumps(document, indent=2, ensure_ascii=False)))
    else:
        _render_table(reports, strict)
    if any(r.read_error for r in reports):
        sys.exit(EXIT_UNREADABLE)
    sys.exit(EXIT_FINDINGS if any(r.failed(strict) for r in reports) else EXIT_CLEAN)


def _report_json(report: LogReport, strict: bool) -> dict[str, Any]:
    return {
        "log": report.label, "generation": report.generation, "ok": not report.failed(strict),
        "skipped": report.skipped, "supersededBy": report.superseded_by, "events": report.events,
        "readError": report.read_error, "rejectedByReference": report.rejected,
        "findings": [{"code": f.code, "severity": f.severity, "line": f.line, "seq": f.seq,
                      "eventType": f.event_type, "message": f.message, "rejects": f.rejects}
                     for f in report.findings],
        "requests": [{"turn": q.turn, "step": q.step, "attempt": q.attempt, "dispatchSeq": q.dispatch_seq,
                      "sha256": q.sha256, "inherited": q.inherited, "extendsPrevious": q.extends_previous,
                      "causes": q.causes} for q in report.requests],
    }


def _render_table(reports: list[LogReport], strict: bool) -> None:
    for report in reports:
        if report.skipped:
            click.echo(f"{'skipped':<10} {report.label}  (an older generation; read {report.superseded_by})")
            continue
        status = "UNREADABLE" if report.read_error else ("FAIL" if report.failed(strict) else "ok")
        generation = f"v{report.generation}" if report.generation is not None else "v?"
        click.echo(f"{status:<10} {report.label}  ({generation}, {report.events} events, "
                   f"{report.request_count} requests)")
        if report.read_error:
            click.echo(printable(f"    {report.read_error}"))
        for finding in report.findings:
            click.echo(printable(f"    {finding.render()}"))
    totals = summary(reports, strict)
    notes = f", {totals['notes']} note(s)" if totals["notes"] else ""
    skipped = f", {totals['skipped']} older generation(s) skipped" if totals["skipped"] else ""
    click.echo(f"{totals['logs']} log(s), {totals['failed']} failed, {totals['requests']} request(s) rebuilt, "
               f"{totals['errors']} error(s), {totals['warnings']} warning(s){notes}{skipped}")


@main.command()
@click.argument("log", type=click.Path(path_type=Path))
@click.option("--step", "step_filter", metavar="TURN.STEP", help="Only the request(s) of this step.")
@click.option("--format", "fmt", type=click.Choice(["json", "jsonl", "digest"]), default="json",
              show_default=True, help="json: annotated and indented; jsonl: the exact request bytes, one per "
              "line; digest: sha256 per request.")
@PREFIX_OPTION
def rebuild(log: Path, step_filter: str | None, fmt: str, message_prefix: str) -> None:
    """Print the exact request(s) the model saw, rebuilt from LOG."""
    wanted = _parse_step(step_filter)
    try:
        with paused_gc():
            _write_requests(log, wanted, fmt, message_prefix)
    except DshAuditError as error:
        _fail(error)
    except BrokenPipeError:   # `audit rebuild … | head` is fine
        sys.stderr.close()


def _write_requests(log: Path, wanted: tuple[int, int] | None, fmt: str, message_prefix: str) -> None:
    out = sys.stdout.buffer
    for source in open_logs(log):
        for request in iter_requests(source, message_prefix=message_prefix, bodies=fmt != "digest"):
            if wanted is not None and (request.turn, request.step) != wanted:
                continue
            name = f"{request.turn}.{request.step}#{request.attempt}"
            if fmt == "digest":
                out.write(f"{name}\tseq={request.dispatch_seq}\t{request.sha256}\n".encode())
            elif fmt == "jsonl":
                out.write((request.body or b"null") + b"\n")
            else:
                annotated = {"log": source.label, "generation": source.generation.version,
                             "turn": request.turn, "step": request.step,
                             "attempt": request.attempt, "dispatchSeq": request.dispatch_seq,
                             "headerSeq": request.header_seq, "sha256": request.sha256,
                             "inherited": request.inherited, "owner": request.owner,
                             "prefix": request.prefix,
                             "placeholders": request.placeholders,
                             "request": json.loads(request.body) if request.body else None}
                out.write(printable(json.dumps(annotated, indent=2, ensure_ascii=False)).encode() + b"\n")
            out.flush()


def _parse_step(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        turn, step = text.split(".")
        return int(turn), int(step)
    except ValueError:
        raise click.BadParameter(f"expected TURN.STEP such as 1.2, got {text!r}", param_hint="--step") from None
