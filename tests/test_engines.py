"""The engines (dsh_audit.engines): every item's result exactly once, in the order of the items, on this process, a
process pool or a real Dask cluster of 2 worker processes on 127.0.0.1, started and stopped here. A worker
killed mid-run loses nothing and doubles nothing; verify's JSON document is the same whatever the engine."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conftest_reference import LOGS_ROOT
from dsh_audit import digest_spool
from dsh_audit.cli import main, options
from dsh_audit.engines import CHUNK_UNSIZED, CHUNKS_IN_FLIGHT, ENGINES, EngineChoice, local_cluster, map_units
from dsh_audit.errors import DshAuditError
from dsh_audit.verify import VerifyUnit

psutil = pytest.importorskip("psutil")
distributed = pytest.importorskip("distributed")

GENERATIONS = Path(__file__).resolve().parent / "fixtures" / "generations"
WAIT = 120   # seconds: the bound on every wait for the cluster
REFUSING = "tcp://127.0.0.1:9"   # the discard port, where nothing listens


def doubled(item: int) -> tuple[int, int]:
    return item * 2, os.getpid()


def slowly_doubled(item: int) -> tuple[int, int]:
    time.sleep(0.02)
    return doubled(item)


def deadly_at_7(item: int) -> tuple[int, int]:
    """A unit that takes down its worker on one item, as a log too big for the worker's memory would."""
    if item == 7:
        os.kill(os.getpid(), signal.SIGKILL)
    return doubled(item)


class Counted:
    """An iterable that does not say its length and counts how far it has been read."""

    def __init__(self, count: int) -> None:
        self.count, self.read = count, 0

    def __iter__(self) -> Iterator[int]:
        for item in range(self.count):
            self.read += 1
            yield item


def finished_in_time(read: Callable[[], None]) -> None:
    """`read` run in a thread that must end within WAIT seconds: a hung engine fails the test, not the suite."""
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(WAIT)
    assert not reader.is_alive(), "the engine did not finish in time"


def collected(choice: EngineChoice, items: list[int], unit: Any = doubled) -> list[tuple[int, int]]:
    """map_units' results, read in a thread that must end within WAIT seconds; what it raises, raised here."""
    results: list[tuple[int, int]] = []
    raised: list[BaseException] = []

    def read() -> None:
        try:
            results.extend(map_units(unit, items, choice))
        except Exception as error:
            raised.append(error)

    finished_in_time(read)
    if raised:
        raise raised[0]
    return results


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """The LocalCluster `--engine dask` starts (2 workers on 127.0.0.1), with a client to it."""
    local = local_cluster(2)
    client = distributed.Client(local, set_as_default=False, timeout=WAIT)
    try:
        client.wait_for_workers(2, timeout=WAIT)
        yield local, client
    finally:
        client.close(timeout=WAIT)
        local.close(timeout=WAIT)


def test_the_command_line_offers_every_engine() -> None:
    assert options.ENGINES == ENGINES   # spelled there so that --help starts without dsh_audit.engines


@pytest.mark.parametrize("jobs", [1, 2])
def test_local_engine_yields_each_result_once_in_order(jobs: int) -> None:
    items = list(range(300))
    results = collected(EngineChoice("local", jobs), items)
    assert [value for value, _ in results] == [item * 2 for item in items]
    pids = {pid for _, pid in results}
    # one worker: this process; a pool: its workers did the work, not this process (on a loaded machine one worker
    # may take every chunk)
    assert pids == {os.getpid()} if jobs == 1 else (os.getpid() not in pids and 1 <= len(pids) <= jobs)


def test_local_engine_keeps_bounded_work_in_flight() -> None:
    """On an iterable of unknown length, the pool reads only a few chunks ahead of what has been yielded."""
    items = Counted(1_000_000)
    mapped = map_units(doubled, items, EngineChoice("local", 2))
    assert next(mapped)[0] == 0
    assert items.read <= (2 * CHUNKS_IN_FLIGHT + 1) * CHUNK_UNSIZED   # 2 workers' chunks, and one more
    mapped.close()   # the pool is shut down with the generator


