"""Directory mode is a gate (issue 12, item 1): what looks like a dsh log and cannot be read fails the run, an
empty directory is an error, and what is left out is counted and named. Through the real CLI."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from test_safe_outputs import SAMPLE, _as_nobody, audit, one_line

LISTING_COMMANDS = (["verify"], ["verify", "--strict"], ["cache-report"], ["header-diff"], ["golden", "update"],
                    ["golden", "check"])


def folder_with(tmp_path: Path, **files: bytes) -> Path:
    folder = tmp_path / "logs"
    folder.mkdir(parents=True)
    for name, content in files.items():
        (folder / name.replace("__", ".")).write_bytes(content)
    return folder


GOOD = SAMPLE.read_bytes()


@pytest.mark.parametrize("broken", [
    b"\xef\xbb\xbf" + GOOD,                        # a byte order mark before the header
    b'{"type":"sess' + b"\n",                     # a torn header
    b"\x00\x01\x02 binary\n",                      # not text at all
    b"\xff\xfe" + GOOD,                            # not UTF-8
])
def test_a_log_that_cannot_be_read_fails_the_directory(broken: bytes, tmp_path: Path) -> None:
    folder = folder_with(tmp_path, good__jsonl=GOOD, broken__jsonl=broken)
    for strict in ([], ["--strict"]):
        done = audit("verify", *strict, folder)
        out = done.stdout.decode()
        assert done.returncode == 2, out
        assert "UNREADABLE" in out and "broken.jsonl" in out and "2 log(s), 1 failed" in out
        assert b"Traceback" not in done.stderr


def test_an_empty_directory_is_an_error_for_every_command(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for command in LISTING_COMMANDS:
        done = audit(*command, empty)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        text = (done.stdout + done.stderr).decode()
        assert "Traceback" not in text, command
        # golden check first misses its golden file, which an empty directory cannot hold either
        assert ("no dsh log below this directory" if command[-1] != "check" else "no golden file") in text


def test_a_directory_of_corrupt_headers_fails(tmp_path: Path) -> None:
    folder = folder_with(tmp_path, session__jsonl=b"garbage\n", **{"session__1__jsonl": b"{\n"})
    done = audit("verify", folder)
    assert done.returncode == 2 and done.stdout.decode().count("UNREADABLE") == 2
    for command in (["cache-report"], ["header-diff"], ["golden", "update"]):
        failed = audit(*command, folder)
        assert failed.returncode == 2, (command, failed.stdout, failed.stderr)
        assert not (folder / "dsh-audit.golden.json").exists()


def test_files_that_are_not_dsh_logs_are_counted_and_named_never_read(tmp_path: Path) -> None:
    other = json.dumps({"type": "session_event", "event": {}}).encode() + b"\n"
    folder = folder_with(tmp_path, session__jsonl=GOOD, stream__expected__jsonl=other, notes__md=b"# hi\n",
                         cache__db=b"SQLite format 3\x00" + bytes(100))
    done = audit("verify", folder)
    out = done.stdout.decode()
    assert done.returncode == 0, out
    assert "1 log(s), 0 failed" in out and "2 file(s) that are not dsh logs ignored" in out
    assert "ignored    " in out and "stream.expected.jsonl  (not a dsh log: its first line is not a dsh session " \
                                     "header)" in out
    assert "cache.db  (not a dsh log: a SQLite database that is not a dsh session store)" in out
    assert "notes.md" not in out                   # no kind of log: not counted
    document = json.loads(audit("verify", "--format", "json", folder).stdout)
    assert document["summary"]["ignored"] == 2 and document["summary"]["logs"] == 1
    only_others = folder_with(tmp_path / "x", stream__expected__jsonl=other)
    done = audit("verify", only_others)
    assert done.returncode == 2
    assert "no dsh log below this directory (1 other .jsonl or database file(s), none a dsh log)" in \
        done.stdout.decode()


def test_a_folder_the_walk_cannot_list_fails_the_run() -> None:
    user = _as_nobody()
    root = Path(tempfile.mkdtemp(prefix="dsh-audit-unlisted-"))   # outside pytest's 0700 folder
    try:
        root.chmod(0o755)
        shutil.copy(SAMPLE, root / "session.jsonl")
        closed = root / "closed"
        closed.mkdir()
        shutil.copy(SAMPLE, closed / "session.jsonl")
        closed.chmod(0o700 if user is not None else 0o000)
        done = audit("verify", root, user=user)
        out = done.stdout.decode()
        assert done.returncode == 2, out
        assert re.search(r"^UNREADABLE closed  .*\n    cannot list this folder: Permission denied", out, re.M), out
        cache = audit("cache-report", root, user=user)   # a report covers the rest and names the folder
        assert cache.returncode == 0 and "closed: cannot list this folder: Permission denied" in cache.stdout.decode()
        assert one_line(cache.stderr) == ("audit: 1 log(s) could not be read and are not in the report (each is named "
                                          "in it)\n")
    finally:
        (root / "closed").chmod(0o755)
        shutil.rmtree(root)
