"""The fast path's Doubt, and the raw lines of a zstd log (a plain log is read by the file's own line iteration).

Anything the readers would report (an unterminated final line, a torn zstd frame, corruption, a cap) is a doubt:
the full verifier reads the log again and words it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..errors import DshAuditError
from ..readers.zstd import ZstdLines


class Doubt(Exception):
    """The fast path cannot decide this log: the full verifier must read it."""


def zstd_lines(path: Path) -> Iterator[bytes]:
    """The lines of dsh's concatenated zstd frames, the header line first."""
    with path.open("rb") as handle:
        lines = ZstdLines(handle, str(path))
        try:
            for _number, data, terminated in lines:
                if not terminated:
                    raise Doubt("unterminated final line")
                yield data
        except DshAuditError as error:
            raise Doubt(str(error)) from None
        tail = getattr(lines, "tail", None)   # newer readers: a final line dropped unread, or the torn frame
        if lines.incomplete_frame is not None or (tail is not None and tail() is not None):
            raise Doubt("a torn zstd tail")
