"""Logs found where dsh keeps them: the session root, `audit sessions`, --session prefixes, and zstd logs
recompressed as one ordinary frame."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import zstandard
from click.testing import CliRunner

from dsh_audit import reconstruct_file
from dsh_audit.cli import main
from dsh_audit.errors import LogReadError
from dsh_audit.generations import generations
from dsh_audit.readers import home, open_log
from dsh_audit.readers.home import (
    Selection,
    default_paths,
    dsh_home,
    find_session,
    scan_sessions,
    session_root,
)
from dsh_audit.reports.sessions_view import humane_size
from dsh_audit.sessions import list_sessions
from homebuilder import NEWER as NEWER_VERSION
from homebuilder import SAMPLE, ZQ, build_messy_home, put, with_header

REPO = Path(__file__).resolve().parent.parent

ALPHA = "session-a1a1a1a1-0000-4000-8000-000000000001"   # v0 + v3 plain: the v3 is read
BETA = "session-b2b2b2b2-0000-4000-8000-000000000002"    # v4, dsh's multi-frame zstd
BETA2 = "session-b2b2c3c3-0000-4000-8000-000000000003"   # v4, one ordinary zstd frame
GAMMA = "session-c4c4c4c4-0000-4000-8000-000000000004"   # v4 plain, no cwd, with a child log beside it
BROKEN = "session-d5d5d5d5-0000-4000-8000-000000000005"  # corrupt zstd


def dsh_frames(data: bytes, batch: int = 4) -> bytes:
    """dsh's form: a checksummed frame holding the header line, then one per append batch of whole lines."""
    compressor = zstandard.ZstdCompressor(write_checksum=True)
    header, *lines = data.splitlines(keepends=True)
    frames = [compressor.compress(header)]
    frames += [compressor.compress(b"".join(lines[i:i + batch])) for i in range(0, len(lines), batch)]
    return b"".join(frames)


def one_frame(data: bytes) -> bytes:
    """What `zstd session.jsonl` writes: the whole file as one ordinary frame."""
    return zstandard.ZstdCompressor(level=3, write_checksum=True).compress(data)


def one_frame_in_blocks(data: bytes) -> bytes:
    """One frame still, but a block ends after every line (as a streaming compressor may end them), so a
    truncated copy still holds whole blocks to decode."""
    compressor = zstandard.ZstdCompressor(write_checksum=True).compressobj()
    blocks = [compressor.compress(line) + compressor.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
              for line in data.splitlines(keepends=True)]
    return b"".join(blocks) + compressor.flush()


@dataclass
class Home:
    home: Path
    root: Path
    logs: dict[str, Path]
    env: dict[str, str]


T0 = 1_790_000_000  # 2026-09-20T...Z; each session one hour apart


@pytest.fixture
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    home = tmp_path / "dsh-home"
    root = home / "sessions"
    alpha = root / "--work-alpha--" / ALPHA
    put(alpha / "session.jsonl", with_header(SAMPLE / "session.jsonl", ALPHA, "/work/alpha"), T0)
    put(alpha / "session.v3.jsonl", with_header(SAMPLE / "session.v3.jsonl", ALPHA, "/work/alpha"), T0 + 100)
    beta = with_header(ZQ / "text-turn" / "session.v4.jsonl", BETA, "/work/beta")
    put(root / "--work-beta--" / BETA / "session.v4.jsonl.zstd", dsh_frames(beta), T0 + 3600)
    beta2 = with_header(ZQ / "tool-error-details" / "session.v4.jsonl", BETA2, "/work/beta")
    put(root / "--work-beta--" / BETA2 / "session.v4.jsonl.zstd", one_frame(beta2), T0 + 7200)
    gamma = root / "_no-cwd" / GAMMA
    put(gamma / "session.v4.jsonl", with_header(ZQ / "subagent-fork-in-process" / "session.v4.jsonl", GAMMA, None),
        T0 + 10800)
    put(gamma / "session.1.v4.jsonl",
        with_header(ZQ / "subagent-fork-in-process" / "session.1.v4.jsonl", GAMMA + "-child", None), T0 + 10800)
    (gamma / "session.lock").write_bytes(b"")
    put(root / "--work-delta--" / BROKEN / "session.v4.jsonl.zstd", b"\x28\xb5\x2f\xfdJUNK-NOT-A-FRAME", T0 + 14400)
    env = {"DSH_HOME": str(home), "HOME": str(tmp_path / "os-home")}
    monkeypatch.setenv("DSH_HOME", str(home))
    return Home(home, root, {"alpha": alpha / "session.v3.jsonl", "beta": root / "--work-beta--" / BETA /
                             "session.v4.jsonl.zstd", "beta2": root / "--work-beta--" / BETA2 /
                             "session.v4.jsonl.zstd", "gamma": gamma / "session.v4.jsonl"}, env)


