"""`audit export` and `audit query` (dsh_audit.fleet): the dataset's totals equal cache-report's and its verdicts
verify's on the same logs, for every generation, the corpus (forks among them) and a messy home; its files keep
to the declared columns; a second run skips what it holds, replaces what changed; a run that stops part-way is
completed by the next; a newer dsh-audit's dataset is refused untouched; an unreadable input is a failed row."""

from __future__ import annotations

import html
import json
import math
import os
import pickle
import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from conftest_reference import LOGS_ROOT
from dsh_audit.cli import main
from dsh_audit.cli.options import chosen_filter as cli_filter
from dsh_audit.fleet import dataset as dataset_module
from dsh_audit.fleet import export as export_module
from dsh_audit.fleet import query
from dsh_audit.fleet.columns import CACHE_RENAMED, DATASET_VERSION, TABLES
from dsh_audit.fleet.export import export
from dsh_audit.fleet.unit import ExportedLog, ExportOptions, export_log
from dsh_audit.generations import generations
from dsh_audit.reports.filters import CallFilter
from dsh_audit.reports.query_view import render
from dsh_audit.reports.views import Terminal
from homebuilder import SAMPLE, build_messy_home
from test_fastpath import generate
from test_filters_everywhere import build_timed_home
from test_numbers import MARK, every_generation, log_text, write_log


def run(*args: str) -> tuple[int, str, str]:
    done = CliRunner().invoke(main, list(args))
    return done.exit_code, done.stdout, done.stderr


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of one built log of each known generation, a session folder each."""
    return every_generation(tmp_path_factory.mktemp("built"), turns=3)


@pytest.fixture(scope="module")
def bench_like(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """benchmarks/generate_log.py's logs, smaller: compactions under pressure, zstd, v0, v3 and v4, a folder each."""
    root = tmp_path_factory.mktemp("bench")
    for name, *args in (("a/session.jsonl", "--size", "300KB"),
                        ("b/session.v3.jsonl", "--size", "300KB", "--generation", "3", "--seed", "2"),
                        ("c/session.v4.jsonl", "--size", "300KB", "--generation", "4", "--seed", "3"),
                        ("d/session.jsonl.zst", "--size", "200KB", "--zstd", "--seed", "4")):
        (root / name).parent.mkdir()
        generate(root / Path(name).parent, Path(name).name, *args, "--compaction", "pressure", "--context-kb", "20")
    return root


def sources(name: str, built: Path, tmp_path: Path, bench_like: Path) -> Path:
    if name == "built":
        return built
    if name == "bench":
        return bench_like
    if name == "home":
        return build_messy_home(tmp_path / "sessions")
    if not (LOGS_ROOT / "manifest.json").exists():
        pytest.skip(f"shared corpus {LOGS_ROOT} not present")
    return LOGS_ROOT


def assert_totals_equal(dataset: Path, logs: Path, *filters: str) -> None:
    code, out, _ = run("cache-report", "--rows", "totals", "--json", str(logs), *filters)
    assert code == 0
    [expected] = json.loads(out)["rows"]
    code, out, err = run("query", str(dataset), "--json", *filters)
    assert code == 0, err
    [got] = json.loads(out)["rows"]
    for name, value in expected.items():
        assert got[name] == (pytest.approx(value) if isinstance(value, float) else value), name


def assert_verdicts_equal(dataset: Path, logs: Path) -> None:
    _, out, _ = run("verify", "--json", str(logs))
    expected = json.loads(out)["summary"]
    logs_rows = query.scan(dataset, "logs").collect()
    assert logs_rows.height == expected["logs"]
    assert (logs_rows["status"] != "clean").sum() == expected["failed"]
    assert (logs_rows["status"] == "unreadable").sum() == expected["unreadable"]
    for column, name in (("rebuiltRequests", "requests"), ("errors", "errors"), ("warnings", "warnings"),
                         ("notes", "notes")):
        assert logs_rows[column].fill_null(0).sum() == expected[name], column
    status = query.status(dataset)
    assert status["logs"].sum() == expected["logs"]


def assert_log_rows_equal(dataset: Path, logs: Path) -> None:
    """Each log's cache columns in the logs table are cache-report's per-log row of it (the unit sums its calls
    in one pass of its own)."""
    code, out, _ = run("cache-report", "--rows", "logs", "--json", str(logs))
    assert code == 0
    expected = {row["log"]: row for row in json.loads(out)["rows"]}
    got = {row["log"]: row for row in query.scan(dataset, "logs").collect().iter_rows(named=True)
           if row["log"] in expected}
    assert got.keys() == expected.keys()
    for label, row in expected.items():
        for name, value in row.items():
            if name not in ("log", "generation", "sessionId"):
                mine = got[label][CACHE_RENAMED.get(name, name)]
                assert mine == (pytest.approx(value) if isinstance(value, float) else value), (label, name)


@pytest.mark.parametrize("name", ["built", "corpus", "home", "bench"])
def test_the_dataset_s_totals_and_verdicts_are_cache_report_s_and_verify_s(name: str, built: Path, tmp_path: Path,
                                                                            bench_like: Path) -> None:
    logs, dataset = sources(name, built, tmp_path, bench_like), tmp_path / "fleet"
    code, _, err = run("export", str(logs), "--to", str(dataset), "-j", "2")
    assert code == (2 if name == "home" else 0), err
    assert_totals_equal(dataset, logs)
    assert_verdicts_equal(dataset, logs)
    assert_log_rows_equal(dataset, logs)
    if name == "built":   # every generation is a partition of every table that has rows of it
        assert set(query.scan(dataset, "logs").collect()["generation"]) == {g.version for g in generations()}
        for known in generations():
            one = tmp_path / f"one-v{known.version}"
            run("export", str(built / f"v{known.version}"), "--to", str(one))
            assert_totals_equal(one, built / f"v{known.version}")


def written_files(dataset: Path) -> Iterator[tuple[str, Path]]:
    for table in TABLES:
        for path in sorted((dataset / table).rglob("*.parquet")):
            yield table, path


