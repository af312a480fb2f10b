"""Logs in object storage and list files (readers.remote, readers.spool, readers.sources), against a real
S3-compatible server: moto's server mode on 127.0.0.1, started and stopped by the module's fixture, with fake
credentials set for this module only, every AWS profile variable unset and the endpoint given explicitly, so that
no other address is ever contacted. `audit verify s3://…` and `cache-report s3://…` say what the same logs say on
a local disk, but for the labels; the spool is empty afterwards; each bad input is one line naming the URL."""

from __future__ import annotations

import json
import logging
import os
import resource
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from cli_child import run_audit
from conftest_reference import LOGS_ROOT
from dsh_audit.generations import generations
from dsh_audit.readers import open_log
from dsh_audit.readers.discover import LOG_SUFFIXES, discover_logs
from dsh_audit.readers.objects import RemoteLog, RemoteSource, StorageOptions
from dsh_audit.readers.remote import list_remote
from dsh_audit.readers.spool import SPOOL_DIR_ENV, SPOOL_MAX_ENV, label_of, spooled
from dsh_audit.verify import verify_path
from test_numbers import log_text, write_log

moto_server = pytest.importorskip("moto.server")
pytest.importorskip("s3fs")
boto3 = pytest.importorskip("boto3")

REPO = Path(__file__).resolve().parents[1]
GENERATIONS = REPO / "tests" / "fixtures" / "generations"
SCALE = REPO / "benchmarks" / "scale_cases.py"
BUCKET = "logs"
MiB, GiB = 1 << 20, 1 << 30
SMALL_FILES = 4 << 10
TIMEOUT = 180   # seconds for any one CLI run: a hang fails the test, not the suite


@dataclass(frozen=True)
class Server:
    endpoint: str
    client: Any
    local: Path   # the same logs as the bucket's `logs/` prefix, on a local disk


def _copy_logs(roots: list[Path], into: Path) -> None:
    """Every file a walk of `roots` reads (every generation) named as a log, kept below its root's name."""
    for root in roots:
        found = discover_logs([root], all_generations=True)
        for file in found.files:
            assert isinstance(file, Path)
            if file.name.endswith(LOG_SUFFIXES):
                target = into / root.name / file.relative_to(root)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(file, target)


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    saved = dict(os.environ)
    for key in [key for key in os.environ if key.startswith("AWS_")]:   # no profile, no other endpoint
        del os.environ[key]
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1",
                      AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull,
                      AWS_EC2_METADATA_DISABLED="true")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        assert host == "127.0.0.1"
        endpoint = f"http://{host}:{port}"
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        client = boto3.client("s3", endpoint_url=endpoint)
        client.create_bucket(Bucket=BUCKET)
        local = tmp_path_factory.mktemp("local") / "logs"
        built = tmp_path_factory.mktemp("built") / "built"
        for known in generations():   # a log of each generation, v1 too, which no fixture holds as the newest
            write_log(built / f"v{known.version}", known.version, log_text(known.version, turns=2))
        _copy_logs([GENERATIONS, built, *([LOGS_ROOT] if LOGS_ROOT.is_dir() else [])], local)
        for file in sorted(local.rglob("*")):
            if file.is_file():
                client.upload_file(str(file), BUCKET, f"logs/{file.relative_to(local).as_posix()}")
        client.put_object(Bucket=BUCKET, Key="notes/readme.txt", Body=b"no log here")
        yield Server(endpoint, client, local)
    finally:
        server.stop()
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def spool(tmp_path: Path) -> Iterator[Path]:
    """A spool folder of the test's own, which every remote read must leave empty."""
    folder = tmp_path / "spool"
    folder.mkdir()
    yield folder
    assert list(folder.iterdir()) == []


def audit(*args: str | Path, spool: Path, stdin: bytes | None = None, env: dict[str, str] | None = None,
          unset: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, SPOOL_DIR_ENV: str(spool), "COLUMNS": "200", **(env or {})}
    for name in unset:
        del environment[name]
    return subprocess.run([sys.executable, "-m", "dsh_audit", *map(str, args)], input=stdin and stdin.decode(),
                          capture_output=True, text=True, timeout=TIMEOUT, cwd=REPO, env=environment)


