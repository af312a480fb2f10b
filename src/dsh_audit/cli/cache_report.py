"""`audit cache-report`: options in (the price table, the block size, the files to count), the library's
report out, its rows of the kind asked handed to the sink asked for."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..errors import DshAuditError
from ..reports.cache_rows import ROW_KINDS
from ..reports.prices import MAX_PRICE, Prices, PriceTable, default_table, flat_table, load_table
from ..reports.render import FORMATS
from ..text import printable
from . import EXIT_CLEAN, EXIT_FINDINGS
from .options import (
    ALL_GENERATIONS_OPTION,
    BY_OPTION,
    COLLAPSES_ONLY_OPTION,
    COLOR_OPTION,
    LOGS_ARGUMENT,
    OUT_OPTION,
    SESSION_OPTION,
    WIDE_OPTION,
    chosen_filter,
    chosen_paths,
    explain_targets,
    filter_options,
    format_option,
    prefix_option,
    remote_options,
    sort_option,
    tell_left_out,
    tell_skipped,
    tell_unreadable,
    this_terminal,
    top_option,
)
from .progress_bar import byte_progress

if TYPE_CHECKING:
    from ..reports.cache_report import CacheReport

T = TypeVar("T")


def _rate(_context: click.Context, _parameter: click.Parameter, value: float | None) -> float | None:
    """A flat rate from 0 to MAX_PRICE USD: costs must stay finite numbers (docs/prices.md)."""
    if value is not None and not 0 <= value <= MAX_PRICE:   # NaN fails every comparison
        raise click.BadParameter(f"{value} is not a price from 0 to {MAX_PRICE:g} USD")
    return value


def _prices(prices_file: Path | None, flat: tuple[float | None, float | None, float | None]) -> Prices | None:
    if any(p is not None for p in flat):
        if any(p is None for p in flat) or prices_file is not None:
            raise click.UsageError("give all of --price-hit, --price-miss and --price-output (and no --prices), "
                                   "or none")
        hit, miss, output = (float(p or 0) for p in flat)
        return Prices(cache_hit=hit, cache_miss=miss, output=output)
    return None


def _block_size(ctx: click.Context, param: click.Parameter, value: str) -> int | None:
    """A positive number of tokens, or `auto` (None): each log's own (cache_report.measure_block)."""
    if value == "auto":
        return None
    if value.isdigit() and int(value) > 0:
        return int(value)
    raise click.BadParameter(f"{value!r} is neither auto nor a positive number of tokens", ctx, param)


