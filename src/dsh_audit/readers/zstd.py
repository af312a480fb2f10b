"""`.jsonl.zstd` logs: concatenated, independently decodable zstd frames (a header frame holding exactly the
header line, then one frame per append batch of whole lines). Decoded frame by frame from bounded reads;
a one-shot decompress would stop after the first frame.

Rules after session-persistence-jsonl (index.ts readZstdPrefix, zstd.ts): a bad magic, a corrupt block or
checksum, or a complete frame ending mid-line is corruption; an incomplete final frame keeps the complete
lines it yields and is reported as a torn tail.

One departure: a file that is a single frame (a log recompressed whole, as `zstd session.jsonl` writes it) is
read, although its first frame holds more than the header line. Only a first frame followed by another frame
must be the header alone: that is the writer's own form, and anything else there is corruption.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import zstandard

from dsh_audit.errors import LogReadError
from dsh_audit.readers.jsonl import Line, name_version, open_lines
from dsh_audit.readers.progress import reported
from dsh_audit.records import LogSource

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"  # 0xFD2FB528 little-endian
_READ_SIZE = 1 << 18  # compressed bytes per read; bounds the plaintext held at once


class ZstdLines:
    """Plaintext lines of a multi-frame zstd file; `incomplete_frame` is set once EOF cuts a frame short."""

    def __init__(self, handle: BinaryIO, label: str) -> None:
        self._handle = handle
        self._label = label
        self.incomplete_frame: str | None = None
        self._line = 0
        self._fragments: list[bytes] = []
        # A first frame of other than one line is corrupt only once a second frame follows it (see the module
        # docstring); until then the problem is held here.
        self._header_frame_problem: LogReadError | None = None

    def _split(self, plaintext: bytes) -> Iterator[Line]:
        start = 0
        while (newline := plaintext.find(b"\n", start)) >= 0:
            piece = plaintext[start:newline]
            if self._fragments:
                self._fragments.append(piece)
                piece = b"".join(self._fragments)
                self._fragments.clear()
            self._line += 1
            yield self._line, piece, True
            start = newline + 1
        if start < len(plaintext):
            self._fragments.append(plaintext[start:])

    def _frame_ended(self, index: int, end: int, lines_before: int) -> None:
        if self._fragments:
            raise LogReadError(f"corrupt zstd log: the frame ending at byte {end} ends mid-line; "
                               "expected every frame to hold whole lines",
                               path=self._label, line=self._line + 1)
        if index == 0 and self._line - lines_before != 1:
            self._header_frame_problem = LogReadError(
                "corrupt zstd log: first frame is not exactly one line (the session header), and frames follow it",
                path=self._label, line=1)

    def _next_frame_starts(self) -> None:
        if self._header_frame_problem is not None:
            raise self._header_frame_problem

    def __iter__(self) -> Iterator[Line]:
        decompressor = zstandard.ZstdDecompressor()
        frame: zstandard.ZstdDecompressionObj | None = None
        frame_index, frame_start, frame_lines, offset = 0, 0, 0, 0
        carry = b""  # the first bytes of a frame, until its magic can be checked
        while chunk := self._handle.read(_READ_SIZE):
            data = carry + chunk if carry else chunk
            carry = b""
            while data:
                if frame is None:
                    self._next_frame_starts()
                    if len(data) < 4:
                        carry = data
                        break
                    if data[:4] != ZSTD_MAGIC:
                        raise LogReadError(f"corrupt zstd log: invalid frame magic at byte {offset}; "
                                           "expected concatenated zstd frames",
                                           path=self._label, line=self._line + 1)
                    frame, frame_start, frame_lines = decompressor.decompressobj(), offset, self._line
                try:
                    plaintext = frame.decompress(data)
                except zstandard.ZstdError as error:
                    raise LogReadError(f"corrupt zstd frame at byte {frame_start}: {error}",
                                       path=self._label, line=self._line + 1) from None
                yield from self._split(plaintext)
                if not frame.eof:
                    offset += len(data)
                    break
                rest = frame.unused_data
                offset += len(data) - len(rest)
                self._frame_ended(frame_index, offset, frame_lines)
                frame, frame_index, data = None, frame_index + 1, rest
        if frame is not None or carry:
            start = frame_start if frame is not None else offset
            self.incomplete_frame = (f"incomplete final zstd frame at byte {start} "
                                     f"({offset + len(carry) - start} bytes); its complete lines were kept")
            if self._fragments:
                yield self._line + 1, b"".join(self._fragments), False


def open_zstd(path: Path) -> LogSource:
    handle = path.open("rb")
    lines = ZstdLines(handle, str(path))
    source = open_lines(str(path), reported(iter(lines), handle, str(path)), lambda: lines.incomplete_frame,
                        handle.close, name_version=name_version(path))
    source.reopen = lambda: open_zstd(path)
    return source
