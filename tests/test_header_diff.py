"""header-diff: one row per change between consecutive request headers, fork parent/child, scrubbed fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from dsh_audit.cli import main
from dsh_audit.reports.header_diff import build_header_diff
from logbuilder import LogBuilder

LOGS = Path(__file__).resolve().parents[2] / "shared" / "dsh-logs"
READ = {"name": "read", "description": "read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}
WRITE = {"name": "write", "description": "write a file", "parameters": {"type": "object", "properties": {}}}


def write(log: LogBuilder, path: Path) -> Path:
    path.write_text("\n".join(json.dumps(line) for line in [log.header, *log.events]) + "\n", encoding="utf-8")
    return path


def changes(frame: pl.DataFrame) -> list[tuple[Any, ...]]:
    return frame.select("seq", "reason", "field", "change", "path").rows()


def test_config_system_tools_and_prefix_changes_are_one_row_each(tmp_path: Path) -> None:
    log = LogBuilder()
    first = log.header_event("initial", system="line one\nline two", tools=[READ])
    changed_read = {**READ, "parameters": {"type": "object", "properties": {"path": {"type": "integer"}}}}
    second = log.header_event("change", system="line one\nline 2", tools=[changed_read, WRITE],
                              temperature=0.2)
    frame = build_header_diff([write(log, tmp_path / "session.jsonl")])
    assert changes(frame) == [
        (first, "initial", None, "initial", None),
        (second, "change", "config.temperature", "added", None),
        (second, "change", "system", "changed", "+1 -1 lines"),
        (second, "change", "tools", "added", "tools[write]"),
        (second, "change", "tools", "schema-changed", "tools[read].parameters.properties.path.type"),
    ]
    system = frame.filter(pl.col("field") == "system")["detail"][0]
    assert "-line two" in system and "+line 2" in system
    schema = frame.filter(pl.col("change") == "schema-changed").row(0, named=True)
    assert (schema["before"], schema["after"]) == ('"string"', '"integer"')


def test_a_resume_without_drift_is_shown_unchanged_and_one_with_drift_names_it(tmp_path: Path) -> None:
    log = LogBuilder()
    log.header_event("initial", tools=[READ])
    quiet = log.header_event("resume", tools=[READ])
    drift = log.header_event("resume", tools=[READ], model="deepseek-v4-pro")
    frame = build_header_diff([write(log, tmp_path / "session.jsonl")])
    assert changes(frame)[1:] == [(quiet, "resume", None, "unchanged", None),
                                  (drift, "resume", "config.model", "changed", None)]


def test_scrubbed_fields_are_unverifiable_never_unchanged(tmp_path: Path) -> None:
    log = LogBuilder()
    log.header_event("initial", system="{{system}}", tools="{{tools}}")
    seq = log.header_event("resume", system="{{system}}", tools="{{tools}}")
    frame = build_header_diff([write(log, tmp_path / "session.jsonl")]).filter(pl.col("seq") == seq)
    assert frame.select("field", "change").rows() == [(None, "unchanged"), ("system", "unverifiable"),
                                                      ("tools", "unverifiable")]
    assert frame["detail"][0] == "but system, tools unverifiable"


def test_fork_child_is_diffed_against_the_parent_snapshot_at_the_fork(tmp_path: Path) -> None:
    parent = LogBuilder("parent")
    parent.header_event("initial", tools=[READ])
    parent.header_event("change", tools=[READ, WRITE])   # after the fork: the child must not see it
    child = LogBuilder("child", parentSession="parent", seedLength=1)
    child.header_event("initial", tools=[READ], temperature=0.7)
    write(parent, tmp_path / "session.jsonl")
    write(child, tmp_path / "session.1.jsonl")
    frame = build_header_diff([tmp_path]).filter(pl.col("sessionId") == "child")
    assert frame.select("field", "change").rows() == [("config.temperature", "added")]
    assert frame["against"][0].startswith("parent session.jsonl seq 0 (seedLength 1")


@pytest.mark.skipif(not LOGS.is_dir(), reason="shared dsh-logs corpus not present")
def test_shared_corpus_tool_change_and_fork_rows() -> None:
    run = LOGS / "scripts/snapshots/python-sdk-single-exe/advanced"
    frame = build_header_diff([run])
    parent = frame.filter(pl.col("log").str.ends_with("/session.jsonl") & pl.col("change").is_in(["added", "removed"]))
    assert parent.select("seq", "change", "path").rows() == [(28, "added", "tools[snapshot_double]"),
                                                             (75, "removed", "tools[snapshot_double]")]
    children = frame.filter(pl.col("against").str.starts_with("parent"))
    assert set(children["log"].str.split("/").list.last()) == {"session.1.jsonl", "session.2.jsonl"}
    everything = build_header_diff([LOGS])
    # every scrubbed snapshot after the first says so; none passes as verified-unchanged silently
    resumed = everything.filter((pl.col("change") == "unchanged") & pl.col("detail").is_null())
    assert resumed.height < everything.filter(pl.col("change") == "unchanged").height


def test_cli_renders_every_format(tmp_path: Path) -> None:
    log = LogBuilder()
    log.header_event("initial", tools=[READ])
    log.header_event("change", tools=[WRITE])
    path = write(log, tmp_path / "session.jsonl")
    runner = CliRunner()
    table = runner.invoke(main, ["header-diff", str(path)])
    assert table.exit_code == 0 and "tools - read (removed)" in table.output and "tools + write (added)" in table.output
    document = json.loads(runner.invoke(main, ["header-diff", str(path), "--format", "json"]).stdout)
    assert document["schema"] == "dsh-audit/header-diff"
    assert [(r["field"], r["change"]) for r in document["rows"]] == [
        (None, "initial"), ("tools", "removed"), ("tools", "added")]
    out = tmp_path / "diff.csv"
    assert runner.invoke(main, ["header-diff", str(path), "--out", str(out)]).exit_code == 0   # format from .csv
    assert pl.read_csv(out).height == 3
    missing = runner.invoke(main, ["header-diff", str(tmp_path / "nope.jsonl")])
    assert missing.exit_code == 2 and missing.stderr.startswith("audit: ")


def test_the_view_names_each_log_by_path_with_its_session_s_short_id(tmp_path: Path) -> None:
    """header-diff reads files, so a log's heading is its path; the short id other views name its session by
    (told apart from every log read) comes first, where it has one: a scrubbed {{sessionId}} is none."""
    from test_cache_report import TOOL_A, turn
    from test_views import collapsing_home

    root = collapsing_home(tmp_path / "sessions")
    done = CliRunner().invoke(main, ["header-diff", str(root)], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    headings = [line for line in done.output.splitlines() if line.endswith("  ·  v0")]
    shop = root / "--work-shop--" / "session-3f2a91c0-7d4e-4b1a-9c3e-5f6a7b8c9d01" / "session.jsonl"
    assert f"session 3f2a91c0-7  ·  {shop}  ·  v0" in headings and len(headings) == 4
    scrubbed = LogBuilder(session_id="{{sessionId}}")
    turn(scrubbed, 1, "hello " * 100, 0, reason="initial", tools=[TOOL_A])
    path = tmp_path / "scrubbed.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in [scrubbed.header, *scrubbed.events]) + "\n",
                    encoding="utf-8")
    done = CliRunner().invoke(main, ["header-diff", str(path)], env={"COLUMNS": "200"})
    assert done.exit_code == 0 and done.output.startswith(f"{path}  ·  v") and "session " not in done.output, \
        done.output
