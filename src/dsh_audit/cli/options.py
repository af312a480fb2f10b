"""What the commands share: each option declared once, and what turns the options given into what a command
reads (`chosen_paths`, `chosen_log`, `parse_step`) and says on stderr beside its output."""

from __future__ import annotations

import functools
import os
import shlex
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click
from click.core import ParameterSource

from ..errors import DshAuditError
from ..reports.views import COLOR_CHOICES, Terminal, terminal
from ..sinks import described
from ..text import printable

if TYPE_CHECKING:
    from ..engines import EngineChoice
    from ..log_filter import LogFilter
    from ..readers.discover import Selection, Skipped, Unreadable
    from ..readers.objects import RemoteSource
    from ..reports.filters import CallFilter

F = TypeVar("F", bound=Callable[..., Any])



class _Source(click.ParamType[Path | str]):
    """A SRC: a local path (a Path), or an object-storage URL or (`lists`) an `@LIST` kept as typed
    (readers.sources reads them; a Path would fold a URL's `//`)."""

    name = "path"

    def __init__(self, *, lists: bool = True) -> None:
        self.lists = lists

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path | str:
        if not isinstance(value, str):
            return cast(Path, value)
        from ..readers.objects import is_url
        from ..readers.sources import LIST_PREFIX

        listed = self.lists and value.startswith(LIST_PREFIX)
        return value if is_url(value) or listed else Path(value)


LOGS_ARGUMENT = click.argument("logs", nargs=-1, type=_Source())
LOG_ARGUMENT = click.argument("log", required=False, type=_Source(lists=False))   # one log: a path or a URL


def _storage_option(_context: click.Context, _param: click.Parameter, given: tuple[str, ...]
                    ) -> dict[str, str | bool]:
    options: dict[str, str | bool] = {}
    for item in given:
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            # not echoed: what was typed may hold a secret
            raise click.BadParameter("expected KEY=VALUE, such as endpoint_url=http://127.0.0.1:9000")
        options[key.strip()] = {"true": True, "false": False}.get(value.lower(), value)
    return options


def _spool_env(variable: str) -> Callable[[click.Context, click.Parameter, str | None], None]:
    """A spool setting given as a flag, set as its environment variable (readers.spool), which `-j` workers
    inherit; a size is checked now."""

    def set_it(_context: click.Context, param: click.Parameter, value: str | None) -> None:
        if value is not None:
            if param.name == "spool_max":   # a bad size: one line naming the option (a DshAuditError), exit 2
                from ..readers.limits import parse_size

                parse_size(value, "--spool-max")
            os.environ[variable] = value

    return set_it


def remote_options(function: F) -> F:
    """--storage-option, --spool-dir, --spool-max: how a command reads object-storage URLs (docs/fleet.md)."""
    for option in (
        click.option("--spool-max", metavar="SIZE", expose_value=False, callback=_spool_env("DSH_AUDIT_SPOOL_MAX"),
                     help="Largest remote log copied to the spool, e.g. 8G; a larger one is a log that could not "
                          "be read [default: 4G; env DSH_AUDIT_SPOOL_MAX]."),
        click.option("--spool-dir", metavar="DIR", expose_value=False, callback=_spool_env("DSH_AUDIT_SPOOL_DIR"),
                     help="Where remote logs are copied while read, one at a time per process, each deleted after "
                          "[default: the system's temporary folder; env DSH_AUDIT_SPOOL_DIR]."),
        click.option("--storage-option", "storage_options", multiple=True, metavar="KEY=VALUE",
                     callback=_storage_option,
                     help="An fsspec storage option for the URLs given, e.g. endpoint_url=http://127.0.0.1:9000 or "
                          "anon=true (repeatable; true/false are booleans). Credentials come from the usual "
                          "environment (AWS_* variables, ~/.aws)."),
    ):
        function = option(function)
    return function
SESSION_OPTION = click.option(
    "--session", metavar="ID", help="The session whose id (or directory name) starts with ID, searched below the "
    "LOGS given, else below dsh's session root ($DSH_HOME/sessions, else ~/.dsh/sessions).")
