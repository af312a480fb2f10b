"""`audit report` reads each log once (dsh_audit.reports.one_walk): one walk feeds verify's checks, cache-report's
calls and header-diff's snapshots, and the page's three parts equal what build_cache_report (its defaults),
build_header_diff and verify_paths give over the same logs: every generation, forks, unreadable and torn logs,
a count no report row holds, a flat folder of more logs than a run keeps open."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from conftest_reference import LOGS_ROOT, require_corpus
from dsh_audit.cli import main
from dsh_audit.fastpath import Decided, decide
from dsh_audit.generations import generation, generations
from dsh_audit.readers import jsonl, open_logs
from dsh_audit.readers.discover import discover_logs
from dsh_audit.readers.found import opener
from dsh_audit.readers.home import session_origin
from dsh_audit.records import LogSource
from dsh_audit.reports.cache_report import CacheOptions, build_cache_report
from dsh_audit.reports.header_diff import build_header_diff
from dsh_audit.reports.html import verify_findings
from dsh_audit.reports.one_walk import KEPT_OPEN, PageParts, read_once
from dsh_audit.verify import verify_paths
from homebuilder import build_messy_home
from test_cache_report import write_jsonl
from test_html_report import many_sessions, tiny_session
from test_numbers import bad_log, every_generation, log_text, write_log

REPO = Path(__file__).resolve().parent.parent
GENERATIONS = REPO / "tests" / "fixtures" / "generations"
WILD = REPO / "tests" / "fixtures" / "wild"


def three_commands(paths: list[Path], *, all_generations: bool = False,
                   allow_events: tuple[str, ...] = ()) -> PageParts:
    """The page's parts as the three commands give them, each reading every log itself."""
    cache = build_cache_report(paths, CacheOptions(), all_generations=all_generations)
    headers = build_header_diff(paths, all_generations=all_generations, unreadable=[])
    findings = verify_findings(verify_paths(paths, keep_requests=False, all_generations=all_generations,
                                            allow_events=allow_events))
    origins = {}
    for label in cache.logs["log"].to_list():
        [source] = [one for one in open_logs(label.partition("#")[0]) if one.label == label]
        origins[label] = session_origin(source.header)
        source.close()
    return PageParts(cache, headers, findings, origins)


