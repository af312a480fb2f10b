"""The `audit` command line: parses options, calls the library, renders.

Every command returns its exit code, and every failure leaves through one error path (`_AuditGroup.main`):
0 clean, 1 findings, 2 unreadable input, an unwritable output or bad usage, 3 an internal error (one line
asking for a report; DSH_AUDIT_DEBUG=1 shows the traceback instead), 130 interrupted (Ctrl-C), 141 stdout
closed early (`audit rebuild LOG | head -1`), quietly, 143 terminated (SIGTERM). Never a traceback.

The library is imported inside the commands that use it, so that `audit --help` and `--version` load click and
little else (tests/test_startup.py)."""

from __future__ import annotations

import errno
import importlib
import io
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, ClassVar

import click

from .. import stopping
from ..errors import DshAuditError
from ..readers.limits import DECOMPRESSED_ENV, LINE_ENV, parse_size
from ..reports.views import COLOR_CHOICES, Terminal, terminal
from ..text import clip, display, printable

if TYPE_CHECKING:
    from ..digest_spool import DigestSpool
    from ..fold import RebuiltRequest
    from ..readers.discover import Skipped
    from ..readers.home import Selection
    from ..records import LogSource, RequestDigest
    from ..verify import LogReport

EXIT_CLEAN, EXIT_FINDINGS, EXIT_UNREADABLE, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_INTERRUPTED = stopping.EXIT_INTERRUPTED   # 128 + SIGINT, as a shell reports a process Ctrl-C ended
EXIT_BROKEN_PIPE = 141      # 128 + SIGPIPE: the reader of stdout went away; nothing more is said
DEBUG_ENV = "DSH_AUDIT_DEBUG"
PREFIX_OPTION = click.option(
    "--message-prefix", type=click.Choice(["legacy", "drop"]), default="legacy", show_default=True,
    help="Older logs carry header.messagePrefix: 'legacy' prepends it as the old writers sent it; 'drop' "
         "ignores it as the current reference does.")


COLOR_OPTION = click.option(
    "--color", type=click.Choice(COLOR_CHOICES), default=None,
    help="Colour in the human views: auto (on a terminal; never with NO_COLOR, always with FORCE_COLOR), "
         "always or never [default: auto].")


ALL_GENERATIONS_OPTION = click.option(
    "--all-generations", is_flag=True,
    help="In a directory, read every generation of each log (session.jsonl, session.v2.jsonl, ...), not only "
         "the newest one, which is the one dsh reads.")


# -- the one error path ----------------------------------------------------------------------------------

def _say(line: str) -> None:
    """One line on stderr, whatever it holds (control characters and line breaks are shown escaped)."""
    text = display(line)
    with suppress(OSError, ValueError):   # stderr itself is gone: the exit code still tells
        click.echo(text, err=True)