ALL_GENERATIONS_OPTION = click.option(
    "--all-generations", is_flag=True,
    help="In a directory, read every generation of each log (session.jsonl, session.v2.jsonl, ...), not only "
         "the newest one, which is the one dsh reads.")
ALLOW_EVENT_OPTION = click.option(
    "--allow-event", "allow_events", multiple=True, metavar="PATTERN",
    help="An ignorable event type this version does not know, but you do (a glob on the type, e.g. 'acme/*'; "
         "repeatable; also $DSH_AUDIT_ALLOW_EVENTS, space-separated): listed as a note, never a warning, so "
         "verify --strict accepts it.")


def _codes(_context: click.Context, _param: click.Parameter, codes: tuple[str, ...]) -> tuple[str, ...]:
    from ..findings import ignored_code_problem

    for code in codes:
        problem = ignored_code_problem(code)
        if problem is not None:
            raise click.BadParameter(problem)
    return codes


IGNORE_OPTION = click.option(
    "--ignore", "ignore_codes", multiple=True, metavar="CODE", callback=_codes,
    help="A finding code to accept (repeatable; also the list `ignore` in ./dsh-audit.toml): its findings are "
         "listed as notes, never failing a log, --strict or not.")
COLOR_OPTION = click.option(
    "--color", type=click.Choice(COLOR_CHOICES), default=None,
    help="Colour in the human views: auto (on a terminal; never with NO_COLOR, always with FORCE_COLOR), "
         "always or never [default: auto].")
OUT_OPTION = click.option("--out", type=click.Path(path_type=Path, allow_dash=True),
                          help="Write here, not stdout (replaced atomically; never an input; - is stdout).")
WIDE_OPTION = click.option("--wide", is_flag=True, help="The table with every column, whatever the terminal width.")
COLLAPSES_ONLY_OPTION = click.option(
    "--collapses-only", is_flag=True,
    help="Only the sessions with a cache collapse, and of their calls only the collapses.")
# reports.ranking.SORT_KEYS, spelled here so that `--help` starts without polars
SORT_KEYS = ("lost", "cost", "hit", "requests", "recent", "path")


def sort_option(default: str) -> Callable[[F], F]:
    """--sort: what the sessions are ranked by; `default` is what the command's own view opens with."""
    return click.option(
        "--sort", type=click.Choice(SORT_KEYS), default=None,
        help="Rank the sessions by what their cache collapses lost, their cost, their hit ratio (worst first), "
             f"their requests, their last activity, or keep them in path order [default: {default}].")


def top_option(*more_names: str) -> Callable[[F], F]:
    """--top N (and any older name of it): only the first N sessions of the ranking."""
    return click.option("--top", *more_names, "top", type=click.IntRange(min=1), default=None, metavar="N",
                        help="Only the first N sessions of the ranking.")


SINCE_OPTION = click.option(
    "--since", metavar="WHEN",
    help="Only what was logged from WHEN: a date (2026-12-01), a date and time (2026-12-01T09:30), or a span "
         "back from now (7d, 24h, 2w); in UTC unless --timezone says otherwise. Reports count the calls logged "
         "from then (a call without a logged time is left out); verify and header-diff read the logs started from "
         "then (a log that logs no start is read).")
UNTIL_OPTION = click.option(
    "--until", metavar="WHEN", help="Only what was logged before WHEN (a date counts that whole day); as --since.")
TIMEZONE_OPTION = click.option(
    "--timezone", metavar="ZONE", help="The time zone of --since/--until's dates (and of cache-report --by's days, "
                                       "weeks and months): an IANA name such as Europe/Paris [default: UTC].")
MODEL_OPTION = click.option("--model", "models", multiple=True, metavar="NAME",
                            help="Only the calls to this model, as logged (repeatable); verify and header-diff: the "
                                 "logs whose first request is to it.")
PROJECT_OPTION = click.option(
    "--project", "projects", multiple=True, metavar="DIR",
    help="Only the sessions run in DIR or below it: their logged cwd, against DIR made absolute (repeatable).")