def test_every_file_keeps_to_its_table_s_declared_columns(built: Path, tmp_path: Path) -> None:
    dataset = tmp_path / "fleet"
    run("export", str(built), str(build_messy_home(tmp_path / "sessions")), "--to", str(dataset))
    seen = set()
    for table, path in written_files(dataset):
        declared = pl.DataFrame(schema=TABLES[table]).to_arrow().schema
        got = pq.read_schema(path)
        assert got.names == declared.names, path
        assert [str(f.type).replace("large_", "") for f in got] == \
               [str(f.type).replace("large_", "") for f in declared], path
        stamp = (pq.read_metadata(path).metadata or {}).get(b"dsh-audit-dataset")
        assert stamp == f"{table}/{DATASET_VERSION}".encode()
        part = path.relative_to(dataset / table).parts
        assert part[0].startswith("generation=") and part[1].startswith("date="), path
        seen.add(table)
    assert seen == set(TABLES)
    code, out, _ = run("export", str(built), "--to", str(dataset), "--json")
    assert (code, json.loads(out)["skipped"]) == (0, len(list(built.iterdir())))


def snapshot(dataset: Path) -> dict[str, pl.DataFrame]:
    """Every table's rows, in one order, without the file names."""
    frames = {}
    for table in TABLES:
        frame = query.scan(dataset, table).collect()
        frames[table] = frame.sort(frame.columns, nulls_last=True)
    return frames


def assert_same_rows(one: Path, other: Path) -> None:
    mine, theirs = snapshot(one), snapshot(other)
    for table in TABLES:
        assert mine[table].equals(theirs[table]), table


def test_an_unchanged_log_is_skipped_and_a_changed_one_replaces_its_rows(built: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    shutil.copytree(built, logs)
    dataset = tmp_path / "fleet"
    code, out, _ = run("export", str(logs), "--to", str(dataset), "--json")
    assert (code, json.loads(out)["new"]) == (0, len(generations()))
    touched = next(logs.glob("v3/session*.jsonl"))
    os.utime(touched)   # the same content, a new time: read again, its rows kept
    changed = next(logs.glob("v4/session*.jsonl"))
    write_log(logs / "v4", 4, log_text(4, turns=5))
    assert next(logs.glob("v4/session*.jsonl")) == changed
    code, out, _ = run("export", str(logs), "--to", str(dataset), "--json")
    summary = json.loads(out)
    assert (summary["replaced"], summary["unchanged"], summary["skipped"]) == (1, 1, len(generations()) - 2)
    assert_totals_equal(dataset, logs)
    clean = tmp_path / "clean"
    run("export", str(logs), "--to", str(clean))
    assert_same_rows(dataset, clean)
    shutil.rmtree(logs / "v0")   # a log removed from SRC stays in the dataset: it accumulates
    run("export", str(logs), "--to", str(dataset))
    assert query.scan(dataset, "logs").collect().height == len(generations())


def test_tasks_take_many_small_logs_and_a_big_one_alone(tmp_path: Path) -> None:
    """The engine's cost per task is shared by many small logs; a big log's rows are never in flight with
    others'. Order is kept, every log is in one task."""
    sizes = [1_000] * 40 + [export_module.TASK_BYTES + 1] + [export_module.TASK_BYTES // 3] * 4 + [10]
    items = [export_module.ExportItem(tmp_path / f"{k:02}.jsonl", None, ExportOptions(), f"{k:02}", size)
             for k, size in enumerate(sizes)]   # the size as the plan took it: tasks stat nothing again
    cut = export_module.tasks(items)
    assert [item for task in cut for item in task] == items
    assert [len(task) for task in cut] == [export_module.TASK_LOGS, 8, 1, 3, 2]
    assert all(sum(item.size for item in task) <= export_module.TASK_BYTES
               for task in cut if len(task) > 1)


def test_a_run_stopped_part_way_is_completed_by_the_next(built: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    dataset, clean = tmp_path / "fleet", tmp_path / "clean"
    monkeypatch.setattr(dataset_module, "CHECKPOINT_EVERY", 2)
    monkeypatch.setattr(dataset_module, "BATCH_LOGS", 1)   # the third log's batch is written, then the run stops
    monkeypatch.setattr(export_module, "TASK_LOGS", 1)   # a task per log: the fourth log's is the one that dies

    def dies_after_three(unit: Any, items: Any, choice: Any) -> Iterator[ExportedLog]:
        for k, item in enumerate(items):
            if k == 3:
                raise KeyboardInterrupt
            yield unit(item)

    with monkeypatch.context() as patched, pytest.raises(KeyboardInterrupt):
        patched.setattr(export_module, "map_units", dies_after_three)
        export([built], dataset)
    saved = json.loads((dataset / "_manifest.json").read_text())
    assert len(saved["logs"]) == 2   # the checkpoint after two; the third's batch files are orphans
    assert [one["complete"] for one in saved["runs"]] == [False]
    named = {name for entry in saved["logs"].values() for name in entry["files"]}
    orphans = [path for _, path in written_files(dataset) if path.relative_to(dataset).as_posix() not in named]
    assert len({path.name for _, path in written_files(dataset)}) == 3 and orphans
    stray = dataset / "calls" / ".part-x.parquet.1.tmp"
    stray.write_bytes(b"half")
    dataset_module.Dataset.open(dataset)   # what the next run does first
    assert not stray.exists() and not any(path.exists() for path in orphans)
    summary = export([built], dataset)
    assert (summary.new, summary.skipped) == (len(generations()) - 2, 2)
    assert [one["complete"] for one in json.loads((dataset / "_manifest.json").read_text())["runs"]] == [False, True]
    export([built], clean)
    assert_same_rows(dataset, clean)
    assert_totals_equal(dataset, built)


def test_a_dataset_of_a_newer_dsh_audit_is_refused_untouched(built: Path, tmp_path: Path) -> None:
    dataset = tmp_path / "fleet"
    run("export", str(built / "v1"), "--to", str(dataset))
    manifest = dataset / "_manifest.json"
    document = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**document, "version": 99}))
    before = sorted(dataset.rglob("*"))
    code, out, err = run("export", str(built), "--to", str(dataset))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "newer dsh-audit (dataset format 99" in err
    assert sorted(dataset.rglob("*")) == before
    code, _, err = run("query", str(dataset))
    assert code == 2 and "newer dsh-audit" in err


