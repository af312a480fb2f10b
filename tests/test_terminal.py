"""Every human view as a person sees it: the real CLI on a real pseudo-terminal (a pty of 60, 80 and 120 columns,
TERM=xterm-256color, no COLUMNS), nothing between it and the terminal.

On each view: no line is wider than the terminal (in terminal cells: CJK text counts two), the tool's own
styling is real colour (SGR), never the text `\\u001b`, and nothing else reaches the terminal as a control
sequence; with NO_COLOR or --color never there is no colour at all, with --color always there is colour even
into a pipe. A snapshot of each view at 80 columns, colour included, is kept in tests/snapshots/terminal/
(DSH_AUDIT_WRITE_SNAPSHOTS=1 writes them anew)."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from rich.cells import cell_len

from test_views import collapsing_home, collapsing_log

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_logs" / "compaction-recovery"
WILD = REPO / "tests" / "fixtures" / "wild" / "lyteboat-boat"
CHINESE = WILD / "examples/agents/finance/evals/baseline/sessions/overview-then-diagnosis/session.v4.jsonl"
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots" / "terminal"
SGR = re.compile(r"\x1b\[[0-9;]*m")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
WIDTHS = (60, 80, 120)
MOMENT = 1_790_000_000   # every file's modification time: the sessions view shows it


def on_terminal(args: list[str], columns: int, cwd: Path, *, env: dict[str, str] | None = None,
                timeout: float = 120) -> tuple[int, str]:
    """Run `audit ARGS` with stdin, stdout and stderr on a new pty of `columns` columns; what the terminal got
    (line ends as the pty writes them, \\r\\n, made \\n) and the exit code."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "CI", "TERM")}
    environment |= {"TERM": "xterm-256color", **(env or {})}
    child = subprocess.Popen([sys.executable, "-m", "dsh_audit", *args], stdin=slave, stdout=slave, stderr=slave,
                             cwd=cwd, env=environment, start_new_session=True)
    os.close(slave)
    received = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if child.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError as error:   # the slave side closed: everything was read
                if error.errno == errno.EIO:
                    break
                raise
            if not chunk:
                break
            received += chunk
    finally:
        os.close(master)
    code = child.wait(timeout=max(1.0, deadline - time.monotonic()))
    return code, received.decode("utf-8").replace("\r\n", "\n")


def assert_fits(text: str, columns: int) -> None:
    """Every line within the terminal, once the colour is taken out; no escaped ESC, no other control."""
    assert "\\u001b" not in text, text
    plain = SGR.sub("", text)
    assert not CONTROL.search(plain.replace("\n", "")), repr(plain)
    for line in plain.split("\n"):
        assert cell_len(line) <= columns, (columns, cell_len(line), line)


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory as a user has one: logs of every view's kind, paths relative to it, fixed mtimes."""
    root = tmp_path_factory.mktemp("terminal")
    shutil.copytree(SAMPLE, root / "logs" / "compaction-recovery")
    (root / "collapses").mkdir()
    collapsing_log(root / "collapses")
    home = root / "home" / "sessions"
    shutil.copytree(SAMPLE, home / "--work-sample--" / "session-0b5e")
    broken = home / "--work-broken--" / "session-7c1d"
    broken.mkdir(parents=True)
    lines = (SAMPLE / "session.jsonl").read_text(encoding="utf-8").splitlines()
    (broken / "session.jsonl").write_text("\n".join([*lines[:5], '{"type": "turn/start", "data": {', *lines[6:]])
                                          + "\n", encoding="utf-8")
    shutil.copy(CHINESE, root / "chinese.v4.jsonl")
    collapsing_home(root / "collapsing" / "sessions")
    subprocess.run([sys.executable, "-m", "dsh_audit", "golden", "update", "logs"], cwd=root, check=True,
                   capture_output=True)
    changed = root / "logs" / "compaction-recovery" / "session.v3.jsonl"
    changed.write_text(changed.read_text(encoding="utf-8").replace("Establish a durable", "Establish a lasting"),
                       encoding="utf-8")
    for run in ("a", "b"):   # the same system-prompt edit in two runs, and a user message edited in one
        (root / "golden-full" / run).mkdir(parents=True)
        shutil.copy(SAMPLE / "session.v3.jsonl", root / "golden-full" / run)
    subprocess.run([sys.executable, "-m", "dsh_audit", "golden", "update", "--full", "golden-full"], cwd=root,
                   check=True, capture_output=True)
    for run in ("a", "b"):
        edited = root / "golden-full" / run / "session.v3.jsonl"
        text = edited.read_text(encoding="utf-8").replace("running the code or tests.", "running the tests.")
        edited.write_text(text.replace("Establish a durable", "Establish a lasting") if run == "a" else text,
                          encoding="utf-8")
    for path in root.rglob("*"):
        os.utime(path, (MOMENT, MOMENT))
    return root


