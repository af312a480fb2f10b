"""`audit header-diff` and `audit cache-report`: options in, library DataFrame out, rendered. Nothing else."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click
import polars as pl

from .cli import ALL_GENERATIONS_OPTION
from .errors import DshAuditError
from .readers import discover
from .reports.cache_report import TABLE_COLUMNS as CACHE_COLUMNS
from .reports.cache_report import UNEXPLAINED, CacheOptions, build_cache_report
from .reports.header_diff import TABLE_COLUMNS as HEADER_COLUMNS
from .reports.header_diff import build_header_diff
from .reports.prices import DEFAULT_PRICES, FALLBACK_MODEL, Prices
from .reports.render import FORMATS, write_frame

EXIT_UNEXPLAINED, EXIT_UNREADABLE = 1, 2
FORMAT_OPTION = click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
OUT_OPTION = click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write here, not stdout.")
LOGS_ARGUMENT = click.argument("logs", nargs=-1, required=True, type=click.Path(path_type=Path))


def _fail(error: DshAuditError) -> None:
    click.echo(f"audit: {error}", err=True)
    sys.exit(error.exit_code)


@click.command("header-diff")
@LOGS_ARGUMENT
@FORMAT_OPTION
@OUT_OPTION
@ALL_GENERATIONS_OPTION
def header_diff(logs: tuple[Path, ...], fmt: str, out: Path | None, all_generations: bool) -> None:
    """One row per change between consecutive request headers of each LOG (file or directory).

    From format v3 the system prompt is the system/message head: its changes are shown as the header's."""
    try:
        frame = build_header_diff(logs, all_generations=all_generations)
        write_frame(frame, fmt, out, table_columns=HEADER_COLUMNS)
    except DshAuditError as error:
        _fail(error)


@contextmanager
def _progress(total: int) -> Iterator[Callable[[Path], None] | None]:
    """A progress bar on an interactive terminal; nothing in CI or when stderr is redirected."""
    if total < 2 or not sys.stderr.isatty() or os.environ.get("CI"):
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("cache-report", total=total)
        yield lambda _file: bar.advance(task)


_flash = DEFAULT_PRICES[FALLBACK_MODEL]


@click.command("cache-report")
@LOGS_ARGUMENT
@FORMAT_OPTION
@OUT_OPTION
@click.option("--block", type=click.IntRange(min=1), default=64, show_default=True,
              help="Cache-block granularity of the prediction, in tokens.")
@click.option("--collapse-threshold", type=click.FloatRange(0, 1, min_open=True), default=0.5, show_default=True,
              help="A collapse: cache reads below this share of the predecessor's reads or of the prediction.")
@click.option("--price-hit", type=float, help=f"USD per 1M cache-hit input tokens [DeepSeek list per model; "
              f"{FALLBACK_MODEL}: {_flash.cache_hit}].")
@click.option("--price-miss", type=float, help=f"USD per 1M cache-miss input tokens [{_flash.cache_miss}].")
@click.option("--price-output", type=float, help=f"USD per 1M output tokens [{_flash.output}].")
@click.option("--system-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Real system prompt to count where a log has {{system}}.")
@click.option("--tools-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Real tool schemas (JSON list) to count where a log has {{tools}}.")
@click.option("--sidecars", is_flag=True, help="Take them from system-prompt*.expected.md / "
              "tool-schemas*.expected.json beside each log (pinned snapshot scenarios).")
@click.option("--wire", is_flag=True, help="Add the serialized DeepSeek request body as a wireBody column.")
@click.option("--predict/--no-predict", default=True, show_default=True,
              help="Predict each request's cacheable prefix with the DeepSeek tokenizer. It costs time in "
              "proportion to the total size of all requests; --no-predict keeps the logged figures, the "
              "collapses against the predecessor's reads and their causes, and is linear in the log.")
@click.option("--fail-on-unexplained", is_flag=True, help="Exit 1 when any collapse is unexplained.")
@click.option("--message-prefix", type=click.Choice(["legacy", "drop"]), default="legacy", show_default=True)
@ALL_GENERATIONS_OPTION
def cache_report(logs: tuple[Path, ...], fmt: str, out: Path | None, block: int, collapse_threshold: float,
                 price_hit: float | None, price_miss: float | None, price_output: float | None,
                 system_file: Path | None, tools_file: Path | None, sidecars: bool, wire: bool,
                 predict: bool, fail_on_unexplained: bool, message_prefix: str, all_generations: bool) -> None:
    """Per-request cache usage of each LOG, predicted cacheable prefix, collapses and their causes, cost."""
    given = (price_hit, price_miss, price_output)
    prices = None
    if any(p is not None for p in given):
        if any(p is None for p in given):
            raise click.UsageError("give all of --price-hit, --price-miss and --price-output, or none")
        prices = Prices(cache_hit=float(price_hit or 0), cache_miss=float(price_miss or 0),
                        output=float(price_output or 0))
    try:
        tools = json.loads(tools_file.read_text(encoding="utf-8")) if tools_file else None
        if tools is not None and not isinstance(tools, list):
            raise DshAuditError("expected a JSON list of tool schemas", path=str(tools_file))
        options = CacheOptions(
            block=block, collapse_ratio=collapse_threshold, prices=prices, message_prefix=message_prefix,
            wire=wire, system=system_file.read_text(encoding="utf-8") if system_file else None, tools=tools,
            sidecars=sidecars, predict=predict)
        with _progress(len(discover(logs, all_generations=all_generations))) as advance:
            frame = build_cache_report(logs, options, on_log=advance, all_generations=all_generations)
        write_frame(frame, fmt, out, table_columns=CACHE_COLUMNS)
    except DshAuditError as error:
        _fail(error)
        return
    except (OSError, json.JSONDecodeError) as error:
        _fail(DshAuditError(f"cannot read option file: {error}"))
        return
    unexplained = frame.filter((pl.col("row") == "request") & pl.col("collapse").fill_null(False)
                               & (pl.col("cause") == UNEXPLAINED))
    if fail_on_unexplained and unexplained.height:
        click.echo(f"audit: {unexplained.height} unexplained cache collapse(s)", err=True)
        sys.exit(EXIT_UNEXPLAINED)
