"""How far the readers are through their files, for a progress bar: a reader reports (file, bytes read) every
few thousand lines while a hook is installed; nothing is reported, and nothing costs, otherwise."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from dsh_audit.readers.lines import ByteSource

Hook = Callable[[str, int], None]
T = TypeVar("T")
EVERY = 4096   # lines between two reports

_hook: Hook | None = None


@contextmanager
def watching(hook: Hook) -> Iterator[None]:
    global _hook
    previous, _hook = _hook, hook
    try:
        yield
    finally:
        _hook = previous


def reported(items: Iterator[T], handle: ByteSource, label: str) -> Iterator[T]:
    """`items` (a file's lines), reporting the bytes `handle` has read to the hook installed when it started."""
    hook = _hook
    if hook is None:
        yield from items
        return
    for count, item in enumerate(items):
        if count % EVERY == 0:
            hook(label, handle.tell())
        yield item
    hook(label, handle.tell())
