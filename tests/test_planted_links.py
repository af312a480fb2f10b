"""Issue 18, item 1, through the real CLI in a child process held to a hard address-space limit: a path dsh-audit
finds itself (the golden file, a log below a folder or in dsh's home, a sidecar) is never followed. A symbolic link
planted there, to a file outside the tree, to /dev/zero, to a FIFO or to nothing, is one line and exit 2 naming the
path (a row of verify's report, or a session of the listing, where those name what they could not read); nothing
is read or written through it, nothing waits on the FIFO, memory stays bounded and every input is unchanged.

Every case runs as the invoking user and as an unprivileged one (nobody, when the suite runs as root, as in CI),
in a scratch folder anyone may enter; the victim outside the tree is writable by both.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cli_child import AUDIT, Run, run_audit
from dsh_audit.golden import GOLDEN_NAME
from dsh_audit.readers.found import FoundFileError, open_found
from test_hostile_inputs import build_store
from test_safe_outputs import ROOT, SAMPLE, _as_nobody, _reachable_folder

MiB, GiB = 1 << 20, 1 << 30
AS_LIMIT = 4 * GiB       # polars reserves about 1.4 GiB of address space on import (cache-report, sessions)
RSS_BUDGET = 200 * MiB   # reading /dev/zero to a cap would pass it; refusing the link costs the interpreter only
TIMEOUT = 60             # seconds
LINK_TARGETS = ("outside-file", "dev-zero", "fifo", "dangling")
USERS = ("invoker", "unprivileged")


def audit(*args: str | Path, user: str | None, env: dict[str, str] | None = None) -> Run:
    """The CLI in a child under RLIMIT_AS, as `user` (None: this one), with its own peak RSS (tests/cli_child.py)."""
    return run_audit(*args, as_limit=AS_LIMIT, user=user, env=env, timeout=TIMEOUT, columns=400)


def one_line(run: Run) -> str:
    """Exit 2, with exactly one line on stderr, no traceback, within the memory budget; the line."""
    assert run.code == 2, run.out + run.err
    assert "Traceback" not in run.err and "internal error" not in run.err, run.err
    assert run.err.count("\n") == 1 and run.err.endswith("\n"), run.err
    assert run.peak_rss < RSS_BUDGET, f"peak RSS {run.peak_rss >> 20} MiB"
    return run.err


def digests(*roots: Path) -> dict[Path, str]:
    """Every regular file below (or at) the roots, by content; links are not followed."""
    files = {}
    for root in roots:
        for path in [root] if not root.is_dir() else sorted(root.rglob("*")):
            if path.is_file() and not path.is_symlink():
                files[path] = hashlib.sha256(path.read_bytes()).hexdigest()
    return files


@dataclass
class Tree:
    """A checkout anyone may enter: logs/a/session.jsonl with its golden file, and outside it a victim file (a
    valid golden document, writable by anyone, so a read or a write through a link would pass unnoticed) and a
    FIFO no one writes to."""

    root: Path
    user: str | None

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def victim(self) -> Path:
        return self.root / "outside" / "victim"

    def plant(self, link: Path, target: str) -> None:
        aim = {"outside-file": self.victim, "dev-zero": Path("/dev/zero"), "fifo": self.root / "outside" / "fifo",
               "dangling": self.root / "outside" / "nothing-here"}[target]
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(aim)


@pytest.fixture(params=USERS)
def tree(request: pytest.FixtureRequest) -> Iterator[Tree]:
    if request.param == "unprivileged" and not ROOT:
        pytest.skip("the invoking user is unprivileged already")
    user = _as_nobody() if request.param == "unprivileged" else None
    with _reachable_folder() as root:
        (root / "logs" / "a").mkdir(parents=True)
        shutil.copy(SAMPLE, root / "logs" / "a" / "session.jsonl")
        (root / "outside").mkdir()
        assert subprocess.run([*AUDIT, "golden", "update", root / "logs"], capture_output=True,
                              check=False).returncode == 0
        (root / "outside" / "victim").write_bytes((root / "logs" / GOLDEN_NAME).read_bytes())
        (root / "outside" / "victim").chmod(0o666)
        os.mkfifo(root / "outside" / "fifo", 0o666)
        for folder in (root, *(path for path in root.rglob("*") if path.is_dir())):
            folder.chmod(0o777)
        yield Tree(root, user)


def unchanged(tree: Tree) -> Callable[[], None]:
    before = digests(tree.logs, tree.victim)
    links = {path: os.readlink(path) for path in tree.root.rglob("*") if path.is_symlink()}

    def check() -> None:
        assert digests(tree.logs, tree.victim) == before
        assert {path: os.readlink(path) for path in tree.root.rglob("*") if path.is_symlink()} == links
        assert not (tree.root / "outside" / "nothing-here").exists(), "a dangling link's target was created"
        assert not [path for path in tree.root.rglob("*.partial")], "a temporary file was left behind"
    return check


# --- the golden file --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", LINK_TARGETS)
def test_the_golden_file_is_never_written_nor_read_through_a_planted_link(tree: Tree, target: str) -> None:
    golden = tree.logs / GOLDEN_NAME
    golden.unlink()
    tree.plant(golden, target)   # the victim is a golden document that matches: read, it would pass the gate
    check = unchanged(tree)
    line = one_line(audit("golden", "update", tree.logs, user=tree.user))
    assert str(golden) in line and "refusing to write the golden file through a symbolic link" in line
    line = one_line(audit("golden", "check", tree.logs, user=tree.user))
    assert str(golden) in line and "the golden file is a symbolic link" in line
    check()


def test_a_golden_file_that_is_a_fifo_is_refused_without_waiting(tree: Tree) -> None:
    golden = tree.logs / GOLDEN_NAME
    golden.unlink()
    os.mkfifo(golden, 0o666)
    check = unchanged(tree)
    assert "the golden file is not a regular file" in one_line(audit("golden", "check", tree.logs, user=tree.user))
    assert "not a regular file" in one_line(audit("golden", "update", tree.logs, user=tree.user))
    check()


def test_a_golden_file_is_held_to_the_line_cap_and_the_depth_cap(tree: Tree) -> None:
    golden = tree.logs / GOLDEN_NAME
    with golden.open("r+b") as handle:   # sparse: a huge golden file costs no disk
        handle.truncate(3 * GiB)
    check = unchanged(tree)
    line = one_line(audit("golden", "check", tree.logs, user=tree.user))
    assert "larger than the cap of 256 MiB" in line and "--max-line-bytes" in line
    golden.write_text('{"format": "dsh-audit-golden/1", "logs": ' + "[" * 5000 + "]" * 5000 + "}")
    check = unchanged(tree)
    assert "JSON nested deeper than 200 levels" in one_line(audit("golden", "check", tree.logs, user=tree.user))
    check()


def test_a_golden_folder_given_as_a_link_is_followed(tree: Tree) -> None:
    """The folder is the user's own: a link there is followed as given, and the file in it is written."""
    given = tree.root / "given"
    given.symlink_to(tree.logs)
    assert audit("golden", "update", given, user=tree.user).code == 0
    assert audit("golden", "check", given, user=tree.user).code == 0
    assert (tree.logs / GOLDEN_NAME).is_file() and not (tree.logs / GOLDEN_NAME).is_symlink()