def test_a_pool_worker_killed_mid_run_ends_the_run_in_one_line() -> None:
    """The process pool cannot rerun a dead worker's logs: the run stops with why, not a traceback."""
    raised: list[BaseException] = []

    def read() -> None:
        seen = 0
        try:
            for _, pid in map_units(slowly_doubled, list(range(400)), EngineChoice("local", 2)):
                seen += 1
                if seen == 40:
                    os.kill(pid, signal.SIGKILL)
        except DshAuditError as error:
            raised.append(error)

    finished_in_time(read)
    [error] = raised
    assert str(error).startswith("a worker process died mid-run (killed, or out of memory?)")


def test_the_cluster_listens_on_127_0_0_1_only(cluster: Any) -> None:
    """The scheduler and the nannies run in this process, the workers in its children: every socket any of them
    listens on is bound to 127.0.0.1."""
    here = psutil.Process()
    processes = [here, *here.children(recursive=True)]
    listening = [(process.pid, connection.laddr) for process in processes
                 for connection in process.net_connections(kind="inet")
                 if connection.status == psutil.CONN_LISTEN or not connection.raddr]
    assert len(listening) >= 6   # the scheduler and its HTTP server, two nannies, two workers
    assert {address.ip for _, address in listening} == {"127.0.0.1"}, listening


def test_dask_engine_yields_each_result_once_in_order(cluster: Any) -> None:
    local, _ = cluster
    items = list(range(500))
    results = collected(EngineChoice("dask", address=local.scheduler_address), items)
    assert [value for value, _ in results] == [item * 2 for item in items]
    assert len({pid for _, pid in results}) == 2 and os.getpid() not in {pid for _, pid in results}


