"""The fast verifier over one log (`reading`: for verify's verdict and for cache-report), and cache-report's
pass: asked for model calls and fed a batch of lines at a time, it hands out each call as soon as it is read.
Memory stays bounded as in the walk: a request holds its body by reference (RequestParts), never a decoded
event, and only one batch's calls wait to be taken.

Nothing it hands out is final until the log ends: the verifier may doubt at any line (and at the end), and then
the caller drops what it built and walks the log in full (reports.cache_report), as verify does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import chain, islice
from typing import Any

from ..model_calls import Call
from ..records import LogSource
from ..vocabulary import validate_header
from .lines import Body, Doubt, body, log_kind, refuse_seqless
from .verifier import FastVerifier

BATCH_LINES = 4096


@contextmanager
def reading(source: LogSource, message_prefix: str, **options: Any) -> Iterator[tuple[FastVerifier, Body]]:
    """A fast verifier for a file source (FastVerifier `options`) and the lines after its header, checked against
    its generation's type. Doubt where the fast path cannot read the log: not a plain or zstd file, a generation
    or header it does not cover, a RecursionError or MemoryError on the way."""
    kind = log_kind(source)
    refuse_seqless(source, kind)
    verifier = FastVerifier(source.header, source.generation, message_prefix, **options)
    if verifier.types.header is None and validate_header(source.header, source.generation.version):
        raise Doubt("session header schema")
    try:
        with body(source, kind, verifier.types.header) as lines:
            yield verifier, lines
    except (RecursionError, MemoryError) as error:
        raise Doubt(type(error).__name__) from None


def read_calls(source: LogSource, message_prefix: str, *, digests: bool = False,
               started: Callable[[FastVerifier], None] | None = None) -> Iterator[Call]:
    """Every priced model call of one file source, in log order, as cache_report.calls yields them; raises
    Doubt where the fast path cannot decide the log. `digests`: each request gets its digest (verify's, for the
    export's requests table); `started` is handed the verifier before the first line, to watch it or read its
    counts once the calls are all taken (reports.fast_walk)."""
    with reading(source, message_prefix, keep_requests=digests, model_calls=True) as (verifier, lines):
        if started is not None:
            started(verifier)
        calls = verifier.model_calls
        assert calls is not None
        rest = lines.lines
        while (first := next(rest, None)) is not None:   # a line at a time: one may be as long as the cap
            verifier.feed(chain((first,), islice(rest, BATCH_LINES - 1)), max_line=lines.max_line,
                          max_depth=lines.max_depth)
            yield from calls
            calls.clear()
        verifier.finish(check_newline=lines.check_newline)
    yield from calls