def one_line(run: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Traceback" not in run.stderr and "internal error" not in run.stderr, run.stderr
    [line] = run.stderr.strip().splitlines()
    for needle in needles:
        assert needle in line, line
    return line


def as_remote(text: str, server: Server) -> str:
    """A local run's output with each label the bucket's URL of the same log."""
    return text.replace(str(server.local), f"s3://{BUCKET}/logs")


@pytest.mark.parametrize("every", [False, True], ids=["newest", "all-generations"])
def test_verify_of_a_prefix_equals_the_local_run_in_every_generation(s3: Server, spool: Path, every: bool) -> None:
    flags = ["--all-generations"] if every else []
    local = audit("verify", "--json", *flags, s3.local, spool=spool)
    remote = audit("verify", "--json", *flags, "-j", "2", f"s3://{BUCKET}/logs/", spool=spool)   # spooled in workers
    assert remote.returncode == local.returncode, remote.stderr
    document, expected = json.loads(remote.stdout), json.loads(as_remote(local.stdout, s3))
    assert [log["log"] for log in document["logs"]] == [log["log"] for log in expected["logs"]]
    for log, same in zip(document["logs"], expected["logs"], strict=True):
        assert log == same
    assert document == expected
    assert all(log["log"].startswith(f"s3://{BUCKET}/logs/") for log in document["logs"])
    assert str(spool) not in remote.stdout + remote.stderr
    if every:
        assert {log["generation"] for log in document["logs"]} >= {known.version for known in generations()}
    else:   # older generations left out below a prefix, as in a folder
        assert document["summary"]["skipped"] > 0


@pytest.mark.parametrize("rows", ["logs", "totals"])
def test_cache_report_of_a_prefix_equals_the_local_run(s3: Server, spool: Path, rows: str) -> None:
    local = audit("cache-report", "--rows", rows, "--format", "json", s3.local, spool=spool)
    remote = audit("cache-report", "--rows", rows, "--format", "json", f"s3://{BUCKET}/logs", spool=spool)
    assert local.returncode == remote.returncode == 0, remote.stderr
    assert json.loads(remote.stdout) == json.loads(as_remote(local.stdout, s3))
    assert remote.stderr == as_remote(local.stderr, s3)


def test_a_list_file_mixes_urls_and_local_paths_in_its_order(s3: Server, spool: Path, tmp_path: Path) -> None:
    [v3, v0] = [sorted(s3.local.rglob(f"session{suffix}.jsonl"))[0] for suffix in (".v3", "")]
    url = f"s3://{BUCKET}/logs/{v3.relative_to(s3.local).as_posix()}"
    listed = tmp_path / "logs.txt"
    listed.write_text(f"# nightly\n\n  {url}  \n{v0}\n", encoding="utf-8")
    for run in (audit("verify", "--json", f"@{listed}", spool=spool),
                audit("verify", "--json", "@-", spool=spool, stdin=listed.read_bytes())):
        assert [log["log"] for log in json.loads(run.stdout)["logs"]] == [url, str(v0)], run.stderr
    nested = tmp_path / "nested.txt"
    nested.write_text(f"{v0}\n@{listed}\n", encoding="utf-8")
    one_line(audit("verify", f"@{nested}", spool=spool), f"{nested}:2", "not another list file")
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n", encoding="utf-8")
    one_line(audit("verify", f"@{empty}", spool=spool), str(empty), "names no log")
    one_line(audit("verify", f"@{tmp_path / 'absent.txt'}", spool=spool), "absent.txt", "cannot read the list file")
    one_line(audit("header-diff", f"@{listed}", spool=spool), url, "local logs only")


def test_explain_reads_the_one_log_a_url_names(s3: Server, spool: Path) -> None:
    """cache-report names a remote log's collapses by its URL; explain takes that URL."""
    local = s3.local / "built" / "v3" / "session.v3.jsonl"
    url = f"s3://{BUCKET}/logs/built/v3/session.v3.jsonl"
    expected = audit("explain", "--json", local, "2.1", spool=spool)
    run = audit("explain", "--json", url, "2.1", spool=spool)
    assert run.returncode == expected.returncode, run.stderr
    assert json.loads(run.stdout) == json.loads(as_remote(expected.stdout, s3))
    several = audit("explain", f"s3://{BUCKET}/logs/built/", "1.1", spool=spool)
    one_line(several, f"names {len(generations())} logs; give the URL of one")


def test_each_bad_url_is_a_failed_row_of_the_gate_naming_it(s3: Server, spool: Path) -> None:
    s3.client.put_object(Bucket=BUCKET, Key="cold/session.jsonl", Body=b"{}\n", StorageClass="GLACIER")
    s3.client.put_object(Bucket=BUCKET, Key="other/session.jsonl", Body=b'{"type": "note"}\n')
    bad = {"s3://no-such-bucket/x": "no such bucket (no-such-bucket)",
           f"s3://{BUCKET}/empty/": "no such object or prefix",   # S3 has no folders: an empty prefix is none
           f"s3://{BUCKET}/notes/": "no dsh log below this prefix (1 other object(s), none named as a log)",
           f"s3://{BUCKET}/cold/session.jsonl": "access denied",
           f"s3://{BUCKET}/other/session.jsonl": "first line is not a session header",
           "nope://bucket/key": "unknown protocol 'nope'"}
    run = audit("verify", "--json", *bad, spool=spool)
    assert run.returncode == 2, run.stderr
    rows = {log["log"]: log["readError"] for log in json.loads(run.stdout)["logs"]}
    assert set(rows) == set(bad)
    for url, why in bad.items():
        assert rows[url].startswith(url) and why in rows[url], rows[url]
    line = one_line(audit("cache-report", "s3://no-such-bucket/x", spool=spool), "s3://no-such-bucket/x")
    assert "no such bucket" in line
    for url, why in (("s3://", "malformed URL"), ("s3:///key", "no bucket"), ("s3://b/a key", "malformed URL")):
        one_line(audit("verify", url, spool=spool), url, why)


def test_storage_options_reach_the_workers_and_show_no_value(s3: Server, spool: Path) -> None:
    """The endpoint given as a storage option, not in the environment: the -j workers list nothing, they spool
    each log with the options its record carries."""
    prefix = f"s3://{BUCKET}/logs/built/"
    given = audit("verify", "--json", "-j", "2", "--storage-option", f"endpoint_url={s3.endpoint}", prefix,
                  spool=spool, unset=("AWS_ENDPOINT_URL",))
    usual = audit("verify", "--json", prefix, spool=spool)
    assert given.returncode == usual.returncode, given.stdout + given.stderr
    assert json.loads(given.stdout) == json.loads(usual.stdout)
    assert not any(log["readError"] for log in json.loads(given.stdout)["logs"])
    usage = audit("verify", "--storage-option", "s3cr3t", prefix, spool=spool)
    assert usage.returncode == 2 and "expected KEY=VALUE" in usage.stderr and "s3cr3t" not in usage.stderr


def test_a_url_given_without_the_extra_names_it(s3: Server, spool: Path, tmp_path: Path) -> None:
    hidden = tmp_path / "no-fsspec"
    hidden.mkdir()
    (hidden / "fsspec.py").write_text("raise ImportError('hidden by the test')\n", encoding="utf-8")
    run = audit("verify", f"s3://{BUCKET}/logs/", spool=spool, env={"PYTHONPATH": str(hidden)})
    assert run.returncode == 2
    assert "needs the remote extra: pip install 'dsh-audit[remote]'" in run.stdout, run.stdout


def test_an_object_gone_between_listing_and_reading_is_an_unreadable_report(s3: Server, spool: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SPOOL_DIR_ENV, str(spool))
    body = next(s3.local.rglob("session.v3.jsonl")).read_bytes()
    s3.client.put_object(Bucket=BUCKET, Key="gone/session.v3.jsonl", Body=body)
    [log] = list_remote(RemoteSource(f"s3://{BUCKET}/gone/")).logs
    s3.client.delete_object(Bucket=BUCKET, Key="gone/session.v3.jsonl")
    [report] = verify_path(log)
    assert report.label == log.url
    assert report.read_error == f"{log.url}: no longer exists: it was listed, then gone before it was read"


def test_an_object_over_the_spool_cap_is_refused_unread(s3: Server, spool: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SPOOL_DIR_ENV, str(spool))
    monkeypatch.setenv(SPOOL_MAX_ENV, "4K")
    logs = list_remote(RemoteSource(f"s3://{BUCKET}/logs/"), all_generations=True).logs
    log = next(log for log in logs if (log.size or 0) > 8192)
    [report] = verify_path(log)
    assert report.read_error == (f"{log.url}: the object ({log.size} bytes) is larger than the spool cap of 4 KiB "
                                 "(4096 bytes); raise it with --spool-max or DSH_AUDIT_SPOOL_MAX")
    [unlisted] = verify_path(RemoteLog(log.url, None, None, log.options))   # a size not known: the copy stops
    assert unlisted.read_error is not None and "larger than the spool cap" in unlisted.read_error


def test_a_spooled_copy_is_private_named_by_its_url_and_deleted(s3: Server, spool: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SPOOL_DIR_ENV, str(spool))
    [log] = list_remote(RemoteSource(f"s3://{BUCKET}/logs/built/v3/session.v3.jsonl")).logs
    with spooled(log) as copy:
        assert stat.S_IMODE(copy.parent.stat().st_mode) == 0o700 and stat.S_IMODE(copy.stat().st_mode) == 0o600
        assert copy.parent.parent == spool and copy.name == "session.v3.jsonl"   # its name states its generation
        source = open_log(copy)
        source.close()
        assert label_of(copy) == log.url and source.label == log.url
        assert copy.stat().st_size == log.size
    assert label_of(copy) == str(copy) and not copy.parent.exists()


def test_a_spool_that_cannot_take_the_copy_names_it(s3: Server, spool: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full spool disk, as RLIMIT_FSIZE stands in for it (Python ignores SIGXFSZ: the write fails with EFBIG)."""
    monkeypatch.setenv(SPOOL_DIR_ENV, str(spool))
    logs = list_remote(RemoteSource(f"s3://{BUCKET}/logs/"), all_generations=True).logs
    log = next(log for log in logs if (log.size or 0) > 2 * SMALL_FILES)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (SMALL_FILES, hard))
    try:
        [report] = verify_path(log)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert report.read_error == f"{log.url}: cannot be copied into the spool ({spool}): File too large"


def test_a_remote_record_pickles_and_never_shows_its_options() -> None:
    import pickle

    log = RemoteLog("s3://b/k/session.jsonl", 10, "etag", StorageOptions.of({"secret": "hunter2", "anon": False}))
    assert pickle.loads(pickle.dumps(log)) == log
    assert "hunter2" not in repr(log) and "secret=…" in repr(log)
    assert log.name == "session.jsonl"


def test_the_spool_refuses_a_linked_folder(s3: Server, tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    run = audit("verify", f"s3://{BUCKET}/logs/", spool=tmp_path / "link")
    assert run.returncode == 2
    assert "the spool folder is a symbolic link" in run.stdout
    assert list((tmp_path / "real").iterdir()) == []


def test_a_remote_log_larger_than_the_memory_bound_is_verified_within_it(s3: Server, spool: Path,
                                                                         tmp_path: Path) -> None:
    log = tmp_path / "session.jsonl"
    subprocess.run([sys.executable, str(SCALE), "steps", "--count", "200000", "--out", str(log)], check=True,
                   capture_output=True, cwd=REPO, timeout=TIMEOUT)
    size = log.stat().st_size
    bound = 128 * MiB
    assert size > bound
    s3.client.upload_file(str(log), BUCKET, "big/session.jsonl")
    run = run_audit("verify", f"s3://{BUCKET}/big/session.jsonl", as_limit=3 * GiB // 2, timeout=TIMEOUT,
                    env={SPOOL_DIR_ENV: str(spool)})
    assert run.code == 0, run.text
    assert "s3://logs/big/session.jsonl" in run.out and "200000 request" in run.out.replace(",", "")
    assert run.peak_rss < bound, f"peak RSS {run.peak_rss >> 20} MiB for a {size >> 20} MiB log"


def assert_same_rows(rows: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    """Equal rows, a float equal to 12 digits: the datasets' files are scanned in another order, and a sum of
    floats depends on its order."""
    assert [sorted(row) for row in rows] == [sorted(row) for row in expected]
    for row, same in zip(rows, expected, strict=True):
        for column, value in row.items():
            if isinstance(value, float):
                assert value == pytest.approx(same[column], rel=1e-12), column
            else:
                assert value == same[column], column


def test_export_of_a_prefix_equals_the_local_export_and_skips_what_it_holds(s3: Server, spool: Path,
                                                                             tmp_path: Path) -> None:
    """`audit export s3://…` spools each log where its unit runs (a pool worker here) and names it by its URL; its
    dataset answers as the local export's; run again, every object whose size and ETag are as recorded is
    skipped unread."""
    local_run = audit("export", "--json", "-j", "1", s3.local, "--to", tmp_path / "local", spool=spool)
    remote_run = audit("export", "--json", "-j", "2", f"s3://{BUCKET}/logs/", "--to", tmp_path / "remote",
                       spool=spool)
    assert remote_run.returncode == local_run.returncode, remote_run.stderr
    done, expected = json.loads(remote_run.stdout), json.loads(local_run.stdout)
    assert done["files"] == expected["files"] and done["new"] == expected["new"] > 0
    assert [one["input"] for one in done["unreadable"]] == [
        as_remote(one["input"], s3) for one in expected["unreadable"]]
    for question in ("totals", "status"):
        answers = [audit("query", "--json", "--question", question, tmp_path / name, spool=spool)
                   for name in ("local", "remote")]
        assert [answer.returncode for answer in answers] == [0, 0], answers[1].stderr
        assert_same_rows(json.loads(answers[1].stdout)["rows"], json.loads(as_remote(answers[0].stdout, s3))["rows"])
    logs = pq.read_table(tmp_path / "remote" / "logs").column("file").to_pylist()
    assert logs and all(file.startswith(f"s3://{BUCKET}/logs/") for file in logs)
    again = json.loads(audit("export", "--json", f"s3://{BUCKET}/logs/", "--to", tmp_path / "remote",
                             spool=spool).stdout)
    assert again["skipped"] == again["files"] - len(again["unreadable"]) and again["new"] == 0
