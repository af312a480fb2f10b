"""Lines of a byte stream, cut from blocks of any size while holding at most about one line cap of a line.

A line longer than the cap is never assembled. Before the first non-blank line (the session header) it is an
error at once: a header that long is unreadable whatever follows, and a stream such as /dev/zero never ends.
After it, the rest of the line is skipped unread up to its newline, which makes it an error (the event cannot
be judged), or to the end of the input, which makes it a torn tail: the reference loader drops an unterminated
final line whatever it holds, so dropping it unread gives the verdict a full read would.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from typing import Protocol

from dsh_audit.errors import LogReadError
from dsh_audit.readers.limits import InputLimits, describe, located
from dsh_audit.records import TornTail

# (physical line number from 1, line bytes without the newline, whether a newline ended it)
Line = tuple[int, bytes, bool]

BLOCK = 1 << 18   # bytes read at once from a plain file or pipe (the fastest size measured; small beside a line)


class ByteSource(Protocol):
    """What the readers need of an input: a file opened "rb", or a pipe behind dsh_audit.readers.stream."""

    def read(self, size: int = -1, /) -> bytes: ...

    def tell(self) -> int: ...

    def close(self) -> None: ...


class LineSplitter:
    """Feed it blocks of bytes in order; it yields each completed line. `finish` at the end of the input yields
    the unterminated final line, or records it in `overlong` when it went past the cap (skipped unread)."""

    def __init__(self, limits: InputLimits, label: str) -> None:
        self.limits = limits
        self.label = label
        self.cap = limits.max_line_bytes
        self.number = 0                  # lines completed so far
        self.overlong: TornTail | None = None
        self._carry: list[bytes] = []    # the start of the current line, at most `cap` bytes in all
        self._carried = 0
        self._skipped: int | None = None  # bytes of an over-cap line skipped so far (None: not skipping)
        self._header_seen = False        # a non-blank line was completed: a later over-cap line may be a tail
        self._step = min(self.cap + 1, BLOCK)

    @property
    def mid_line(self) -> bool:
        """Whether the bytes fed so far end inside a line."""
        return bool(self._carry) or self._skipped is not None

    def feed(self, block: bytes) -> Iterator[Line]:
        step = self._step
        if len(block) <= step:
            return self._feed(block)
        # Fed in slices of at most BLOCK bytes, and never more than the cap: no line inside one slice can pass
        # the cap, and cutting one never makes a list of more than BLOCK pieces. (chain: no frame per line.)
        slices = (block[start:start + step] for start in range(0, len(block), step))
        return chain.from_iterable(map(self._feed, slices))

    def _feed(self, block: bytes) -> Iterator[Line]:
        if self._skipped is not None:
            newline = block.find(b"\n")
            if newline < 0:
                self._skipped += len(block)
                return
            raise self._too_long()
        if not self._carry and block.endswith(b"\n") and not block.strip():
            # Only blank lines, which every reader skips: one stands for all (a zstd frame can hold gigabytes
            # of newlines in a few bytes, and a line each would take hours).
            self.number += block.count(b"\n")
            yield self.number, b"", True
            return
        pieces = block.split(b"\n")
        last = pieces.pop()   # what follows the block's last newline: the start of the next line
        if pieces:
            if self._carry:
                if self._carried + len(pieces[0]) > self.cap:
                    raise self._too_long()
                self._carry.append(pieces[0])
                pieces[0] = b"".join(self._carry)
                self._carry, self._carried = [], 0
            if not self._header_seen:
                self._header_seen = any(piece.strip() for piece in pieces)
            number = self.number
            self.number += len(pieces)
            for piece in pieces:
                number += 1
                yield number, piece, True
        if last:
            self._carried += len(last)
            if self._carried <= self.cap:
                self._carry.append(last)
                return
            if not self._header_seen:
                raise self._too_long()
            self._skipped, self._carry, self._carried = self._carried, [], 0

    def _too_long(self) -> LogReadError:
        return located(self.limits.line_too_long(self.number + 1), path=self.label)

    def finish(self) -> Iterator[Line]:
        if self._skipped is not None:
            self.overlong = TornTail(self.number + 1, self._skipped,
                                     "final line has no trailing newline and is longer than the line cap of "
                                     f"{describe(self.cap)}: dropped unread, as the reference loader drops any "
                                     "unterminated record")
            self._skipped = None
        elif self._carry:
            data = b"".join(self._carry)
            self._carry, self._carried = [], 0
            yield self.number + 1, data, False


class FileLines:
    """The lines of a plain file or pipe, read a block at a time. `tail` is the final line dropped unread, if
    any (see LineSplitter)."""

    def __init__(self, handle: ByteSource, label: str, limits: InputLimits) -> None:
        self._handle = handle
        self._splitter = LineSplitter(limits, label)
        # Blocks no longer than the cap: a line inside one block is within the cap without a check per line.
        self._block = min(BLOCK, limits.max_line_bytes + 1)

    def __iter__(self) -> Iterator[Line]:
        read, block, splitter = self._handle.read, self._block, self._splitter
        while chunk := read(block):
            yield from splitter.feed(chunk)
        yield from splitter.finish()

    def tail(self) -> TornTail | None:
        return self._splitter.overlong