VIEWS = {
    "verify": ["verify", "logs", "home/sessions"],
    "cache-report": ["cache-report", "collapses/session.jsonl"],
    "header-diff": ["header-diff", "logs/compaction-recovery/session.jsonl"],
    "explain": ["explain", "collapses/session.jsonl", "5.1#1"],
    "sessions": ["sessions", "--root", "home/sessions"],
    "golden-check": ["golden", "check", "logs"],
    "golden-check-full": ["golden", "check", "golden-full"],
}



def assert_snapshot(text: str, name: str) -> None:
    """`text` is the snapshot `name` (DSH_AUDIT_WRITE_SNAPSHOTS=1 writes it anew)."""
    snapshot = SNAPSHOTS / f"{name}.ansi"
    if os.environ.get("DSH_AUDIT_WRITE_SNAPSHOTS"):
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        snapshot.write_text(text, encoding="utf-8")
    assert text == snapshot.read_text(encoding="utf-8"), f"{name} differs from {snapshot.name}"

@pytest.mark.parametrize("columns", WIDTHS)
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_each_view_fits_the_terminal_in_real_colour(view: str, columns: int, place: Path) -> None:
    code, text = on_terminal(VIEWS[view], columns, place)
    assert code in (0, 1, 2), text
    assert "Traceback" not in text and "internal error" not in text, text
    assert SGR.search(text), f"{view}: no colour on a terminal"
    assert_fits(text, columns)
    if columns == 80:
        assert_snapshot(text, f"{view}-80")


# Worst first: the views of a home whose sessions lost money to collapses, kept at 80 and 120 columns.
RANKED = {
    "cache-report-home": ["cache-report", "collapsing/sessions"],
    "cache-report-home-logs": ["cache-report", "--rows", "logs", "--top", "2", "collapsing/sessions"],
    "sessions-ranked": ["sessions", "--root", "collapsing/sessions"],
}


@pytest.mark.parametrize("columns", (80, 120))
@pytest.mark.parametrize("view", sorted(RANKED))
def test_ranked_views_open_with_the_worst(view: str, columns: int, place: Path) -> None:
    code, text = on_terminal(RANKED[view], columns, place)
    assert code == 0 and "Traceback" not in text, text
    assert_fits(text, columns)
    plain = SGR.sub("", text).splitlines()
    first = 2 if view.startswith("cache-report") else 1   # after the heading and the table's titles
    assert plain[first].split()[0] == "e9c4d2b1"   # one naming rule in every view (reports.ranking.short_ids)
    assert_snapshot(text, f"{view}-{columns}")


# Filtered: cache-report counts the calls of the sessions run in /work/shop; verify lists each log it leaves out.
FILTERED = {
    "cache-report-project": ["cache-report", "--project", "/work/shop", "collapsing/sessions"],
    "verify-project": ["verify", "--project", "/work/shop", "collapsing/sessions"],
}


@pytest.mark.parametrize("columns", (80, 120))
@pytest.mark.parametrize("view", sorted(FILTERED))
def test_filtered_views_say_what_they_leave_out(view: str, columns: int, place: Path) -> None:
    code, text = on_terminal(FILTERED[view], columns, place)
    assert code == 0 and "Traceback" not in text, text
    assert_fits(text, columns)
    plain = " ".join(SGR.sub("", text).split())
    if view.startswith("cache-report"):
        assert "shop-api" not in plain and "3 of 4 log(s) have no call the filters keep" in plain, plain
    else:
        assert plain.count("left out") == 4 and "3 log(s) left out by --project /work/shop" in plain, plain
    assert_snapshot(text, f"{view}-{columns}")


def test_a_rollup_view_ranks_the_projects_by_what_they_lost(place: Path) -> None:
    code, text = on_terminal(["cache-report", "--by", "project", "collapsing/sessions"], 80, place)
    assert code == 0 and "Traceback" not in text, text
    assert_fits(text, 80)
    plain = SGR.sub("", text).splitlines()
    assert [line.split()[0] for line in plain[2:6]] == ["/work/billing", "/work/shop", "/work/docs",
                                                         "/work/shop-api"]
    assert_snapshot(text, "cache-report-by-project-80")


