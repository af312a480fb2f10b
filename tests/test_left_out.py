"""Issue 18, item 5: nothing left out silently. A listing names each folder it could not list (as a report names
each log it could not read, readers.discover.read_each), and every command says which older generations it
skipped, in every selector form: a folder, --session, and no path (dsh's whole session root). A log named on
the command line is read as named: nothing beside it was passed over. Through the real CLI: CliRunner in
process, and subprocesses as root and as an unprivileged user (root lists a folder whatever its mode)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from dsh_audit.cli import main
from homebuilder import SAMPLE, ZQ, put, with_header
from test_safe_outputs import ROOT, _as_nobody, _reachable_folder, audit

OLD_ID = "session-a1a1a1a1-0000-4000-8000-000000000001"   # v0 and v3 side by side: dsh reads the v3
NEW_ID = "session-b2b2b2b2-0000-4000-8000-000000000002"   # v4 alone
MOMENT = 1_790_000_000


def home_in(root: Path) -> Path:
    """A session root: one session with two generations, one with a single v4 log; returns the first's folder."""
    twice = root / "--work-alpha--" / OLD_ID
    put(twice / "session.jsonl", with_header(SAMPLE / "session.jsonl", OLD_ID, "/work/alpha"), MOMENT)
    put(twice / "session.v3.jsonl", with_header(SAMPLE / "session.v3.jsonl", OLD_ID, "/work/alpha"), MOMENT + 60)
    put(root / "--work-beta--" / NEW_ID / "session.v4.jsonl",
        with_header(ZQ / "text-turn" / "session.v4.jsonl", NEW_ID, "/work/beta"), MOMENT + 120)
    return twice


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = home_in(tmp_path / "dsh" / "sessions")
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "dsh"))
    monkeypatch.setenv("COLUMNS", "400")
    return folder