def test_a_worker_killed_mid_run_loses_and_doubles_nothing(cluster: Any) -> None:
    local, client = cluster
    items = list(range(400))   # 20 ms each: about 4 s on 2 workers
    pids = sorted(client.run(os.getpid, wait=True).values())
    victim = pids[0]
    results: list[tuple[int, int]] = []

    def read() -> None:
        for result in map_units(slowly_doubled, items, EngineChoice("dask", address=local.scheduler_address)):
            results.append(result)
            if len(results) == 40:   # mid-run: the rest is queued or running on both workers
                os.kill(victim, signal.SIGKILL)

    finished_in_time(read)
    assert [value for value, _ in results] == [item * 2 for item in items]   # each exactly once, in order
    assert victim in {pid for _, pid in results[:40]}
    assert victim not in {pid for _, pid in results[len(results) // 2:]}   # its unfinished chunks were rerun
    client.wait_for_workers(2, timeout=WAIT)   # the nanny restarted it, for the tests after this one


def test_a_chunk_that_kills_every_worker_it_meets_ends_the_run_in_one_line(cluster: Any) -> None:
    """Dask reruns a dead worker's chunk elsewhere, up to allowed-failures (3) times: a fourth death is a
    DshAuditError (exit 2), not KilledWorker's traceback."""
    local, client = cluster
    with pytest.raises(DshAuditError, match=r"killed 4 Dask workers in turn \(distributed.scheduler.allowed-failures"):
        collected(EngineChoice("dask", address=local.scheduler_address), list(range(20)), unit=deadly_at_7)
    client.wait_for_workers(2, timeout=WAIT)


def test_digests_for_a_remote_worker_travel_as_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker of a cluster at --address may be on another machine: its reports' digests, spilled to its disk,
    reach the driver as bytes, not as the name of a file there."""
    spill = tmp_path / "tmp"
    spill.mkdir()
    monkeypatch.setattr(digest_spool, "SPILL_BYTES", 1)   # every spool on disk
    monkeypatch.setattr(tempfile, "tempdir", str(spill))
    found = (Path(__file__).resolve().parents[1] / "sample_logs" / "compaction-recovery" / "session.v3.jsonl", None)
    [here] = VerifyUnit()(found)
    [there] = VerifyUnit(portable=True)(found)
    assert len(here.requests) > 0 and there.requests.portable
    state = there.requests.__getstate__()
    assert "bytes" in state and "path" not in state
    assert list(pickle.loads(pickle.dumps(there)).requests) == list(here.requests)


def audit(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dsh_audit", *map(str, args)], capture_output=True, text=True,
                          timeout=WAIT, check=False, env={**os.environ, "COLUMNS": "200", **(env or {})})


def document(*args: str | Path) -> Any:
    """verify --json over the corpus and the generation fixtures, through the engine `args` name."""
    done = audit("verify", "--json", *args, LOGS_ROOT, GENERATIONS)
    assert done.returncode == 2, done.stderr   # one fixture is unreadable: it fails the gate
    assert not done.stderr   # quiet: nothing of Dask's logging
    return json.loads(done.stdout)


def test_verify_gives_the_same_document_on_every_engine(cluster: Any) -> None:
    local, _ = cluster
    serial = document("-j", "1")
    assert serial["summary"]["requests"] > 211 and serial["summary"]["failed"] > 11
    assert document("-j", "2") == serial
    assert document("--engine", "dask", "--address", local.scheduler_address) == serial
    assert document("--engine", "dask", "-j", "2") == serial   # its own LocalCluster, started and closed


def test_an_unreachable_scheduler_is_one_line_exit_2() -> None:
    done = audit("verify", "--engine", "dask", "--address", REFUSING, GENERATIONS)
    assert done.returncode == 2 and not done.stdout
    assert done.stderr == f"audit: cannot reach the Dask scheduler at {REFUSING}: Connection refused\n"


@pytest.mark.parametrize(("args", "said"), [
    (["--engine", "dask", "--address", "nonsense"], "no Dask scheduler address (tcp://HOST:PORT)"),
    (["--address", REFUSING], "--address names a Dask scheduler: it needs --engine dask, not local"),
])
def test_a_wrong_address_is_one_line_exit_2(args: list[str], said: str) -> None:
    result = CliRunner().invoke(main, ["verify", *args, str(GENERATIONS)])
    assert result.exit_code == 2 and not result.stdout
    assert said in result.stderr and result.stderr.count("\n") == 1


def test_the_dask_engine_not_installed_is_one_line_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)   # import distributed raises ImportError
    result = CliRunner().invoke(main, ["verify", "--engine", "dask", str(GENERATIONS)])
    assert result.exit_code == 2 and not result.stdout
    assert result.stderr == "audit: --engine dask needs Dask's distributed scheduler: pip install 'dsh-audit[dask]'\n"


def test_a_worker_killed_mid_export_loses_and_doubles_no_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 22's check: one worker of two killed by its PID mid-export; every log is in the dataset exactly once,
    and the dataset equals a clean run's on this process. A cluster of its own: the module's has seen workers die."""
    from dsh_audit.fleet import export as export_module
    from test_fleet import assert_same_rows

    local = local_cluster(2)
    client = distributed.Client(local, set_as_default=False, timeout=WAIT)
    try:
        client.wait_for_workers(2, timeout=WAIT)
        killed_mid_export(local.scheduler_address, client, tmp_path, monkeypatch, export_module)
    finally:
        client.close(timeout=WAIT)
        local.close(timeout=WAIT)
    assert_same_rows(tmp_path / "fleet", tmp_path / "clean")


def killed_mid_export(address: str, client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                      export_module: Any) -> None:
    logs = tmp_path / "logs"
    for k, log in enumerate(sorted(LOGS_ROOT.rglob("*.jsonl"))[:60]):
        (logs / f"{k:02}").mkdir(parents=True)
        shutil.copyfile(log, logs / f"{k:02}" / log.name)
    victim = sorted(client.run(os.getpid, wait=True).values())[0]
    real, seen = export_module.map_units, []

    def killing_one_worker(unit: Any, items: Any, choice: EngineChoice) -> Iterator[Any]:
        for task in real(unit, items, choice):
            seen.extend(result.key for result in task)
            if len(seen) == 6:   # mid-run: tasks are queued or running on both workers
                os.kill(victim, signal.SIGKILL)
            yield task

    monkeypatch.setattr(export_module, "TASK_LOGS", 2)   # 30 tasks, not two: the kill falls mid-run
    monkeypatch.setattr(export_module, "map_units", killing_one_worker)
    summary = export_module.export([logs], tmp_path / "fleet", engine=EngineChoice("dask", address=address))
    monkeypatch.undo()
    assert not psutil.pid_exists(victim) or psutil.Process(victim).status() == psutil.STATUS_ZOMBIE
    assert len(seen) == len(set(seen)) == summary.files == summary.new == 60
    export_module.export([logs], tmp_path / "clean")