def _silence_stdout() -> None:
    """After stdout failed (a closed pipe, a full disk), point it at /dev/null, so the interpreter's flush at
    exit neither raises again nor prints "Exception ignored"."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):   # not a real stream (click's test runner)
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except OSError:
        pass


def _stdout_failed() -> bool:
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        return True
    return False


_WRITE_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})   # only ever from writing


def _debugging() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def exit_code_for(error: BaseException) -> int:
    """The exit code for whatever ended a command, after saying why in one line on stderr."""
    if isinstance(error, SystemExit):
        if error.code is None or isinstance(error.code, int):
            return error.code or EXIT_CLEAN
        _say(f"audit: {error.code}")
        return EXIT_FINDINGS
    if isinstance(error, click.exceptions.Exit):
        return error.exit_code
    if isinstance(error, stopping.Stopped | KeyboardInterrupt | click.Abort):   # Ctrl-C or SIGTERM
        _say(stopping.told(error))
        return stopping.exit_code(error)
    if isinstance(error, click.ClickException):   # bad usage: click's own message and hint
        error.show()
        return EXIT_UNREADABLE
    if isinstance(error, DshAuditError):
        _say(f"audit: {error}")
        return error.exit_code
    if isinstance(error, BrokenPipeError) or (isinstance(error, OSError) and error.errno == errno.EPIPE):
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    if isinstance(error, OSError):   # the environment, not dsh-audit: a file it cannot open, a full disk
        if error.filename is not None:
            name = os.fsdecode(error.filename) if isinstance(error.filename, bytes) else str(error.filename)
            _say(f"audit: {name}: {error.strerror or error}")
        elif error.errno in _WRITE_ERRORS or _stdout_failed():   # files go through dsh_audit.output: stdout
            _silence_stdout()
            _say(f"audit: cannot write to stdout: {error.strerror or error}")
        else:
            _say(f"audit: input/output error: {error.strerror or error}")
        return EXIT_UNREADABLE
    message = " ".join(str(error).split())
    message = clip(message, 300)
    _say(f"audit: internal error: {type(error).__name__}: {message or '(no message)'} — please report it with "
         "the command line")
    return EXIT_INTERNAL


def run_guarded(call: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """Run `call` and turn how it ended into an exit code: its returned code, or the one for what it raised
    (said in one line). Stdout is flushed inside, so a broken pipe or a full disk is reported here too."""
    try:
        with stopping.handled():
            result = call(*args, **kwargs)
            sys.stdout.flush()
    except BaseException as error:
        if _debugging() and not isinstance(error, DshAuditError | click.ClickException | click.exceptions.Exit
                                           | SystemExit | stopping.Stopped | KeyboardInterrupt | click.Abort
                                           | BrokenPipeError):
            raise
        return exit_code_for(error)
    return result if isinstance(result, int) and not isinstance(result, bool) else EXIT_CLEAN


class _LazyGroup(click.Group):
    """Subcommands that live in their own modules are imported when used: `verify` and `rebuild` start
    without loading polars or the tokenizer's vocabulary, and `audit --help` lists them by the first sentence
    of their help kept here (tests/test_startup.py checks it against each command's own)."""

    lazy: ClassVar[dict[str, tuple[str, str]]] = {
        "cache-report": ("cache_report:cache_report", "Per model call of each LOG: cache reads, hit ratio, "
                         "the expected read, collapses and their logged causes, and what each call and each "
                         "collapse cost; a summary per log and overall."),
        "explain": ("explain:explain", "Where request TURN.STEP[#ATTEMPT] of LOG first differs from "
                    "what the provider could have cached before it (its predecessor's prompt and answer), and "
                    "the logged event that explains it, or \"unexplained\"."),
        "header-diff": ("cache_report:header_diff", "What changed between consecutive request headers of "
                        "each LOG (file or directory): config old -> new, tools added, removed or changed, the "
                        "system prompt as a diff."),
        "report": ("report:report", "One self-contained HTML page for the LOGS (files or directories): "
                   "per session, its requests' prompt tokens split into cache read and miss, each collapse "
                   "marked with its logged cause, header changes and compactions on the same axis, the "
                   "cumulative cost, and verify's findings; for several sessions a table of them, sortable by "
                   "cost, hit ratio and the rest (over 25, ranked worst first and only the 25 worst drawn)."),
        "golden": ("golden:golden", "Golden-log CI mode: pin every log's rebuilt request digests in "
                   "DIR/dsh-audit.golden.json."),
        "sessions": ("sessions:sessions", "List the sessions dsh keeps, newest first: id, last "
                     "activity, generation, requests, cost, size, cwd."),
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.lazy:
            return super().get_command(ctx, cmd_name)
        module, _, attribute = self.lazy[cmd_name][0].partition(":")
        command: click.Command = getattr(importlib.import_module(f"{__package__}.{module}"), attribute)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their short help, laid out as click lays them out, without importing lazy ones."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        listed = [click.Command(name, help=self.lazy[name][1]) if name in self.lazy else self.commands[name]
                  for name in names]
        rows = [(name, command.get_short_help_str(limit)) for name, command in zip(names, listed, strict=True)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


class _AuditGroup(_LazyGroup):
    """The `audit` group: every command's outcome (a returned exit code, an error, Ctrl-C, a closed pipe,
    an unexpected exception) becomes its exit code through `run_guarded`, here and nowhere else."""

    def invoke(self, ctx: click.Context) -> Any:
        return run_guarded(super().invoke, ctx)

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        _escape_what_cannot_be_shown()
        code = run_guarded(super().main, args, prog_name, complete_var, standalone_mode=False, **extra)
        if not standalone_mode:
            return code
        sys.exit(code)


@click.group(cls=_AuditGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog="""\b
Examples:
  audit sessions                         dsh's sessions, newest first
  audit verify                           every session, every request rebuilt, every invariant checked
  audit cache-report --session 3f2a      where that session lost the prefix cache, why, and the cost
  audit explain LOG 1.2#2                why request 1.2#2 did not extend what was cached
Exit codes: 0 clean, 1 findings, 2 unreadable input, unwritable output or bad usage, 3 internal error,
130 interrupted (Ctrl-C), 143 terminated (SIGTERM), 141 stdout closed early (each command's --help says more).""")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=lambda ctx, _param, value: _print_version(ctx) if value else None,
              help="Show the version, the log generations read and the price table's date, and exit.")
@COLOR_OPTION
@click.option("--max-line-bytes", metavar="SIZE", callback=lambda _ctx, _param, value: _set_cap(LINE_ENV, value),
              help=f"Longest line (one event) read, e.g. 512M [default: 256M; env {LINE_ENV}].")
@click.option("--max-decompressed-bytes", metavar="SIZE",
              callback=lambda _ctx, _param, value: _set_cap(DECOMPRESSED_ENV, value),
              help=f"Most plaintext one zstd log may expand to, e.g. 8G [default: 4G; env {DECOMPRESSED_ENV}].")
def main(max_line_bytes: str | None, max_decompressed_bytes: str | None, color: str | None) -> None:
    """Audit dsh session logs offline: every model request rebuilt from the log, every invariant checked.

    Reads every dsh log generation (format v0 to v4); with no path, dsh's own session root."""


def _print_version(ctx: click.Context) -> None:
    """The version, the generations read and the bundled price table's date, each read as plain JSON: --version
    loads no schema validator (tests/test_startup.py)."""
    from importlib import metadata, resources

    package = resources.files("dsh_audit")
    generations = json.loads(package.joinpath("schemas", "generations.json").read_text(encoding="utf-8"))
    prices = json.loads(package.joinpath("reports", "data", "deepseek-prices.json").read_text(encoding="utf-8"))
    versions = ", ".join(f"v{g['version']}" for g in generations["generations"])
    click.echo(f"audit, version {metadata.version('dsh-audit')}\n"
               f"log generations read: {versions} (schemas/generations.json; docs/generations.md)\n"
               f"price table: DeepSeek's as of {prices['asOf']} (docs/prices.md; --prices FILE overrides)")
    ctx.exit()


def _set_cap(variable: str, value: str | None) -> None:
    """A cap given as a flag is checked now and set as its environment variable: every reader of this run, and
    the workers of `verify -j`, take their caps from there (dsh_audit.readers.limits)."""
    if value is not None:
        parse_size(value, "--" + ("max-line-bytes" if variable == LINE_ENV else "max-decompressed-bytes"))
        os.environ[variable] = value


def print_view(term: Terminal, text: str) -> None:
    """A human view on stdout, made safe to print (`Terminal.show`). Written to sys.stdout itself, which `audit`
    set to escape what its encoding cannot show (click.echo would swap in a UTF-8 writer, or strip colour)."""
    sys.stdout.write(term.show(text if text.endswith("\n") else text + "\n"))


def _escape_what_cannot_be_shown() -> None:
    """Any output encoding: what it cannot show is escaped, not fatal (also in an error message)."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


LOGS_ARGUMENT = click.argument("logs", nargs=-1, type=click.Path(path_type=Path))
ALLOW_EVENT_OPTION = click.option(
    "--allow-event", "allow_events", multiple=True, metavar="PATTERN",
    help="An ignorable event type this version does not know, but you do (a glob on the type, e.g. 'acme/*'; "
         "repeatable; also $DSH_AUDIT_ALLOW_EVENTS, space-separated): listed as a note, never a warning, so "
         "--strict accepts it.")
SESSION_OPTION = click.option(
    "--session", metavar="ID", help="The session whose id (or directory name) starts with ID, searched below the "
    "LOGS given, else below dsh's session root ($DSH_HOME/sessions, else ~/.dsh/sessions).")


def chosen_log(log: Path | None, session: str | None) -> Path:
    """The one LOG a command reads, or the --session picked: then the older generations of its log, which it
    skips, are named on stderr, as a walk of the log's folder names them."""
    if log is None and session is None:
        raise DshAuditError("give a LOG, or --session ID to pick one from dsh's session root")
    chosen = chosen_paths(() if log is None else (log,), session)
    [path] = chosen.paths
    tell_skipped(chosen.skipped)
    return path


def chosen_paths(logs: tuple[Path, ...], session: str | None) -> Selection:
    """What a command reads: the LOGS given, the --session picked, or with neither dsh's session root."""
    from ..readers.home import default_paths

    return default_paths(logs, session)


def tell_skipped(skipped: Sequence[Skipped]) -> None:
    """On stderr, a line per older generation left out, where the command's own output cannot list them."""
    for log in skipped:
        click.echo(printable(f"audit: {log.reason}"), err=True)


@main.command(epilog="""\b
Examples:
  audit verify                          every session in dsh's session root
  audit verify --session 3f2a           the one session whose id starts with 3f2a
  audit verify --strict --junit out.xml logs/     a CI gate: warnings fail too, a JUnit report
  audit verify --strict --allow-event 'acme/*' logs/   the product's own ignorable events accepted
Exit codes: 0 clean, 1 findings, 2 unreadable input, unwritable --junit or bad usage, 3 internal error,
130 interrupted.""")
@LOGS_ARGUMENT
@SESSION_OPTION
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--strict", is_flag=True, help="Warnings (placeholders, ignorable unknown events, torn tails) fail too.")
@ALLOW_EVENT_OPTION
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=0, show_default=True,
              help="Processes for a directory of logs (0: one per core). Output order does not depend on it.")
