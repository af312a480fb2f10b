"""Where a unit of work runs: `map_units(unit, items, choice)` calls `unit(item)` for every item and yields the
results in the order of `items`, each exactly once, whatever the engine (docs/fleet.md, "Engines").

- `local` (the default): this process when one worker is asked for, else a process pool on this machine;
- `dask`: a Dask distributed cluster, the one at `address`, else a LocalCluster started for the run, bound to
  127.0.0.1 and closed after it (`pip install dsh-audit[dask]`).

Either way at most a few chunks per worker are in flight, so a million items cost the memory of those chunks, not
of a million futures. A unit is a picklable top-level callable that turns its own failures into its result (a
failed row, as verify_path does with an unreadable log): what it raises is a bug, raised here as it was there.
A Dask worker that dies mid-run has its chunks rerun on the others, never yielded twice; a chunk that kills
worker after worker (Dask's allowed-failures), or a pool worker that dies, ends the run in one line (exit 2)."""

from __future__ import annotations

import os
import signal
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sized
from itertools import islice
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from . import stopping
from .errors import DshAuditError

if TYPE_CHECKING:
    from concurrent.futures import Future

T = TypeVar("T")
R = TypeVar("R")

ENGINES = ("local", "dask")
CHUNKS_IN_FLIGHT = 4          # per worker: enough to keep each busy while the head chunk's results are read
CHUNK_CAP = 64                # items per chunk at most: a chunk's results are held whole until yielded
CHUNK_UNSIZED = 16            # items per chunk when `items` does not say how many there are
DASK_EXTRA = "pip install 'dsh-audit[dask]'"


class EngineChoice(msgspec.Struct, frozen=True):
    """Which engine, how many workers (None: one per core of this machine), and for `dask` the address of a
    running scheduler (None: a LocalCluster of `jobs` workers on 127.0.0.1, for the run alone)."""

    engine: str = "local"
    jobs: int | None = 1
    address: str | None = None
    # local pool: how its workers start (None: the platform's default, fork on Linux, which keeps what the driver
    # loaded before; "forkserver" for a driver whose own threads a fork would copy mid-lock: export's writer)
    start_method: str | None = None
    # items per task at most (None: CHUNK_CAP): the driver holds CHUNKS_IN_FLIGHT tasks' results per worker, so a
    # unit with large results (export's rows) asks for small tasks
    chunk_cap: int | None = None

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise DshAuditError(f"unknown engine {self.engine!r}: expected one of {', '.join(ENGINES)}")
        if self.address is not None and self.engine != "dask":
            raise DshAuditError(f"--address names a Dask scheduler: it needs --engine dask, not {self.engine}")

    @property
    def workers(self) -> int:
        return self.jobs or os.cpu_count() or 1


SERIAL = EngineChoice()   # the default: every unit in this process, one after another


def map_units(unit: Callable[[T], R], items: Iterable[T], choice: EngineChoice = SERIAL) -> Iterator[R]:
    """`unit(item)` for every item, in the order of `items`, on the engine `choice` names."""
    if choice.engine == "dask":
        ready(choice)   # now, not at the first result
        return _checked(_dask(unit, items, choice))
    workers = min(choice.workers, len(items)) if isinstance(items, Sized) else choice.workers
    if workers <= 1:
        return _checked(map(unit, items))
    return _checked(_pool(unit, items, workers, _chunk_size(items, workers, choice.chunk_cap), choice.start_method))


def _checked(results: Iterator[R]) -> Iterator[R]:
    """`results`, a stop Python could not raise where it landed (stopping.check) raised before each: the run
    ends at its next unit, not at its end."""
    for result in results:
        stopping.check()
        yield result


def ready(choice: EngineChoice) -> None:
    """Refuses, in one line, an engine that is not installed: a command checks before it starts its work."""
    if choice.engine != "dask":
        return
    try:
        import distributed  # noqa: F401 (its import is the check)
    except ImportError:
        raise DshAuditError(f"--engine dask needs Dask's distributed scheduler: {DASK_EXTRA}") from None


def run_chunk(unit: Callable[[T], R], chunk: list[T]) -> list[R]:
    """One task: a chunk of items through `unit`, on whichever process the engine sent it to."""
    return [unit(item) for item in chunk]


