"""How a run stops when asked to: Ctrl-C (SIGINT) and SIGTERM, at any moment from the first line dsh-audit runs.

Both become `Stopped`, an exception, so every `finally` and context manager on the way out runs (a half-written
output's temporary file is removed; dsh_audit.output). It is no KeyboardInterrupt, which click would catch while
it parses a command line (and print a blank line for), and no Exception, which no `except Exception` swallows.
The one error path (dsh_audit.cli) turns it into the exit code:
130 for SIGINT and 143 for SIGTERM, 128 plus the signal as a shell reports them, after one line and no traceback.
The first signal also terminates this process's worker processes (`verify -j`), so a pool's shutdown has nothing
to wait for; later signals are ignored while the run unwinds, and after the command has finished a signal ends the
process at once with its code. This module imports nothing heavy: the `audit` entry point installs it before the
command's own modules (polars, the schemas) are loaded.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from types import FrameType
from typing import Any

EXIT_INTERRUPTED = 130   # 128 + SIGINT
EXIT_TERMINATED = 143    # 128 + SIGTERM
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(BaseException):
    """SIGINT or SIGTERM asked the run to stop."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _terminated(stop: BaseException) -> bool:
    return isinstance(stop, Stopped) and stop.signum == signal.SIGTERM


def exit_code(stop: BaseException) -> int:
    """For a Stopped, or a KeyboardInterrupt (Python's own Ctrl-C, before `install`, or a caller's)."""
    return EXIT_TERMINATED if _terminated(stop) else EXIT_INTERRUPTED


def message(stop: BaseException) -> str:
    return "audit: terminated" if _terminated(stop) else "audit: interrupted"


def _quiet(args: Any) -> None:
    """While the run stops: what a helper thread raises (a pool's, over its dead workers) is not news."""


def _stop(signum: int, frame: FrameType | None) -> None:
    if os.getpid() != _owner:
        # A forked worker inherits this handler. It writes nothing and its owner stops it: Ctrl-C reaches the
        # whole process group, so the worker leaves that to its owner; SIGTERM (its owner's) ends it quietly.
        if signum == signal.SIGTERM:
            os._exit(EXIT_TERMINATED)
        return
    global _asked
    _asked = signum
    for other in SIGNALS:   # already stopping: a second Ctrl-C must not interrupt the clean-up
        signal.signal(other, signal.SIG_IGN)
    threading.excepthook = _quiet
    # Only a run that started workers has any; a signal while multiprocessing is still being imported finds the
    # module half made, without active_children (and no worker started yet).
    active_children = getattr(sys.modules.get("multiprocessing"), "active_children", None)
    if active_children is not None:
        for child in active_children():
            with suppress(OSError, ValueError, AttributeError):
                child.terminate()
    raise Stopped(signum)


def _after_the_command(signum: int, frame: FrameType | None) -> None:
    """The command's work is done and flushed: leave now, with the signal's line and code, nothing to unwind."""
    stop = Stopped(signum)
    with suppress(OSError):
        os.write(2, (message(stop) + "\n").encode())
    os._exit(exit_code(stop))


_owner: int | None = None
_asked: int | None = None   # the signal that asked this process to stop, once one has


def check() -> None:
    """Raise the stop a signal asked for, if one did and was lost on the way (never `told`): CPython's compiler
    drops an exception raised inside it (a signal while a module's source is compiled, with no .pyc yet), and a
    weakref callback or __del__ hands it to sys.unraisablehook (a signal while importlib drops a module lock).
    Called once the command's module is in, before each unit a run maps (engines.map_units: verify, export) or
    log a report reads (cache-report, report), and when the command returns: a lost stop ends the run there."""
    if _asked is not None:
        raise Stopped(_asked)


def _unraisable_unless_stopped(before: Callable[[Any], object]) -> Callable[[Any], None]:
    """A stop raised where Python cannot raise it is not printed as "Exception ignored": it stays asked, and
    `check` raises it at the next point it is called at. Anything else goes to `before`."""
    def hook(unraisable: Any) -> None:
        if not isinstance(unraisable.exc_value, Stopped):
            before(unraisable)
    hook.keeps_stops = True   # type: ignore[attr-defined]
    return hook


def told(stop: BaseException) -> str:
    """The line that says how the run stopped; from now on the stop is reported, not lost."""
    global _asked
    _asked = None
    return message(stop)


def install() -> bool:
    """Take SIGINT and SIGTERM for this process; False where signals cannot be taken (not the main thread)."""
    global _owner
    if threading.current_thread() is not threading.main_thread():
        return False
    _owner = os.getpid()   # first: a signal right after its handler is in must find its owner
    if not getattr(sys.unraisablehook, "keeps_stops", False):
        sys.unraisablehook = _unraisable_unless_stopped(sys.unraisablehook)
    try:
        for number in SIGNALS:
            signal.signal(number, _stop)
    except ValueError:   # not the main interpreter
        return False
    return True


@contextmanager
def handled() -> Iterator[None]:
    """SIGINT and SIGTERM stop the block as above; the handlers in force before are restored after it (a caller
    in the same process, a test runner say, gets its own back)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.getsignal(number) for number in SIGNALS}
    unraisablehook = sys.unraisablehook
    if not install():
        yield
        return
    try:
        yield
    finally:
        sys.unraisablehook = unraisablehook
        for number, handler in previous.items():
            with suppress(ValueError, TypeError):
                signal.signal(number, handler)


def finishing() -> None:
    """Called once the command's outcome is known and its output flushed: a signal now just ends the process."""
    if threading.current_thread() is threading.main_thread():
        with suppress(ValueError):
            for number in SIGNALS:
                signal.signal(number, _after_the_command)


@contextmanager
def deferred() -> Iterator[None]:
    """Signals held back for a few statements that must not be split (a temporary file made and remembered):
    delivered, and acted on, right after the block."""
    blocked = set(SIGNALS)
    try:
        before = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    except (AttributeError, OSError, ValueError):   # no sigmask here: nothing is held back
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
