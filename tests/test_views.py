"""What a person sees: the terminal views of cache-report and header-diff fit the terminal, read as numbers a
person reads, name the collapses and what they cost, and never print null; machine formats are tidy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import polars as pl
import pytest
from click.testing import CliRunner

from conftest_reference import LOGS_ROOT, require_corpus
from dsh_audit.cli import main
from dsh_audit.reports.views import count, percent, style, usd
from logbuilder import LogBuilder
from test_cache_report import TOOL_A, TOOL_B, steady_log, turn, write_jsonl

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"


def run(*args: str, columns: int = 80, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env={"COLUMNS": str(columns), **(env or {})})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def collapsing_log(tmp_path: Path) -> Path:
    """Three collapses: a tool change (explained), a compaction replace (explained), one with no cause."""
    log = steady_log()
    turn(log, 3, "more", 0, reason="change", tools=[TOOL_A, TOOL_B])
    turn(log, 4, "again " * 100, 640)
    turn(log, 5, "later", 0)
    return write_jsonl(log, tmp_path / "session.jsonl")


def collapsing_home(root: Path) -> Path:
    """A session root of four sessions: the collapsing log, one steady, one whose one unexplained collapse
    loses most, and one that never collapses and whose id shares its first nine characters with the first."""
    def place(log: LogBuilder, session_id: str, project: str) -> None:
        log.header |= {"id": f"session-{session_id}", "cwd": f"/work/{project}"}
        folder = root / f"--work-{project}--" / f"session-{session_id}"
        folder.mkdir(parents=True)
        write_jsonl(log, folder / "session.jsonl")

    collapsing = steady_log()
    turn(collapsing, 3, "more", 0, reason="change", tools=[TOOL_A, TOOL_B])
    turn(collapsing, 4, "again " * 100, 640)
    turn(collapsing, 5, "later", 0)
    place(collapsing, "3f2a91c0-7d4e-4b1a-9c3e-5f6a7b8c9d01", "shop")
    place(steady_log(), "b7e01d44-1c2d-4e5f-8a9b-0c1d2e3f4a5b", "docs")
    costly = steady_log()
    turn(costly, 3, "long " * 400, 4096, fresh=4000)
    turn(costly, 4, "later", 0, fresh=8500)
    place(costly, "e9c4d2b1-6a7f-4c8d-b3e2-1f0a9b8c7d6e", "billing")
    place(steady_log(), "3f2a91c0-0b1c-4d2e-8f3a-4b5c6d7e8f90", "shop-api")
    return root


@pytest.mark.parametrize(("value", "shown"), [(None, "–"), (0, "0"), (999, "999"), (1234, "1.2K"),
                                              (15_600_000, "15.6M")])
def test_counts_read_as_a_person_reads_them(value: int | None, shown: str) -> None:
    assert count(value) == shown


def test_money_and_ratios_read_as_a_person_reads_them() -> None:
    assert [usd(v) for v in (None, 0, 15.6234, 0.018, 0.00123, 0.000005)] == [
        "–", "$0", "$15.62", "$0.018", "$0.0012", "$0.0000050"]
    assert (percent(0.984), percent(None)) == ("98.4 %", "–")


def test_cache_report_view_answers_on_one_screen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = collapsing_log(tmp_path)
    monkeypatch.chdir(tmp_path)   # the path is shown relative to where the user is
    code, out, _ = run("cache-report", "session.jsonl")
    assert code == 0 and "null" not in out
    expected = (SNAPSHOTS / "cache-report-80.txt").read_text(encoding="utf-8")
    assert out == expected, out
    assert path.exists()


def test_the_summary_names_the_collapses_their_cost_and_how_to_explain_them(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    collapsing_log(tmp_path)
    monkeypatch.chdir(tmp_path)
    _, out, _ = run("cache-report", "session.jsonl", columns=200)
    lines = out.rstrip().splitlines()
    block = next(index for index, line in enumerate(lines) if line.startswith("cache block"))
    summary = lines[:block]
    assert "2 collapse(s), 1 unexplained" in summary[-3]
    assert summary[-2].startswith("worst: s-1 3.1#1 (header-change, $0.000044)")   # the session by its id
    assert summary[-1].startswith("unexplained: s-1 5.1#1 lost $")
    assert "audit explain session.jsonl 5.1#1" in summary[-1]
    assert lines[block].startswith("cache block 128 tokens (default: all 65 non-zero cache reads")


@pytest.mark.parametrize("columns", [60, 80, 200])
def test_no_line_of_a_default_view_is_wider_than_the_terminal(columns: int, tmp_path: Path) -> None:
    require_corpus()
    paths = [str(collapsing_log(tmp_path)), str(LOGS_ROOT / "apps/web/tests/snapshots/plan-review"),
             str(LOGS_ROOT / "scripts/snapshots/python-sdk-single-exe/advanced")]
    for command in (["cache-report", "--no-predict"], ["header-diff"]):
        code, out, _ = run(*command, *paths, columns=columns)
        assert code == 0, out
        widest = max(out.splitlines(), key=len)
        assert len(widest) <= columns, (command, widest)
        assert "null" not in out


def test_wide_keeps_every_column(tmp_path: Path) -> None:
    path = str(collapsing_log(tmp_path))
    narrow, wide = run("cache-report", path, columns=60)[1], run("cache-report", "--wide", path, columns=60)[1]
    header = next(line for line in wide.splitlines() if line.strip().startswith("call"))
    assert all(title in header for title in ("seq", "expected", "output", "lost", "price", "why"))
    assert "price" not in next(line for line in narrow.splitlines() if line.strip().startswith("call"))


def test_colour_only_on_a_terminal_and_never_with_no_color(tmp_path: Path) -> None:
    path = str(collapsing_log(tmp_path))
    assert "\x1b[" not in run("cache-report", path)[1]          # CliRunner's output is not a TTY
    from dsh_audit.reports.views import Terminal, terminal

    class Tty:
        def isatty(self) -> bool:
            return True

    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("NO_COLOR", raising=False)
        assert terminal(stream=Tty()).color
        patch.setenv("NO_COLOR", "1")
        assert not terminal(stream=Tty()).color
    assert Terminal(80, True).style("x", fg="red") != "x"


def test_header_diff_view_shows_the_change_itself(tmp_path: Path) -> None:
    log = LogBuilder()
    log.header_event("initial", system="line one\nline two", tools=[TOOL_A])
    log.header_event("change", system="line one\nline 2\nline three", tools=[TOOL_B], temperature=0.5)
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in [log.header, *log.events]) + "\n")
    _, out, _ = run("header-diff", str(path))
    assert "config.temperature: absent -> 0.5" in out
    assert "tools - read (removed)" in out and "tools + write (added)" in out
    assert "system prompt changed: 2 lines -> 3 lines (+2 -1 lines)" in out
    assert "      -line two" in out and "      +line 2" in out and "      +line three" in out


# -- machine formats ----------------------------------------------------------------------------------------
def test_each_machine_format_holds_one_row_kind(tmp_path: Path) -> None:
    path = str(collapsing_log(tmp_path))
    for rows, height in (("requests", 5), ("logs", 1), ("totals", 1)):
        document = json.loads(run("cache-report", "--format", "json", "--rows", rows, path)[1])
        assert document["schema"] == f"dsh-audit/cache-report/{rows}" and len(document["rows"]) == height
        lines = run("cache-report", "--format", "jsonl", "--rows", rows, path)[1].splitlines()
        assert [json.loads(line) for line in lines] == document["rows"]
    out = tmp_path / "calls.csv"
    assert run("cache-report", "--out", str(out), path)[0] == 0
    frame = pl.read_csv(out)
    assert frame.height == 5 and frame["costUsd"].sum() == pytest.approx(
        json.loads(run("cache-report", "--format", "json", "--rows", "totals", path)[1])["rows"][0]["costUsd"])


@pytest.mark.parametrize(("out", "message"), [("missing/dir/x.csv", "does not exist"),
                                              ("report.xlsx", "cannot tell the format")])
def test_bad_output_paths_are_one_line_errors(tmp_path: Path, out: str, message: str) -> None:
    code, _, err = run("cache-report", str(collapsing_log(tmp_path)), "--out", str(tmp_path / out))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_any_output_encoding_works(tmp_path: Path) -> None:
    """Through a real process whose stdout cannot encode the view's characters: escaped, never a traceback."""
    path = str(collapsing_log(tmp_path))
    for command in (["cache-report", path], ["header-diff", path], ["verify", path]):
        done = subprocess.run([sys.executable, "-m", "dsh_audit", *command], capture_output=True,
                              env={**os.environ, "PYTHONIOENCODING": "ascii", "COLUMNS": "80"}, check=False)
        assert done.returncode in (0, 1) and b"Traceback" not in done.stderr, done.stderr
        done.stdout.decode("ascii")


