"""`.jsonl.zstd` logs: concatenated, independently decodable zstd frames (a header frame holding exactly the
header line, then one frame per append batch of whole lines). Decoded frame by frame from bounded reads;
a one-shot decompress would stop after the first frame.

Rules after session-persistence-jsonl (index.ts readZstdPrefix, zstd.ts): a bad magic, a corrupt block or
checksum, or a complete frame ending mid-line is corruption; an incomplete final frame keeps the complete
lines it yields and is reported as a torn tail.

One departure: a file that is a single frame (a log recompressed whole, as `zstd session.jsonl` writes it) is
read, although its first frame holds more than the header line. Only a first frame followed by another frame
must be the header alone: that is the writer's own form, and anything else there is corruption.

Bounded whatever the frames hold: compressed bytes go to the decoder a slice at a time, so one call yields at most
half the line cap (zstd's largest expansion is an RLE block: 4 bytes for 128 KiB), the plaintext of the whole file
is held to the decompressed-size cap, and its lines to the line cap (dsh_audit.readers.limits).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator

import zstandard

from dsh_audit.errors import LogReadError
from dsh_audit.readers.jsonl import Line
from dsh_audit.readers.limits import InputLimits, located
from dsh_audit.readers.lines import ByteSource, LineSplitter
from dsh_audit.readers.magic import ZSTD_MAGIC
from dsh_audit.records import TornTail

_READ_SIZE = 1 << 18  # compressed bytes per read
_MIN_FEED = 1 << 10   # compressed bytes per decoder call, at least (see feed_size)
_BATCH = 1 << 17      # plaintext gathered before it is cut into lines (with the last piece, mostly one BLOCK)
_WRITE_SIZE = 1 << 20  # the decoder's output buffer: measured 6x faster than the default on long expansions


class TooLarge(ValueError):
    """More plaintext than the caller's limit."""


def feed_size(cap: int) -> int:
    """Compressed bytes per decoder call under a line cap: zstd expands at most 32768-fold, so one call yields
    at most half the cap, or 32 MiB under a small cap (each call costs a little: fewer are faster)."""
    return max(_MIN_FEED, cap >> 16)


def inflate(frame: zstandard.ZstdDecompressionObj, data: bytes, limit: int,
            feed: int = _MIN_FEED) -> Iterator[tuple[int, bytes]]:
    """(bytes of `data` used so far, plaintext) for each slice of `feed` bytes of `data` fed to `frame`, up to
    where the frame ends. TooLarge once this call has decoded more than `limit` bytes: no more is decoded than
    it takes to tell."""
    total = 0
    for start in range(0, len(data), feed):
        piece = data[start:start + feed]
        plaintext = frame.decompress(piece)
        total += len(plaintext)
        if total > limit:
            raise TooLarge(f"decompresses to more than {limit} bytes")
        if frame.eof:
            yield start + len(piece) - len(frame.unused_data), plaintext
            return
        yield start + len(piece), plaintext


def decompress_bounded(blob: bytes, limit: int) -> bytes:
    """One zstd frame's plaintext, at most `limit` bytes (ValueError otherwise, or for a truncated frame)."""
    frame = zstandard.ZstdDecompressor().decompressobj(write_size=_WRITE_SIZE)
    try:
        text = b"".join(plaintext for _, plaintext in inflate(frame, blob, limit, feed_size(limit)))
    except zstandard.ZstdError as error:
        raise ValueError(f"not valid zstd: {error}") from None
    if not frame.eof:
        raise ValueError("a truncated zstd frame")
    return text


class ZstdLines:
    """Plaintext lines of a multi-frame zstd file; `incomplete_frame` is set once EOF cuts a frame short."""

    def __init__(self, handle: ByteSource, label: str, limits: InputLimits | None = None) -> None:
        self._handle = handle
        self._label = label
        self._limits = limits or InputLimits.from_env()
        self.incomplete_frame: str | None = None
        self._splitter = LineSplitter(self._limits, label)
        self._plaintext = 0   # bytes decoded so far, held to the decompressed-size cap
        self._feed = feed_size(self._limits.max_line_bytes)
        # A first frame of other than one line is corrupt only once a second frame follows it (see the module
        # docstring); until then the problem is held here.
        self._header_frame_problem: LogReadError | None = None

    def _frame_ended(self, index: int, end: int, lines_before: int) -> None:
        if self._splitter.mid_line:
            raise LogReadError(f"corrupt zstd log: the frame ending at byte {end} ends mid-line; "
                               "expected every frame to hold whole lines",
                               path=self._label, line=self._splitter.number + 1)
        if index == 0 and self._splitter.number - lines_before != 1:
            self._header_frame_problem = LogReadError(
                "corrupt zstd log: first frame is not exactly one line (the session header), and frames follow it",
                path=self._label, line=1)

    def _next_frame_starts(self) -> None:
        if self._header_frame_problem is not None:
            raise self._header_frame_problem

    def _decode(self, frame: zstandard.ZstdDecompressionObj, data: bytes, start: int) -> Generator[Line, None, int]:
        """The lines `data` completes; returns how many of its bytes the frame used (all, unless it ended)."""
        limits, splitter = self._limits, self._splitter
        room = limits.max_decompressed_bytes - self._plaintext
        batch: list[bytes] = []
        size = used = 0
        try:
            for position, plaintext in inflate(frame, data, room, self._feed):
                used = position
                if not plaintext:
                    continue
                batch.append(plaintext)
                size += len(plaintext)
                if size >= _BATCH:
                    self._plaintext += size
                    yield from splitter.feed(b"".join(batch))
                    batch, size = [], 0
        except TooLarge:
            raise located(limits.too_much_plaintext(splitter.number + 1), path=self._label) from None
        except zstandard.ZstdError as error:
            raise LogReadError(f"corrupt zstd frame at byte {start}: {error}", path=self._label,
                               line=splitter.number + 1) from None
        if batch:
            self._plaintext += size
            yield from splitter.feed(b"".join(batch))
        return used

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
                                           path=self._label, line=self._splitter.number + 1)
                    frame = decompressor.decompressobj(write_size=_WRITE_SIZE)
                    frame_start, frame_lines = offset, self._splitter.number
                used = yield from self._decode(frame, data, frame_start)
                offset += used
                if not frame.eof:
                    break
                self._frame_ended(frame_index, offset, frame_lines)
                frame, frame_index, data = None, frame_index + 1, data[used:]
        if frame is not None or carry:
            start = frame_start if frame is not None else offset
            self.incomplete_frame = (f"incomplete final zstd frame at byte {start} "
                                     f"({offset + len(carry) - start} bytes); its complete lines were kept")
            yield from self._splitter.finish()

    def tail(self) -> str | TornTail | None:
        """How the input ended: the final line dropped unread (over the line cap) with the torn frame that
        held it, or the torn frame alone."""
        overlong = self._splitter.overlong
        if overlong is not None:
            return TornTail(overlong.line, overlong.dropped_bytes, f"{overlong.reason}; {self.incomplete_frame}")
        return self.incomplete_frame
