"""The `audit` command line: the group, its own options and the one error path. Each command is a module of
this package (cli/verify.py, cli/rebuild.py, ...) that parses its options, calls the library and hands the
result to a sink (dsh_audit.sinks); the options they share are declared once, in cli/options.py.

Every command returns its exit code, and every failure leaves through one error path (`_AuditGroup.main`):
0 clean, 1 findings, 2 unreadable input, an unwritable output or bad usage, 3 an internal error (one line
asking for a report; DSH_AUDIT_DEBUG=1 shows the traceback instead), 130 interrupted (Ctrl-C), 141 stdout
closed early (`audit rebuild LOG | head -1`), quietly, 143 terminated (SIGTERM). Never a traceback.

A command's module is imported when it runs, and the library inside the command, so that `audit --help` and
`--version` load click and little else (tests/test_startup.py)."""

from __future__ import annotations

import errno
import importlib
import io
import json
import os
import sys
from collections.abc import Callable
from contextlib import suppress
from typing import Any, ClassVar

import click

from .. import stopping
from ..errors import DshAuditError
from ..readers.limits import DECOMPRESSED_ENV, LINE_ENV, parse_size
from ..text import clip, display
from .options import COLOR_OPTION

EXIT_CLEAN, EXIT_FINDINGS, EXIT_UNREADABLE, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_INTERRUPTED = stopping.EXIT_INTERRUPTED   # 128 + SIGINT, as a shell reports a process Ctrl-C ended
EXIT_BROKEN_PIPE = 141      # 128 + SIGPIPE: the reader of stdout went away; nothing more is said
DEBUG_ENV = "DSH_AUDIT_DEBUG"


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
    """Every command lives in its own module of this package, imported when the command is used: `verify` and
    `rebuild` start without loading polars or the tokenizer's vocabulary, and `audit --help` lists them by the
    first sentence of their help kept here (tests/test_startup.py checks it against each command's own)."""

    lazy: ClassVar[dict[str, tuple[str, str]]] = {
        "cache-report": ("cache_report:cache_report", "Per model call of each LOG: cache reads, hit ratio, "
                         "the expected read, collapses and their logged causes, and what each call and each "
                         "collapse cost; a summary per log and overall."),
        "explain": ("explain:explain", "Where request TURN.STEP[#ATTEMPT] of LOG first differs from "
                    "what the provider could have cached before it (its predecessor's prompt and answer), the "
                    "logged event that explains it, and cache-report's verdict on it: its read, the time since "
                    "its predecessor, the cache block and what a collapse cost."),
        "header-diff": ("header_diff:header_diff", "What changed between consecutive request headers of "
                        "each LOG (file or directory): config old -> new, tools added, removed or changed, the "
                        "system prompt as a diff."),
        "report": ("report:report", "One self-contained HTML page for the LOGS (files or directories): "
                   "per session, its requests' prompt tokens split into cache read and miss, each collapse "
                   "marked with its logged cause, header changes and compactions on the same axis, the "
                   "cumulative cost, and verify's findings; for several sessions a table of them, sortable by "
                   "cost, hit ratio and the rest (over 25, ranked worst first and only the 25 worst drawn)."),
        "export": ("export:export", "Export every LOG (files or directories) into a hive-partitioned Parquet "
                   "dataset: tables logs, requests, calls, findings and header_changes, partitioned by generation "
                   "and date, with a manifest; a log already exported with the same content is skipped, a changed "
                   "one replaces its rows."),
        "golden": ("golden:golden", "Golden-log CI mode: pin every log's rebuilt request digests in "
                   "DIR/dsh-audit.golden.json."),
        "query": ("query:query", "Answer a fleet question over a DATASET written by audit export: totals, "
                  "cache waste per model, project or day, the header changes before collapses, verification "
                  "status."),
        "rebuild": ("rebuild:rebuild", "Print the exact request(s) the model saw, rebuilt from LOG (or the "
                    "--session picked)."),
        "schema": ("schema:schema", "Print the JSON Schema (draft 2020-12) of one machine output, or with no "
                   "NAME list them all."),
        "sessions": ("sessions:sessions", "List the sessions dsh keeps, those whose cache collapses cost most "
                     "first (or as --sort ranks them): id, last activity, generation, requests, hit ratio, cost, "
                     "what collapses lost, size, cwd."),
        "verify": ("verify:verify", "Rebuild every request of each LOG (file or directory) and check every "
                   "invariant."),
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.lazy)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.lazy:
            return None
        module, _, attribute = self.lazy[cmd_name][0].partition(":")
        command: click.Command = getattr(importlib.import_module(f"{__package__}.{module}"), attribute)
        stopping.check()   # a stop lost while the command's module loaded ends the run before the command starts
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their short help, laid out as click lays them out, without importing lazy ones."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [(name, click.Command(name, help=self.lazy[name][1]).get_short_help_str(limit)) for name in names]
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
  audit sessions                         dsh's sessions, those that lost most to cache collapses first
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
    """The version, the generations read and the bundled price table's date and periods, each read as plain JSON:
    --version loads no schema validator (tests/test_startup.py)."""
    from importlib import metadata, resources

    package = resources.files("dsh_audit")
    generations = json.loads(package.joinpath("schemas", "generations.json").read_text(encoding="utf-8"))
    prices = json.loads(package.joinpath("reports", "data", "deepseek-prices.json").read_text(encoding="utf-8"))
    versions = ", ".join(f"v{g['version']}" for g in generations["generations"])
    latest = str(prices.get("from", ""))[:10]
    periods = (f"{len(prices.get('earlier', [])) + 1} dated periods, the latest from {latest}, each call priced by "
               "the period of its time") if latest else "one period"
    click.echo(f"audit, version {metadata.version('dsh-audit')}\n"
               f"log generations read: {versions} (schemas/generations.json; docs/generations.md)\n"
               f"price table: DeepSeek's as of {prices['asOf']}, {periods} (docs/prices.md; --prices FILE overrides)")
    ctx.exit()


def _set_cap(variable: str, value: str | None) -> None:
    """A cap given as a flag is checked now and set as its environment variable: every reader of this run, and
    the workers of `verify -j`, take their caps from there (dsh_audit.readers.limits)."""
    if value is not None:
        parse_size(value, "--" + ("max-line-bytes" if variable == LINE_ENV else "max-decompressed-bytes"))
        os.environ[variable] = value


def _escape_what_cannot_be_shown() -> None:
    """Any output encoding: what it cannot show is escaped, not fatal (also in an error message)."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
