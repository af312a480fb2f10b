"""The `audit` executable (and `python -m dsh_audit`): the first code dsh-audit runs.

SIGINT and SIGTERM are taken here, before the command's modules are imported, so that Ctrl-C during start-up
(polars and the schemas take a moment to load) ends like Ctrl-C anywhere else: one line, exit 130 (143 for
SIGTERM), no traceback (dsh_audit.stopping). Only the standard library is imported before that."""

from __future__ import annotations

import sys
from contextlib import suppress
from typing import NoReturn

from . import stopping


def run() -> NoReturn:
    stopping.install()
    try:
        from .cli import main

        stopping.check()
        code = main(standalone_mode=False)
        stopping.check()
    except (stopping.Stopped, KeyboardInterrupt) as stop:   # outside the command's own error path
        with suppress(OSError, ValueError):
            print(stopping.told(stop), file=sys.stderr, flush=True)
        code = stopping.exit_code(stop)
    stopping.finishing()
    sys.exit(code)