def test_a_folder_that_is_no_dataset_is_refused(tmp_path: Path, built: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    code, _, err = run("export", str(built), "--to", str(tmp_path))
    assert code == 2 and "neither a dsh-audit dataset" in err and err.count("\n") == 1
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_a_file_or_no_folder_where_a_dataset_is_named_is_one_line(tmp_path: Path, built: Path) -> None:
    """--to naming a file, and query naming a file or nothing: one line naming it, exit 2, the file unchanged
    (not click's usage message)."""
    file = tmp_path / "fleet.txt"
    file.write_text("mine")
    for args, said in ((("export", str(built), "--to", str(file)), "is not a folder"),
                       (("query", str(file)), "is not a folder"),
                       (("query", str(tmp_path / "missing")), "no such dataset folder")):
        code, out, err = run(*args)
        assert (code, out) == (2, "") and err == f"audit: {args[-1]}: {said}\n", err
    assert file.read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == ["fleet.txt"]


def test_a_refused_dataset_is_refused_before_the_sources_are_listed(tmp_path: Path, built: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """--to naming a file, a folder that holds something else or a newer dsh-audit's dataset is refused before
    SRC is listed (a bucket's listing may take minutes)."""
    def listed(*_: Any, **__: Any) -> None:
        raise AssertionError("the sources were listed")

    monkeypatch.setattr(export_module, "discover_logs", listed)
    file = tmp_path / "fleet.txt"
    file.write_text("mine")
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    for target, said in ((file, "is not a folder"), (other, "is neither a dsh-audit dataset")):
        code, out, err = run("export", str(built), "--to", str(target))
        assert (code, out) == (2, "") and err.startswith(f"audit: {target}: {said}"), err
    assert file.read_text() == "mine" and [p.name for p in other.iterdir()] == ["notes.txt"]


def test_bad_sources_are_failed_rows_or_usage_errors_as_verify_makes_them(tmp_path: Path, built: Path) -> None:
    dataset = tmp_path / "fleet"
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "session.jsonl").write_text("{not json\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run("export", str(built / "v2"), str(broken), str(empty), "--to", str(dataset))
    verify_code, _, _ = run("verify", str(built / "v2"), str(broken), str(empty))
    assert code == verify_code == 2
    rows = query.scan(dataset, "logs").collect()
    failed = rows.filter(pl.col("status") == "unreadable")
    assert failed.height == 2 and failed["readError"].null_count() == 0
    assert failed["generation"].null_count() == 2   # the null partition
    assert str(broken / "session.jsonl") in err and str(empty) in err
    code, _, err = run("export", str(tmp_path / "missing"), "--to", str(tmp_path / "other"))
    assert code == run("verify", str(tmp_path / "missing"))[0] == 2 and err.count("\n") == 1
    assert not (tmp_path / "other").exists()   # refused before a new dataset's folder is made
    piped = CliRunner().invoke(main, ["export", "-", "--to", str(tmp_path / "other")], input="{}\n")
    assert piped.exit_code == 2 and piped.stderr.count("\n") == 1 and "standard input" in piped.stderr
    assert not (tmp_path / "other").exists()


def snapshot_files(dataset: Path) -> dict[Path, int]:
    """Every written file with its modification time: what a run rewrote."""
    return {path: path.stat().st_mtime_ns for _, path in written_files(dataset)}


def test_a_log_unreadable_past_its_header_fails_every_run_as_verify_fails_it(tmp_path: Path) -> None:
    """A line past the header that is not JSON: verify calls the log UNREADABLE (exit 2); so does every export
    run, the second too (it is read again, not skipped as recorded: unchanged, its rows kept as they are), and the
    summary counts it unreadable."""
    lines = (SAMPLE / "session.v3.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    log = tmp_path / "logs" / "torn" / "session.v3.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("".join([*lines[:3], "{not json\n", *lines[3:]]), encoding="utf-8")
    dataset = tmp_path / "fleet"
    assert run("verify", str(log.parent))[0] == 2
    for outcome in ("new", "unchanged"):
        written = snapshot_files(dataset)
        code, out, err = run("export", str(log.parent), "--to", str(dataset), "--json")
        document = json.loads(out)
        assert code == 2 and document[outcome] == 1 and document["skipped"] == 0, (outcome, out)
        assert [one["input"] for one in document["unreadable"]] == [str(log)]
        assert document["withoutCacheFigures"] == [] and err.count("\n") == 1
        assert outcome == "new" or snapshot_files(dataset) == written
    assert query.scan(dataset, "logs").collect()["status"].to_list() == ["unreadable"]


def test_a_relative_source_s_unreadable_logs_are_named_once_each(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """SRC given relative: each stderr line names its log once, by the path verify names it by, not also by its
    absolute path in front."""
    for name, text in (("empty", ""), ("torn", "{not json\n")):
        (tmp_path / "logs" / name).mkdir(parents=True)
        (tmp_path / "logs" / name / "session.jsonl").write_text(text)
    (tmp_path / "logs" / "dangling").mkdir()
    (tmp_path / "logs" / "dangling" / "session.jsonl").symlink_to(tmp_path / "gone.jsonl")
    monkeypatch.chdir(tmp_path)
    code, _, err = run("export", "logs", "--to", "fleet")
    lines = err.splitlines()
    assert code == 2 and len(lines) == 3, err
    for line in lines:
        assert line.startswith("audit: logs/") and line.count("session.jsonl") == 1, line


def test_an_unreadable_log_s_row_names_it_as_verify_does_and_the_page_once(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """SRC given relative: the `log` of a log that could not be read at all is verify's name for it (as a read
    log's is), so the fleet page lists it once, `name — why`, as the page over the logs does."""
    (tmp_path / "logs" / "empty").mkdir(parents=True)
    (tmp_path / "logs" / "empty" / "session.jsonl").write_text("")
    (tmp_path / "logs" / "dangling").mkdir()
    (tmp_path / "logs" / "dangling" / "session.jsonl").symlink_to(tmp_path / "gone.jsonl")
    (tmp_path / "logs" / "read").mkdir()
    shutil.copy(SAMPLE / "session.v3.jsonl", tmp_path / "logs" / "read")
    monkeypatch.chdir(tmp_path)
    run("export", "logs", "--to", "fleet")
    verified = json.loads(run("verify", "--json", "logs")[1])["logs"]
    rows = query.scan(Path("fleet"), "logs").collect()
    assert sorted(rows["log"]) == sorted(log["log"] for log in verified) == [
        "logs/dangling/session.jsonl", "logs/empty/session.jsonl", "logs/read/session.v3.jsonl"]
    for page, source in (("fleet.html", "fleet"), ("logs.html", "logs")):
        run("report", source, "-o", page)
    listed = [re.findall(r"<li>(.*?)</li>", Path(page).read_text().split('id="unreadable"')[1].split("</ul>")[0])
              for page in ("fleet.html", "logs.html")]
    assert listed[0] == listed[1] and len(listed[0]) == 2, listed
    assert all(item.count("session.jsonl") == 1 for item in listed[0]), listed


def test_the_page_of_a_dataset_with_no_log_read_is_refused_as_over_its_logs(tmp_path: Path) -> None:
    """Every log unreadable: `audit report` over the logs says the first one's error and writes no page, exit 2;
    over their dataset the same, not an empty page and exit 0."""
    (tmp_path / "logs" / "torn").mkdir(parents=True)
    (tmp_path / "logs" / "torn" / "session.jsonl").write_text("{not json\n")
    run("export", str(tmp_path / "logs"), "--to", str(tmp_path / "fleet"))
    over_logs = run("report", str(tmp_path / "logs"), "-o", str(tmp_path / "logs.html"))
    over_dataset = run("report", str(tmp_path / "fleet"), "-o", str(tmp_path / "fleet.html"))
    assert over_dataset == over_logs and over_logs[0] == 2 and over_logs[2].count("\n") == 1, over_dataset
    assert not (tmp_path / "fleet.html").exists() and not (tmp_path / "logs.html").exists()


def test_a_question_or_page_parses_the_manifest_once(built: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Each table a question scans is checked against the manifest, which holds every log (some 700 MB of JSON
    for a million): parsed once per command, not once per table."""
    dataset = tmp_path / "fleet"
    run("export", str(built), "--to", str(dataset))
    parsed = []
    monkeypatch.setattr(query, "read_manifest", lambda root: parsed.append(root) or dataset_module.read_manifest(root))
    for args in (("query", str(dataset)), ("query", str(dataset), "--question", "status", "--model", "x"),
                 ("report", str(dataset), "-o", str(tmp_path / "fleet.html"))):
        stamp = (dataset / "_manifest.json").stat().st_mtime_ns + 1
        os.utime(dataset / "_manifest.json", ns=(stamp, stamp))   # as if saved again: read anew
        parsed.clear()
        assert run(*args)[0] == 0
        assert len(parsed) == 1, args


def test_the_summary_says_what_it_passed_over_as_verify_s_does(tmp_path: Path) -> None:
    """An older generation beside its log and a .jsonl file that is no log: both named in the table's summary, in
    verify's words (they were in the JSON only)."""
    shutil.copytree(SAMPLE, tmp_path / "logs" / "session")
    (tmp_path / "logs" / "notes.jsonl").write_text('{"kind": "note"}\n')
    code, out, _ = run("export", str(tmp_path / "logs"), "--to", str(tmp_path / "fleet"))
    verified = " ".join(run("verify", str(tmp_path / "logs"))[1].split())
    said = "1 older generation(s) skipped, 1 file(s) that are not dsh logs ignored"
    assert code == 0 and said in verified and said in " ".join(out.split()), out


def test_a_log_whose_cache_figures_cannot_be_made_is_named_and_exits_2_as_cache_report_does(
        built: Path, tmp_path: Path) -> None:
    """Its verify and header rows are exported; its logs row says why as cacheError; the run names it on stderr
    in cache-report's own words and exits 2; the other logs' figures are whole."""
    sample = Path(__file__).resolve().parents[1] / "sample_logs" / "compaction-recovery" / "session.jsonl"
    over = tmp_path / "over" / "session.jsonl"
    over.parent.mkdir()
    text = sample.read_text(encoding="utf-8")
    assert '"usage":{"inputTokens":24' in text
    over.write_text(text.replace('"usage":{"inputTokens":24', '"usage":{"inputTokens":9223372036854775000'),
                    encoding="utf-8")
    refused, _, said = run("cache-report", str(over))
    dataset = tmp_path / "fleet"
    code, out, err = run("export", str(built / "v3"), str(over.parent), "--to", str(dataset), "--json")
    assert code == refused == 2 and said.strip() in err and err.count("\n") == 1
    document = json.loads(out)
    assert [one["input"] for one in document["withoutCacheFigures"]] == [str(over)]
    assert document["unreadable"] == [] and document["new"] == 2
    rows = query.scan(dataset, "logs").collect().filter(pl.col("file") == str(over))
    assert rows["cacheError"].to_list() == [said.strip().removeprefix("audit: ")]
    assert rows["status"].to_list() != ["unreadable"] and rows["costUsd"].to_list() == [None]
    assert_totals_equal(dataset, built / "v3")


def test_a_log_whose_token_sums_pass_int64_is_exported_without_cache_figures(built: Path, tmp_path: Path) -> None:
    """1,030 requests of 2**53-1 input tokens each: every count is one a report holds, their sum is not. The unit
    makes the log a withoutCacheFigures row in cache-report's words (exit 2), as a count past the bound, and
    exports its verify rows; it does not stop."""
    over = write_log(tmp_path / "over", 0, log_text(0, turns=1030).replace(str(MARK), str(2**53 - 1)))
    refused, _, said = run("cache-report", str(over))
    assert refused == 2 and "add up to" in said
    dataset = tmp_path / "fleet"
    code, out, err = run("export", str(built / "v3"), str(over.parent), "--to", str(dataset), "--json")
    assert code == 2 and said.strip() in err and err.count("\n") == 1
    document = json.loads(out)
    assert [one["input"] for one in document["withoutCacheFigures"]] == [str(over)]
    rows = query.scan(dataset, "logs").collect().filter(pl.col("file") == str(over))
    assert rows["cacheError"].to_list() == [said.strip().removeprefix("audit: ")]
    assert rows["rebuiltRequests"].to_list() == [1030] and rows["inputTokens"].to_list() == [None]
    assert query.scan(dataset, "requests").filter(pl.col("log") == str(over)).collect().height == 1030
    assert_totals_equal(dataset, built / "v3")


def test_an_unreadable_input_given_relatively_is_named_once_on_stderr(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader's error names a log as it was given (relative, here); the run's line names it once, as
    cache-report's does, not after its absolute path as well."""
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "corrupt.jsonl").write_text('{"not a header"\n', encoding="utf-8")
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path)
    code, _, err = run("export", "logs/corrupt.jsonl", "empty", "--to", "fleet")
    _, _, said = run("cache-report", "logs/corrupt.jsonl")
    assert code == 2
    assert err.splitlines() == ["audit: empty: no dsh log below this directory",
                                "audit: logs/corrupt.jsonl:1: session header line: not valid JSON (unexpected end of "
                                "data); expected a JSON object"]
    assert err.splitlines()[1] == said.strip()


def test_the_unit_of_work_is_picklable_and_self_describing(built: Path) -> None:
    [log] = (built / "v3").glob("session*.jsonl")
    exported = pickle.loads(pickle.dumps(export_log(log, None, ExportOptions())))
    assert exported.size == log.stat().st_size and exported.error is None
    assert set(exported.tables) == set(TABLES)
    assert exported.tables["logs"].num_rows == 1 and exported.tables["calls"].num_rows > 0


@pytest.mark.parametrize("width", [60, 80])
def test_query_s_table_keeps_what_waste_is_ranked_by_on_a_narrow_terminal(width: int, built: Path,
                                                                          tmp_path: Path) -> None:
    """The counts give way first, not lostUsd (the order of the answer), the cost or the hit ratio; a long
    project is cut at its start, so every line fits."""
    dataset = tmp_path / "fleet"
    run("export", str(built), "--to", str(dataset))
    answer = query.waste(dataset, "project", CallFilter())
    answer = pl.concat([answer.with_columns(project=pl.lit("/home/someone/work/" + "deep/" * 12 + "the-project")),
                        answer.with_columns(project=pl.lit("/tmp"))])
    lines = render(answer, Terminal(width, color=False), wide=False).splitlines()
    assert {"project", "hitRatio", "lostUsd", "costUsd"} <= set(lines[0].split()), lines[0]
    assert all(len(line) <= width for line in lines) and lines[1].lstrip().startswith("…"), lines


@pytest.mark.parametrize("question", ["totals", "waste", "breaks", "status"])
@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
def test_query_answers_each_question_in_each_format(question: str, fmt: str, built: Path, tmp_path: Path) -> None:
    dataset = tmp_path / "fleet"
    run("export", str(built), "--to", str(dataset))
    code, out, err = run("query", str(dataset), "--question", question, "--format", fmt)
    assert code == 0 and out and not err
    if fmt == "json":
        assert json.loads(out)["schema"] == f"dsh-audit/query/{question}"
        assert run("query", str(dataset), "--question", question, "--json") == (code, out, err)
        exported = run("export", str(built), "--to", str(dataset), "--json")
        assert exported == run("export", str(built), "--to", str(dataset), "--format", "json")
        assert exported[0] == 0 and json.loads(exported[1])["schema"] == "dsh-audit/export"


def test_the_page_s_explain_commands_work_from_any_folder(bench_like: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A dataset exported from relative paths: its page's `audit explain` commands name each log by its real
    path, so they explain the collapse run from another folder (they named the path the export was given)."""
    shutil.copytree(bench_like, tmp_path / "logs")
    monkeypatch.chdir(tmp_path)
    run("export", "logs", "--to", "fleet")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, _, _ = run("report", str(tmp_path / "fleet"), "-o", "page.html")
    commands = set(re.findall(r"audit explain ([^<]+)", html.unescape((elsewhere / "page.html").read_text())))
    assert code == 0 and commands
    for command in commands:
        log, call = shlex.split(command)
        assert Path(log).is_absolute() and Path(log).is_relative_to(tmp_path / "logs"), command
        explained, said, err = run("explain", log, call)
        assert explained in (0, 1) and said and not err, command


@pytest.mark.parametrize("question", ["totals", "breaks", "status"])
def test_by_with_a_question_that_has_no_groups_is_bad_usage(question: str, built: Path, tmp_path: Path) -> None:
    """--by groups waste only: given with another question it is refused, not silently ignored."""
    dataset = tmp_path / "fleet"
    run("export", str(built), "--to", str(dataset))
    code, out, err = run("query", str(dataset), "--question", question, "--by", "day")
    assert (code, out) == (2, "") and f"--question {question} has no groups" in err


def query_answers(dataset: Path) -> list[str]:
    """Every question's answer as JSON: --by each grouping, and with a filter."""
    asked = [("--question", "totals"), ("--question", "totals", "--model", "deepseek-v4-pro"),
             ("--question", "breaks"), ("--question", "status"),
             *(("--question", "waste", "--by", by) for by in ("model", "project", "day"))]
    return [run("query", str(dataset), *question, "--json")[1] for question in asked]


def test_query_s_sums_are_exact_whatever_the_dataset_s_files_and_the_logs_order(built: Path, bench_like: Path,
                                                                                tmp_path: Path) -> None:
    """Costs are summed exactly (math.fsum), as cache-report sums them: a dataset written in one run and one
    written a log per run, last first (a batch file each, in other folders' order), answer the same bytes, and
    their totals are cache-report's over the logs given in either order. Polars' float sums, which add chunk by
    chunk and thread by thread, differed in the last digits with the files, the run and the order of the logs."""
    copies = [shutil.copytree(folder, tmp_path / f"{folder.name}-{copy}") for copy in range(2)
              for folder in sorted(bench_like.iterdir())]   # more logs than partitions: files share a folder
    folders = [*sorted(bench_like.iterdir()), *copies, *sorted(built.iterdir())]
    at_once, one_by_one = tmp_path / "at-once", tmp_path / "one-by-one"
    assert run("export", *map(str, folders), "--to", str(at_once), "-j", "2")[0] == 0
    for folder in reversed(folders):
        assert run("export", str(folder), "--to", str(one_by_one), "-j", "1")[0] == 0
    files = [len(list((dataset / "calls").rglob("*.parquet"))) for dataset in (at_once, one_by_one)]
    assert files[1] > files[0]
    answers = query_answers(at_once)
    assert query_answers(one_by_one) == answers and query_answers(at_once) == answers
    [got] = json.loads(answers[0])["rows"]
    for given in (folders, folders[::-1]):
        code, out, _ = run("cache-report", "--rows", "totals", "--json", *map(str, given))
        assert code == 0 and json.loads(out)["rows"] == [got]
    own = query.scan(one_by_one, "calls").filter(~pl.col("inherited")).collect()
    assert got["costUsd"] == math.fsum(own["costUsd"].drop_nulls().to_list())
    assert got["collapseCostUsd"] == math.fsum(own.filter(pl.col("collapse"))["collapseCostUsd"].drop_nulls().to_list())
    by_model = {row["model"]: row for row in json.loads(answers[4])["rows"]}
    for model, row in by_model.items():
        costs = own.filter(pl.col("model") == model)["costUsd"].drop_nulls().to_list()
        assert row["costUsd"] == math.fsum(costs), model
    code, out, _ = run("cache-report", "--by", "model", "--json", *map(str, folders[::-1]))
    rolled = {row["group"]: row for row in json.loads(out)["rows"]}
    assert code == 0 and rolled.keys() == by_model.keys()
    for model, row in rolled.items():
        assert (row["costUsd"], row["collapseCostUsd"]) == (by_model[model]["costUsd"], by_model[model]["lostUsd"])


def test_waste_gives_an_unpriced_model_no_cost_as_cache_report_does(tmp_path: Path) -> None:
    """A model no price is known for has no cost (null, shown "-"), never $0: waste's groups equal cache-report
    --by model's, priced or not."""
    if not (LOGS_ROOT / "manifest.json").exists():
        pytest.skip(f"shared corpus {LOGS_ROOT} not present")
    run("export", str(LOGS_ROOT), "--to", str(tmp_path / "fleet"))
    waste = json.loads(run("query", str(tmp_path / "fleet"), "--question", "waste", "--by", "model", "--json")[1])
    rolled = json.loads(run("cache-report", "--by", "model", "--json", str(LOGS_ROOT))[1])
    costs = {row["model"]: (row["costUsd"], row["lostUsd"]) for row in waste["rows"]}
    assert costs == {row["group"]: (row["costUsd"], row["collapseCostUsd"]) for row in rolled["rows"]}
    assert None in {cost for cost, _ in costs.values()}, "the corpus logs a model without a price"


FILTERS = [("--since", "2026-12-01"), ("--until", "2026-12-01"), ("--model", "deepseek-v4-pro"),
           ("--project", "/work/shop"), ("--project", "/work/shop-api", "--since", "2026-11-01"),
           ("--since", "2026-12-01T08:00", "--until", "2026-12-01T12:03", "--timezone", "UTC"),
           ("--since", "2026-12-01", "--timezone", "Asia/Shanghai"), ("--model", "no-such-model")]


@pytest.fixture(scope="module")
def timed_fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """test_filters_everywhere's three sessions of known times, models and projects, with an unreadable log
    beside them, and their dataset."""
    home = build_timed_home(tmp_path_factory.mktemp("home"))
    (home / "broken").mkdir()
    (home / "broken" / "session.jsonl").write_text("{not json\n")
    dataset = tmp_path_factory.mktemp("timed") / "fleet"
    assert run("export", str(home), "--to", str(dataset))[0] == 2   # the unreadable log: a failed row
    return home, dataset


@pytest.mark.parametrize("filters", FILTERS, ids=" ".join)
def test_query_s_filters_count_the_calls_cache_report_counts_with_them(filters: tuple[str, ...],
                                                                       timed_fleet: tuple[Path, Path]) -> None:
    home, dataset = timed_fleet
    assert_totals_equal(dataset, home, *filters)
    _, out, _ = run("cache-report", "--rows", "logs", "--json", str(home), *filters)
    kept = {row["log"] for row in json.loads(out)["rows"]}
    by_model = query.waste(dataset, "model", chosen_filter(filters))
    [totals] = query.totals(dataset, chosen_filter(filters)).to_dicts()
    assert by_model["requests"].sum() == totals["requests"] and by_model["collapses"].sum() == totals["collapses"]
    assert query.breaks(dataset, chosen_filter(filters))["collapses"].sum() == totals["collapses"]
    assert query.status(dataset, chosen_filter(filters))["logs"].sum() == len(kept) + 1   # and the unreadable


def chosen_filter(filters: tuple[str, ...]) -> CallFilter:
    """The CallFilter of the options given, as the CLI reads them."""
    options = dict(zip(filters[::2], filters[1::2], strict=True))
    return cli_filter(options.get("--since"), options.get("--until"), options.get("--timezone"),
                      tuple(v for k, v in zip(filters[::2], filters[1::2], strict=True) if k == "--model"),
                      tuple(v for k, v in zip(filters[::2], filters[1::2], strict=True) if k == "--project"))


def test_query_s_filters_keep_unreadable_logs_in_status_and_read_times_as_the_cli_does(
        timed_fleet: tuple[Path, Path]) -> None:
    _, dataset = timed_fleet
    code, out, _ = run("query", str(dataset), "--question", "status", "--json", "--model", "deepseek-v4-pro")
    assert code == 0
    [row] = [row for row in json.loads(out)["rows"] if row["unreadable"]]
    assert row["unreadable"] == 1
    assert sum(row["logs"] for row in json.loads(out)["rows"]) == 2   # docs, and the unreadable one
    code, out, err = run("query", str(dataset), "--since", "yesterday-ish")
    assert code == 2 and out == "" and "Invalid value for --since" in err


def test_export_and_query_outputs_keep_to_their_schemas(built: Path, tmp_path: Path) -> None:
    from jsonschema import Draft202012Validator

    from dsh_audit.output_schemas import schema

    dataset = tmp_path / "fleet"
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "session.jsonl").write_text("{not json\n")
    _, out, _ = run("export", str(built), str(broken), "--to", str(dataset), "--json")
    Draft202012Validator(schema("export")).validate(json.loads(out))
    for question, by in (("totals", ()), ("breaks", ()), ("status", ()),
                         *(("waste", ("--by", by)) for by in ("model", "project", "day"))):
        _, out, _ = run("query", str(dataset), "--question", question, *by, "--json")
        document = json.loads(out)
        Draft202012Validator(schema(f"query-{question}")).validate(document)
        assert document["rows"], question
        parquet = tmp_path / f"{question}-{'-'.join(by)}.parquet"
        run("query", str(dataset), "--question", question, *by, "--out", str(parquet))
        rows = Draft202012Validator({"$ref": "#/$defs/row", "$defs": schema(f"query-{question}")["$defs"]})
        for row in pl.read_parquet(parquet).with_columns(pl.col(pl.Date).cast(pl.String)).iter_rows(named=True):
            rows.validate(row)


def test_small_files_are_compacted_and_a_compacted_log_can_still_be_replaced(built: Path, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    logs = tmp_path / "logs"
    for copy in range(4):   # four sessions of each generation: several logs in each partition folder
        shutil.copytree(built, logs / f"copy{copy}")
    monkeypatch.setattr(dataset_module, "COMPACT_AT", 2)
    monkeypatch.setattr(dataset_module, "BATCH_LOGS", 2)   # batches of two logs: four files in each partition
    dataset, clean = tmp_path / "fleet", tmp_path / "clean"
    summary = export([logs], dataset)
    assert summary.compacted > 0
    names = {path.name for _, path in written_files(dataset)}
    assert any(name.startswith("compact-") for name in names)
    assert not any(name.startswith("batch-") for name in names)
    manifest = json.loads((dataset / "_manifest.json").read_text())
    named = {name for entry in manifest["logs"].values() for name in entry["files"]}
    assert named == {path.relative_to(dataset).as_posix() for _, path in written_files(dataset)}
    changed = logs / "copy2" / "v4"
    write_log(changed, 4, log_text(4, turns=5))
    again = export([logs], dataset)
    assert (again.replaced, again.skipped) == (1, summary.files - 1)
    monkeypatch.setattr(dataset_module, "COMPACT_AT", 1000)
    export([logs], clean)
    assert_same_rows(dataset, clean)
    assert_totals_equal(dataset, logs)


def test_a_changed_log_is_removed_from_its_batch_file_which_keeps_the_others(built: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    for copy in range(3):   # three sessions of each generation: each batch file holds several logs
        shutil.copytree(built, logs / f"copy{copy}")
    dataset, clean = tmp_path / "fleet", tmp_path / "clean"
    export([logs], dataset)
    [batch] = {path.name for _, path in written_files(dataset)}
    write_log(logs / "copy1" / "v4", 4, log_text(4, turns=5))
    again = export([logs], dataset)
    assert again.replaced == 1
    manifest = json.loads((dataset / "_manifest.json").read_text())
    named = {name for entry in manifest["logs"].values() for name in entry["files"]}
    assert named == {path.relative_to(dataset).as_posix() for _, path in written_files(dataset)}
    changed = next(entry for entry in manifest["logs"].values() if "copy1/v4" in entry["file"])
    assert not any(name.endswith(batch) for name in changed["files"])   # its rows left the batch file,
    assert any(name.endswith(batch) for name in named)                  # which still holds the others
    export([logs], clean)
    assert_same_rows(dataset, clean)
    assert_totals_equal(dataset, logs)


def test_a_format_1_dataset_s_single_log_files_are_replaced_and_compacted(built: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A dataset written before batches: a file per log (`part-`), which a changed log's rows leave whole."""
    logs = tmp_path / "logs"
    for copy in range(3):
        shutil.copytree(built, logs / f"copy{copy}")
    dataset, clean = tmp_path / "fleet", tmp_path / "clean"
    monkeypatch.setattr(dataset_module, "BATCH_LOGS", 1)
    export([logs], dataset)
    manifest = json.loads((dataset / "_manifest.json").read_text())
    for key, entry in manifest["logs"].items():   # renamed as format 1 named them: one file per log
        singles = [re.sub(r"/batch-(\w+)", rf"/part-{key}-\1", name) for name in entry["files"]]
        for name, single in zip(entry["files"], singles, strict=True):
            os.replace(dataset / name, dataset / single)
        entry["files"] = singles
    manifest["version"] = 1
    (dataset / "_manifest.json").write_text(json.dumps(manifest))
    write_log(logs / "copy1" / "v4", 4, log_text(4, turns=5))
    monkeypatch.setattr(dataset_module, "COMPACT_AT", 2)
    again = export([logs], dataset)
    assert (again.replaced, again.compacted > 0) == (1, True)
    assert json.loads((dataset / "_manifest.json").read_text())["version"] == DATASET_VERSION
    assert not any(path.name.startswith("part-") for _, path in written_files(dataset))
    export([logs], clean)
    assert_same_rows(dataset, clean)


def test_a_log_reached_through_a_linked_folder_is_the_log_at_its_real_path(built: Path, tmp_path: Path) -> None:
    logs, linked, dataset = tmp_path / "logs", tmp_path / "linked", tmp_path / "fleet"
    shutil.copytree(built, logs)
    linked.symlink_to(logs, target_is_directory=True)
    first = export([linked], dataset)
    assert first.new == len(generations())
    again = export([logs], dataset)
    assert (again.new, again.skipped) == (0, len(generations()))
    files = query.scan(dataset, "logs").collect()["file"].to_list()
    assert sorted(files) == sorted(str(path) for path in logs.rglob("session*.jsonl*"))


def test_a_log_exported_before_and_unreadable_now_keeps_its_rows(built: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    shutil.copytree(built, logs)
    dataset = tmp_path / "fleet"
    run("export", str(logs), "--to", str(dataset))
    before = snapshot(dataset)
    [log] = (logs / "v2").glob("session*.jsonl")
    log.write_text("{torn")   # rewritten into no log at all: a log that vanished mid-run reads the same
    code, out, err = run("export", str(logs), "--to", str(dataset), "--json")
    assert code == 2 and json.loads(out)["kept"] == 1 and str(log) in err
    after = snapshot(dataset)
    for table in TABLES:
        assert after[table].equals(before[table]), table


def test_a_log_that_vanishes_mid_run_is_one_line_and_loses_nothing_exported(built: Path, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A log listed when the run is planned and gone when its unit reads it: one line naming it, exit 2, the
    other logs exported; one exported before (and changed since, so read again) keeps its earlier rows."""
    logs = tmp_path / "logs"
    shutil.copytree(built, logs)
    dataset = tmp_path / "fleet"
    [known] = (logs / "v2").glob("session*.jsonl")
    [new] = (logs / "v3").glob("session*.jsonl")
    new.rename(tmp_path / new.name)   # not there for the first run
    run("export", str(logs), "--to", str(dataset))
    before = snapshot(dataset)
    (tmp_path / new.name).rename(new)
    known.write_text(known.read_text() + "\n")   # changed: planned for reading again
    planned = export_module.export_task

    def vanishing(task: list[Any]) -> Any:
        for log in (known, new):
            log.unlink(missing_ok=True)
        return planned(task)

    monkeypatch.setattr(export_module, "export_task", vanishing)
    code, out, err = run("export", str(logs), "--to", str(dataset), "--json", "-j", "1")
    summary = json.loads(out)
    assert code == 2 and (summary["kept"], summary["new"]) == (1, 1), summary
    assert sorted(err.splitlines()) == sorted(f"audit: {log}: this log cannot be read: No such file or directory"
                                              for log in (known, new)), err
    after = snapshot(dataset)
    for table in TABLES:   # the known log's rows as before; the new one a failed logs row and no other row
        kept = after[table].filter(pl.col("key") != export_module.log_key(str(new)))
        assert kept.equals(before[table]), table


def doc_blocks(language: str) -> list[str]:
    text = (Path(__file__).resolve().parents[1] / "docs" / "fleet.md").read_text(encoding="utf-8")
    return [block.split("```", 1)[0] for block in text.split(f"```{language}\n")[1:]]


def test_the_documented_polars_and_duckdb_queries_answer_as_audit_query(built: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    duckdb = pytest.importorskip("duckdb")
    logs = tmp_path / "logs"
    for copy in range(2):
        shutil.copytree(built, logs / f"copy{copy}")
    run("export", str(logs), str(build_messy_home(tmp_path / "sessions")), "--to", str(tmp_path / "fleet"))
    monkeypatch.chdir(tmp_path)   # the snippets name the dataset fleet/
    by_model = query.waste(Path("fleet"), "model").sort("model", nulls_last=True)
    snippet = doc_blocks("python")[0]   # the second is the Ray job
    scope: dict[str, Any] = {}
    exec(compile(snippet.replace("(own.group_by", "answer = (own.group_by"), "fleet.md", "exec"), scope)
    polars_answer = scope["answer"].sort("model", nulls_last=True)
    assert polars_answer["lostUsd"].to_list() == pytest.approx(by_model["lostUsd"].to_list())
    assert polars_answer["hit"].to_list() == pytest.approx(by_model["hitRatio"].to_list(), nan_ok=True)
    [sql] = doc_blocks("sql")
    models, projects, statuses = (duckdb.sql(statement).fetchall()
                                  for statement in sql.split(";") if statement.strip())
    assert sorted((m, pytest.approx(lost)) for m, lost, _ in models if m) == \
           sorted((m, pytest.approx(lost)) for m, lost in by_model.select("model", "lostUsd").rows() if m)
    by_project = query.waste(Path("fleet"), "project")
    assert {p: lost for p, lost in projects} == pytest.approx(dict(by_project.select("project", "lostUsd").rows()))
    verdicts = query.scan(Path("fleet"), "logs").group_by("generation", "status").len().collect().rows()
    assert sorted(statuses, key=str) == sorted(verdicts, key=str)


@pytest.mark.parametrize("planted", ["calls", "_manifest.json"])
def test_a_link_planted_in_the_dataset_is_never_written_through(planted: str, built: Path, tmp_path: Path) -> None:
    dataset, elsewhere = tmp_path / "fleet", tmp_path / "elsewhere"
    run("export", str(built / "v1"), "--to", str(dataset))
    elsewhere.mkdir()
    target = dataset / planted
    if planted == "calls":
        shutil.rmtree(target)
        target.symlink_to(elsewhere, target_is_directory=True)
    else:
        (elsewhere / planted).write_bytes(target.read_bytes())
        target.unlink()
        target.symlink_to(elsewhere / planted)
    code, _, err = run("export", str(built), "--to", str(dataset))
    assert code == 2 and err.count("\n") == 1 and "link" in err
    assert [path.name for path in elsewhere.iterdir()] == ([] if planted == "calls" else [planted])


def page_parts(page: str) -> tuple[str, list[str], int]:
    """The page's summary, its sessions table's rows (sorted: ties may rank in another order) and how many
    sessions it draws. Without the explain commands: a dataset's page names each log by its path there (explain
    reads logs, not a dataset), the logs' page by `--session PREFIX` where that picks it."""
    page = re.sub(r'<td class="cmd">.*?</td>', "", page)
    summary = page.split('<p id="summary">', 1)[1].split("</p>", 1)[0]
    table = page.split('<tbody>', 1)[1].split("</tbody>", 1)[0] if '<table class="sortable"' in page else ""
    return summary, sorted(table.split("<tr>")), page.count('<section class="session"')


@pytest.mark.parametrize("name", ["bench", "home"])
def test_report_of_a_dataset_is_the_report_of_its_logs(name: str, built: Path, tmp_path: Path,
                                                       bench_like: Path) -> None:
    logs, dataset = sources(name, built, tmp_path, bench_like), tmp_path / "fleet"
    run("export", str(logs), "--to", str(dataset))
    code, _, err = run("report", str(dataset), "-o", str(tmp_path / "fleet.html"))
    assert code == 0, err
    run("report", str(logs), "-o", str(tmp_path / "logs.html"))
    fleet, direct = ((tmp_path / page).read_text(encoding="utf-8") for page in ("fleet.html", "logs.html"))
    assert page_parts(fleet) == page_parts(direct)


@pytest.mark.parametrize("filters", [("--since", "2026-12-01"), ("--project", "/work/shop"),
                                     ("--model", "no-such-model")], ids=" ".join)
def test_a_filtered_report_of_a_dataset_is_the_filtered_report_of_its_logs(
        filters: tuple[str, ...], timed_fleet: tuple[Path, Path], tmp_path: Path) -> None:
    home, dataset = timed_fleet
    code, out, err = run("report", str(dataset), "-o", str(tmp_path / "fleet.html"), *filters)
    assert code == 0, err
    direct_run = run("report", str(home), "-o", str(tmp_path / "logs.html"), *filters)

    def sized(text: str) -> str:   # the pages' sizes differ by their explain commands (paths or --session)
        return re.sub(r"\(\d[\d.]*[KM]?B\)", "(size)", text)

    # the same counts, the same left out
    assert (sized(direct_run[1]), direct_run[2]) == (sized(out.replace("fleet.html", "logs.html")), err)
    fleet, direct = ((tmp_path / page).read_text(encoding="utf-8") for page in ("fleet.html", "logs.html"))
    assert page_parts(fleet) == page_parts(direct)


def test_a_link_planted_at_a_temporary_name_is_removed_not_written_through(built: Path, tmp_path: Path) -> None:
    dataset, elsewhere = tmp_path / "fleet", tmp_path / "elsewhere.json"
    run("export", str(built / "v1"), "--to", str(dataset))
    elsewhere.write_text("mine")
    (dataset / f"._manifest.json.{os.getpid()}.tmp").symlink_to(elsewhere)
    code, _, err = run("export", str(built), "--to", str(dataset))
    assert code == 0, err
    assert elsewhere.read_text() == "mine"
    assert json.loads((dataset / "_manifest.json").read_text())["runs"][-1]["complete"]


def test_memory_holds_one_log_s_rows_not_the_run_s(built: Path, tmp_path: Path) -> None:
    """Ten times the logs, about the same peak: each log's rows are written as they arrive."""
    from cli_child import run_audit

    peaks = {}
    for copies in (8, 80):
        logs = tmp_path / f"logs{copies}"
        for copy in range(copies):
            shutil.copytree(built, logs / f"copy{copy}")
        done = run_audit("export", logs, "--to", tmp_path / f"fleet{copies}", as_limit=4 << 30, timeout=300)
        assert done.code == 0, done.err
        peaks[copies] = done.peak_rss
    assert peaks[80] < peaks[8] + (24 << 20), peaks
