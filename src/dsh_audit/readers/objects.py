"""Logs in object storage, as small records: a URL as given (`RemoteSource`: one object or a prefix) and one
object listed below it (`RemoteLog`: its URL, size and version at listing). Both pickle, so the unit of work
that reads a log can spool it where it runs (a `verify -j` worker, a Dask worker); neither shows the storage
options' values in its repr, which may hold secrets. fsspec is imported only where a URL is listed or read
(readers.remote, readers.spool)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from dsh_audit.errors import DshAuditError

# RFC 3986's scheme: `s3://bucket/key`, `gs://…`, `memory://…`; a local path never starts so (write ./s3:/x).
_URL = re.compile(r"(?P<protocol>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)", re.DOTALL)
_BUCKETED = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl"}   # a bucket (container) before the key


def is_url(text: str) -> bool:
    """Whether a SRC names an object-storage URL (`protocol://…`) rather than a local path."""
    return _URL.match(text) is not None


@dataclass(frozen=True, slots=True)
class StorageOptions:
    """The filesystem's keyword arguments (--storage-option KEY=VALUE), as given; the repr names the keys only."""

    items: tuple[tuple[str, str | bool | int | float], ...] = ()

    def __repr__(self) -> str:
        return f"StorageOptions({', '.join(f'{key}=…' for key, _ in self.items)})"

    def as_kwargs(self) -> dict[str, str | bool | int | float]:
        return dict(self.items)

    @classmethod
    def of(cls, options: Mapping[str, str | bool | int | float]) -> StorageOptions:
        return cls(tuple(sorted(options.items())))


@dataclass(frozen=True, slots=True)
class RemoteSource:
    """A URL given on the command line or in a list file: one object, or a prefix to list."""

    url: str
    options: StorageOptions = field(default=StorageOptions(), compare=False)

    def __post_init__(self) -> None:
        check_url(self.url)

    def __str__(self) -> str:
        return self.url

    @property
    def protocol(self) -> str:
        return self.url.split("://", 1)[0].lower()


@dataclass(frozen=True, slots=True, order=True)
class RemoteLog:
    """One log object found at a RemoteSource: what a unit of work needs to spool it, wherever it runs."""

    url: str
    size: int | None = field(default=None, compare=False)      # bytes, as listed
    version: str | None = field(default=None, compare=False)   # the ETag or version id, as listed
    options: StorageOptions = field(default=StorageOptions(), compare=False)

    def __str__(self) -> str:
        return self.url

    @property
    def name(self) -> str:
        """The object's own name (the last part of its key), which states its generation as a file name does."""
        return PurePosixPath(self.url.split("://", 1)[1]).name


def check_url(url: str) -> None:
    """A URL that names no object: no protocol, nothing after `://`, no bucket where the protocol has them."""
    match = _URL.fullmatch(url)
    if match is None:
        raise DshAuditError("not an object-storage URL (expected protocol://bucket/key)", path=url)
    rest = match["rest"]
    if not rest.strip("/") or any(char.isspace() or not char.isprintable() for char in rest):
        raise DshAuditError("malformed URL: expected protocol://bucket/key with no space or control character",
                            path=url)
    if match["protocol"].lower() in _BUCKETED and (rest.startswith("/") or not rest.split("/", 1)[0]):
        raise DshAuditError(f"malformed URL: no bucket after {match['protocol']}://", path=url)
