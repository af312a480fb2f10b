"""A progress bar by bytes on stderr, for people waiting on a long log: only on a terminal, never in CI or a
pipe, and only when there is enough to read to be worth one."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..readers import discover
from ..readers.progress import watching

WORTH_IT = 16 * 1024 * 1024   # bytes: below this a bar only flickers


@contextmanager
def byte_progress(paths: Iterable[Path], what: str) -> Iterator[None]:
    """Show how much of the logs at `paths` the readers have read, while the block runs. Readers in other
    processes (verify -j) do not report: call it only where the logs are read in this process."""
    if not sys.stderr.isatty() or os.environ.get("CI"):
        yield
        return
    try:
        sizes = {str(path): path.stat().st_size for path in discover(paths)}
    except Exception:   # the command reports what it cannot read; the bar just stays away
        sizes = {}
    total = sum(sizes.values())
    if total < WORTH_IT:
        yield
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    done: dict[str, int] = {}
    from ..reports.views import wants_color
    from .options import color_choice

    console = Console(stderr=True, no_color=not wants_color(color_choice(), sys.stderr))
    with Progress(TextColumn(what), BarColumn(), DownloadColumn(), TimeRemainingColumn(), console=console,
                  transient=True) as bar:
        task = bar.add_task(what, total=total)

        def hook(label: str, position: int) -> None:
            done[label] = min(position, sizes.get(label, position))
            bar.update(task, completed=sum(done.values()))

        with watching(hook):
            yield