# --- the root -----------------------------------------------------------------------------------------------

def test_session_root_follows_dsh_home_paths(tmp_path: Path) -> None:
    os_home = str(tmp_path / "me")
    assert session_root({"DSH_HOME": "/srv/dsh", "HOME": os_home}) == Path("/srv/dsh/sessions")
    assert dsh_home({"HOME": os_home}) == Path(os_home, ".dsh")
    assert dsh_home({"DSH_HOME": "  ", "HOME": os_home}) == Path(os_home, ".dsh")  # blank counts as unset
    assert dsh_home({"DSH_HOME": "~/x/../y", "HOME": os_home}) == Path(os_home, "y")
    assert dsh_home({"DSH_HOME": "rel", "HOME": os_home}) == Path.cwd() / "rel"
    assert dsh_home({"DSH_HOME": "~other/z", "HOME": os_home}) == Path.cwd() / "~other" / "z"


# --- listing --------------------------------------------------------------------------------------------------

def test_sessions_are_listed_newest_first_with_their_newest_generation(fake_home: Home) -> None:
    infos = list_sessions(fake_home.root).sessions
    assert [i.session_id for i in infos] == [None, GAMMA, BETA2, BETA, ALPHA]
    broken, gamma, beta2, beta, alpha = infos
    assert broken.error is not None and "corrupt zstd" in broken.error and broken.requests is None
    assert broken.directory.name == BROKEN
    assert (alpha.generation, alpha.path, alpha.cwd) == (3, fake_home.logs["alpha"], "/work/alpha")
    assert (gamma.cwd, gamma.generation, [p.name for p in gamma.children]) == (None, 4, ["session.1.v4.jsonl"])
    assert beta.size == fake_home.logs["beta"].stat().st_size
    assert beta.last_activity.timestamp() == T0 + 3600
    for info, key in ((alpha, "alpha"), (beta, "beta"), (beta2, "beta2"), (gamma, "gamma")):
        expected = sum(1 for r in reconstruct_file(fake_home.logs[key], bodies=False).requests if not r.inherited)
        assert info.error is None and info.requests == expected, key
        assert info.cost_usd is None  # the default tally prices nothing


def test_limit_and_tally(fake_home: Home) -> None:
    seen: list[str] = []

    def tally(source: object) -> tuple[int, float]:
        seen.append(str(getattr(source, "label", "")))
        return 7, 0.25

    infos = list_sessions(fake_home.root, limit=3, tally=tally).sessions
    assert [i.requests for i in infos][1:] == [7, 7]
    assert [i.session_id for i in infos] == [None, GAMMA, BETA2]
    assert [i.cost_usd for i in infos] == [None, 0.25, 0.25]   # the unreadable log is never priced
    assert seen == [str(fake_home.logs["gamma"]), str(fake_home.logs["beta2"])]


def test_missing_root(tmp_path: Path) -> None:
    with pytest.raises(LogReadError, match="no such file"):
        list_sessions(tmp_path / "nowhere")


# --- picking one ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("prefix", [ALPHA, "session-a1a1", "a1a1", "a"])
def test_a_unique_prefix_picks_the_session(prefix: str, fake_home: Home) -> None:
    assert find_session(fake_home.root, prefix) == fake_home.logs["alpha"]


def test_directory_name_prefix_also_picks(fake_home: Home) -> None:
    assert find_session(fake_home.root, "d5d5") == fake_home.root / "--work-delta--" / BROKEN / \
        "session.v4.jsonl.zstd"


