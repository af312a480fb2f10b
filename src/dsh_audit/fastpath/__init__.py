"""The fast path of `verify`: a verifier that decides, beside the full verifier that explains.

`fast_verify` reads a plain or zstd JSONL log in one pass with decoders generated from schemas/ and returns the
report of a log with no finding at all, or None on any doubt (a finding, a warning, a note, or a shape the fast
types do not cover); the caller then runs the full verifier (dsh_audit.verify), which words the findings. A log
the fast path accepts gets the same report from either: tests/test_fastpath.py checks that differentially.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import msgspec

from ..errors import DshAuditError
from ..readers.discover import sniff
from ..records import LogSource
from ..vocabulary import validate_header
from .lines import Doubt, zstd_lines
from .types import fast_types
from .verifier import SUPPORTED, FastVerifier

__all__ = ["SWITCH", "Decided", "DecidedRequest", "decide", "fast_verify", "preload"]

SWITCH = "DSH_AUDIT_FAST_PATH"


@dataclass(frozen=True, slots=True)
class DecidedRequest:
    turn: int
    step: int
    attempt: int
    dispatch_seq: int
    sha256: str | None
    inherited: bool
    extends_previous: bool
    causes: list[str]


@dataclass(frozen=True, slots=True)
class Decided:
    """A log the fast path accepted: no finding, these events and requests."""

    events: int
    request_count: int
    requests: list[DecidedRequest]   # empty unless asked for (keep_requests)


def fast_verify(source: LogSource, *, message_prefix: str = "legacy", keep_requests: bool = True) -> Decided | None:
    """The verdict of the fast path on a file source, or None when the full verifier must read it (always with
    DSH_AUDIT_FAST_PATH=0 in the environment: for comparisons and bisecting)."""
    if os.environ.get(SWITCH) == "0":
        return None
    verdict = decide(source, message_prefix=message_prefix, keep_requests=keep_requests)
    return verdict if isinstance(verdict, Decided) else None


def preload() -> None:
    """Generate every supported generation's decoders now (before `verify -j` forks its workers)."""
    for version in SUPPORTED:
        fast_types(version)


def _caps() -> tuple[int | None, int | None]:
    """The readers' line and depth caps (dsh_audit.readers.limits), where this tree's readers have them: a line
    longer than the first (with its newline), or JSON nested deeper than the second, is a read error to them."""
    try:
        from ..readers.limits import MAX_DEPTH, InputLimits
    except ImportError:   # readers without caps
        return None, None
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


def decide(source: LogSource, *, message_prefix: str = "legacy", keep_requests: bool = True) -> Decided | str:
    """The fast path's verdict, or why it leaves the log to the full verifier (for tests and benchmarks)."""
    path = Path(source.label)
    if source.reopen is None or source.header_line != 1 or not path.is_file():
        return "not a plain file source with its header on line 1"
    try:
        kind = sniff(path)
    except OSError:
        return "unreadable"
    if kind not in ("jsonl", "zstd"):
        return f"a {kind} source"
    generation = source.generation
    try:
        max_line, max_depth = _caps()
        verifier = FastVerifier(source.header, generation, message_prefix, keep_requests=keep_requests)
        header = verifier.types.header
        if header is None and validate_header(source.header, generation.version):
            return "session header schema"
        if kind == "jsonl":
            with path.open("rb", buffering=1 << 20) as handle:
                if max_line is not None and path.stat().st_size <= max_line:
                    max_line = None   # no line of this file can pass the cap
                lines: Iterator[bytes] = (iter(handle) if max_line is None
                                          else iter(partial(handle.readline, max_line + 2), b""))
                first = next(lines, b"")
                if not first.endswith(b"\n"):
                    return "torn header"
                _check_header(header, first)
                requests = verifier.run(lines, check_newline=True, max_line=max_line, max_depth=max_depth)
        else:
            lines = zstd_lines(path)
            _check_header(header, next(lines, b""))
            requests = verifier.run(lines, max_line=max_line, max_depth=max_depth)
    except Doubt as doubt:
        return str(doubt)
    except (RecursionError, MemoryError) as error:
        return type(error).__name__
    return Decided(verifier.events, verifier.request_count, [
        DecidedRequest(r.turn, r.step, r.attempt, r.dispatch_seq, r.sha256, r.inherited, r.extends_previous,
                       [f"{c.kind}@{c.seq}: {c.detail}" for c in r.causes]) for r in requests])