@click.option("--junit", "junit_file", type=click.Path(path_type=Path, allow_dash=True),
              help="Also write a JUnit XML report (one test case per log) to this file (replaced atomically; "
                   "its folder is created; - for stdout).")
@ALL_GENERATIONS_OPTION
@PREFIX_OPTION
@COLOR_OPTION
def verify(logs: tuple[Path, ...], session: str | None, fmt: str, strict: bool, allow_events: tuple[str, ...],
           jobs: int, message_prefix: str, junit_file: Path | None, all_generations: bool, color: str | None
           ) -> int:
    """Rebuild every request of each LOG (file or directory) and check every invariant.

    Every dsh log generation (format v0 to v4) is read; in a directory, each log's newest generation. With no
    LOG, the sessions in dsh's session root."""
    from ..findings import allowed_events
    from ..output import check_output
    from ..verify import verify_paths
    from .progress_bar import byte_progress

    allowed = allowed_events(allow_events)
    chosen = chosen_paths(logs, session)
    paths = chosen.paths
    check_output(junit_file, inputs=chosen.inputs, what="the JUnit report", create_folder=True)   # before the work
    single = jobs == 1 or (len(paths) == 1 and paths[0].is_file())   # read in this process: a bar by bytes
    reports: list[LogReport] = []
    with byte_progress(paths, "verify") if single else nullcontext():
        found = verify_paths(paths, message_prefix=message_prefix, jobs=jobs or None,
                             keep_requests=fmt == "json",   # the table shows counts only
                             all_generations=all_generations, superseded=chosen.superseded,
                             allow_events=allowed)
        if fmt == "json":
            _stream_json(found, reports, strict)
        else:
            reports.extend(found)
    if fmt != "json":
        from ..reports import verify_view

        term = terminal()
        print_view(term, verify_view.render(reports, paths, term, strict=strict))
    if junit_file is not None:
        from ..junit import cases_from_reports, write_junit
        write_junit(junit_file, "dsh-audit verify", cases_from_reports(reports, strict=strict),
                    inputs=chosen.inputs)
    if any(r.read_error for r in reports):
        return EXIT_UNREADABLE
    return EXIT_FINDINGS if any(r.failed(strict) for r in reports) else EXIT_CLEAN


