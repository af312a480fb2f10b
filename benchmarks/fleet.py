"""Issue 22's engines at fleet scale: `audit verify` and `audit export` run over 2,000 small logs and over 20 logs
of 30 MB through `--engine local` and `--engine dask` (2 workers each), alternating, in one run. Per command and
engine: its fixed start-up (a run over 2 small logs, so that both start their 2 workers), then per set of logs the
wall time, the CPU of the driver and of its worker processes, the CPU per log past the start-up (all of it, and
the driver's alone: the export's driver writes every Parquet file), and the peak RSS of the driver and of the
workers.

    python benchmarks/fleet.py [--small 2000] [--big 20] [--big-size 30MB] [--workers 2] [--tries 2]
        [--command 'verify --engine {engine} -j {workers} {logs}' ...] [--json]

--command (repeatable; default verify's and export's, COMMANDS) is what is measured, with {engine}, {workers},
{logs} (the folder of logs) and {scratch} (an empty folder of its own per run) filled in. CPU: os.wait4 of the
driver counts it and every worker process it reaped; the workers' own share is read from /proc (psutil) every
20 ms, as is each process's RSS, so a peak shorter than that may be missed. Data goes to
benchmarks/data/fleet-small and fleet-big (kept: the output is deterministic).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

import generate_log
import small_logs

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
AUDIT = str(Path(sys.executable).parent / "audit")
ENGINES = ("local", "dask")
COMMANDS = ("verify --engine {engine} -j {workers} {logs}",
            "export --engine {engine} -j {workers} {logs} --to {scratch}/ds")
SAMPLE_SECONDS = 0.02
MIB = 1024 * 1024


@dataclass
class Measured:
    engine: str
    logs: str
    count: int
    megabytes: float
    wall_s: float
    cpu_s: float           # the driver and every worker process (see measure)
    workers_cpu_s: float   # the worker processes' own, as last sampled
    driver_rss_mib: float
    workers_rss_mib: float   # all worker processes together, at their peak
    worker_rss_mib: float    # the largest one
    rc: int

    @property
    def driver_cpu_s(self) -> float:
        return self.cpu_s - self.workers_cpu_s


class Sampler(threading.Thread):
    """The RSS and CPU of a process and its descendants, read until it exits."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.driver_rss = self.workers_rss = self.worker_rss = 0
        self.driver_cpu = 0.0
        self.cpu: dict[int, float] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.sample()
            time.sleep(SAMPLE_SECONDS)

    def sample(self) -> None:
        try:
            children = self.root.children(recursive=True)
            self.driver_rss = max(self.driver_rss, self.root.memory_info().rss)
            own = self.root.cpu_times()
            self.driver_cpu = own.user + own.system
        except psutil.Error:
            return
        together = 0
        for child in children:
            try:
                with child.oneshot():
                    rss, times = child.memory_info().rss, child.cpu_times()
            except psutil.Error:
                continue
            together += rss
            self.worker_rss = max(self.worker_rss, rss)
            self.cpu[child.pid] = times.user + times.system
        self.workers_rss = max(self.workers_rss, together)


def measure(engine: str, logs: Path, workers: int, command: str) -> Measured:
    files = sorted(logs.glob("*.jsonl"))
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as scratch:
        argv = [AUDIT, *shlex.split(command.format(engine=engine, workers=workers, logs=logs, scratch=scratch))]
        started = time.perf_counter()
        child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        sampler = Sampler(child.pid)
        sampler.start()
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        sampler.done.set()
        sampler.join()
    child.returncode = os.waitstatus_to_exitcode(status)   # reaped here; keep Popen from waiting again
    # os.wait4 counts the driver and the workers it reaped; a forkserver's workers are reaped by the forkserver,
    # which the driver never reaps, so they are counted from the samples (the driver's own to its last sample)
    workers = sum(sampler.cpu.values())
    cpu = max(usage.ru_utime + usage.ru_stime, sampler.driver_cpu + workers)
    return Measured(engine, logs.name, len(files), sum(f.stat().st_size for f in files) / 1e6, wall,
                    cpu, workers, sampler.driver_rss / MIB,
                    sampler.workers_rss / MIB, sampler.worker_rss / MIB, child.returncode)


def small_set(count: int) -> Path:
    folder = DATA / f"fleet-small-{count}"
    small_logs.write_small_logs(folder, count, "50KB", 20)
    return folder


def start_set(small: Path) -> Path:
    """2 of the small logs, in a folder of their own: enough for either engine to start both workers."""
    folder = DATA / "fleet-start"
    folder.mkdir(parents=True, exist_ok=True)
    for source in sorted(small.glob("*.jsonl"))[:2]:
        target = folder / source.name
        if not target.exists():
            target.write_bytes(source.read_bytes())
    return folder


def big_set(count: int, size: str) -> Path:
    folder = DATA / f"fleet-big-{size}"
    folder.mkdir(parents=True, exist_ok=True)
    for k in range(count):
        path = folder / f"big-{k:02d}.jsonl"
        if not path.exists():   # distinct seeds: distinct sessions
            generate_log.main(["--size", size, "--compaction", "pressure", "--seed", str(100 + k), "--out", str(path)])
    return folder


