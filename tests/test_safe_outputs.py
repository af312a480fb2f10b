"""Issue 12, items 2 and 4, through the real CLI in a subprocess: every file a command writes is written by
dsh_audit.output's rules (docs/outputs.md), and every command ends through one error path (exit 0 clean, 1
findings, 2 unreadable input / unwritable output / bad usage, 3 internal error, 130 Ctrl-C, 141 stdout closed).

Each case asserts the exit code, one line on stderr, no traceback, and inputs left as they were (bytes, mtime,
mode). Tests run as root in CI, where a read-only folder does not stop a write: those cases are skipped as root
and the error path is covered by /dev/full, a folder in the file's place and a path below a regular file.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_audit.cli import main
from dsh_audit.golden import GOLDEN_NAME, collect, golden_document, write_golden
from dsh_audit.output import open_output

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_logs" / "compaction-recovery" / "session.jsonl"
AUDIT = [sys.executable, "-m", "dsh_audit"]
ROOT = os.geteuid() == 0
NOBODY = 65534
HAS_DEV_FULL = Path("/dev/full").exists() and stat.S_ISCHR(os.stat("/dev/full").st_mode)


def audit(*args: str | bytes | Path, umask: int | None = None, env: dict[str, str] | None = None,
          timeout: float = 120, user: str | None = None, stdout: int | None = None, file_size: int | None = None
          ) -> subprocess.CompletedProcess[bytes]:
    """The CLI in a subprocess; its stdout captured, or the descriptor `stdout` (a pipe nobody reads). With
    `file_size`, no file it writes may grow past that many bytes (RLIMIT_FSIZE: a write past it fails as on a
    full disk, with EFBIG)."""
    command: list[str | bytes | Path] = [*AUDIT, *args]
    if user is not None:
        command = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *command]

    def child() -> None:
        if umask is not None:
            os.umask(umask)
        if file_size is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))

    return subprocess.run(command, stdout=subprocess.PIPE if stdout is None else stdout, stderr=subprocess.PIPE,
                          timeout=timeout, check=False, preexec_fn=child,
                          env={**os.environ, "COLUMNS": "120", **(env or {})})


def one_line(stderr: bytes) -> str:
    """stderr is exactly one line (no traceback); returned decoded."""
    text = stderr.decode("utf-8")
    assert "Traceback" not in text, text
    assert text.count("\n") == 1 and text.endswith("\n"), text
    return text


def snapshot(*roots: Path) -> dict[Path, tuple[bytes, int, int]]:
    """Every file below (or at) the roots: bytes, mtime and mode, not following symlinks into elsewhere."""
    files: dict[Path, tuple[bytes, int, int]] = {}
    for root in roots:
        for path in [root] if root.is_file() else sorted(root.rglob("*")):
            if path.is_file() and not path.is_symlink():
                info = path.stat()
                files[path] = (path.read_bytes(), info.st_mtime_ns, info.st_mode)
    return files


def leftovers(*folders: Path) -> list[Path]:
    return [p for folder in folders if folder.is_dir() for p in folder.iterdir() if p.name.endswith(".partial")]


# -- the writers and the sinks ------------------------------------------------------------------------------

class Case:
    """A scratch folder: logs/session.jsonl (with its golden file pinned) and a folder for outputs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.logs = root / "logs"
        self.logs.mkdir()
        self.log = self.logs / "session.jsonl"
        shutil.copy(SAMPLE, self.log)
        entries = list(collect(self.logs))
        write_golden(self.logs, golden_document(entries, full=False, message_prefix="legacy"))
        self.out = root / "out"
        self.out.mkdir()


# writer -> (arguments for a target, whether it creates a missing folder)
WRITERS: dict[str, tuple[Callable[[Case, str], list[str]], bool]] = {
    "verify --junit": (lambda c, t: ["verify", "--junit", t, str(c.log)], True),
    "golden check --junit": (lambda c, t: ["golden", "check", "--junit", t, str(c.logs)], True),
    "cache-report --out": (lambda c, t: ["cache-report", "--format", "csv", "--out", t, str(c.log)], False),
    "cache-report --out parquet": (lambda c, t: ["cache-report", "--format", "parquet", "--out", t, str(c.log)],
                                   False),
    "header-diff --out": (lambda c, t: ["header-diff", "--format", "json", "--out", t, str(c.logs)], False),
    "report -o": (lambda c, t: ["report", str(c.log), "-o", t], False),
    "golden update": (lambda c, t: ["golden", "update", str(c.logs)], False),   # writes DIR/dsh-audit.golden.json
}