def test_ambiguous_and_unknown_prefixes(fake_home: Home) -> None:
    with pytest.raises(LogReadError) as caught:
        find_session(fake_home.root, "b2b2")
    message = str(caught.value)
    assert "ambiguous" in message and BETA in message and BETA2 in message and "\n" not in message
    with pytest.raises(LogReadError, match=r"ambiguous.*5 sessions match"):
        find_session(fake_home.root, "session-")
    with pytest.raises(LogReadError, match="no session id or directory starts with 'ffff'"):
        find_session(fake_home.root, "ffff")
    with pytest.raises(LogReadError, match="empty"):
        find_session(fake_home.root, "")


def test_exact_id_wins_over_longer_ids_and_at_most_five_are_named(tmp_path: Path) -> None:
    data = ZQ / "text-turn" / "session.v4.jsonl"
    for name in ("abc", "abcd", "abce", "abcf", "abcg", "abch", "abci"):
        put(tmp_path / "--p--" / name / "session.v4.jsonl", with_header(data, name, "/p"), T0)
    assert find_session(tmp_path, "abc") == tmp_path / "--p--" / "abc" / "session.v4.jsonl"
    with pytest.raises(LogReadError) as caught:
        find_session(tmp_path, "ab")
    assert str(caught.value).endswith("7 sessions match (abc, abcd, abce, abcf, abcg and 2 more)")


def test_default_paths(fake_home: Home, tmp_path: Path) -> None:
    given = (tmp_path / "x.jsonl",)
    assert default_paths(given, None, fake_home.env) == Selection(list(given))
    assert default_paths((), None, fake_home.env) == Selection([fake_home.root])
    assert default_paths((), "c4c4", fake_home.env) == Selection([fake_home.logs["gamma"]])
    assert default_paths((fake_home.root / "--work-beta--",), "b2b2c3", {}) == Selection([fake_home.logs["beta2"]])
    alpha = fake_home.logs["alpha"]   # beside its v3, the v0 dsh no longer reads: skipped, and an input all the same
    picked = default_paths((), "a1a1", fake_home.env)
    assert picked == Selection([alpha], {alpha.with_name("session.jsonl"): alpha})
    assert picked.inputs == [alpha, alpha.with_name("session.jsonl")]
    missing = {"DSH_HOME": str(tmp_path / "no-home")}
    with pytest.raises(LogReadError) as caught:
        default_paths((), None, missing)
    assert str(caught.value) == (f"no dsh session root at {tmp_path / 'no-home' / 'sessions'}; set DSH_HOME to "
                                 "dsh's home, or pass a log or directory")


# --- a log recompressed as one ordinary zstd frame --------------------------------------------------------------

def _digests(path: Path) -> list[tuple[int, int, int, str]]:
    return [(r.turn, r.step, r.attempt, r.sha256) for r in reconstruct_file(path, bodies=False).requests]


@pytest.mark.parametrize("log", [SAMPLE / "session.jsonl", SAMPLE / "session.v3.jsonl",
                                 ZQ / "subagent-fork-in-process" / "session.v4.jsonl"])
def test_single_frame_zstd_reads_as_its_plain_log(log: Path, tmp_path: Path) -> None:
    plain = reconstruct_file(log, bodies=False)
    for name, data in (("one", one_frame(log.read_bytes())), ("dsh", dsh_frames(log.read_bytes()))):
        packed = tmp_path / name / (log.name + ".zstd")
        put(packed, data, T0)
        assert _digests(packed) == [(r.turn, r.step, r.attempt, r.sha256) for r in plain.requests], name
        source = open_log(packed)
        assert source.header == open_log(log).header
        assert len(list(source.records())) == len(list(open_log(log).records())) and source.torn_tail is None
    assert plain.requests  # the comparison compared something


