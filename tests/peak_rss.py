"""Runs a command and writes its peak resident memory, in bytes, to a file: `python peak_rss.py FILE CMD...`.

The memory tests measure a child of the pytest worker, but a forked child's peak RSS starts at its parent's
(Linux carries it across exec), so a worker grown to 230 MiB over the suite made every bound fail that passed
alone. From this small process the command starts at a few MiB: what wait4 reports is its own. The exit status
is the command's, a signal included.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path


def main(report: str, command: list[str]) -> None:
    child = subprocess.Popen(command)   # stdin, stdout, stderr and the limits are this process's own
    _, status, usage = os.wait4(child.pid, 0)
    Path(report).write_text(str(usage.ru_maxrss * 1024), encoding="ascii")
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    sys.exit(os.waitstatus_to_exitcode(status))


SCRIPT = Path(__file__).resolve()


def wrapped(report: Path, command: list[str | Path]) -> list[str | Path]:
    """`command` run through this script, its peak RSS written to `report`."""
    return [sys.executable, SCRIPT, report, *command]


def read(report: Path) -> int:
    """The peak RSS written, 0 when the script was killed before writing it."""
    text = report.read_text(encoding="ascii") if report.exists() else ""
    return int(text or 0)


def kill_group(pid: int) -> None:
    """Kills the script and the command it started (run with start_new_session), for a timer."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