def _stream_json(found: Iterable[LogReport], kept: list[LogReport], strict: bool) -> None:
    """One JSON document, {"logs": [...], "summary": {...}}, written a log at a time and its requests one at a
    time from its spool: memory holds one request's digest, not a log's, let alone every log's."""
    from ..digest_spool import DigestSpool
    from ..verify import summary

    click.echo('{\n  "logs": [')
    for index, report in enumerate(found):
        text = json.dumps(_report_json(report, strict), indent=2, ensure_ascii=False).replace("\n", "\n    ")
        head = text.removesuffix(_NO_REQUESTS)   # "requests" is the last key: its items follow one by one
        assert head != text
        click.echo(("    " if index == 0 else ",\n    ") + printable(head), nl=False)
        _stream_requests(report.requests)
        report.requests = DigestSpool()   # written; the summary and the exit code need only counts and findings
        kept.append(report)
    totals = json.dumps(summary(kept, strict), indent=2).replace("\n", "\n  ")
    click.echo(("\n  ],\n" if kept else "  ],\n") + f'  "summary": {totals}\n}}')


_NO_REQUESTS = '[]\n    }'   # how an empty "requests" array ends a log's object in _stream_json's layout
_WRITE_BYTES = 65536


def _stream_requests(requests: DigestSpool) -> None:
    """A log's "requests" array and the end of its object, laid out as json.dumps(indent=2) would inside the
    document, in writes of about _WRITE_BYTES."""
    pending: list[str] = []
    size = 0
    for number, q in enumerate(requests):
        item = {"turn": q.turn, "step": q.step, "attempt": q.attempt, "dispatchSeq": q.dispatch_seq,
                "sha256": q.sha256, "inherited": q.inherited, "extendsPrevious": q.extends_previous,
                "causes": q.causes}
        text = ("[\n        " if number == 0 else ",\n        ") + json.dumps(
            item, indent=2, ensure_ascii=False).replace("\n", "\n        ")
        pending.append(text)
        size += len(text)
        if size >= _WRITE_BYTES:
            click.echo(printable("".join(pending)), nl=False)
            pending, size = [], 0
    pending.append("\n      ]\n    }" if requests else _NO_REQUESTS)
    click.echo(printable("".join(pending)), nl=False)


