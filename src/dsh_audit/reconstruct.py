"""Public reconstruction API: every request a log's model calls were built from, rebuilt byte-for-byte."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import LogReadError
from .findings import Finding
from .fold import OnFinding, RebuiltRequest
from .readers import open_logs
from .records import LogSource, TornTail
from .walker import Walker


@dataclass(slots=True)
class Reconstruction:
    label: str
    header: dict[str, Any]
    generation: int
    requests: list[RebuiltRequest] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    torn_tail: TornTail | None = None


def iter_requests(source: LogSource, *, message_prefix: str = "legacy", bodies: bool = False,
                  on_finding: OnFinding | None = None) -> Iterator[RebuiltRequest]:
    """Stream the rebuilt requests of one log in dispatch order, each once its attempt has closed.

    With the default `on_finding`, anything the reference would refuse raises LogRejected.
    """
    yield from Walker(source, message_prefix=message_prefix, bodies=bodies, on_finding=on_finding).requests()


def reconstruct_source(source: LogSource, *, message_prefix: str = "legacy",
                       bodies: bool = True) -> Reconstruction:
    result = Reconstruction(label=source.label, header=source.header, generation=source.generation.version)
    result.requests = list(iter_requests(source, message_prefix=message_prefix, bodies=bodies))
    result.torn_tail = source.torn_tail
    return result


def reconstruct_file(path: str | Path, *, message_prefix: str = "legacy", bodies: bool = True) -> Reconstruction:
    """Rebuild every request of the single session stored at `path`."""
    sources = iter(open_logs(Path(path)))
    source = next(sources, None)
    if source is None:
        raise LogReadError("no session in this store", path=str(path))
    result = reconstruct_source(source, message_prefix=message_prefix, bodies=bodies)
    if next(sources, None) is not None:
        raise LogReadError("the store holds several sessions; open it with dsh_audit.readers.open_logs",
                           path=str(path))
    return result
