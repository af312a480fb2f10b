"""The fast path's Doubt, and the raw lines of a log after its header: a plain log's by the file's own line
iteration, a zstd log's decompressed frame by frame.

Anything the readers would report (an unterminated final line, a torn zstd frame, corruption, a cap) is a doubt:
the full verifier reads the log again and words it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, BinaryIO

import msgspec

from ..errors import DshAuditError
from ..readers.discover import kind_of
from ..readers.limits import MAX_DEPTH, InputLimits
from ..records import LogSource


class Doubt(Exception):
    """The fast path cannot decide this log: the full verifier must read it."""


def zstd_lines(handle: BinaryIO, label: str) -> Iterator[bytes]:
    """The lines of dsh's concatenated zstd frames, the header line first."""
    from ..readers.zstd import ZstdLines  # zstandard: for a compressed log only

    with handle:
        lines = ZstdLines(handle, label)
        try:
            for _number, data, terminated in lines:
                if not terminated:
                    raise Doubt("unterminated final line")
                yield data
        except DshAuditError as error:
            raise Doubt(str(error)) from None
        if lines.tail() is not None:   # a final line dropped unread, or a torn frame
            raise Doubt("a torn zstd tail")


def log_kind(source: LogSource) -> str:
    """"jsonl" or "zstd": the only sources the fast path reads (a plain file, its header on line 1)."""
    if source.reopen is None or source.open_file is None or source.header_line != 1:
        raise Doubt("not a plain file source with its header on line 1")
    try:
        with _opened(source, -1) as handle:
            kind = kind_of(handle.read(100))
    except OSError:
        raise Doubt("unreadable") from None
    if kind not in ("jsonl", "zstd"):
        raise Doubt(f"a {kind} source")
    return kind


def refuse_seqless(source: LogSource, kind: str) -> None:
    """Doubt when a plain log's first event line names no seq (the committed fixture form, which the fast path
    leaves to the full verifier), before its generation's types are built for nothing. A seq written with an
    escaped key is taken as absent: a doubt, which is never wrong, only slower."""
    if kind != "jsonl":
        return
    with _opened(source, 1 << 16) as handle:
        header = handle.readline(1 << 16)
        first = handle.readline(1 << 16) if header.endswith(b"\n") else b""   # a longer header: not decided here
    if first and b'"seq' not in first:
        raise Doubt("seq not contiguous or absent")


class Body(msgspec.Struct, frozen=True):
    """The lines after a log's header, and how the verifier reads them (FastVerifier.feed and finish)."""

    lines: Iterator[bytes]
    check_newline: bool      # the lines keep their newline, and the last one must have it
    max_line: int | None
    max_depth: int | None


@contextmanager
def body(source: LogSource, kind: str, header: msgspec.json.Decoder[Any] | None) -> Iterator[Body]:
    """The lines after the header line, once that line is checked against its generation's type (`header`)."""
    max_line, max_depth = _caps()
    if kind == "zstd":
        lines = zstd_lines(_opened(source, -1), source.label)
        _check_header(header, next(lines, b""))
        yield Body(lines, False, max_line, max_depth)
        return
    with _opened(source, 1 << 20) as handle:
        if max_line is not None and os.fstat(handle.fileno()).st_size <= max_line:
            max_line = None   # no line of this file can pass the cap
        plain: Iterator[bytes] = (iter(handle) if max_line is None
                                  else iter(partial(handle.readline, max_line + 2), b""))
        first = next(plain, b"")
        if not first.endswith(b"\n"):
            raise Doubt("torn header")
        _check_header(header, first)
        yield Body(plain, True, max_line, max_depth)


def _opened(source: LogSource, buffering: int) -> BinaryIO:
    """The source's file opened again as its reader opened it (a log a walk found: never through a link)."""
    assert source.open_file is not None
    try:
        return source.open_file(buffering)
    except DshAuditError as error:   # the reader's own opener refused it: the full verifier says why
        raise Doubt(str(error)) from None


def _caps() -> tuple[int | None, int | None]:
    """The readers' line and depth caps (dsh_audit.readers.limits): a line longer than the first (with its
    newline), or JSON nested deeper than the second, is a read error to them."""
    try:
        return InputLimits.from_env().max_line_bytes + 1, MAX_DEPTH
    except DshAuditError as error:   # a bad cap in the environment: the reader refuses it too
        raise Doubt(str(error)) from None


def _check_header(decoder: msgspec.json.Decoder[Any] | None, line: bytes) -> None:
    """The session header line against its generation's generated type (the reader parsed the same line)."""
    if decoder is not None:
        try:
            decoder.decode(line)
        except (msgspec.ValidationError, msgspec.DecodeError):
            raise Doubt("session header schema") from None