def place_sink(case: Case, writer: str, sink: str) -> str | None:
    """Arrange `sink` where the writer writes; the target argument, or None when it does not apply."""
    golden = writer == "golden update"
    if golden:
        target = case.logs / GOLDEN_NAME
        target.unlink()
    if sink == "input":
        if golden:
            target.symlink_to(case.log)    # the only way the fixed golden path can be a log it reads
            return str(target)
        return str(case.log)
    if sink == "symlink-to-input":
        link = target if golden else case.out / "link.out"
        link.symlink_to(case.log)
        return str(link)
    if sink == "directory":
        folder = target if golden else case.out / "folder.out"
        folder.mkdir()
        return str(folder)
    if sink == "dev-full":
        if not HAS_DEV_FULL:
            return None
        if golden:
            target.symlink_to("/dev/full")
            return str(target)
        return "/dev/full"
    if sink == "file-too-large":   # a regular file that cannot grow: a full disk for this process alone
        old = target if golden else case.out / "old.out"
        old.write_text("the old file\n")
        return str(old)
    if sink == "closed-pipe":   # `| head -c1` that has already gone: stdout is a pipe with no reader
        return None if golden else "-"
    if sink == "dev-null":
        if golden:
            target.symlink_to("/dev/null")
            return str(target)
        return "/dev/null"
    if sink == "under-a-file":
        if golden:
            return None
        plain = case.out / "plain.txt"
        plain.write_text("not a folder\n")
        return str(plain / "x.out")
    if sink == "missing-folder":
        return None if golden else str(case.out / "no" / "such" / "x.out")
    if sink == "read-only-folder":
        if ROOT:
            return None
        folder = case.logs if golden else case.out / "read-only"
        folder.mkdir(exist_ok=True)
        folder.chmod(0o555)
        return str(target if golden else folder / "x.out")
    raise AssertionError(sink)


REFUSED = ("input", "symlink-to-input", "directory", "dev-full", "file-too-large", "under-a-file",
           "read-only-folder")
FILE_SIZE_LIMIT = 200   # bytes: less than any writer writes for the sample log
SINKS = (*REFUSED, "closed-pipe", "dev-null", "missing-folder")


@pytest.mark.parametrize("sink", SINKS)
@pytest.mark.parametrize("writer", list(WRITERS))
def test_every_writer_against_every_sink(writer: str, sink: str, tmp_path: Path) -> None:
    """The fuzz-style cross product: refused sinks are one line and exit 2, with nothing written or left over;
    a closed pipe is 141 and nothing said; devices are written through and stay devices; inputs never change.
    A writer added to WRITERS (a new command, a new format) meets every sink. The golden file's path is named by
    dsh-audit, not the user: any link there (to an input, a device) is refused, never written through."""
    case = Case(tmp_path)
    target = place_sink(case, writer, sink)
    planted = target is not None and writer == "golden update" and Path(target).is_symlink()
    if target is None:
        pytest.skip(f"{sink} does not apply to {writer}" + (" as root (test_read_only_folder_is_one_line runs it as "
                    "nobody)" if ROOT and sink == "read-only-folder" else ""))
    arguments, creates_folder = WRITERS[writer]
    inputs = snapshot(case.log) if writer == "golden update" else snapshot(case.logs)
    devices = {path: os.stat(path).st_mode for path in ("/dev/null", "/dev/full") if os.path.exists(path)}
    if sink == "closed-pipe":
        unread, closed = os.pipe()
        os.close(unread)
        try:
            done = audit(*arguments(case, target), stdout=closed)
        finally:
            os.close(closed)
    else:
        done = audit(*arguments(case, target), file_size=FILE_SIZE_LIMIT if sink == "file-too-large" else None)
    try:
        assert (snapshot(case.log) if writer == "golden update" else snapshot(case.logs)) == inputs
        for path, mode in devices.items():
            assert os.stat(path).st_mode == mode, f"{path} is no longer a device"
        assert not leftovers(case.out, case.logs, Path(target).parent), "a temporary file was left behind"
        if sink in REFUSED or planted or (sink == "missing-folder" and not creates_folder):
            line = one_line(done.stderr)
            assert done.returncode == 2, line
            assert line.startswith("audit: ") and ("cannot write" in line or "refusing" in line), line
            if planted:
                assert "refusing to write the golden file through a symbolic link" in line
            elif sink in ("input", "symlink-to-input"):
                assert "refusing to write" in line and "reads" in line
            if sink == "dev-full" and not planted:
                assert "No space left on device" in line
            if sink == "file-too-large":
                assert "File too large" in line and Path(target).read_text() == "the old file\n", line
        elif sink == "closed-pipe":
            assert (done.returncode, done.stderr) == (141, b""), done.stderr
        else:
            assert done.returncode == 0, done.stderr
            assert b"Traceback" not in done.stderr
            if sink == "missing-folder":
                assert Path(target).is_file() and Path(target).read_bytes().startswith(b"<?xml")
    finally:
        for folder in (case.logs, case.out / "read-only"):
            if folder.exists():
                folder.chmod(0o755)


