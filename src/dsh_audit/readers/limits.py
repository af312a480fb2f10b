"""What one input may cost the reader: the bytes of one line, the plaintext of one zstd log, the nesting of one
JSON value. Every read is held to them whatever the bytes are, so that a hostile or broken file ends in a
one-line error naming the cap, never in a MemoryError, a RecursionError or a run without end.

The line and plaintext caps are generous by default and set by environment variables (which `verify -j`
workers inherit; the CLI's --max-line-bytes and --max-decompressed-bytes set them) or by a library caller's
`InputLimits`. The depth cap is fixed: it protects the stack of the
code that walks parsed values recursively (the schema checks, JSON.stringify-exact serialization, diffs)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

import msgspec

from dsh_audit.errors import DshAuditError, LogReadError

LINE_ENV = "DSH_AUDIT_MAX_LINE_BYTES"
DECOMPRESSED_ENV = "DSH_AUDIT_MAX_DECOMPRESSED_BYTES"
DEFAULT_MAX_LINE_BYTES = 256 << 20
DEFAULT_MAX_DECOMPRESSED_BYTES = 4 << 30
MIN_CAP = 1024      # below this not even a session header fits
# Python's recursion limit is 1000 frames. The walkers over parsed values take one frame per level (the schema
# checks, jsjson) or more: DeepDiff, which header-diff runs on a changed tool schema, takes four per level of a
# list and failed past 247 levels. 200 leaves them room; dsh's logs hold a dozen levels, a deep tool schema thirty.
MAX_DEPTH = 200

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"\s*(\d+)\s*([kmgt]?)(?:i?b)?\s*", re.IGNORECASE)


class OverLimit(LogReadError):
    """An input beyond one of these caps; raised where the cap is met, located by the reader that knows where."""


def parse_size(text: str, name: str) -> int:
    """Bytes from `268435456`, `256M`, `256MiB` or `4G` (binary units); a bad value is a usage error."""
    match = _SIZE.fullmatch(text)
    if match is None:
        raise DshAuditError(f"{name} must be a size in bytes such as 268435456, 256M or 4GiB, got {text!r}")
    size = int(match[1]) * _UNITS[match[2].lower()]
    if size < MIN_CAP:
        raise DshAuditError(f"{name} must be at least {MIN_CAP} bytes, got {text!r}")
    return size


def describe(size: int) -> str:
    """`256 MiB (268435456 bytes)`: the round figure a person set, and the exact one."""
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit} ({size} bytes)"
    return f"{size} bytes"


class InputLimits(msgspec.Struct, frozen=True):
    """The caps one read is held to. `from_env` is what the readers use unless a caller passes its own."""

    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> InputLimits:
        line, plain = environ.get(LINE_ENV, "").strip(), environ.get(DECOMPRESSED_ENV, "").strip()
        return cls(parse_size(line, LINE_ENV) if line else DEFAULT_MAX_LINE_BYTES,
                   parse_size(plain, DECOMPRESSED_ENV) if plain else DEFAULT_MAX_DECOMPRESSED_BYTES)

    def line_too_long(self, line: int | None) -> OverLimit:
        return OverLimit(f"line longer than the line cap of {describe(self.max_line_bytes)}; if the log is genuine, "
                         f"raise it with --max-line-bytes or {LINE_ENV}", line=line)

    def too_much_plaintext(self, line: int | None) -> OverLimit:
        return OverLimit(f"decompresses to more than the cap of {describe(self.max_decompressed_bytes)}; if the log is "
                         f"genuine, raise it with --max-decompressed-bytes or {DECOMPRESSED_ENV}", line=line)


def located(error: LogReadError, *, path: str | None = None, line: int | None = None, seq: int | None = None,
            event_type: str | None = None) -> LogReadError:
    """The same error, with the location its raiser did not know filled in."""
    return type(error)(error.message, path=error.path if error.path is not None else path,
                       line=error.line if error.line is not None else line,
                       seq=error.seq if error.seq is not None else seq,
                       event_type=error.event_type if error.event_type is not None else event_type)