def _chunk_size(items: Iterable[Any], workers: int, cap: int | None) -> int:
    if not isinstance(items, Sized):
        return CHUNK_UNSIZED
    return max(1, min(cap or CHUNK_CAP, len(items) // (workers * 8)))


def _chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


def _in_order(submit: Callable[[list[T]], Any], result: Callable[[Any], list[R]], items: Iterable[T],
              size: int, window: int) -> Iterator[R]:
    """Chunks submitted up to `window` ahead of the one being read, whose results are yielded in order."""
    pending: deque[Any] = deque()
    chunks = _chunks(items, size)
    for chunk in chunks:
        pending.append(submit(chunk))
        if len(pending) >= window:
            break
    while pending:
        yield from result(pending.popleft())
        for chunk in chunks:   # one chunk out, one in
            pending.append(submit(chunk))
            break


def _pool(unit: Callable[[T], R], items: Iterable[T], workers: int, size: int, start_method: str | None
          ) -> Iterator[R]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor  # multiprocessing and logging: for -j only (~10 ms)
    from concurrent.futures.process import BrokenProcessPool

    context = multiprocessing.get_context(start_method) if start_method else None
    if start_method == "forkserver":
        forkserver_deaf_to_ctrl_c()
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        def submit(chunk: list[T]) -> Future[list[R]]:
            return pool.submit(run_chunk, unit, chunk)

        def result(future: Future[list[R]]) -> list[R]:
            try:
                return future.result()
            except BrokenProcessPool:   # killed, or out of memory: the pool cannot rerun its work
                raise DshAuditError("a worker process died mid-run (killed, or out of memory?); --engine dask "
                                    "reruns a dead worker's work elsewhere") from None

        yield from _in_order(submit, result, items, size, workers * CHUNKS_IN_FLIGHT)


def _dask(unit: Callable[[T], R], items: Iterable[T], choice: EngineChoice) -> Iterator[R]:
    import logging  # for Dask only: a local run never loads it (~2 ms)

    from distributed import Client

    logging.getLogger("distributed").setLevel(logging.CRITICAL)   # its log is for a cluster's operator
    cluster = local_cluster(choice.workers) if choice.address is None else None
    try:
        try:
            client = Client(  # type: ignore[no-untyped-call]
                cluster if cluster is not None else _reachable(choice.address or ""), set_as_default=False)
        except OSError as error:   # a scheduler that does not answer in Dask's connect timeout
            raise DshAuditError(f"cannot reach the Dask scheduler at {choice.address}: {error}") from None
        with client:
            workers = len(client.scheduler_info()["workers"]) or 1
            size = _chunk_size(items, workers, choice.chunk_cap)

            def submit(chunk: list[T]) -> Any:
                return client.submit(run_chunk, unit, chunk, pure=False)

            yield from _in_order(submit, _dask_result, items, size, workers * CHUNKS_IN_FLIGHT)
    finally:
        if cluster is not None:
            cluster.close()


def _dask_result(future: Any) -> Any:
    from distributed import KilledWorker

    try:
        return future.result()
    except KilledWorker:
        from dask.config import get

        raise DshAuditError(f"one chunk of the run's work killed {get('distributed.scheduler.allowed-failures') + 1} "
                            "Dask workers in turn (distributed.scheduler.allowed-failures): a log too big for a "
                            "worker's memory?") from None


def local_cluster(workers: int) -> Any:
    """A cluster of `workers` processes of one thread each, for this run alone: the scheduler, the nannies and the
    workers listen on 127.0.0.1 only, and so does the scheduler's HTTP server (it has one, dashboard or not: on a
    port of its own, not 8787, which another cluster may hold); nothing is logged but a crash. Its workers are
    forked from a forkserver that ignores Ctrl-C (forkserver_deaf_to_ctrl_c); a worker Dask restarts after a crash
    is spawned, Dask's default."""
    import logging

    from dask.config import set as configured
    from distributed import LocalCluster

    # Not Dask's own preload for the server (Dask and numpy, pandas… imported there once): its workers then took
    # 0.3-1.7 s to stop, where these take 0.1
    with configured({"distributed.worker.multiprocessing-method": "forkserver"}):
        forkserver_deaf_to_ctrl_c()
        return LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address="127.0.0.1:0", silence_logs=logging.CRITICAL)


def forkserver_deaf_to_ctrl_c() -> None:
    """Start multiprocessing's forkserver (if it is not running) with SIGINT ignored, which it and every worker
    forked from it keep: a terminal's Ctrl-C reaches the whole process group, and a worker still importing its
    modules (the run's first seconds) would print a KeyboardInterrupt traceback. The driver alone takes it and
    stops its workers (dsh_audit.stopping). An ignored signal is the one disposition that survives exec; a blocked
    mask does not survive multiprocessing's spawn. A Ctrl-C typed in the few milliseconds the server takes to
    start is lost."""
    from multiprocessing import forkserver

    if threading.current_thread() is not threading.main_thread():   # signals are the main thread's to set
        forkserver.ensure_running()
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)


def _reachable(address: str) -> str:
    """`address` once a TCP connection to it opens: Client itself retries a refused one for the whole connect
    timeout, then leaves a half-started client behind whose clean-up prints a traceback at exit."""
    import socket

    from dask.config import get
    from dask.utils import parse_timedelta
    from distributed.comm.addressing import get_address_host_port

    try:
        host, port = get_address_host_port(address)
    except ValueError as error:
        raise DshAuditError(f"--address {address!r} is no Dask scheduler address (tcp://HOST:PORT): {error}") from None
    seconds = parse_timedelta(get("distributed.comm.timeouts.connect"), default="seconds")
    try:
        socket.create_connection((host, port), timeout=seconds).close()
    except OSError as error:
        raise DshAuditError(f"cannot reach the Dask scheduler at {address}: {error.strerror or error}") from None
    return address