@pytest.mark.parametrize("columns", WIDTHS)
def test_chinese_text_is_measured_in_cells(columns: int, place: Path) -> None:
    for args in (["explain", "chinese.v4.jsonl", "2.1#1"], ["cache-report", "--wide", "chinese.v4.jsonl"],
                 ["verify", "chinese.v4.jsonl"], ["header-diff", "chinese.v4.jsonl"]):
        code, text = on_terminal(args, columns, place)
        assert code in (0, 1), text
        if args[0] != "cache-report":   # --wide keeps every column on purpose
            assert_fits(text, columns)
        assert "\ufffd" not in text, text   # no character cut in half


@pytest.mark.parametrize("how", [{"NO_COLOR": "1"}, {"TERM": "dumb"}, "--color=never"])
def test_no_colour_when_the_user_says_so(how: dict[str, str] | str, place: Path) -> None:
    for view in ("verify", "cache-report", "sessions", "golden-check"):
        args = VIEWS[view]
        env = how if isinstance(how, dict) else {}
        command = [*args, how] if isinstance(how, str) and view != "golden-check" else args
        if isinstance(how, str) and view == "golden-check":
            command = ["golden", "check", how, "logs"]
        _, text = on_terminal(command, 80, place, env=env)
        assert "\x1b" not in text and "\\u001b" not in text, (view, how, text)


def test_colour_forced_into_a_pipe(place: Path) -> None:
    for env, flag in (({}, ["--color", "always"]), ({"FORCE_COLOR": "1"}, []), ({"FORCE_COLOR": "0"}, None)):
        done = subprocess.run([sys.executable, "-m", "dsh_audit", *(flag or []), "verify", "logs"], cwd=place,
                              capture_output=True, text=True, env={**os.environ, **env}, check=False)
        assert ("\x1b[" in done.stdout) is (flag is not None), (env, flag, done.stdout)
        assert "\\u001b" not in done.stdout


def test_log_text_stays_escaped_with_colour_on(tmp_path: Path) -> None:
    """Colour on lets the tool's own SGR through, never a log's: an ESC logged in a message is shown as \\u001b."""
    lines = (SAMPLE / "session.jsonl").read_text(encoding="utf-8").splitlines()
    hostile = [line.replace("Establish a durable", "\\u001b[31m\\u001b]52;c;eA==\\u0007 durable") for line in lines]
    (tmp_path / "session.jsonl").write_text("\n".join(hostile) + "\n", encoding="utf-8")
    code, text = on_terminal(["explain", "session.jsonl", "1.2#2"], 120, tmp_path)
    assert code == 0, text
    assert "\\u001b[31m\\u001b]52;c;eA==\\u0007" in text   # the log's bytes, shown
    assert not re.search(r"\x1b(?!\[[0-9;]*m)", text) and "\x1b[31m\\u001b" not in text


def test_the_progress_bar_fits_and_goes(tmp_path: Path) -> None:
    """verify -j 1 over 20 MB on a terminal draws a bar on stderr (rich) and leaves no trace of it."""
    big = tmp_path / "big.jsonl"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "generate_log.py"), "--size", "2MB", "--seed", "7",
                    "--out", str(big)], check=True, capture_output=True, timeout=300)
    folder = tmp_path / "many"
    folder.mkdir()
    for k in range(10):
        os.link(big, folder / f"log-{k}.jsonl")
    for columns in WIDTHS:
        code, text = on_terminal(["verify", "-j", "1", "many"], columns, tmp_path)
        assert code == 0, text
        drawn, _, rest = text.rpartition("\x1b[?25h")   # rich shows the cursor again when the bar is gone
        assert drawn and "━" in drawn and SGR.search(drawn), "no bar was drawn"
        frames = re.sub(r"\x1b\[\?25[lh]|\x1b\[2K|\x1b\[1A|\r", "\n", drawn)
        assert all(cell_len(SGR.sub("", frame)) <= columns for frame in frames.split("\n"))
        assert_fits(re.sub(r"^(?:\r|\x1b\[1A|\x1b\[2K)+", "", rest), columns)   # after rich erased its bar
        assert SGR.sub("", rest).count("\nok ") == 9 and "10 log(s), 0 failed, 940 request(s)" in SGR.sub("", rest)


def test_verify_tells_a_repeated_finding_once(tmp_path: Path) -> None:
    log = [json.loads(line) for line in (SAMPLE / "session.jsonl").read_text(encoding="utf-8").splitlines()]
    kept = [event for event in log if event.get("type") != "request/header"]   # every request without a header
    (tmp_path / "session.jsonl").write_text("\n".join(json.dumps(event) for event in kept) + "\n",
                                            encoding="utf-8")
    code, text = on_terminal(["verify", "session.jsonl"], 80, tmp_path)
    plain = SGR.sub("", text)
    assert code == 1, plain
    assert re.search(r"error ×\d+ \[no-header\]", plain), plain
    assert plain.count("[no-header]") == 1