def test_single_frame_keeps_every_other_rule(tmp_path: Path) -> None:
    data = (SAMPLE / "session.v3.jsonl").read_bytes()
    whole = one_frame(data)
    # Torn: the frame's complete lines are kept, the tail reported.
    blocks = one_frame_in_blocks(data)
    assert zstandard.ZstdDecompressor().decompressobj().decompress(blocks) == data
    torn = put(tmp_path / "torn" / "session.v3.jsonl.zstd", blocks[:len(blocks) * 2 // 3], T0)
    source = open_log(torn)
    records = list(source.records())
    assert source.torn_tail is not None and "incomplete final zstd frame" in source.torn_tail.reason
    assert 0 < len(records) < len(list(open_log(SAMPLE / "session.v3.jsonl").records()))
    # A complete frame ending mid-line is still corruption.
    cut = put(tmp_path / "cut" / "session.v3.jsonl.zstd", one_frame(data[:-20]), T0)
    with pytest.raises(LogReadError, match="ends mid-line"):
        list(open_log(cut).records())
    # A multi-line first frame followed by another frame is not dsh's form and not one frame either.
    second = zstandard.ZstdCompressor(write_checksum=True).compress(b"")
    followed = put(tmp_path / "followed" / "session.v3.jsonl.zstd", whole + second, T0)
    with pytest.raises(LogReadError, match="first frame is not exactly one line"):
        list(open_log(followed).records())


# --- audit sessions -------------------------------------------------------------------------------------------

COST = r"(\$\d+\.\d+|–)"   # views.usd: the digits that matter, as in cache-report
HIT = r"(\d+\.\d %|–)"


def test_audit_sessions_table(fake_home: Home) -> None:
    result = CliRunner().invoke(main, ["sessions", "--sort", "recent"], env=fake_home.env | {"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert all(len(line) <= 120 for line in lines), lines
    assert lines[0].split() == ["ID", "LAST", "ACTIVITY", "(UTC)", "GEN", "REQS", "HIT", "COST", "LOST", "SIZE",
                                "CWD"]
    rows = [line for line in lines[1:] if not line.startswith((" ", "5 session(s)"))]   # an error under its row
    assert [row.split()[0] for row in rows] == ["d5d5d5d5", "c4c4c4c4", "b2b2c3c3", "b2b2b2b2", "a1a1a1a1"]
    assert rows[0].endswith("  (unreadable)") and lines[2].startswith("  error: ") and "corrupt zstd" in lines[2]
    alpha = rows[-1]
    assert re.search(rf"a1a1a1a1 +2026-\d\d-\d\dT\d\d:\d\d:\d\dZ  v3 +\d+ +{HIT} +{COST} +({COST} +)?[\d.]+ kB  "
                     "/work/alpha$", alpha), alpha
    assert rows[1].endswith("  –")   # no cwd
    closing = next(i for i, line in enumerate(lines) if line.startswith("5 session(s)"))   # wraps on a long path
    assert " ".join(line.strip() for line in lines[closing:]) == (f"5 session(s) in {fake_home.root}, 1 unreadable, "
                                                                  "1 older generation(s) skipped")


def test_audit_sessions_json_limit_and_root(fake_home: Home, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["sessions", "--format", "json", "--limit", "2"],
                                env={"DSH_HOME": str(tmp_path / "elsewhere")} | {"HOME": str(tmp_path)})
    assert result.exit_code == 2
    result = CliRunner().invoke(main, ["sessions", "--root", str(fake_home.root), "--format", "json", "--sort",
                                       "recent", "--limit", "2"], env={"DSH_HOME": str(tmp_path / "elsewhere")})
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["root"] == str(fake_home.root)
    assert [s["id"] for s in document["sessions"]] == [None, GAMMA]
    gamma = document["sessions"][1]
    assert gamma["generation"] == 4 and gamma["cwd"] is None and gamma["requests"] > 0 and gamma["error"] is None
    assert gamma["path"] == str(fake_home.logs["gamma"]) and len(gamma["children"]) == 1
    assert gamma["lastActivity"].endswith("Z") and gamma["sizeBytes"] == fake_home.logs["gamma"].stat().st_size


def test_audit_sessions_long_cwd_is_clipped(tmp_path: Path) -> None:
    cwd = "/very/" + "deep/" * 30 + "project"
    put(tmp_path / "--x--" / "s1" / "session.v4.jsonl", with_header(ZQ / "text-turn" / "session.v4.jsonl", "s1", cwd),
        T0)
    result = CliRunner().invoke(main, ["sessions", "--root", str(tmp_path)], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    row = result.output.splitlines()[1]
    assert len(row) == 100 and row.endswith("…" + cwd[-(100 - len(row.split("…")[0]) - 1):])
    assert row.endswith("deep/project")


@pytest.mark.parametrize("setup", ["missing", "file"])
def test_audit_sessions_unreadable_root(setup: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    if setup == "file":
        home.mkdir()
        (home / "sessions").write_text("not a directory")
    result = CliRunner().invoke(main, ["sessions"], env={"DSH_HOME": str(home)})
    assert result.exit_code == 2
    assert result.output == (f"audit: no dsh session root at {home / 'sessions'}; set DSH_HOME to dsh's home, "
                             "or use --root\n")
    result = CliRunner().invoke(main, ["sessions", "--root", str(tmp_path / "nope")])
    assert result.exit_code == 2 and result.output == f"audit: no dsh session root at {tmp_path / 'nope'}\n"


def test_humane_size() -> None:
    assert [humane_size(n) for n in (0, 999, 1000, 12_345, 12_345_678, 999_960, 3 * 10**12, 5 * 10**15)] == [
        "0 B", "999 B", "1.0 kB", "12.3 kB", "12.3 MB", "1.0 MB", "3.0 TB", "5000.0 TB"]


def test_scan_reads_headers_only(fake_home: Home) -> None:
    scan = scan_sessions([fake_home.root])
    assert scan.unlisted == []
    infos = scan.sessions
    assert all(i.requests is None and i.cost_usd is None for i in infos)
    assert {i.session_id for i in infos} == {None, ALPHA, BETA, BETA2, GAMMA}


def test_audit_sessions_root_that_cannot_be_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "sessions"
    root.mkdir()

    def denied(path: object) -> object:   # what a root without read permission gives (root itself reads anything)
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(home.os, "scandir", denied)
    result = CliRunner().invoke(main, ["sessions", "--root", str(root)])
    assert result.exit_code == 2 and result.output.startswith(f"audit: cannot read the session root {root}: ")


def test_commands_read_the_session_root_without_a_path_and_pick_one_with_session(fake_home: Home) -> None:
    everything = CliRunner().invoke(main, ["verify"], env={"COLUMNS": "300"})
    assert "Traceback" not in everything.output and everything.exit_code in (1, 2)   # the root holds a broken log
    assert everything.output.startswith(f"in {fake_home.root}{os.sep}\n")   # then each path relative to it
    for name in ("gamma", "beta"):
        assert f" {fake_home.logs[name].relative_to(fake_home.root)}  (" in everything.output
    one = CliRunner().invoke(main, ["verify", "--session", "a1a1"], env={"COLUMNS": "300"})
    assert one.exit_code == 0 and str(fake_home.logs["alpha"]) in one.output and "1 log(s)" in one.output
    report = CliRunner().invoke(main, ["cache-report", "--no-predict", "--session", ALPHA, "--format", "json"])
    assert report.exit_code == 0 and json.loads(report.stdout)["rows"][0]["log"] == str(fake_home.logs["alpha"])
    digest = CliRunner().invoke(main, ["rebuild", "--session", "a1a1", "--format", "digest"])
    assert digest.exit_code == 0 and digest.stdout.startswith("1.1#1\t")
    nothing = CliRunner().invoke(main, ["rebuild"])
    assert nothing.exit_code == 2 and "give a LOG, or --session ID" in nothing.output


# -- a real home: several generations, a newer dsh, a corrupt session ------------------------------------------
@pytest.fixture
def messy_home(tmp_path: Path) -> Path:
    return build_messy_home(tmp_path / "dsh" / "sessions")


NEWER = (f"uses log format v{NEWER_VERSION}, newer than any generation dsh-audit knows "
         f"({generations()[0].label} to {generations()[-1].label})")
TORN = "line 7: not valid JSON"


def test_one_bad_session_never_hides_the_others_in_any_report(messy_home: Path, tmp_path: Path) -> None:
    env = {"DSH_HOME": str(messy_home.parent), "COLUMNS": "400"}
    readable = ["v0", "v2", "v3", "v4"]
    for command in (["cache-report"], ["header-diff"]):
        done = CliRunner().invoke(main, command, env=env)
        assert done.exit_code == 0, done.output
        assert f"{NEWER}" in done.stdout and TORN in done.stdout   # named in the view, with why
        assert "2 log(s) could not be read and are not in the report" in done.stderr
        machine = CliRunner().invoke(main, [*command, "--format", "json"], env=env)
        assert machine.exit_code == 0
        logs = {Path(row["log"]).parent.name for row in json.loads(machine.stdout)["rows"]}
        assert logs >= {"session-v0", "session-v3"}   # (a v2 fixture with no request has no call, no header row)
        assert f"session-v{NEWER_VERSION}" not in logs and "session-torn" not in logs
        said = machine.stderr.splitlines()
        assert len(said) == 3 and NEWER in said[0] + said[1] and ":7: not valid JSON" in said[0] + said[1]
    rows = json.loads(CliRunner().invoke(main, ["cache-report", "--rows", "logs", "--format", "json"],
                                         env=env).stdout)["rows"]
    assert sorted(Path(row["log"]).parent.name for row in rows) == [f"session-{name}" for name in readable]
    page = tmp_path / "home.html"
    report = CliRunner().invoke(main, ["report", "-o", str(page)], env=env)
    assert report.exit_code == 0, report.output
    html = page.read_text(encoding="utf-8")
    assert 'id="unreadable"' in html and "newer than any generation" in html and "not valid JSON" in html
    assert all(f"session-{name}" in html for name in readable)
    listing = CliRunner().invoke(main, ["sessions"], env=env)
    assert listing.exit_code == 0 and "6 session(s)" in listing.stdout and "2 unreadable" in listing.stdout
    assert NEWER in listing.stdout and TORN in listing.stdout
    gate = CliRunner().invoke(main, ["verify"], env=env)   # verify stays a gate
    assert gate.exit_code == 2 and gate.stdout.count("UNREADABLE") == 2 and gate.stdout.count("\nok ") >= 3


def test_a_gate_over_a_home_it_cannot_read_whole_says_so(messy_home: Path) -> None:
    env = {"DSH_HOME": str(messy_home.parent)}
    done = CliRunner().invoke(main, ["cache-report", "--fail-on-unexplained"], env=env)
    assert done.exit_code == 2 and "--fail-on-unexplained: 2 log(s) could not be read" in done.stderr


def test_nothing_readable_is_still_an_error(messy_home: Path) -> None:
    torn = messy_home / "--work-torn--"
    for command in (["cache-report", str(torn)], ["header-diff", str(torn)]):
        done = CliRunner().invoke(main, command)
        assert done.exit_code == 2 and TORN.replace("line 7", ":7") in done.stderr, done.output


def test_audit_sessions_model_filter_and_short_ids(tmp_path: Path) -> None:
    """--model keeps the sessions whose first request is to that model (as verify picks a log); the JSON gives
    each session the short id the table shows, which --session takes back to its log."""
    from logbuilder import MODEL
    from test_views import collapsing_home

    root = collapsing_home(tmp_path / "sessions")
    [billing] = root.glob("--work-billing--/*/session.jsonl")
    billing.write_text(billing.read_text(encoding="utf-8").replace(f'"model": "{MODEL}"', '"model": "other-model"'),
                       encoding="utf-8")

    def listed(*options: str) -> list[dict[str, object]]:
        result = CliRunner().invoke(main, ["sessions", "--root", str(root), "--format", "json", *options])
        assert result.exit_code == 0, result.output
        sessions: list[dict[str, object]] = json.loads(result.output)["sessions"]
        return sessions

    assert [(s["id"], s["shortId"]) for s in listed("--model", "other-model")] == [
        ("session-e9c4d2b1-6a7f-4c8d-b3e2-1f0a9b8c7d6e", "e9c4d2b1")]
    assert len(listed("--model", MODEL)) == 3 and listed("--model", "no-such-model") == []
    every = listed()
    # two ids share their first nine characters: each is told apart by one more
    assert sorted(str(s["shortId"]) for s in every) == ["3f2a91c0-0", "3f2a91c0-7", "b7e01d44", "e9c4d2b1"]
    assert all(find_session(root, str(s["shortId"])) == Path(str(s["path"])) for s in every)
    table = CliRunner().invoke(main, ["sessions", "--root", str(root), "--model", "other-model"])
    assert table.exit_code == 0 and "e9c4d2b1" in table.output and "b7e01d44" not in table.output, table.output