def _report_json(report: LogReport, strict: bool) -> dict[str, Any]:
    """A log's object in the document, but for its requests (_stream_requests writes them)."""
    from ..findings import failing_rule

    return {
        "log": report.label, "generation": report.generation, "ok": not report.failed(strict),
        "failedBy": failing_rule(report.findings, report.unlisted, strict) or None,
        "skipped": report.skipped, "supersededBy": report.superseded_by, "ignored": report.ignored,
        "events": report.events,
        "readError": report.read_error, "rejectedByReference": report.rejected,
        "unlistedFindings": report.unlisted,
        "findings": [{"code": f.code, "severity": f.severity, "line": f.line, "seq": f.seq,
                      "eventType": f.event_type, "message": f.message, "rejects": f.rejects}
                     for f in report.findings],
        "requests": [],
    }


@main.command(epilog="""\b
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
@click.option("--format", "fmt", type=click.Choice(["json", "jsonl", "digest"]), default="json",
              show_default=True, help="json: one document, each request annotated and indented; jsonl: the "
              "exact request bytes, one per line; digest: sha256 per request.")
@PREFIX_OPTION
def rebuild(log: Path | None, session: str | None, step_filter: str | None, fmt: str, message_prefix: str) -> int:
    """Print the exact request(s) the model saw, rebuilt from LOG (or the --session picked)."""
    from ..verify import paused_gc

    wanted = parse_step(step_filter, "--step")
    path = chosen_log(log, session)
    # With --step, the few requests picked are held until one is found: a step that matches nothing is an
    # error with nothing on stdout, not an empty document before it.
    held = io.BytesIO() if wanted is not None else None
    with paused_gc():
        written = _write_requests(path, wanted, fmt, message_prefix, held if held is not None else sys.stdout.buffer)
    if wanted is not None and not written:
        raise DshAuditError(f"no request {step_filter} in this log (audit rebuild --format digest lists them)",
                            path=str(path))
    if held is not None:
        sys.stdout.buffer.write(held.getvalue())
    return EXIT_CLEAN


Step = tuple[int, int, int | None]


def _write_requests(log: Path, wanted: Step | None, fmt: str, message_prefix: str, out: BinaryIO) -> int:
    """Write the requests (those of `wanted` only, when given) to `out`; how many were written. JSON is one document,
    streamed: its requests are written as they are rebuilt."""
    from ..fold import RebuiltRequest
    from ..readers import open_logs

    written = 0
    for source in open_logs(log):
        if fmt == "json":
            head = {"schema": "dsh-audit/rebuild", "version": 1, "log": source.label,
                    "generation": source.generation.version}
            out.write(printable(json.dumps(head, ensure_ascii=False))[:-1].encode() + b', "requests": [')
        for request in _rebuilt(source, message_prefix, fmt):
            if wanted is not None and ((request.turn, request.step) != wanted[:2]
                                       or wanted[2] not in (None, request.attempt)):
                continue
            name = f"{request.turn}.{request.step}#{request.attempt}"
            if fmt == "digest":
                out.write(f"{name}\tseq={request.dispatch_seq}\t{request.sha256}\n".encode())
            elif not isinstance(request, RebuiltRequest):   # the fast path answers digests only
                raise AssertionError("a fast-path request has no body")
            elif fmt == "jsonl":
                out.write((request.body or b"null") + b"\n")
            else:
                annotated = {"name": name, "turn": request.turn, "step": request.step,
                             "attempt": request.attempt, "dispatchSeq": request.dispatch_seq,
                             "headerSeq": request.header_seq, "sha256": request.sha256,
                             "inherited": request.inherited, "owner": request.owner,
                             "prefix": request.prefix, "placeholders": request.placeholders,
                             "request": json.loads(request.body) if request.body else None}
                text = printable(json.dumps(annotated, indent=2, ensure_ascii=False)).replace("\n", "\n  ")
                out.write((",\n  " if written else "\n  ").encode() + text.encode())
            written += 1
            out.flush()
        if fmt == "json":
            out.write(b"\n]}\n")
    return written


def _rebuilt(source: LogSource, message_prefix: str, fmt: str) -> Iterable[RebuiltRequest | RequestDigest]:
    """The requests of one log. Digests only: those of verify's fast path when it accepts the log (the same
    sha256s as the fold's, tests/test_fastpath.py), else the fold's."""
    from .. import fastpath
    from ..reconstruct import iter_requests

    if fmt == "digest":
        decided = fastpath.fast_verify(source, message_prefix=message_prefix)
        if decided is not None:
            return decided.requests
    return iter_requests(source, message_prefix=message_prefix, bodies=fmt != "digest")


def parse_step(text: str | None, option: str) -> Step | None:
    """TURN.STEP or TURN.STEP#ATTEMPT, as the digest and the reports name a request."""
    if text is None:
        return None
    try:
        step, _, attempt = text.partition("#")
        turn, number = step.split(".")
        return int(turn), int(number), int(attempt) if attempt else None
    except ValueError:
        raise click.BadParameter(f"expected TURN.STEP or TURN.STEP#ATTEMPT such as 1.2 or 1.2#2, got {text!r}",
                                 param_hint=option) from None