# --- logs found below a folder ----------------------------------------------------------------------------------

def test_logs_planted_as_links_below_a_folder_are_named_not_read(tree: Tree) -> None:
    shutil.copy(SAMPLE, tree.victim)
    links = {target: tree.logs / target / "session.jsonl" for target in LINK_TARGETS}
    for target, link in links.items():
        tree.plant(link, target)
    check = unchanged(tree)
    run = audit("verify", tree.logs, user=tree.user)   # the gate: an unreadable row naming each link, exit 2
    assert run.code == 2 and run.err == "" and run.peak_rss < RSS_BUDGET, run.out + run.err
    rows = run.out.splitlines()
    for target in LINK_TARGETS:
        row = next(i for i, row in enumerate(rows) if row.startswith(f"UNREADABLE {target}/session.jsonl"))
        assert "is a symbolic link" in rows[row + 1], run.out
    assert "ok         a/session.jsonl" in run.out
    line = one_line(audit("golden", "check", tree.logs, user=tree.user))
    assert str(links[LINK_TARGETS[0]]) in line and "symbolic link" in line
    run = audit("cache-report", tree.logs, user=tree.user)   # a report: each left out, with why; the rest read
    assert run.code == 0 and "4 log(s) could not be read" in run.err, run.out + run.err
    assert all(str(link) in run.out for link in links.values()) and "1 log(s), 3 request(s)" in run.out, run.out
    check()