# reports.rollup.ROLLUPS, spelled here so that `--help` starts without polars
ROLLUPS = ("day", "week", "month", "model", "project")
BY_OPTION = click.option(
    "--by", type=click.Choice(ROLLUPS), default=None,
    help="Instead of --rows, one row per day, week (from Monday), month, model or project (cwd) of the calls "
         "counted, with their requests, hit ratio, cost and what collapses lost; they add up to the totals.")


def filter_options(function: F) -> F:
    """--since, --until, --timezone, --model, --project: which calls a multi-log view counts."""
    for option in (PROJECT_OPTION, MODEL_OPTION, TIMEZONE_OPTION, UNTIL_OPTION, SINCE_OPTION):
        function = option(function)
    return function


def chosen_filter(since: str | None, until: str | None, timezone: str | None, models: tuple[str, ...] = (),
                  projects: tuple[str, ...] = ()) -> CallFilter:
    """The filter of calls the options given describe; a time that does not read is a usage error naming its
    option."""
    from ..reports.filters import CallFilter

    logs = chosen_log_filter(since, until, timezone, models, projects)
    return CallFilter(logs.since_ms, logs.until_ms, logs.models, logs.projects)


def filters_given(since: str | None, until: str | None, timezone: str | None, models: tuple[str, ...] = (),
                  projects: tuple[str, ...] = ()) -> str:
    """The filter options as given (`--since 7d --project ~/shop`), for an output that says what narrowed it."""
    given = [("--since", since), ("--until", until), ("--timezone", timezone),
             *(("--model", model) for model in models), *(("--project", project) for project in projects)]
    return " ".join(f"{option} {value}" for option, value in given if value is not None)


def chosen_log_filter(since: str | None, until: str | None, timezone: str | None, models: tuple[str, ...] = (),
                      projects: tuple[str, ...] = ()) -> LogFilter:
    """The filters the options given describe, for a command that takes or leaves whole logs (log_filter) and
    as chosen_filter's base; without any, nothing is loaded (a time zone's data is a file read)."""
    from datetime import UTC, datetime

    from ..log_filter import LogFilter, moment_ms, project_path, zone

    if since is None and until is None and timezone is None:
        return LogFilter(models=models, projects=tuple(project_path(project) for project in projects))
    try:
        where = zone(timezone)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--timezone") from None
    now = datetime.now(UTC)

    def moment(text: str | None, option: str) -> int | None:
        try:
            return None if text is None else moment_ms(text, zone=where, now=now, end=option == "--until")
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint=option) from None

    return LogFilter(moment(since, "--since"), moment(until, "--until"), models,
                     tuple(project_path(project) for project in projects), since, until)


def tell_left_out(read: int, kept: int) -> None:
    """On stderr, how many of the logs `read` the filters left out (none of their calls kept): a view's closing
    summary counts only the logs kept."""
    if read > kept:
        click.echo(f"audit: {read - kept} of {read} log(s) have no call the filters keep, and are left out", err=True)


def tell_filtered(left_out: Sequence[tuple[str, str, str]]) -> None:
    """On stderr, how many logs each filter option left out unread (label, option, why: log_filter)."""
    by: dict[str, int] = {}
    for _label, option, _why in left_out:
        by[option] = by.get(option, 0) + 1
    for option, count in by.items():
        click.echo(printable(f"audit: {count} log(s) left out by {option}"), err=True)


# dsh_audit.engines.ENGINES, spelled here so that `--help` starts without the engines
ENGINES = ("local", "dask")


def engine_options(function: F) -> F:
    """-j/--jobs, --engine, --address: where a command's per-log work runs (dsh_audit.engines, docs/fleet.md)."""
    for option in (
        click.option("--address", metavar="URL",
                     help="With --engine dask: the running Dask scheduler to use (tcp://HOST:PORT); without it, a "
                          "cluster of --jobs worker processes on 127.0.0.1 is started for the run."),
        click.option("--engine", type=click.Choice(ENGINES), default="local", show_default=True,
                     help="Where the logs are read: local, processes on this machine; dask, a Dask distributed "
                          "cluster (pip install 'dsh-audit[dask]'). The output is the same either way."),
        click.option("-j", "--jobs", type=click.IntRange(min=0), default=0, show_default=True,
                     help="Worker processes (0: one per core). Output order does not depend on it."),
    ):
        function = option(function)
    return function


