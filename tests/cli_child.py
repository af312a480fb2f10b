"""The CLI run as a user meets it: a child process under a hard address-space limit, optionally as another user,
fed a real pipe or file, killed with its children when it overruns, with its own peak RSS (tests/peak_rss.py)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import threading
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import peak_rss

REPO = Path(__file__).resolve().parents[1]
AUDIT = [sys.executable, "-m", "dsh_audit"]


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str
    peak_rss: int   # bytes

    @property
    def text(self) -> str:
        return self.out + self.err


def run_audit(*args: str | Path, as_limit: int, user: str | None = None, stdin: bytes | Path | None = None,
              env: dict[str, str] | None = None, timeout: float = 120, columns: int = 200) -> Run:
    """`audit ARGS` in a child under RLIMIT_AS `as_limit`, as `user` (None: this one). `stdin` bytes go through a
    real pipe, written from a thread (the child may stop reading early); a Path is opened as the child's stdin.
    A run past `timeout` seconds is killed with its children: a hang fails the test, not the suite."""
    command: list[str | Path] = [*AUDIT, *args]
    if user is not None:
        command = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *command]

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (as_limit, as_limit))

    environment = {**os.environ, "COLUMNS": str(columns), **(env or {})}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, ExitStack() as stack:
        source: IO[bytes] | int = subprocess.DEVNULL
        if isinstance(stdin, Path):
            source = stack.enter_context(stdin.open("rb"))
        elif stdin is not None:
            source = subprocess.PIPE
        report = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "peak"
        child = subprocess.Popen(peak_rss.wrapped(report, command), stdin=source, stdout=out, stderr=err,
                                 env=environment, preexec_fn=limit, cwd=REPO, start_new_session=True)
        if isinstance(stdin, bytes):
            assert child.stdin is not None
            threading.Thread(target=_feed, args=(child.stdin, stdin), daemon=True).start()
        timer = threading.Timer(timeout, peak_rss.kill_group, (child.pid,))
        timer.start()
        try:
            _, status, _usage = os.wait4(child.pid, 0)
        finally:
            timer.cancel()
        out.seek(0)
        err.seek(0)
        return Run(os.waitstatus_to_exitcode(status), out.read().decode(errors="replace"),
                   err.read().decode(errors="replace"), peak_rss.read(report))


def _feed(pipe: IO[bytes], data: bytes) -> None:
    try:
        pipe.write(data)
        pipe.close()
    except BrokenPipeError:
        pass