def test_a_log_given_as_a_link_is_still_read(tree: Tree) -> None:
    link = tree.root / "outside" / "given.jsonl"
    link.symlink_to(tree.logs / "a" / "session.jsonl")
    run = audit("verify", link, user=tree.user)
    assert run.code == 0 and "ok " in run.out, run.out + run.err


@pytest.mark.parametrize("beside", ["-wal", "-shm", "-journal"])
def test_a_link_planted_beside_a_sqlite_store_is_refused(tree: Tree, beside: str) -> None:
    (tree.logs / "s").mkdir(mode=0o777)
    store = build_store(tree.logs / "s" / "store.db", ("s-1",), wal=beside != "-journal")
    tree.plant(Path(f"{store}{beside}"), "outside-file")
    check = unchanged(tree)
    run = audit("verify", tree.logs, user=tree.user)
    assert run.code == 2 and "UNREADABLE s/store.db" in run.out, run.out + run.err
    assert f"store.db{beside}, beside the store, is a symbolic link" in run.out, run.out
    check()


# --- a session home ---------------------------------------------------------------------------------------------

def test_session_logs_planted_as_links_in_the_home_are_named_not_read(tree: Tree) -> None:
    sessions = tree.root / "home" / "sessions" / "--work--"
    (sessions / "session-good").mkdir(parents=True)
    shutil.copy(SAMPLE, sessions / "session-good" / "session.jsonl")
    links = {target: sessions / f"session-{target}" / "session.v4.jsonl" for target in LINK_TARGETS}
    for target, link in links.items():
        tree.plant(link, target)
    for folder in (tree.root / "home", *(path for path in (tree.root / "home").rglob("*") if path.is_dir())):
        folder.chmod(0o777)
    check = unchanged(tree)
    home = {"DSH_HOME": str(tree.root / "home")}
    run = audit("sessions", user=tree.user, env=home)
    assert run.code == 0 and "5 session(s)" in run.out and "4 unreadable" in run.out, run.out + run.err
    assert run.out.count("is a symbolic link") == 4 and run.peak_rss < RSS_BUDGET, run.out
    run = audit("verify", user=tree.user, env=home)
    assert run.code == 2 and run.out.count("UNREADABLE") == 4 and run.out.count("is a symbolic link") == 4, run.out
    line = one_line(audit("verify", "--session", "dev-zero", user=tree.user, env=home))
    assert str(links["dev-zero"]) in line and "this session's log is a symbolic link" in line
    check()


# --- sidecars ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", LINK_TARGETS)
def test_a_sidecar_planted_as_a_link_is_refused(tree: Tree, target: str) -> None:
    tree.victim.write_text("TOP SECRET", encoding="utf-8")
    sidecar = tree.logs / "a" / "system-prompt.expected.md"
    tree.plant(sidecar, target)
    check = unchanged(tree)
    run = audit("cache-report", "--sidecars", "--format", "csv", tree.logs / "a" / "session.jsonl", user=tree.user)
    line = one_line(run)   # cache-report over one log: its only log is unreadable
    assert str(sidecar) in line and "symbolic link" in line and "SECRET" not in run.out + run.err
    check()


# --- the helper ---------------------------------------------------------------------------------------------------

def test_a_folder_below_the_one_given_swapped_for_a_link_is_refused(tmp_path: Path) -> None:
    """A listing saw a folder; by the time the file is opened it is a link: no component below the folder given is
    followed (openat with O_NOFOLLOW), so the swap is refused, not read."""
    (tmp_path / "elsewhere").mkdir()
    shutil.copy(SAMPLE, tmp_path / "elsewhere" / "session.jsonl")
    (tmp_path / "given").mkdir()
    (tmp_path / "given" / "run").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FoundFileError, match="symbolic link"):
        open_found(tmp_path / "given" / "run" / "session.jsonl", below=tmp_path / "given")
    with open_found(tmp_path / "elsewhere" / "session.jsonl", below=tmp_path) as handle:
        assert json.loads(handle.readline())["type"] == "session"