# -- names: hypothesis over output file names ----------------------------------------------------------------

NAME = st.binary(min_size=1, max_size=24).filter(lambda b: b"/" not in b and b"\0" not in b)


@settings(max_examples=40, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(name=NAME, writer=st.sampled_from(["junit", "csv", "jsonl", "parquet"]))
def test_any_output_name_is_written_or_refused_in_one_line(name: bytes, writer: str, tmp_path: Path) -> None:
    """Any byte string as a file name (non-UTF-8, control characters, ".", "..", a line break): the file is
    written whole, or the command says in one line why not; never a traceback, never a temporary file left."""
    folder = tmp_path / "names"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    log = folder / "input.jsonl"
    shutil.copy(SAMPLE, log)
    before = snapshot(log)
    target = os.path.join(os.fsencode(folder), name)
    shown = os.fsdecode(target)
    if writer == "junit":
        args = ["verify", "--junit", shown, str(log)]
    else:
        args = ["cache-report", "--rows", "logs", "--format", writer, "--out", shown, str(log)]
    result = CliRunner().invoke(main, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert not leftovers(folder)
    if result.exit_code == 0:
        assert os.path.isfile(target) and os.path.getsize(target) > 0
    else:
        assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
        assert result.stderr.startswith("audit: ") and "Traceback" not in result.stderr
    assert snapshot(log) == before


# -- modes: the user's umask, a replaced file keeps its mode ---------------------------------------------------

@pytest.mark.parametrize("mask", [0o027, 0o002], ids=["umask-027", "umask-002"])
def test_new_files_get_the_users_umask(mask: int, tmp_path: Path) -> None:
    case = Case(tmp_path)
    (case.logs / GOLDEN_NAME).unlink()
    runs = [["verify", "--junit", str(case.out / "v.xml"), str(case.log)],
            ["cache-report", "--out", str(case.out / "c.csv"), str(case.log)],
            ["header-diff", "--out", str(case.out / "h.parquet"), str(case.log)],
            ["report", str(case.log), "-o", str(case.out / "r.html")],
            ["golden", "update", str(case.logs)],
            ["golden", "check", "--junit", str(case.out / "deeper" / "g.xml"), str(case.logs)]]
    for args in runs:
        done = audit(*args, umask=mask)
        assert done.returncode == 0 and b"Traceback" not in done.stderr, (args, done.stderr)
    for path in [*(case.out / name for name in ("v.xml", "c.csv", "h.parquet", "r.html", "deeper/g.xml")),
                 case.logs / GOLDEN_NAME]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask, path
    assert stat.S_IMODE((case.out / "deeper").stat().st_mode) == 0o777 & ~mask


def test_a_replaced_file_keeps_its_mode_and_is_replaced_whole(tmp_path: Path) -> None:
    case = Case(tmp_path)
    target = case.out / "calls.csv"
    target.write_text("old contents\n")
    target.chmod(0o604)
    done = audit("cache-report", "--out", str(target), str(case.log), umask=0o077)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(target.stat().st_mode) == 0o604
    assert target.read_text().startswith("log,") and not leftovers(case.out)


def test_a_symlinked_output_is_written_through_the_link(tmp_path: Path) -> None:
    """A symlink to a file that is not an input: the file it names is replaced, the link stays a link."""
    case = Case(tmp_path)
    real = case.out / "real.csv"
    real.write_text("old\n")
    link = case.out / "link.csv"
    link.symlink_to(real)
    assert audit("cache-report", "--out", str(link), str(case.log)).returncode == 0
    assert link.is_symlink() and real.read_text().startswith("log,")


def test_a_reader_never_sees_half_a_file(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_text("the old file\n")
    with open_output(target) as handle:
        handle.write('{"row": 1}\n')
        handle.flush()
        assert target.read_text() == "the old file\n"    # still the old one while the new one is written
        assert len(leftovers(tmp_path)) == 1
    assert target.read_text() == '{"row": 1}\n' and not leftovers(tmp_path)
    with contextlib.suppress(RuntimeError), open_output(target) as handle:
        handle.write("half")
        raise RuntimeError("the writer failed")
    assert target.read_text() == '{"row": 1}\n' and not leftovers(tmp_path)


def test_dash_and_dev_stdout_are_stdout(tmp_path: Path) -> None:
    case = Case(tmp_path)
    before = snapshot(case.logs)
    done = audit("header-diff", "--format", "json", "--out", "-", str(case.log))
    assert done.returncode == 0 and json.loads(done.stdout)["schema"] == "dsh-audit/header-diff"
    done = audit("cache-report", "--format", "csv", "--out", "/dev/stdout", str(case.log))
    assert done.returncode == 0 and done.stdout.startswith(b"log,")
    done = audit("report", str(case.log), "-o", "-")
    assert done.returncode == 0 and done.stdout.startswith(b"<!DOCTYPE html>")
    assert one_line(done.stderr).startswith("wrote -")   # the summary stays out of the page
    done = audit("verify", "--junit", "-", "--format", "json", str(case.log))
    assert done.returncode == 0 and b"<testsuites" in done.stdout
    assert snapshot(case.logs) == before and not leftovers(case.out, case.logs)


def test_read_only_folder_is_one_line() -> None:
    """As root, the commands run as nobody: root writes into a read-only folder anyway."""
    user = _as_nobody()
    with _reachable_folder() as root:
        shutil.copy(SAMPLE, root / "session.jsonl")
        log = root / "session.jsonl"
        out = root / "read-only"
        out.mkdir(mode=0o555)
        for args in (["cache-report", "--out", out / "c.csv", log], ["cache-report", "--out", out / "c.parquet", log],
                     ["verify", "--junit", out / "v.xml", log],
                     ["header-diff", "--format", "json", "--out", out / "h.json", log],
                     ["report", log, "-o", out / "r.html"]):
            done = audit(*args, user=user)
            assert done.returncode == 2 and "not writable" in one_line(done.stderr), args
        assert not list(out.iterdir())
        logs = root / "logs"   # golden update writes beside the logs it pins
        logs.mkdir()
        shutil.copy(SAMPLE, logs / "session.jsonl")
        logs.chmod(0o555)
        done = audit("golden", "update", logs, user=user)
        assert done.returncode == 2 and "not writable" in one_line(done.stderr)
        assert [path.name for path in logs.iterdir()] == ["session.jsonl"]


# -- the error path -----------------------------------------------------------------------------------------

# Every command that writes to stdout, in each of its formats (parquet with --out -); LOG and DIR are placeholders
STDOUT_WRITERS = [
    ["verify", "LOG"], ["verify", "--format", "json", "LOG"],
    ["rebuild", "LOG"], ["rebuild", "--format", "jsonl", "LOG"], ["rebuild", "--format", "digest", "LOG"],
    ["explain", "LOG", "1.2#2"], ["explain", "--format", "json", "LOG", "1.2#2"],
    ["sessions", "--root", "DIR"], ["sessions", "--format", "json", "--root", "DIR"], ["report", "LOG", "-o", "-"],
    ["golden", "check", "--junit", "-", "DIR"],
    *(["cache-report", "--format", fmt, "--out", "-", "LOG"] for fmt in ("table", "csv", "json", "jsonl", "parquet")),
    *(["header-diff", "--format", fmt, "--out", "-", "LOG"] for fmt in ("table", "csv", "json", "jsonl", "parquet")),
]


@pytest.mark.parametrize("sink", ["full disk", "closed pipe"])
@pytest.mark.parametrize("args", STDOUT_WRITERS, ids=" ".join)
def test_stdout_that_cannot_be_written_is_one_line_or_141(args: list[str], sink: str, tmp_path: Path) -> None:
    """A full stdout is exit 2 in one line; a stdout nobody reads (`| head -c1` gone) is 141, quietly."""
    if sink == "full disk" and not HAS_DEV_FULL:
        pytest.skip("no /dev/full")
    case = Case(tmp_path)   # its golden file pinned
    given = [str(case.log) if arg == "LOG" else str(case.logs) if arg == "DIR" else arg for arg in args]
    if sink == "full disk":
        with open("/dev/full", "wb") as full:
            done = audit(*given, stdout=full.fileno())
        line = one_line(done.stderr)
        assert done.returncode == 2 and "cannot write to stdout: No space left on device" in line, line
    else:
        unread, closed = os.pipe()
        os.close(unread)
        try:
            done = audit(*given, stdout=closed)
        finally:
            os.close(closed)
        assert (done.returncode, done.stderr) == (141, b""), done.stderr


INTERNAL_ERROR = """
import sys
import dsh_audit.cli as cli
import dsh_audit.verify
def boom(*args, **kwargs):
    raise RuntimeError("boom\\nsecond line")
dsh_audit.verify.verify_paths = boom
sys.argv = ["audit", "verify", sys.argv[1]]
cli.main()
"""


def test_an_internal_error_is_exit_3_with_one_line_asking_for_a_report() -> None:
    done = subprocess.run([sys.executable, "-c", INTERNAL_ERROR, str(SAMPLE)], capture_output=True, timeout=120,
                          check=False, env={k: v for k, v in os.environ.items() if k != "DSH_AUDIT_DEBUG"})
    line = one_line(done.stderr)
    assert done.returncode == 3
    assert line.startswith("audit: internal error: RuntimeError: boom second line")
    assert "please report it with the command line" in line
    debug = subprocess.run([sys.executable, "-c", INTERNAL_ERROR, str(SAMPLE)], capture_output=True,
                           timeout=120, check=False, env={**os.environ, "DSH_AUDIT_DEBUG": "1"})
    assert b"Traceback" in debug.stderr and b"RuntimeError: boom" in debug.stderr


def test_no_command_exits_on_its_own() -> None:
    """Exit codes leave through cli.run_guarded only: no command calls sys.exit or prints its own error."""
    modules = sorted((REPO / "src" / "dsh_audit" / "cli").glob("*.py"))
    assert len(modules) > 8
    for module in modules:
        source = module.read_text(encoding="utf-8")
        calls = source.count("sys.exit(")
        assert calls == (1 if module.name == "__init__.py" else 0), module   # the group's own exit
        assert "except DshAuditError" not in source, module


def test_usage_errors_and_unreadable_inputs_are_exit_2(tmp_path: Path) -> None:
    assert audit("verify", "--format", "nope", str(SAMPLE)).returncode == 2
    assert audit("no-such-command").returncode == 2
    done = audit("verify", str(tmp_path / "missing.jsonl"))
    assert done.returncode == 2 and "no such file" in one_line(done.stderr)


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2 MB synthetic log (94 requests of a few hundred KB each): a second or two of work per run."""
    path = tmp_path_factory.mktemp("big") / "session.jsonl"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "generate_log.py"), "--size", "2MB", "--seed", "7",
                    "--out", str(path)], check=True, capture_output=True, timeout=300)
    return path


@pytest.fixture(scope="module")
def many_logs(big_log: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """400 names for the big log (hard links: no disk cost): several seconds of `verify -j 2`."""
    folder = tmp_path_factory.mktemp("many")
    for k in range(400):
        os.link(big_log, folder / f"small-{k:03d}.jsonl")
    return folder


CHILDREN_LISTED = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists()


def _children(pid: int) -> list[int]:
    """Of every thread: a Dask cluster's nannies start its workers from the event loop's thread."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def _descendants(pid: int) -> list[int]:
    """Children and theirs: export's pool workers are forked by its forkserver, a child of the command."""
    found = _children(pid)
    return found + [grandchild for child in found for grandchild in _descendants(child)]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@contextlib.contextmanager
def running(*args: str | Path, group: bool = False) -> Iterator[subprocess.Popen[bytes]]:
    child = subprocess.Popen([*AUDIT, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             start_new_session=group)
    try:
        yield child
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


STOPS = [(signal.SIGINT, 130, "audit: interrupted\n"), (signal.SIGTERM, 143, "audit: terminated\n")]
STOP_IDS = ["SIGINT", "SIGTERM"]


def _takes_sigterm(pid: int) -> bool:
    """Whether the process has its own SIGTERM handler: dsh_audit.stopping is installed (Python takes SIGINT
    itself from its first instant, SIGTERM never), so what follows is the start-up dsh-audit answers for."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught, 16) & (1 << (signal.SIGTERM - 1)))


def _signal_state(pid: int) -> str:
    try:
        return " ".join(line for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                        if line.startswith(("SigBlk", "SigIgn", "SigCgt")))
    except OSError:
        return "(gone)"


def _stopped(child: subprocess.Popen[bytes], number: int) -> tuple[int, str, float]:
    state = _signal_state(child.pid)
    sent = time.monotonic()
    child.send_signal(number)
    _, err = child.communicate(timeout=30)
    return child.returncode, err.decode() or f"(nothing said; signals when sent: {state})", time.monotonic() - sent


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc to see when the handlers are in")
@pytest.mark.parametrize(("number", "code", "said"), STOPS, ids=STOP_IDS)
@pytest.mark.parametrize("later", [0.0, 0.15], ids=["first-instant", "loading-modules"])
@pytest.mark.parametrize("command", [["verify"], ["cache-report"], ["report", "-o", "-"]], ids=" ".join)
def test_a_signal_during_start_up_is_one_line_and_its_exit_code(number: int, code: int, said: str, later: float,
                                                                 command: list[str], many_logs: Path) -> None:
    # 400 logs, not the bundled one: verify decides that in less than the 0.15 s the later signal waits
    with running(*command, many_logs) as child:
        deadline = time.monotonic() + 20
        while not _takes_sigterm(child.pid) and child.poll() is None and time.monotonic() < deadline:
            pass
        time.sleep(later)
        assert child.poll() is None, "the command ended before the signal"
        returncode, err, _ = _stopped(child, number)
    *before, last = err.splitlines()   # on a loaded machine the report may have been written just before it
    assert (returncode, last + "\n") == (code, said) and all(line.startswith("wrote -") for line in before), err


# A signal that lands while importlib drops a module lock runs its handler inside a weakref callback, where Python
# prints a raised exception as "Exception ignored in ..." with its traceback (seen once in CI at the first instant)
LOST_IN_A_CALLBACK = """
import os, signal, weakref
from dsh_audit import stopping
stopping.install()
class Held: pass
held = Held()
def dropped(ref):
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(10_000): pass   # the handler runs here, inside the callback
ref = weakref.ref(held, dropped)
del held
print("went on")
try:
    for unit in engines.map_units(str, range(3)):   # a run's next unit raises it
        print("unit", unit)
except stopping.Stopped as stop:
    print(stopping.told(stop), stopping.exit_code(stop))
"""


def test_a_stop_raised_inside_a_weakref_callback_is_kept_not_printed_and_ends_the_run_at_its_next_unit() -> None:
    script = LOST_IN_A_CALLBACK.replace("from dsh_audit import stopping", "from dsh_audit import engines, stopping")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "went on\naudit: terminated 143\n", "")


# verify's every way of being stopped, and export's by a terminal's Ctrl-C (its pool starts from a forkserver)
WORKER_STOPS = [(command, how, engine) for command in ("verify", "export") for engine in ("local", "dask")
                for how in ("the process", "its process group (a terminal's Ctrl-C)")
                if command == "verify" or how != "the process"]


@pytest.mark.parametrize(("number", "code", "said"), STOPS, ids=STOP_IDS)
@pytest.mark.parametrize(("command", "how", "engine"), WORKER_STOPS, ids=[" ".join(case) for case in WORKER_STOPS])
def test_a_signal_stops_a_run_with_workers_within_2_seconds(number: int, code: int, said: str, command: str,
                                                            how: str, engine: str, many_logs: Path,
                                                            tmp_path: Path) -> None:
    """A terminal's Ctrl-C reaches every worker too, even one still importing its modules (engines: workers
    leave SIGINT to the driver): one line, the exit code, and no worker left."""
    if engine == "dask":
        pytest.importorskip("distributed")
    group = how != "the process"
    output = ["--to", str(tmp_path / "dataset")] if command == "export" else []
    with running(command, "-j", "2", "--engine", engine, *output, many_logs, group=group) as child:
        deadline = time.monotonic() + (30 if CHILDREN_LISTED else 1.5)
        while len(_children(child.pid)) < 2 and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.05)
        time.sleep(0.5)   # the workers are busy (or still importing, for export's)
        workers = _descendants(child.pid)
        assert child.poll() is None, f"{command} finished before it could be interrupted"
        sent = time.monotonic()
        if group:
            os.killpg(child.pid, number)
        else:
            child.send_signal(number)
        _, err = child.communicate(timeout=30)
        elapsed = time.monotonic() - sent
    assert child.returncode == code, err
    assert elapsed < 2, f"took {elapsed:.1f} s to stop"
    assert one_line(err) == said
    deadline = time.monotonic() + 2
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in workers), "a worker outlived the interrupted command"


@pytest.mark.parametrize(("number", "code", "said"), STOPS, ids=STOP_IDS)
def test_a_signal_mid_read_in_one_process(number: int, code: int, said: str, many_logs: Path) -> None:
    with running("verify", "-j", "1", many_logs) as child:
        while not _takes_sigterm(child.pid) and child.poll() is None:
            pass
        time.sleep(1.0)
        assert child.poll() is None, "verify finished before it could be interrupted"
        returncode, err, elapsed = _stopped(child, number)
    assert returncode == code and elapsed < 2, (elapsed, err)
    assert one_line(err.encode()) == said


@pytest.mark.parametrize(("number", "code", "said"), STOPS, ids=STOP_IDS)
def test_a_signal_at_any_moment_leaves_no_temporary_file(number: int, code: int, said: str, big_log: Path,
                                                        tmp_path: Path) -> None:
    """Signals swept over a whole `cache-report --out` run, the writing of the file included: each run ends with
    the report in place (it finished first) or with nothing, never a `.partial` temporary file."""
    outcomes = set()
    for k in range(12):
        folder = tmp_path / f"run{k}"
        folder.mkdir()
        with running("cache-report", "--no-predict", "--out", folder / "calls.csv", big_log) as child:
            while not _takes_sigterm(child.pid) and child.poll() is None:
                pass
            time.sleep(0.25 * k)
            finished = child.poll() is not None
            returncode, err, _ = (child.returncode, "", 0.0) if finished else _stopped(child, number)
        left = sorted(path.name for path in folder.iterdir())
        assert left in ([], ["calls.csv"]), left
        if returncode == -number:   # past the command's end, in the interpreter's own teardown: the shell
            assert left == ["calls.csv"] and "Traceback" not in err   # says 128 + the signal all the same
        elif returncode != 0:   # the report may be in place: the signal came as the command ended
            assert (returncode, err) == (code, said)
        outcomes.add(returncode)
    assert code in outcomes   # the sweep reached the command while it ran


def test_a_closed_stdout_is_quiet_and_141(big_log: Path) -> None:
    """`audit rebuild LOG | head -1`: the first request arrives while the rebuild still streams; closing the
    pipe ends it quietly with 141 (128 + SIGPIPE), as a shell pipeline reports a writer cut short."""
    for fmt in ("jsonl", "json"):
        child = subprocess.Popen([*AUDIT, "rebuild", "--format", fmt, str(big_log)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
        assert child.stdout is not None and child.stderr is not None
        first = child.stdout.readline()
        assert first and child.poll() is None, "the output is streamed, not written at the end"
        child.stdout.close()
        child.wait(timeout=60)
        err = child.stderr.read()
        child.stderr.close()
        assert child.returncode == 141, err
        assert err == b"", err


# -- names that are not UTF-8, folders that cannot be entered -----------------------------------------------

@pytest.fixture
def odd_names(tmp_path: Path) -> tuple[bytes, bytes]:
    folder = os.path.join(os.fsencode(tmp_path), b"logs-\xff")
    os.mkdir(folder)
    log = os.path.join(folder, b"session-\xfe.jsonl")
    shutil.copyfile(SAMPLE, os.fsdecode(log))
    return folder, log


def test_a_non_utf8_file_name_is_shown_escaped_by_every_command(odd_names: tuple[bytes, bytes],
                                                               tmp_path: Path) -> None:
    folder, log = odd_names
    before = snapshot(Path(os.fsdecode(folder)))
    runs: list[list[str | bytes]] = [
        ["verify", log], ["verify", folder], ["verify", "--format", "json", log],
        ["rebuild", "--format", "digest", log],
        ["header-diff", log], ["header-diff", "--format", "json", folder], ["cache-report", log],
        ["cache-report", "--format", "csv", folder], ["explain", log, "1.2#2"],
        ["report", folder, "-o", os.path.join(os.fsencode(tmp_path), b"r\xfd.html")],
        ["cache-report", "--out", os.path.join(os.fsencode(tmp_path), b"c\xfc.csv"), log],
        ["verify", "--junit", os.path.join(os.fsencode(tmp_path), b"j\xfb.xml"), log],
    ]
    for args in runs:
        done = audit(*args)
        assert done.returncode == 0 and b"Traceback" not in done.stderr, (args, done.stderr)
        done.stdout.decode("utf-8")   # escaped, so always valid UTF-8
    shown = audit("verify", log).stdout.decode()
    assert "session-\\udcfe.jsonl" in shown or "session-\\xfe.jsonl" in shown
    for name in (b"r\xfd.html", b"c\xfc.csv", b"j\xfb.xml"):
        assert os.path.isfile(os.path.join(os.fsencode(tmp_path), name))
    for args in (["golden", "update", folder], ["golden", "check", folder]):
        done = audit(*args)
        assert done.returncode == 0 and b"Traceback" not in done.stderr, (args, done.stderr)
    missing = os.path.join(folder, b"missing-\xff.jsonl")
    for command in ("verify", "rebuild", "header-diff", "cache-report"):
        done = audit(command, missing)
        assert done.returncode == 2 and "missing-\\udcff.jsonl" in one_line(done.stderr)
    after = snapshot(Path(os.fsdecode(folder)))
    assert {p: v for p, v in after.items() if p.name != GOLDEN_NAME} == before


def _as_nobody() -> str | None:
    """Who runs the CLI without the permission to enter a folder: this user, or nobody when root can drop to it."""
    if not ROOT:
        return None
    if shutil.which("setpriv") is None:
        pytest.skip("root without setpriv cannot test a folder it may not enter")
    probe = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *AUDIT,
                            "--version"],
                           capture_output=True, timeout=60, check=False)
    if probe.returncode != 0:
        pytest.skip(f"nobody cannot run this interpreter: {probe.stderr.decode(errors='replace')[:200]}")
    return str(NOBODY)


@contextlib.contextmanager
def _reachable_folder() -> Iterator[Path]:
    """A scratch folder anyone may enter (pytest's own are 0700 to their owner, so nobody could not reach them)."""
    root = Path(tempfile.mkdtemp(prefix="dsh-audit-"))
    try:
        root.chmod(0o755)
        yield root
    finally:
        for folder in (root, *(path for path in root.rglob("*") if path.is_dir())):
            folder.chmod(0o755)
        shutil.rmtree(root)


def test_a_log_in_a_folder_the_user_cannot_enter_is_one_line_exit_2() -> None:
    user = _as_nobody()
    with _reachable_folder() as root:
        closed = root / "closed"
        closed.mkdir()
        shutil.copy(SAMPLE, closed / "session.jsonl")
        closed.chmod(0o700 if ROOT else 0o000)
        log = closed / "session.jsonl"
        for args in (["verify", log], ["rebuild", log], ["header-diff", log], ["cache-report", log],
                     ["explain", log, "1.1"], ["report", log, "-o", root / "r.html"],
                     ["cache-report", "--format", "csv", "--out", closed / "x.csv", SAMPLE],
                     ["verify", "--junit", closed / "x.xml", SAMPLE]):
            done = audit(*args, user=user)
            line = one_line(done.stderr)
            assert done.returncode == 2 and ("Permission denied" in line or "not writable" in line), (args, line)


def test_an_output_onto_a_log_the_walk_reads_but_cannot_parse_is_refused(tmp_path: Path) -> None:
    """A log with a byte order mark fails the directory it sits in: it is an input all the same, never a sink."""
    case = Case(tmp_path)
    case.log.write_bytes(b"\xef\xbb\xbf" + SAMPLE.read_bytes())
    before = snapshot(case.logs)
    done = audit("verify", "--junit", case.log, case.logs)
    assert done.returncode == 2 and "onto a file this command reads" in one_line(done.stderr)
    assert snapshot(case.logs) == before and not leftovers(case.logs)