def chosen_engine(engine: str, jobs: int, address: str | None) -> EngineChoice:
    """The engine the options name, checked before any work starts: --address without --engine dask, or an
    engine not installed, is one line (exit 2)."""
    from ..engines import EngineChoice, ready

    choice = EngineChoice(engine, jobs or None, address)
    ready(choice)
    return choice


JUNIT_OPTION = click.option(
    "--junit", "junit_file", type=click.Path(path_type=Path, allow_dash=True),
    help="Also write a JUnit XML report (one test case per log) to this file (replaced atomically; its folder "
         "is created; - for stdout).")


def format_option(*names: str, default: str | None = "table", more: str = "") -> Callable[[F], F]:
    """--format, taking the formats `names` of dsh_audit.sinks' vocabulary; its help lists them from there,
    then says `more` (what they hold for this command). Where json is one of them, --json too."""
    fmt = click.option("--format", "fmt", type=click.Choice(names), default=default, show_default=default is not None,
                       help=f"{described(names)}.{' ' + more if more else ''}")
    return fmt if "json" not in names else lambda command: fmt(_json_flag(command))


def _json_flag(command: F) -> F:
    """`command` with --json, short for --format json: the command sees fmt="json". With another --format given
    it is a usage error (exit 2), not a silent pick of one of the two."""

    @functools.wraps(command)
    def with_json(*args: Any, as_json: bool, **kwargs: Any) -> Any:
        if as_json:
            source = click.get_current_context().get_parameter_source("fmt")
            if source is not None and source is not ParameterSource.DEFAULT and kwargs["fmt"] != "json":
                raise click.UsageError(f"--json is --format json: it cannot go with --format {kwargs['fmt']}")
            kwargs["fmt"] = "json"
        return command(*args, **kwargs)

    return click.option("--json", "as_json", is_flag=True, help="Short for --format json.")(cast(F, with_json))


def prefix_option(more: str = "") -> Callable[[F], F]:
    """--message-prefix, then what it means for this command (`more`)."""
    return click.option(
        "--message-prefix", type=click.Choice(["legacy", "drop"]), default="legacy", show_default=True,
        help="Older logs carry header.messagePrefix: 'legacy' prepends it as the old writers sent it; 'drop' "
             f"ignores it as the current reference does.{' ' + more if more else ''}")


def ignored(codes: tuple[str, ...]) -> dict[str, str]:
    """The codes to accept, each with where it was named: --ignore, else the project's dsh-audit.toml."""
    from ..config import CONFIG_NAME, project_config

    return {code: CONFIG_NAME for code in project_config().ignore} | {code: "--ignore" for code in codes}


def color_choice() -> str | None:
    """The --color given to this command line (the subcommand's, else `audit`'s own), or None."""
    context = click.get_current_context(silent=True)
    while context is not None:
        chosen = context.params.get("color")
        if isinstance(chosen, str):
            return chosen
        context = context.parent
    return None


def this_terminal() -> Terminal:
    """stdout's terminal, coloured as --color says."""
    return terminal(color_choice())


def chosen_paths(logs: tuple[Path | str, ...], session: str | None, *,
                 storage_options: dict[str, str | bool] | None = None) -> Selection:
    """What a command reads: the LOGS given (each list file's lines in its place), the --session picked, or with
    neither dsh's session root. A URL is read by the commands that take `storage_options` (the others refuse)."""
    given = _expanded(logs, storage_options)
    if session is None and given:   # as default_paths says, without loading dsh's home and its session scan
        from ..readers.discover import Selection

        local = [log for log in given if isinstance(log, Path)]
        return Selection(local, given=None if len(local) == len(given) else list(given))
    if not all(isinstance(log, Path) for log in given):
        raise click.UsageError("--session searches local folders only; give URLs without it")
    from ..readers.home import default_paths

    return default_paths(tuple(log for log in given if isinstance(log, Path)), session)


