"""The `audit` executable (and `python -m dsh_audit`): the first code dsh-audit runs.

SIGINT and SIGTERM are taken here, before the command's modules are imported, so that Ctrl-C during start-up
(polars and the schemas take a moment to load) ends like Ctrl-C anywhere else: one line, exit 130 (143 for
SIGTERM), no traceback (dsh_audit.stopping). Only the standard library is imported before that.

The cyclic collector is off while the command line's modules load: they allocate only long-lived objects
(modules, classes, functions, options), which it rescanned some thirty times for nothing, about 7% of the work of
`audit verify` on a small log (benchmarks/startup.py). They are then frozen (gc.freeze), so no later collection
rescans them either, in this process or a `verify -j` worker forked from it. What the command itself left is frozen
when it returns, so the interpreter's teardown does not collect it either: cache-report on 100 MB spends about 2%
less CPU (benchmarks/startup.py's figures are in docs/performance.md)."""

from __future__ import annotations

import gc
import sys
from contextlib import suppress
from typing import NoReturn

from . import stopping


def run() -> NoReturn:
    stopping.install()
    try:
        gc.disable()
        try:
            from .cli import main
        finally:
            gc.freeze()
            gc.enable()
        stopping.check()
        code = main(standalone_mode=False)
        gc.freeze()
        stopping.check()
    except (stopping.Stopped, KeyboardInterrupt) as stop:   # outside the command's own error path
        with suppress(OSError, ValueError):
            print(stopping.told(stop), file=sys.stderr, flush=True)
        code = stopping.exit_code(stop)
    stopping.finishing()
    sys.exit(code)
