"""The dataset on disk: hive-partitioned Parquet, a folder per table (columns.TABLES), then per `generation=G` and
`date=YYYY-MM-DD`, and `_manifest.json`, which names every log exported, its size, content hash and the files
that hold its rows, and every run.

Logs' rows are buffered and written as batches: one `batch-` file per table and partition for up to BATCH_LOGS
logs (or BATCH_VALUES values), named by the keys and content hashes it holds, each first to a hidden temporary
name and then renamed, so writing the same batch again replaces it, never duplicates it. A batch is written before each
save of the manifest, which is saved (atomically) every CHECKPOINT_EVERY logs, or every tenth of the logs it names
once that is more, and at the end of a run; files a crashed run wrote but the manifest does not name are removed
when the dataset is next opened, and their logs exported again. dsh-audit writes only below folders it made
itself and never through a link (readers/found.py: the house rule)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import DshAuditError
from ..output import new_file_mode
from .columns import DATASET_VERSION, PARTITIONS, TABLES
from .unit import Columns, ExportedLog

MANIFEST = "_manifest.json"
FORMAT = "dsh-audit/dataset"
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"   # a null partition value, as Hive, polars and DuckDB name it
CHECKPOINT_EVERY = 200   # logs written between two saves of the manifest, at least
# A save writes every entry (about 820 bytes and 11 us of CPU a log): saving every 200 logs made a run's saves
# quadratic in the dataset's size (1 M logs: some 7 CPU-hours); saving after a tenth more keeps them linear, and a
# crash costs at most a tenth of the dataset's logs read again.
CHECKPOINT_SHARE = 10
COMPACT_AT = 64          # written files a partition folder may hold before they are merged into one
COMPACTED = "compact-"   # the name of a merged file, which holds the rows of many logs
BATCHED = "batch-"       # a file of one batch of logs
SINGLE = "part-"         # a file of one log's rows (dataset format 1, whose files are still read and replaced)
# A batch's bounds: the driver's cost is a file per table and partition per batch, not per log (a write costs
# pyarrow about 0.5 ms whatever its rows), and memory holds one batch's values, about 47 bytes each as Python
# objects (a 30 MB log has some 60,000: 20 of them in one batch held 56 MiB more): 12 MiB at most.
BATCH_LOGS = 256
BATCH_VALUES = 250_000


class DatasetError(DshAuditError):
    """A dataset folder dsh-audit will not write into (exit 2): not a dataset, written by a newer dsh-audit, a
    link where it writes."""


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(slots=True)
class Batch:
    """Logs' rows put but not yet written: by table and partition, a list per column of the file's; the logs by
    key with their content hash, and the files that held their earlier rows (removed from them once it is
    written)."""

    parts: dict[tuple[str, tuple[Any, ...]], Columns] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)
    earlier: dict[str, list[str]] = field(default_factory=dict)
    values: int = 0

    def add(self, exported: ExportedLog, earlier: list[str]) -> None:
        self.logs[exported.key] = exported.sha256 or "unread"
        self.earlier[exported.key] = earlier
        for table, columns in exported.rows.items():
            where = list(zip(*(columns[column] for column in PARTITIONS), strict=True))
            self.values += len(where) * len(columns)
            places = set(where)   # one, as a rule: a file is one session (a store's may span several)
            for place in places:
                part = self.parts.setdefault((table, place), {column: [] for column in TABLES[table]})
                chosen = None if len(places) == 1 else [k for k, at in enumerate(where) if at == place]
                for column, kept in part.items():
                    kept.extend(columns[column] if chosen is None else (columns[column][k] for k in chosen))

    def full(self) -> bool:
        return len(self.logs) >= BATCH_LOGS or self.values >= BATCH_VALUES

    def name(self) -> str:
        """The batch's files' name, from what it holds: the same logs at the same content write the same name."""
        held = "\n".join(f"{key} {sha}" for key, sha in sorted(self.logs.items()))
        return f"{BATCHED}{hashlib.sha256(held.encode()).hexdigest()[:16]}.parquet"


@dataclass(slots=True)
class Dataset:
    """An open dataset: its folder and its manifest as read, changed as logs are written."""

    root: Path
    manifest: dict[str, Any]
    unsaved: int = 0
    batch: Batch = field(default_factory=Batch)
    _made: set[Path] = field(default_factory=set)   # folders checked or made during this run

    @property
    def logs(self) -> dict[str, dict[str, Any]]:
        logs: dict[str, dict[str, Any]] = self.manifest["logs"]
        return logs

    @classmethod
    def open(cls, root: Path) -> Dataset:
        """The dataset at `root`, made if the folder is new or empty; a newer format, or a folder that holds
        something else, is refused before anything is written. Leftovers of a crashed run are removed."""
        return cls.opened(root, cls.checked(root))

    @staticmethod
    def checked(root: Path) -> dict[str, Any] | None:
        """The manifest of the dataset at `root`, or None where a new one may be made (no folder, or an empty
        one); refused as `open` refuses it, nothing written (a run checks --to before it lists its sources)."""
        manifest = read_manifest(root)
        try:
            holds_something = manifest is None and root.is_dir() and any(root.iterdir())
        except OSError as error:
            raise DatasetError(f"cannot list the folder: {error.strerror or error}", path=str(root)) from None
        if holds_something:
            raise DatasetError("is neither a dsh-audit dataset (no _manifest.json) nor empty: name a new or "
                               "empty folder", path=str(root))
        return manifest

    @classmethod
    def opened(cls, root: Path, manifest: dict[str, Any] | None) -> Dataset:
        """`open` with the manifest `checked` gave."""
        if manifest is None:
            try:
                root.mkdir(exist_ok=True)
            except OSError as error:
                raise DatasetError(f"cannot make the dataset folder: {error.strerror or error}",
                                   path=str(root)) from None
            dataset = cls(root, {"format": FORMAT, "version": DATASET_VERSION, "logs": {}, "runs": []})
            dataset.save()   # now: a run that stops before its first checkpoint leaves a dataset, not a stray folder
            return dataset
        dataset = cls(root, manifest)
        dataset.sweep()
        return dataset

    def sweep(self) -> None:
        """Remove what no manifest entry names: temporary files and the files of a run that stopped before it
        saved the manifest (their logs are not in it, so they are exported again)."""
        named = {name for entry in self.logs.values() for name in entry["files"]}
        for table in TABLES:
            folder = self.root / table
            if not folder.is_dir() or folder.is_symlink():
                continue
            for path in _files_below(folder):
                relative = path.relative_to(self.root).as_posix()
                if relative not in named and (path.name.startswith(".") or path.suffix == ".parquet"):
                    path.unlink()

    def put(self, exported: ExportedLog, run: int) -> str:
        """Name one log file in the manifest and buffer its rows in the batch, replacing what it held of an
        earlier version of the file once the batch is written. Returns what was done: new, replaced, unchanged
        (the same content hash; an unreadable file: and the same error), or kept (it cannot be read now: its rows
        from an earlier run stay, nothing exported is lost)."""
        before = self.logs.get(exported.key)
        if before is not None and before["status"] == "read":
            if exported.error is not None:
                before["lastError"] = exported.error
                return "kept"
            if before["sha256"] == exported.sha256:
                before.update(mtimeNs=exported.mtime_ns, version=exported.version, run=run)   # touched, not changed
                return "unchanged"
        elif before is not None and (before["sha256"], before["error"]) == (exported.sha256, exported.error):
            before.update(mtimeNs=exported.mtime_ns, version=exported.version, run=run)   # as unreadable as it was
            return "unchanged"
        if exported.key in self.batch.logs:   # put twice in one batch: the first one's rows are written first
            self.flush()
        self.batch.add(exported, before["files"] if before is not None else [])
        self.logs[exported.key] = {
            "file": exported.file, "size": exported.size, "sha256": exported.sha256, "mtimeNs": exported.mtime_ns,
            "version": exported.version,
            "status": "unreadable" if exported.error else "read", "error": exported.error,
            "blocks": exported.blocks, "files": [], "run": run}
        self.unsaved += 1
        if self.unsaved >= max(CHECKPOINT_EVERY, len(self.logs) // CHECKPOINT_SHARE):
            self.save()
        elif self.batch.full():
            self.flush()
        return "new" if before is None else "replaced"

    def flush(self) -> None:
        """Write the batch: a file per table and partition, named in its logs' entries; then remove the logs'
        earlier rows from the files that held them."""
        batch, self.batch = self.batch, Batch()
        if not batch.logs:
            return
        name = batch.name()
        holding: dict[str, list[str]] = {key: [] for key in batch.logs}
        for (table, values), parts in sorted(batch.parts.items(), key=str):
            folder = self._folder(table, *(f"{column}={_partition(value)}"
                                           for column, value in zip(PARTITIONS, values, strict=True)))
            self._replace(folder / name, pa.Table.from_pydict(parts, schema=_file_schema(table)), table)
            relative = (folder / name).relative_to(self.root).as_posix()
            for key in set(parts["key"]):
                holding[key].append(relative)
        written = {file for files in holding.values() for file in files}
        dropped: dict[str, set[str]] = {}
        for key, files in holding.items():
            self.logs[key]["files"] = files
            for earlier in batch.earlier[key]:
                if earlier not in written:
                    dropped.setdefault(earlier, set()).add(key)
        for file, keys in sorted(dropped.items()):
            self._drop(file, keys)

    def _replace(self, target: Path, rows: pa.Table, table: str) -> None:
        """`rows` written to a hidden name beside `target`, in the table's declared columns, then renamed onto
        it."""
        temporary = _temporary(target)
        schema = _file_schema(table)
        pq.write_table(rows.cast(schema).replace_schema_metadata(
            {"dsh-audit-dataset": f"{table}/{DATASET_VERSION}"}), temporary)
        os.chmod(temporary, new_file_mode())
        os.replace(temporary, target)

    def _folder(self, *parts: str) -> Path:
        """A folder below the root, made if missing; a link or file in its place is refused."""
        folder = self.root
        for part in parts:
            folder = folder / part
            if folder in self._made:
                continue
            with suppress(FileExistsError):
                folder.mkdir()
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                raise DatasetError("is not a folder dsh-audit made (a link or a file): it does not write there",
                                   path=str(folder))
            self._made.add(folder)
        return folder

    def _drop(self, name: str, keys: set[str]) -> None:
        """Remove the rows of the logs `keys` from the file `name`: a file of one log's is deleted, one of many
        logs' rewritten without them (under the same name: the manifest still names it for the others), or
        deleted once no log's rows are left (no entry names it then)."""
        path = self.root / name
        if path.name.startswith(SINGLE):
            path.unlink(missing_ok=True)
            return
        try:
            kept = pq.read_table(path).filter(~pc.field("key").isin(sorted(keys)))
        except FileNotFoundError:   # removed with the last of its logs' rows before a crash
            return
        if kept.num_rows:
            self._replace(path, kept, name.split("/", 1)[0])
        else:
            path.unlink()

    def compact(self) -> int:
        """Merge the written files (batches, or single logs') of each partition folder that holds more than
        COMPACT_AT into one file, streamed (memory holds one file's rows), and name it in the manifest in their
        place. Returns how many files were merged. Atomic: the merged file is renamed into place, the manifest
        saved, and only then the merged files removed; a crash between leaves files no entry names, which the
        next open sweeps."""
        self.flush()
        merged: dict[str, str] = {}
        for table in TABLES:
            folder = self.root / table
            for partition in sorted(_folders_below(folder)) if folder.is_dir() else []:
                parts = sorted(entry.name for entry in os.scandir(partition)
                               if entry.name.startswith((BATCHED, SINGLE)) and entry.is_file(follow_symlinks=False))
                if len(parts) > COMPACT_AT:
                    merged.update(self._merge(table, partition, parts))
        if not merged:
            return 0
        for entry in self.logs.values():
            entry["files"] = list(dict.fromkeys(merged.get(name, name) for name in entry["files"]))
        self.save()
        for name in merged:
            (self.root / name).unlink(missing_ok=True)
        return len(merged)

    def _merge(self, table: str, partition: Path, parts: list[str]) -> dict[str, str]:
        digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
        target = partition / f"{COMPACTED}{digest}.parquet"
        temporary = _temporary(target)
        schema = _file_schema(table).with_metadata({"dsh-audit-dataset": f"{table}/{DATASET_VERSION}"})
        with pq.ParquetWriter(temporary, schema) as writer:
            for name in parts:
                writer.write_table(pq.read_table(partition / name).cast(schema))
        os.chmod(temporary, new_file_mode())
        os.replace(temporary, target)
        relative = partition.relative_to(self.root).as_posix()
        return {f"{relative}/{name}": f"{relative}/{target.name}" for name in parts}

    def save(self) -> None:
        """The batch written, then the manifest written to a hidden name and renamed over the old one."""
        self.flush()
        self.manifest.update(format=FORMAT, version=DATASET_VERSION)
        temporary = _temporary(self.root / MANIFEST)
        temporary.write_text(json.dumps(self.manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(temporary, self.root / MANIFEST)
        self.unsaved = 0


def read_manifest(root: Path) -> dict[str, Any] | None:
    """The manifest of the dataset at `root`, None when there is none yet; refused when a newer dsh-audit wrote
    it or it is not one."""
    path = root / MANIFEST
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            raise DatasetError("is not a regular file (dsh-audit does not follow links it did not make)",
                               path=str(path))
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise DatasetError("is not a folder", path=str(root)) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DatasetError(f"cannot read the manifest: {getattr(error, 'strerror', None) or error}",
                           path=str(path)) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise DatasetError(f"is not a dsh-audit dataset manifest (no \"format\": \"{FORMAT}\")", path=str(path))
    version = manifest.get("version")
    if not isinstance(version, int) or version > DATASET_VERSION:
        raise DatasetError(f"was written by a newer dsh-audit (dataset format {version}; this one reads up to "
                           f"{DATASET_VERSION}): upgrade dsh-audit; nothing was changed", path=str(path))
    for entry in manifest.get("logs", {}).values():   # a batch's file names, once for all its logs: 0.4 KB a log
        entry["files"] = [sys.intern(name) for name in entry.get("files", [])]
    return manifest


def _temporary(target: Path) -> Path:
    """The hidden name `target` is written under before its rename; whatever was there (a link planted to make
    the write land elsewhere) is removed first, never written through."""
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)
    return temporary


@cache
def _file_schema(table: str) -> pa.Schema:
    """The Arrow schema of a file of `table`: its declared columns (columns.TABLES)."""
    return pl.DataFrame(schema=TABLES[table]).to_arrow().schema


def _partition(value: Any) -> str:
    return NULL_PARTITION if value is None else str(value)


def _folders_below(folder: Path) -> list[Path]:
    """The partition folders below a table's: those two levels down, links not followed."""
    return [Path(inner.path) for outer in os.scandir(folder) if outer.is_dir(follow_symlinks=False)
            for inner in os.scandir(outer.path) if inner.is_dir(follow_symlinks=False)]


def _files_below(folder: Path) -> list[Path]:
    """Every regular file below `folder`, links neither followed nor listed."""
    found = []
    for entry in os.scandir(folder):
        if entry.is_dir(follow_symlinks=False):
            found += _files_below(Path(entry.path))
        elif entry.is_file(follow_symlinks=False):
            found.append(Path(entry.path))
    return found
