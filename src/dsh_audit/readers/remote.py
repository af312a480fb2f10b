"""Listing object storage through fsspec (and s3fs for S3; the `remote` extra): a URL that names an object is
that log, read whatever its name, as a file named on the command line is; a prefix expands to the logs below it
by the rules of a folder's walk (readers.discover): objects named as logs (.jsonl, .jsonl.zstd, .jsonl.zst),
and of each log only its newest generation unless every generation is asked for. Unlike a walk, the listing
reads no object to tell a dsh log from another .jsonl one (that would cost a request per object): such an object
fails when it is read, never passes unseen. Credentials and endpoint come from the filesystem's usual
environment (AWS_* variables, ~/.aws, AWS_ENDPOINT_URL for s3fs) and the storage options given."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from dsh_audit.errors import LogReadError
from dsh_audit.readers.discover import LOG_SUFFIXES, newest_generations
from dsh_audit.readers.objects import RemoteLog, RemoteSource, StorageOptions

EXTRA = "pip install 'dsh-audit[remote]'"


def filesystem(url: str, options: StorageOptions) -> tuple[Any, str]:
    """The fsspec filesystem of `url`'s protocol, and the URL's path within it; a LogReadError naming the URL
    when fsspec, or the protocol's own package, is not installed, or the protocol is unknown."""
    protocol = url.split("://", 1)[0].lower()
    try:
        import fsspec
    except ImportError:
        raise LogReadError(f"reading {protocol}:// URLs needs the remote extra: {EXTRA}", path=url) from None
    try:
        kind = fsspec.get_filesystem_class(protocol)
    except ValueError:
        raise LogReadError(f"unknown protocol {protocol!r}: fsspec has no filesystem of that name", path=url) from None
    except ImportError as error:
        raise LogReadError(f"reading {protocol}:// URLs needs a package that is not installed ({error}); for S3: "
                           f"{EXTRA}", path=url) from None
    try:
        return kind(**options.as_kwargs()), kind._strip_protocol(url)
    except Exception as error:   # a filesystem refusing its options raises its own type
        raise LogReadError(f"cannot open the {protocol}:// filesystem with the storage options given: "
                           f"{type(error).__name__}", path=url) from None


def reading_error(url: str, error: Exception, *, listed: bool) -> LogReadError:
    """One line naming `url` for what a filesystem raised reading or listing it (never its options)."""
    if isinstance(error, FileNotFoundError):
        why = "no longer exists: it was listed, then gone before it was read" if listed else "no such object"
    elif isinstance(error, PermissionError):
        why = "access denied"
    else:
        detail = str(error).splitlines()[0] if str(error) else ""
        why = f"cannot read: {type(error).__name__}" + (f": {detail}" if detail else "")
    return LogReadError(why, path=url)


@dataclass(slots=True)
class RemoteListing:
    """The logs a URL holds, in key order; the older generations left out (each with the log read instead);
    generations stored twice, which are read as errors."""

    logs: list[RemoteLog] = field(default_factory=list)
    skipped: dict[RemoteLog, RemoteLog] = field(default_factory=dict)
    ambiguous: dict[RemoteLog, str] = field(default_factory=dict)


def list_remote(source: RemoteSource, *, all_generations: bool = False) -> RemoteListing:
    """The logs at `source`: the object it names, or those below the prefix. A missing bucket, a prefix with no
    log, a listing denied: a LogReadError naming the URL."""
    fs, path = filesystem(source.url, source.options)
    try:
        info = fs.info(path)
        if info.get("type") != "directory":
            return RemoteListing([_record(fs, path, info, source.options)])
        found = fs.find(path, detail=True)
    except FileNotFoundError:
        raise LogReadError(_missing(fs, path), path=source.url) from None
    except Exception as error:   # fsspec's filesystems raise their own types
        raise reading_error(source.url, error, listed=False) from None
    # in a walk's order (by path: `a/x` before `a-b/x`), not the listing's (by key)
    objects = {key: meta for key, meta in sorted(found.items(), key=lambda item: PurePosixPath(item[0]))
               if meta.get("type") != "directory"}
    candidates = [_record(fs, key, meta, source.options) for key, meta in objects.items()
                  if key.endswith(LOG_SUFFIXES)]
    if not candidates:
        raise LogReadError(f"no dsh log below this prefix ({len(objects)} other object(s), none named as a log)"
                           if objects else "no dsh log below this prefix: it holds no object", path=source.url)
    if all_generations:
        return RemoteListing(candidates)
    kept, skipped, ambiguous = newest_generations(candidates, lambda log: PurePosixPath(log.url))
    return RemoteListing(kept, skipped, ambiguous)


def _missing(fs: Any, path: str) -> str:
    bucket = path.split("/", 1)[0]
    try:
        bucket_exists = bucket != path and fs.exists(bucket)
    except Exception:   # cannot tell: say what is certain
        bucket_exists = True
    return "no such object or prefix" if bucket_exists else f"no such bucket ({bucket})"


def _record(fs: Any, key: str, meta: dict[str, Any], options: StorageOptions) -> RemoteLog:
    version = meta.get("VersionId") or meta.get("ETag") or meta.get("etag")
    size = meta.get("size")
    return RemoteLog(fs.unstrip_protocol(key), size if isinstance(size, int) else None,
                     str(version) if version is not None else None, options)