class _BundledRateOption(click.Option):
    """A --price-* option whose help quotes a rate of the bundled price table, read when the help is shown: the
    table is checked against its JSON Schema, which `audit header-diff --help` has no need to load."""

    def __init__(self, *args: Any, quote: Callable[[PriceTable], str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.quote = quote

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        self.help = self.quote(default_table())
        return super().get_help_record(ctx)


def _flash(table: PriceTable) -> Prices:
    return table.models[table.fallback]


@click.command("cache-report", epilog="""\b
Examples:
  audit cache-report ~/.dsh/sessions             the sessions ranked by what collapses lost, the worst
                                                  requests, then every call
  audit cache-report --rows logs --top 10 DIR     the ten sessions that lost most, and their worst requests
  audit cache-report --by day --since 7d DIR      a row per day of the last week (UTC unless --timezone)
  audit cache-report session.v3.jsonl             per call: reads, hit %, collapses and causes, cost
  audit cache-report --no-predict ~/.dsh          logged figures only, linear in the logs
  audit cache-report --rows logs --out logs.csv DIR        one row per log, as CSV
  audit cache-report --fail-on-unexplained DIR    exit 1 when a collapse has no logged cause
Exit codes: 0 done (a log that cannot be read is named and left out), 1 an unexplained collapse with
--fail-on-unexplained, 2 nothing readable (with --fail-on-unexplained: any log unreadable), unwritable --out or
bad usage, 3 internal error, 130 interrupted.""")
@LOGS_ARGUMENT
@SESSION_OPTION
@format_option(*FORMATS, default=None, more="The machine formats hold the rows --rows names. Without --format, "
               "--out's extension decides, else the table.")
@OUT_OPTION
@WIDE_OPTION
@click.option("--rows", type=click.Choice(ROW_KINDS), default="requests", show_default=True,
              help="Which rows: one per model call, per log, or the totals. The table shows the ranked sessions "
                   "and worst requests, then (requests) every call; totals: the summary alone.")
@BY_OPTION
@filter_options
@sort_option("lost in the table, path in the machine formats")
@top_option()
@COLLAPSES_ONLY_OPTION
@click.option("--block", metavar="auto|TOKENS", default="auto", show_default=True, callback=_block_size,
              help="Cache-block size in tokens, or auto: 128 (every real DeepSeek cache read the project has is a "
                   "multiple of it), unless a log's own non-zero reads are not all multiples of 128: then the "
                   "largest power of two dividing them, for that log alone.")
@click.option("--collapse-threshold", type=click.FloatRange(0, 1, min_open=True), default=0.5, show_default=True,
              help="A collapse: cache reads below this share of the predecessor's reads or of the expected read.")
@click.option("--prices", "prices_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A price table (JSON, the shape of dsh_audit/reports/data/deepseek-prices.json) instead of "
                   "DeepSeek's, which prices each call as of its time: the period's rates, peak or off-peak. See "
                   "docs/prices.md.")
@click.option("--price-hit", type=float, callback=_rate, cls=_BundledRateOption,
              quote=lambda table: f"One flat USD per 1M cache-hit input tokens for every model [{table.fallback} "
                                  f"at peak: {_flash(table).cache_hit}].")
@click.option("--price-miss", type=float, callback=_rate, cls=_BundledRateOption,
              quote=lambda table: f"One flat USD per 1M cache-miss input tokens [{_flash(table).cache_miss}].")
@click.option("--price-output", type=float, callback=_rate, cls=_BundledRateOption,
              quote=lambda table: f"One flat USD per 1M output tokens [{_flash(table).output}].")
@click.option("--system-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Real system prompt to count where a log has {{system}}.")
@click.option("--tools-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Real tool schemas (JSON list) to count where a log has {{tools}}.")
@click.option("--sidecars", is_flag=True, help="Take them from system-prompt*.expected.md / "
              "tool-schemas*.expected.json beside each log (pinned snapshot scenarios).")
@click.option("--wire", is_flag=True, help="Add the serialized DeepSeek request body as a wireBody column.")
@click.option("--predict/--no-predict", default=True, show_default=True,
              help="Count tokens where a request does not extend its predecessor (a header change, a "
              "compaction) or the predecessor logged no usage. Elsewhere the expected read comes from the "
              "logged usage. --no-predict leaves those requests without an expected read.")
@click.option("--fail-on-unexplained", is_flag=True, help="Exit 1 when any collapse is unexplained.")
@prefix_option()
@ALL_GENERATIONS_OPTION
@remote_options
@COLOR_OPTION
def cache_report(logs: tuple[Path | str, ...], session: str | None, fmt: str | None, out: Path | None, wide: bool,
                 rows: str, by: str | None, since: str | None, until: str | None, timezone: str | None,
                 models: tuple[str, ...], projects: tuple[str, ...], sort: str | None, top: int | None,
                 collapses_only: bool,
                 block: int | None, collapse_threshold: float, prices_file: Path | None,
                 price_hit: float | None, price_miss: float | None, price_output: float | None,
                 system_file: Path | None, tools_file: Path | None, sidecars: bool, wire: bool, predict: bool,
                 fail_on_unexplained: bool, message_prefix: str, all_generations: bool,
                 storage_options: dict[str, str | bool], color: str | None) -> int:
    """Per model call of each LOG: cache reads, hit ratio, the expected read, collapses and their logged
    causes, and what each call and each collapse cost; a summary per log and overall."""
    # polars and the report are imported here, not above: `audit cache-report --help` starts without them
    import polars as pl

    from ..reports import cache_view
    from ..reports.cache_report import SCHEMA_VERSION, CacheOptions, build_cache_report
    from ..reports.filters import filtered
    from ..reports.ranking import ranked, session_names, session_prefixes
    from ..reports.render import check_frame_output, write_frame
    from ..reports.verdict import unexplained as is_unexplained
    from ..sinks import output_format

    flat = _prices(prices_file, (price_hit, price_miss, price_output))
    counted = chosen_filter(since, until, timezone, models, projects)
    chosen = output_format(fmt, out, FORMATS)
    selection = chosen_paths(logs, session, storage_options=storage_options)
    option_files = [file for file in (prices_file, system_file, tools_file) if file is not None]
    check_frame_output(chosen, out, [*selection.inputs, *option_files])   # before the work
    tools = _option_file(tools_file, json.loads) if tools_file else None
    if tools is not None and not isinstance(tools, list):
        raise DshAuditError("expected a JSON list of tool schemas", path=str(tools_file))
    table = flat_table(flat) if flat else load_table(prices_file) if prices_file else None
    options = CacheOptions(
        block=block, collapse_ratio=collapse_threshold, prices=table, message_prefix=message_prefix,
        wire=wire, system=_option_file(system_file, str) if system_file else None, tools=tools,
        sidecars=sidecars, predict=predict)
    with byte_progress(selection.paths, "cache-report"):
        read = build_cache_report(selection.sources, options, all_generations=all_generations,
                                  superseded=selection.superseded)
    report = filtered(read, counted)

    table_view = chosen == "table"
    order = sort or ("lost" if table_view else "path")
    shown = ranked(report, sort=order, top=top, collapses_only=collapses_only)

    collapsed = set(report.requests.filter(pl.col("collapse"))["log"])   # the logs an explain command names
    # named among every log read, so that a name a filter leaves alone still picks one session with --session
    prefixes = {label: prefix for label, prefix in session_prefixes(read.logs).items() if label in collapsed}
    names = cache_view.Names(session_names(read.logs), explain_targets(logs, session, selection.paths, prefixes))

    def view() -> str:
        term = this_terminal()
        return term.show(cache_view.render(shown, term, wide=wide, rows=rows, names=names,
                                           worst=top or cache_view.WORST_REQUESTS, order=order))

    if by is None:
        write_frame(shown.rows(rows), chosen, out, schema=f"dsh-audit/cache-report/{rows}",
                    version=SCHEMA_VERSION, table=view, inputs=[*selection.inputs, *option_files])
    else:
        _write_rollup(shown, by, timezone or "UTC", chosen, out, [*selection.inputs, *option_files], wide)
    tell_left_out(read.logs.height, report.logs.height)
    tell_unreadable(report.unreadable, listed=table_view)
    tell_skipped([] if table_view else report.skipped)
    if fail_on_unexplained and report.unreadable:   # a gate cannot say there is none in a log it did not read
        raise DshAuditError(f"--fail-on-unexplained: {len(report.unreadable)} log(s) could not be read")
    unexplained = [row for row in report.requests.filter(pl.col("collapse")).to_dicts() if is_unexplained(row)]
    if fail_on_unexplained and unexplained:
        named = "; ".join(f"{cache_view.call_name(row)} of {row['log']} (see {names.command(row)})"
                          for row in unexplained[:5])
        more = f"; and {len(unexplained) - 5} more" if len(unexplained) > 5 else ""
        click.echo(printable(f"audit: {len(unexplained)} unexplained cache collapse(s): {named}{more}"), err=True)
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _write_rollup(report: CacheReport, by: str, zone: str, chosen: str, out: Path | None, inputs: list[Path],
                  wide: bool) -> None:
    """--by: the report's calls a row per group, in the table or the machine format asked."""
    from ..reports import rollup_view
    from ..reports.render import write_frame
    from ..reports.rollup import ROLLUP_VERSION, rollup

    groups = rollup(report, by, zone)

    def view() -> str:
        term = this_terminal()
        return term.show(rollup_view.render(groups, by, zone, report.totals.to_dicts()[0], term, wide=wide))

    write_frame(groups, chosen, out, schema="dsh-audit/cache-report/rollup", version=ROLLUP_VERSION, table=view,
                inputs=inputs)


def _option_file(path: Path, parse: Callable[[str], T]) -> T:
    """An option file (--system-file, --tools-file) read and parsed; one line naming it when it cannot be."""
    try:
        return parse(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise DshAuditError(f"cannot read option file: {error.strerror or error}", path=str(path)) from None
    except UnicodeDecodeError as error:
        raise DshAuditError(f"cannot read option file: not UTF-8 ({error.reason} at byte {error.start})",
                            path=str(path)) from None
    except json.JSONDecodeError as error:
        raise DshAuditError(f"cannot read option file: not JSON ({error.msg} at line {error.lineno})",
                            path=str(path)) from None
