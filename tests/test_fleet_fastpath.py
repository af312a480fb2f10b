"""The export's unit and audit report read a log by the fast path where it decides it (dsh_audit.reports.fast_walk)
and walk it in full elsewhere: every table's rows are the same either way, row for row, over the corpus, the wild
logs, the sample logs, a log of every generation, benchmark-like logs (compactions under pressure, zstd, v0, v3,
v4) and a run of forks; and so are the report's parts. DSH_AUDIT_FAST_PATH=0 forces the full walk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import test_fleet
from conftest_reference import LOGS_ROOT
from dsh_audit.fastpath import SWITCH
from dsh_audit.fleet.unit import ExportedLog, ExportOptions, export_log
from dsh_audit.readers.discover import discover_logs, local_files
from dsh_audit.reports import one_walk
from dsh_audit.reports.one_walk import read_once
from test_numbers import every_generation
from test_one_walk import assert_same

REPO = Path(__file__).resolve().parent.parent
built, bench_like = test_fleet.built, test_fleet.bench_like   # its fixtures, shared
WILD = [REPO / "tests" / "fixtures" / "wild", REPO.parent / "shared" / "wild-logs"]


@pytest.fixture(scope="module")
def one_turn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log of each generation the fast path decides (test_fleet's of three turns have findings from v2 on)."""
    return every_generation(tmp_path_factory.mktemp("one-turn"), turns=1)


@pytest.fixture(scope="module")
def forks(bench_like: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of three logs: a parent (benchmarks' v0 log), a child seeded with its first 40 events and one
    matched by its id alone (the parent is then walked in full: header-diff searches its every event)."""
    root = tmp_path_factory.mktemp("forks")
    header, rest = (bench_like / "a" / "session.jsonl").read_bytes().split(b"\n", 1)
    parent = json.loads(header)
    (root / "session.jsonl").write_bytes(header + b"\n" + rest)
    for name, extra in (("session.1.jsonl", {"seedLength": 40}), ("session.2.jsonl", {})):
        child = {**parent, "id": f"child-{name}", "parentSession": parent["id"], **extra}
        (root / name).write_bytes(json.dumps(child).encode() + b"\n" + rest)
    return root


def folders(name: str, built: Path, bench_like: Path, one_turn: Path, forks: Path) -> list[Path]:
    if name == "built":
        return [built, one_turn]
    if name == "bench":
        return [bench_like, forks]
    if name == "samples":
        return [REPO / "sample_logs"]
    if name == "wild":
        return [folder for folder in WILD if folder.is_dir()]
    if not (LOGS_ROOT / "manifest.json").exists():
        pytest.skip(f"shared corpus {LOGS_ROOT} not present")
    return [LOGS_ROOT]


def exported(paths: list[Path]) -> dict[str, ExportedLog]:
    found = discover_logs(paths, all_generations=True)
    return {str(file): export_log(file, found.found_in.get(file), ExportOptions())
            for file in local_files(found)}


def facts(log: ExportedLog) -> dict[str, Any]:
    return {"rows": log.rows, "blocks": log.blocks, "error": log.error, "cache_error": log.cache_error,
            "key": log.key, "sha256": log.sha256}


@pytest.mark.parametrize("name", ["corpus", "wild", "samples", "built", "bench"])
def test_every_table_s_rows_are_the_full_walk_s(name: str, built: Path, bench_like: Path,
                                                one_turn: Path, forks: Path, monkeypatch: pytest.MonkeyPatch
                                                ) -> None:
    paths = folders(name, built, bench_like, one_turn, forks)
    taken = []
    fast_parts = one_walk.fast_parts

    def counted(*args: Any, **kwargs: Any) -> Any:
        parts = fast_parts(*args, **kwargs)
        taken.append(parts is not None)
        return parts

    monkeypatch.setattr(one_walk, "fast_parts", counted)
    fast = exported(paths)
    assert any(taken) or name in ("corpus", "wild"), "the fast path decided no log: the comparison says nothing"
    monkeypatch.setenv(SWITCH, "0")
    taken.clear()
    full = exported(paths)
    assert not any(taken)
    assert fast.keys() == full.keys()
    for file, log in fast.items():
        mine, theirs = facts(log), facts(full[file])
        for part, value in mine.items():
            if part != "rows":
                assert value == theirs[part], (file, part)
        for table, columns in mine["rows"].items():
            for column, values in columns.items():
                assert values == theirs["rows"][table][column], (file, table, column)


def test_the_report_s_parts_are_the_full_walk_s_over_a_run_of_forks(forks: Path, bench_like: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """audit report reads a folder as one run: the seeded child's fork point comes from the parent's fast pass,
    the child matched by its id alone has its parent walked in full."""
    fast = read_once([forks, bench_like])
    monkeypatch.setenv(SWITCH, "0")
    assert_same(fast, read_once([forks, bench_like]))
    assert fast.headers.filter(pl.col("against").str.contains("seedLength 40")).height == 1
