"""Start-up cost: the CPU `audit` spends on commands that read little or nothing, against a bare interpreter.

    python benchmarks/startup.py [--runs 10] [--json]

Each command runs --runs times in a child; its CPU is user + sys from resource.getrusage(RUSAGE_CHILDREN)
around that child, and the median is kept (CPU rather than wall time: the cores are shared). The floor is a
Python that imports orjson and msgspec only, the least any reader of a log pays; each command is reported as
a multiple of it. Bytecode caches are written and used, as an installed package's are. The small log is the
bundled sample_logs/compaction-recovery/session.jsonl (26 KB).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
AUDIT = str(Path(PY).parent / "audit")
SMALL_LOG = "sample_logs/compaction-recovery/session.jsonl"
# Bytecode is cached as an installed package caches it: without it every run would compile ~200 modules.
ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
FLOOR = ("python -c 'import orjson, msgspec'", [PY, "-c", "import orjson, msgspec"])
COMMANDS = (("audit --help", [AUDIT, "--help"]), ("audit --version", [AUDIT, "--version"]),
            ("audit verify --help", [AUDIT, "verify", "--help"]),
            ("audit verify SMALL_LOG", [AUDIT, "verify", SMALL_LOG]))


def cpu_seconds(cmd: list[str]) -> float:
    """User + sys CPU of one run of `cmd` (and anything it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def median_cpu(cmd: list[str], runs: int) -> float:
    cpu_seconds(cmd)   # warm the page cache and the bytecode cache: the first run pays them once
    return statistics.median(cpu_seconds(cmd) for _ in range(runs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args(argv)
    floor = median_cpu(FLOOR[1], opts.runs)
    rows = [{"command": label, "cpu_s": cpu, "ratio": cpu / floor}
            for label, cmd in COMMANDS for cpu in (median_cpu(cmd, opts.runs),)]
    if opts.json:
        print(json.dumps({"floor": {"command": FLOOR[0], "cpu_s": floor}, "runs": opts.runs, "commands": rows}))
        return 0
    print(f"  {FLOOR[0]:34} {floor * 1000:7.0f} ms CPU (median of {opts.runs})")
    for row in rows:
        print(f"  {row['command']:34} {row['cpu_s'] * 1000:7.0f} ms CPU = {row['ratio']:.2f}× the floor")
    return 0


if __name__ == "__main__":
    sys.exit(main())