def explain_targets(logs: tuple[Path | str, ...], session: str | None, paths: Sequence[Path],
                    prefixes: dict[str, str]) -> dict[str, str]:
    """For each log found below a folder read (`paths` chosen from the LOGS given, else dsh's session root), how
    `audit explain` finds it by its short id (`prefixes`): `[FOLDER] --session PREFIX`, where that picks this log
    and no other (readers.home.picked_by_prefix); a log it would not pick is left to be named by its path."""
    from ..readers.home import picked_by_prefix
    from ..reports.views import shown_path

    targets: dict[str, str] = {}
    roots = paths if not logs or session is None else []
    for root in (root for root in roots if root.is_dir()):
        below = {Path(label): prefix for label, prefix in prefixes.items() if Path(label).is_relative_to(root)}
        if not below:
            continue
        folder = f"{shlex.quote(shown_path(str(root)))} " if logs else ""
        for path in picked_by_prefix(root, below):
            targets[str(path)] = f"{folder}--session {shlex.quote(below[path])}"
    return targets


def _expanded(logs: tuple[Path | str, ...], storage_options: dict[str, str | bool] | None
              ) -> tuple[Path | RemoteSource, ...]:
    """The SRC given, each list file's lines in its place (readers.sources); a URL where none is read: an error."""
    if all(isinstance(log, Path) for log in logs):   # the usual case: no list file, no URL to parse
        return tuple(log for log in logs if isinstance(log, Path))
    from ..readers.objects import RemoteSource, StorageOptions
    from ..readers.sources import expand_sources

    expanded = expand_sources(logs, StorageOptions.of(storage_options or {}))
    remote = next((source for source in expanded if isinstance(source, RemoteSource)), None)
    if remote is not None and storage_options is None:
        raise DshAuditError("this command reads local logs only; verify, cache-report and explain read URLs",
                            path=remote.url)
    return tuple(expanded)


def chosen_log(log: Path | None, session: str | None) -> Path:
    """The one LOG a command reads, or the --session picked: then the older generations of its log, which it
    skips, are named on stderr, as a walk of the log's folder names them."""
    if log is None and session is None:
        raise DshAuditError("give a LOG, or --session ID to pick one from dsh's session root")
    chosen = chosen_paths(() if log is None else (log,), session)
    [path] = chosen.paths
    tell_skipped(chosen.skipped)
    return path


@contextmanager
def one_log(log: Path | str | None, session: str | None, storage_options: dict[str, str | bool]
            ) -> Iterator[Path]:
    """The one LOG a command reads (chosen_log); for an object-storage URL, which must name one log, its copy in
    the spool while the block runs (the readers name it by its URL: readers.spool)."""
    if not isinstance(log, str):
        yield chosen_log(log, session)
        return
    if session is not None:
        raise click.UsageError("--session searches local folders only; give a URL without it")
    from ..readers.objects import RemoteSource, StorageOptions
    from ..readers.remote import list_remote
    from ..readers.spool import spooled

    found = list_remote(RemoteSource(log, StorageOptions.of(storage_options))).logs
    if len(found) != 1:
        raise DshAuditError(f"names {len(found)} logs; give the URL of one", path=log)
    with spooled(found[0]) as copy:
        yield copy


Step = tuple[int, int, int | None]


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


def tell_skipped(skipped: Sequence[Skipped]) -> None:
    """On stderr, a line per older generation left out, where the command's own output cannot list them."""
    for log in skipped:
        click.echo(printable(f"audit: {log.reason}"), err=True)


def tell_unreadable(unreadable: Sequence[Unreadable], *, listed: bool) -> None:
    """On stderr: each log a report left out, in one line (unless the report's own view lists them), then how
    many. The report covers the rest and the command succeeds: only verify is a gate."""
    if not unreadable:
        return
    if not listed:
        for log in unreadable:
            click.echo(printable(f"audit: {log.reason}"), err=True)
    click.echo(f"audit: {len(unreadable)} log(s) could not be read and are not in the report"
               + (" (each is named in it)" if listed else ""), err=True)