def assert_same(once: PageParts, three: PageParts) -> None:
    for kind in ("requests", "logs", "totals"):
        assert once.cache.rows(kind).equals(three.cache.rows(kind)), kind
    assert (once.cache.block, once.cache.block_basis) == (three.cache.block, three.cache.block_basis)
    assert once.cache.unreadable == three.cache.unreadable
    assert once.cache.skipped == three.cache.skipped
    assert once.headers.equals(three.headers)
    assert once.findings.shown.equals(three.findings.shown)
    assert once.findings.tally.equals(three.findings.tally)
    assert once.findings.skipped == three.findings.skipped
    assert once.origins == three.origins


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of one built log of each known generation (test_numbers' one-turn log), a session folder each."""
    return every_generation(tmp_path_factory.mktemp("built"), turns=2)


def versions_below(folder: Path) -> set[int]:
    return {json.loads(path.read_bytes().split(b"\n", 1)[0]).get("version", 0)
            for path in folder.rglob("session*.jsonl")}


def test_what_is_read_holds_every_generation_and_forks(built: Path) -> None:
    """The tests below read each known generation, seeded and spawned children (the upstream fixtures, which
    also hold a newer generation's log, unreadable), and a built log of each generation."""
    known = {known.version for known in generations()}
    assert versions_below(built) == known and versions_below(GENERATIONS) >= known - {1}
    assert sum(".1." in path.name for path in GENERATIONS.rglob("session*.jsonl")) >= 5


@pytest.mark.parametrize("all_generations", [False, True], ids=["newest", "all-generations"])
def test_every_generation_reads_as_the_three_commands_read_it(built: Path, all_generations: bool) -> None:
    once = read_once([GENERATIONS, built], all_generations=all_generations)
    assert once.cache.logs.height > 10 and once.headers.height > 10 and once.findings.tally.height > 0
    assert once.cache.unreadable   # the newer generation's log
    assert_same(once, three_commands([GENERATIONS, built], all_generations=all_generations))


def test_a_messy_home_and_allowed_events(tmp_path: Path) -> None:
    """A newer dsh's session and a torn one are left out of the figures and named, as each command does; the
    wild logs' product events are allowed as verify allows them."""
    home = build_messy_home(tmp_path / "sessions")
    once = read_once([home, WILD], allow_events=("lyteboat.*",))
    assert len(once.cache.unreadable) == 2
    assert_same(once, three_commands([home, WILD], allow_events=("lyteboat.*",)))


def test_a_count_no_row_holds_leaves_the_log_out_of_the_figures_alone(tmp_path: Path) -> None:
    """cache-report refuses the log (its error names the count); verify still reports every finding of it, and
    header-diff its snapshots."""
    bad = bad_log(tmp_path / "bad", 3, "2**63")
    good = write_log(tmp_path / "good", 4, log_text(4))
    once = read_once([bad, good])
    assert [u.label for u in once.cache.unreadable] == [str(bad)]
    assert once.findings.tally.filter(pl.col("log") == str(bad)).height > 0
    assert once.headers.filter(pl.col("log") == str(bad)).height > 0
    assert_same(once, three_commands([bad, good]))


def test_nothing_readable_raises_the_first_reason_as_cache_report_does(tmp_path: Path) -> None:
    home = build_messy_home(tmp_path / "sessions")
    unreadable = [path for path in home.rglob("*.jsonl") if "v5" in path.name or "torn" in str(path)]
    with pytest.raises(Exception) as once:
        read_once(unreadable)
    with pytest.raises(Exception) as three:
        build_cache_report(unreadable, CacheOptions())
    assert str(once.value) == str(three.value) and type(once.value) is type(three.value)


def test_a_flat_folder_past_the_kept_runs(tmp_path: Path) -> None:
    folder = many_sessions(tmp_path / "sessions", KEPT_OPEN + 4)
    assert_same(read_once([folder]), three_commands([folder]))


def test_the_corpus() -> None:
    require_corpus()
    assert_same(read_once([LOGS_ROOT]), three_commands([LOGS_ROOT]))


# -- once ------------------------------------------------------------------------------------------------------
class Reads:
    """Per log file, how often a reader opened it (readers.jsonl.opener: the walk's reader, a reopened one, the
    fast paths' second reader of its bytes) and how often its events were streamed (LogSource.records)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.opened: Counter[str] = Counter()
        self.streamed: Counter[str] = Counter()
        records = LogSource.records

        def counted_opener(path: Path, below: Path | None, buffering: int = -1) -> Any:
            self.opened[str(path)] += 1
            return opener(path, below, buffering)

        def counted_records(source: LogSource, *, expand: bool = True) -> Any:
            self.streamed[source.label] += 1
            return records(source, expand=expand)

        monkeypatch.setattr(jsonl, "opener", counted_opener)
        monkeypatch.setattr(LogSource, "records", counted_records)

    def clear(self) -> None:
        self.opened.clear()
        self.streamed.clear()


def fast_decided(path: Path) -> bool:
    """Whether the fast path decides the one log at `path` (then nothing streams its events)."""
    [source] = open_logs(path)
    try:
        return isinstance(decide(source), Decided)
    finally:
        source.close()


def cut_pass(path: Path) -> int:
    """1 for a seeded child whose generation finds its inherited cut in a first pass over the log (walker.
    inherited_cut: every command reads such a child twice), else 0."""
    header = json.loads(path.read_bytes().split(b"\n", 1)[0])
    rule = generation(header.get("version", 0)).seed_cut
    return int(rule != "seedLength" and header.get("isSeeded") is True)


def readable(path: Path) -> bool:
    """Not a newer dsh's log (opened once: the reader refuses its header)."""
    version = json.loads(path.read_bytes().split(b"\n", 1)[0]).get("version", 0)
    return version in {known.version for known in generations()}


def report(folder: Path, tmp_path: Path, *options: str) -> None:
    done = CliRunner().invoke(main, ["report", str(folder), "-o", str(tmp_path / "report.html"), *options])
    assert done.exit_code == 0, done.output


def test_audit_report_reads_each_log_once(built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every generation's logs (session folders of a log and its forks) and a flat folder of more logs than a run
    keeps open: each log's events are streamed once, or not at all where the fast path decides it, and its file
    opened once, or twice in the flat folder (its run's headers are read first: a fork's parent is walked before
    it), plus at most three opens of the fast path's own reader (its kind, its seqs, its lines: fastpath.lines),
    as verify's and cache-report's. A v2+ seeded child adds the first pass that finds its inherited cut. The flat
    folder's sessions collapse, so their header lines are read once more: the page names them by short id, and
    checks that `audit explain --session ID` picks each (readers.home.picked_by_prefix). The three commands'
    reads, counted the same way, for contrast."""
    flat = many_sessions(tmp_path / "flat", KEPT_OPEN + 1)
    reads = Reads(monkeypatch)
    for folder, opens in ((GENERATIONS, 1), (built, 1), (flat, 2 + 1)):
        found = discover_logs([folder], all_generations=True).files
        files = [path for path in found if readable(path)]
        decided = {path for path in files if fast_decided(path)}
        reads.clear()
        report(folder, tmp_path, "--all-generations")
        assert reads.streamed == {str(path): int(path not in decided) + cut_pass(path) for path in files
                                  if path not in decided or cut_pass(path)}
        for path in found:
            least = opens + cut_pass(path) if path in files else 1
            assert least <= reads.opened[str(path)] <= least + 3, path
        reads.clear()
        three_commands([folder], all_generations=True)
        print(f"\n{folder.name}: {len(files)} logs; audit report opened them {opens * len(files)} times (plus "
              f"{sum(map(cut_pass, files))} seed-cut passes), the three commands {sum(reads.opened.values())}")
        assert all(reads.opened[str(path)] >= 3 for path in files)


def test_a_copy_of_the_fixtures_is_left_as_it_was(tmp_path: Path) -> None:
    copy = shutil.copytree(GENERATIONS, tmp_path / "generations")
    before = {path: path.read_bytes() for path in copy.rglob("*") if path.is_file()}
    report(copy, tmp_path, "--all-generations")
    assert {path: path.read_bytes() for path in copy.rglob("*") if path.is_file()} == before


def test_a_home_of_many_session_folders_keeps_one_folder_open_at_a_time(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A session folder's logs stay open from the pass over its headers to their walks, never the whole home's:
    over 40 folders, at most one folder's logs are open at once."""
    from dsh_audit.reports import header_diff, one_walk

    home = tmp_path / "sessions"
    for k in range(40):
        (home / f"s-{k:02d}").mkdir(parents=True)
        write_jsonl(tiny_session(f"s-{k:02d}", collapsing=False), home / f"s-{k:02d}" / "session.jsonl")
    open_now, most = 0, 0
    headers, take = one_walk.log_headers, header_diff.LogHeaders.open

    def kept(file: Path, found_in: Path | None, *, keep: bool = False) -> list[header_diff.LogHeaders]:
        nonlocal open_now, most
        logs = headers(file, found_in, keep=keep)
        open_now += sum(log.kept is not None for log in logs)
        most = max(most, open_now)
        return logs

    def taken(log: header_diff.LogHeaders) -> Any:
        nonlocal open_now
        open_now -= log.kept is not None
        return take(log)

    monkeypatch.setattr(one_walk, "log_headers", kept)
    monkeypatch.setattr(header_diff.LogHeaders, "open", taken)
    assert read_once([home]).cache.logs.height == 40
    assert (most, open_now) == (1, 0)