def test_every_command_has_help_with_examples_and_exit_codes() -> None:
    from click import Context

    commands = main.list_commands(Context(main))
    assert {"verify", "rebuild", "cache-report", "header-diff", "explain", "sessions", "golden"} <= set(commands)
    for name in ["", *commands]:
        code, out, _ = run(*([name] if name else []), "--help", columns=100)
        assert code == 0 and "Examples:" in out and "Exit codes:" in out, name
    code, out, _ = run("--version")
    assert code == 0 and out.startswith("audit, version ")


def test_readers_report_the_bytes_they_have_read_to_a_progress_hook(tmp_path: Path) -> None:
    from dsh_audit.readers import open_log
    from dsh_audit.readers.progress import EVERY, watching

    log = steady_log()
    for number in range(3, 3 + EVERY // 10):
        turn(log, number, "again", 512)
    path = write_jsonl(log, tmp_path / "session.jsonl")
    seen: list[tuple[str, int]] = []
    with watching(lambda label, position: seen.append((label, position))):
        source = open_log(path)
        for _record in source.records():
            pass
    positions = [position for label, position in seen if label == str(path)]
    assert len(positions) >= 2 and positions == sorted(positions) and positions[-1] == path.stat().st_size
    seen.clear()
    for _record in open_log(path).records():   # no hook: nothing reported
        pass
    assert seen == []


def test_no_progress_bar_in_ci_or_a_pipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_audit.cli.progress_bar import byte_progress
    from dsh_audit.readers import progress

    with byte_progress([collapsing_log(tmp_path)], "verify"):
        assert progress._hook is None          # stderr is not a terminal here
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setenv("CI", "true")
    with byte_progress([collapsing_log(tmp_path)], "verify"):
        assert progress._hook is None


@pytest.mark.parametrize(("name", "columns", "command"), [
    ("cache-report-plan-review-80", 80, ["cache-report", "apps/web/tests/snapshots/plan-review/session.jsonl"]),
    ("cache-report-advanced-60", 60,
     ["cache-report", "--no-predict", "scripts/snapshots/python-sdk-single-exe/advanced"]),
    ("header-diff-advanced-100", 100, ["header-diff", "scripts/snapshots/python-sdk-single-exe/advanced"]),
])
def test_default_views_of_corpus_logs(name: str, columns: int, command: list[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Snapshots of what a person sees; regenerate one with the command in its name, run from the corpus root."""
    require_corpus()
    monkeypatch.chdir(LOGS_ROOT)
    code, out, _ = run(*command, columns=columns)
    assert code == 0 and out == (SNAPSHOTS / f"{name}.txt").read_text(encoding="utf-8"), out


@pytest.mark.parametrize("command", [
    ["verify", "MISSING"], ["rebuild", "MISSING"], ["cache-report", "MISSING"], ["header-diff", "MISSING"],
    ["explain", "MISSING", "1.1"], ["sessions", "--root", "MISSING"], ["verify", "--session", "zzz", "LOGS"],
    ["explain", "LOG", "one.two"], ["cache-report", "--prices", "LOG", "LOG"], ["cache-report", "--rows", "x", "LOG"],
    ["cache-report", "--out", "MISSING/x.json", "LOG"], ["rebuild", "--step", "7.7", "LOG"],
])
def test_bad_input_to_every_command_is_one_line_and_exit_2(command: list[str], tmp_path: Path) -> None:
    log = str(collapsing_log(tmp_path))
    args = [{"MISSING": str(tmp_path / "missing"), "LOG": log, "LOGS": str(tmp_path)}.get(arg, arg)
            if arg in ("MISSING", "LOG", "LOGS") else arg.replace("MISSING", str(tmp_path / "missing"))
            for arg in command]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, (command, result.output)
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert errors and (len(errors) == 1 or errors[0].startswith("Usage:")), result.stderr


@pytest.mark.parametrize("fg", [None, "red", "green", "yellow", "cyan"])
@pytest.mark.parametrize("bold", [None, True, False])
@pytest.mark.parametrize("dim", [None, True])
def test_the_views_style_as_click_does(fg: str | None, bold: bool | None, dim: bool | None) -> None:
    """The views colour without click (tests/test_architecture.py), in the very sequences click.style writes."""
    assert style("x", fg=fg, bold=bold, dim=dim) == click.style("x", fg=fg, bold=bold, dim=dim)