def per_log(run: Measured, start: Measured) -> dict[str, float]:
    """CPU past the start-up run's (whose 2 small logs are left in: a few ms), per log and per MB of log; the
    driver's alone per log."""
    cpu = run.cpu_s - start.cpu_s
    return {"cpu_ms_per_log": 1000 * cpu / run.count, "cpu_mb_per_s": run.megabytes / cpu if cpu > 0 else 0.0,
            "driver_ms_per_log": 1000 * (run.driver_cpu_s - start.driver_cpu_s) / run.count}


def bench(small: int, big: int, big_size: str, workers: int, tries: int,
          commands: tuple[str, ...] = COMMANDS) -> dict[str, object]:
    sets = {"start": start_set(small_set(small)), "small": small_set(small), "big": big_set(big, big_size)}
    for command in commands:   # warm-up: the compiled-code cache, the page cache
        measure("local", sets["start"], workers, command)
    runs: dict[str, dict[str, dict[str, Measured]]] = {command: {engine: {} for engine in ENGINES}
                                                       for command in commands}
    for name, logs in sets.items():
        for _ in range(tries):   # alternating, so that all meet the same neighbours; the fastest is kept
            for command in commands:
                for engine in ENGINES:
                    run = measure(engine, logs, workers, command)
                    kept = runs[command][engine].get(name)
                    if kept is None or run.wall_s < kept.wall_s:
                        runs[command][engine][name] = run
    return {"commands": list(commands), "workers": workers, "tries": tries,
            "runs": {command: {engine: {name: {**asdict(run), "driver_cpu_s": run.driver_cpu_s,
                                               **({} if name == "start" else per_log(run, by_name["start"]))}
                                        for name, run in by_name.items()}
                               for engine, by_name in by_engine.items()}
                     for command, by_engine in runs.items()}}


def results_lines(result: dict[str, object]) -> list[str]:
    """RESULTS.md's section."""
    runs: dict[str, dict[str, dict[str, dict[str, float]]]] = result["runs"]  # type: ignore[assignment]
    lines = ["## Fleet engines (issue 22)", "",
             "Each command with {workers} = " f"{result['workers']} workers, best of {result['tries']}, commands and "
             "engines alternating in one run (benchmarks/fleet.py): "
             + "; ".join(f"`{command}`" for command in runs) + ". CPU: the driver and its workers (os.wait4), the "
             "workers' share sampled from /proc (a forkserver's workers, which os.wait4 misses, only so); per log: "
             "past the start-up run's CPU (the driver's alone beside "
             "it). RSS: peaks sampled every 20 ms.", "",
             "| command | engine | logs | wall s | CPU s (driver + workers) | CPU per log (driver's) | CPU MB/s | "
             "driver peak MiB | workers peak MiB (largest) | rc |", "|---|---|---|---|---|---|---|---|---|---|"]
    starts = []
    for command, by_engine in runs.items():
        name = command.split()[0]
        for engine, by_name in by_engine.items():
            for logs, run in by_name.items():
                per = (f"{run['cpu_ms_per_log']:.1f} ms ({run['driver_ms_per_log']:.1f})" if "cpu_ms_per_log" in run
                       else "(start-up)")
                rate = f"{run['cpu_mb_per_s']:.0f}" if "cpu_mb_per_s" in run else ""
                lines.append(f"| {name} | {engine} | {logs}: {run['count']:,} ({run['megabytes']:.0f} MB) | "
                             f"{run['wall_s']:.2f} | {run['cpu_s']:.2f} ({run['driver_cpu_s']:.2f} + "
                             f"{run['workers_cpu_s']:.2f}) | {per} | {rate} | {run['driver_rss_mib']:.0f} | "
                             f"{run['workers_rss_mib']:.0f} ({run['worker_rss_mib']:.0f}) | {run['rc']} |")
        local, dask = by_engine["local"]["start"], by_engine["dask"]["start"]
        starts.append(f"- {name}: fixed start-up, dask over local: {dask['cpu_s'] - local['cpu_s']:+.2f} CPU-s, "
                      f"{dask['wall_s'] - local['wall_s']:+.2f} s wall.")
    return [*lines, "", *starts, ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="a command over many small and some big logs, on each engine")
    parser.add_argument("--small", type=int, default=2000)
    parser.add_argument("--big", type=int, default=20)
    parser.add_argument("--big-size", default="30MB")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tries", type=int, default=2)
    parser.add_argument("--command", action="append", dest="commands",
                        help="with {engine} {workers} {logs} {scratch}; repeatable (default: verify's and export's)")
    parser.add_argument("--json", action="store_true", help="the results as JSON, not RESULTS.md's section")
    args = parser.parse_args(argv)
    result = bench(args.small, args.big, args.big_size, args.workers, args.tries,
                   tuple(args.commands or COMMANDS))
    print(json.dumps(result, indent=2) if args.json else "\n".join(results_lines(result)))
    return 0


if __name__ == "__main__":
    # the commands measured read their compiled bytecode as an installed dsh-audit does: a shell that sets
    # PYTHONDONTWRITEBYTECODE would have every run compile every module it imports again
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.exit(main())