def run(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result


# -- the older generation skipped: every command, every selector form ----------------------------------------

def selectors(folder: Path) -> dict[str, list[str]]:
    return {"folder": [str(folder)], "--session": ["--session", "a1a1"], "no path": []}


# command -> (arguments before the selector, where the skipped generation is named: "stdout" or "stderr")
COMMANDS: dict[str, tuple[Callable[[Path], list[str]], str]] = {
    "verify": (lambda _: ["verify"], "stdout"),
    "verify json": (lambda _: ["verify", "--format", "json"], "stdout"),
    "cache-report": (lambda _: ["cache-report", "--no-predict"], "stdout"),
    "cache-report csv": (lambda _: ["cache-report", "--no-predict", "--format", "csv"], "stderr"),
    "header-diff": (lambda _: ["header-diff"], "stdout"),
    "header-diff jsonl": (lambda _: ["header-diff", "--format", "jsonl"], "stderr"),
    "report": (lambda out: ["report", "-o", str(out / "page.html")], "stderr"),
}


@pytest.mark.parametrize("form", ["folder", "--session", "no path"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_names_the_older_generation_it_skipped(command: str, form: str, home: Path,
                                                             tmp_path: Path) -> None:
    arguments, where = COMMANDS[command]
    done = run(*arguments(tmp_path), *selectors(home)[form])
    assert done.exit_code == 0, done.output
    older = str(home / "session.jsonl")
    said = done.stdout if where == "stdout" else done.stderr
    if command == "verify json":
        entry = next(log for log in json.loads(done.stdout)["logs"] if log["log"] == older)
        assert entry["skipped"] and entry["supersededBy"] == str(home / "session.v3.jsonl")
    else:
        assert any("session.jsonl" in line and "an older generation" in line for line in said.splitlines()), said
        assert ("1 older generation(s) skipped" in said) == (command in ("verify", "cache-report", "header-diff"))
    if where == "stderr":
        line = next(line for line in done.stderr.splitlines() if older in line)
        assert line == f"audit: {older}: skipped: an older generation; read {home / 'session.v3.jsonl'}"
    if command == "report":
        assert "1 older generation(s) skipped" in (tmp_path / "page.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("command", [["rebuild", "--format", "digest"], ["explain", "1.1"]], ids=" ".join)
def test_a_session_picked_for_one_log_names_its_older_generation(command: list[str], home: Path) -> None:
    done = run(command[0], "--session", "a1a1", *command[1:])
    assert done.exit_code == 0, done.output
    assert done.stderr == (f"audit: {home / 'session.jsonl'}: skipped: an older generation; read "
                           f"{home / 'session.v3.jsonl'}\n")
    named = run(command[0], str(home / "session.v3.jsonl"), *command[1:])   # a log named is read as named
    assert named.exit_code == 0 and named.stderr == ""


def test_every_generation_of_a_picked_session_is_read_with_all_generations(home: Path) -> None:
    done = run("verify", "--session", "a1a1", "--all-generations")
    assert done.exit_code == 0 and "2 log(s)" in done.stdout and "skipped" not in done.stdout
    rows = json.loads(run("cache-report", "--no-predict", "--session", "a1a1", "--all-generations", "--rows", "logs",
                          "--format", "json").stdout)["rows"]
    assert sorted(row["generation"] for row in rows) == [0, 3]


def test_an_output_onto_the_skipped_generation_of_a_picked_session_is_refused(home: Path) -> None:
    done = run("cache-report", "--session", "a1a1", "--out", str(home / "session.jsonl"), "--format", "csv")
    assert done.exit_code == 2 and "refusing to write --out onto a file this command reads" in done.stderr


def test_golden_names_the_older_generation_it_skipped(home: Path, tmp_path: Path) -> None:
    update = run("golden", "update", str(home))
    assert update.exit_code == 0 and update.stdout.rstrip().endswith("1 older generation(s) skipped")
    assert update.stderr == (f"audit: {home / 'session.jsonl'}: skipped: an older generation; read "
                             f"{home / 'session.v3.jsonl'}\n")
    pinned = json.loads((home / "dsh-audit.golden.json").read_text())["logs"]
    assert list(pinned) == ["session.v3.jsonl"]
    check = run("golden", "check", "--junit", str(tmp_path / "golden.xml"), str(home))
    assert check.exit_code == 0, check.output
    assert "skipped    session.jsonl" in check.stdout and "an older generation; read session.v3.jsonl" in check.stdout
    assert check.stdout.rstrip().endswith("1 older generation(s) skipped")
    junit = (tmp_path / "golden.xml").read_text()
    assert 'skipped="1"' in junit and "an older generation; read session.v3.jsonl" in junit


def test_sessions_counts_the_older_generations_it_skipped(home: Path) -> None:
    listing = run("sessions")
    assert listing.exit_code == 0 and listing.stdout.rstrip().endswith("2 session(s) in "
                                                                       f"{home.parent.parent}, 1 older generation(s) "
                                                                       "skipped")
    document = json.loads(run("sessions", "--format", "json").stdout)
    skipped = {session["id"]: session["skipped"] for session in document["sessions"]}
    assert skipped == {OLD_ID: [str(home / "session.jsonl")], NEW_ID: []}


def test_a_picked_session_in_a_subprocess(home: Path) -> None:
    """The same through a separate process: stderr names the older generation, stdout keeps the rows clean."""
    done = audit("cache-report", "--no-predict", "--format", "csv", "--session", "a1a1",
                 env={"DSH_HOME": os.environ["DSH_HOME"]})
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode() == (f"audit: {home / 'session.jsonl'}: skipped: an older generation; read "
                                    f"{home / 'session.v3.jsonl'}\n")
    assert str(home / "session.jsonl").encode() not in done.stdout
    verify = audit("verify", "--session", "a1a1", env={"DSH_HOME": os.environ["DSH_HOME"]})
    assert verify.returncode == 0 and b"skipped    " in verify.stdout
    assert verify.stdout.rstrip().endswith(b"1 older generation(s) skipped")


# -- a folder the listing cannot enter -------------------------------------------------------------------------

@pytest.fixture
def unlisted(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The beta project folder cannot be listed (as a folder without read permission, which root would read)."""
    closed = home.parent.parent / "--work-beta--"
    listing = os.scandir

    def scandir(path: str | os.PathLike[str] = ".") -> object:
        if Path(os.fsdecode(path)) == closed:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return listing(path)

    monkeypatch.setattr(os, "scandir", scandir)
    return closed


def test_sessions_names_a_folder_it_cannot_list(unlisted: Path) -> None:
    listing = run("sessions")
    assert listing.exit_code == 0, listing.output
    lines = listing.stdout.splitlines()
    assert f"  error: {unlisted}: cannot list this folder: Permission denied" in lines
    assert lines[-1].endswith(", 1 folder(s) that could not be listed, 1 older generation(s) skipped")
    assert run("sessions", "--limit", "1").stdout.count("cannot list this folder") == 1   # whatever the limit
    document = json.loads(run("sessions", "--format", "json").stdout)
    assert document["unlisted"] == [{"path": str(unlisted),
                                     "error": f"{unlisted}: cannot list this folder: Permission denied"}]
    assert [session["id"] for session in document["sessions"]] == [OLD_ID]


def test_a_session_prefix_not_found_names_the_folder_it_could_not_search(unlisted: Path) -> None:
    done = run("verify", "--session", "b2b2")
    assert done.exit_code == 2
    assert done.stderr == (f"audit: no session id or directory starts with 'b2b2' under {unlisted.parent} (1 "
                           f"folder(s) could not be listed: {unlisted}: cannot list this folder: Permission denied)\n")


@pytest.fixture
def reachable() -> Iterator[Path]:
    with _reachable_folder() as root:
        yield root


def test_a_folder_an_unprivileged_user_cannot_list_is_named_by_sessions(reachable: Path) -> None:
    """As root the listing runs as nobody (root reads a folder whatever its mode), else as this user."""
    user = _as_nobody()
    root = reachable / "sessions"
    home_in(root)
    for folder in (path for path in [root, *root.rglob("*")] if path.is_dir()):
        folder.chmod(0o755)
    for log in root.rglob("*.jsonl"):
        log.chmod(0o644)
    closed = root / "--work-beta--"
    closed.chmod(0o700 if ROOT else 0o000)
    done = audit("sessions", "--root", root, user=user)
    out = done.stdout.decode()
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    assert f"  error: {closed}: cannot list this folder: Permission denied" in out.splitlines()
    assert "1 session(s)" in out and "1 folder(s) that could not be listed" in out
    document = json.loads(audit("sessions", "--root", root, "--format", "json", user=user).stdout)
    assert [folder["path"] for folder in document["unlisted"]] == [str(closed)]
    gate = audit("verify", root, user=user)   # verify, the gate, fails the run as before
    assert gate.returncode == 2 and b"cannot list this folder: Permission denied" in gate.stdout
