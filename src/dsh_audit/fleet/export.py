"""`audit export`'s driver: find the logs of SRC (as verify finds them), plan the run against the dataset's
manifest (a log file whose size and modification time are those recorded is skipped unread), map the unit of
work (unit.export_log) over the rest through the engine given, and hand each result as it arrives to the
dataset, which writes them in batches, so memory holds the rows of the logs in flight (tasks of at most
TASK_LOGS logs and TASK_BYTES of them, a few per worker) and of one batch (dataset.BATCH_LOGS), whatever the run's size.

The directory gate's rules hold: a folder that cannot be listed, a link with a log's name, a directory with no
log, a file that cannot be read, each is a failed `logs` row, never a silent skip (verify.verify_paths)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import msgspec

from ..engines import EngineChoice, map_units
from ..errors import DshAuditError
from ..readers.discover import Discovery, Found, discover_logs, no_log_below
from ..readers.objects import RemoteLog, RemoteSource
from ..readers.stream import is_stream
from ..reports.cache_report import report_block
from .dataset import Dataset, now
from .unit import ExportedLog, ExportOptions, export_logs, failed, log_key, log_name

# A task is at most TASK_LOGS logs and TASK_BYTES of them (one log at least): small logs go many to a task, so the
# engine's cost per task (Dask's scheduling, the results' transfer) is shared; a big log goes alone, so the rows in
# flight (a log's rows are its largest part) stay bounded by bytes, not by a count of logs.
TASK_LOGS = 32
TASK_BYTES = 4 << 20


@dataclass(frozen=True, slots=True)
class ExportItem:
    """A log file the run reads, with what planning it learned: its name (log_name, or an object's URL), which
    the unit is given rather than resolving it again, and its size in bytes (0 if it could not be stat'ed), which
    cuts the tasks."""

    file: Found
    found_in: Path | None
    options: ExportOptions
    name: str
    size: int


def export_task(task: list[ExportItem]) -> list[ExportedLog]:
    """The unit of work as an engine maps it (dsh_audit.engines.map_units): a task of items, their logs
    (unit.export_logs: export_log of each, their cache figures judged together)."""
    return export_logs([(item.file, item.found_in, item.options, item.name) for item in task])


def tasks(items: list[ExportItem]) -> list[list[ExportItem]]:
    """`items` in their order, cut into tasks of at most TASK_LOGS logs and TASK_BYTES (a log over it alone)."""
    cut: list[list[ExportItem]] = []
    task: list[ExportItem] = []
    held = 0
    for item in items:
        if task and (len(task) == TASK_LOGS or held + item.size > TASK_BYTES):
            cut.append(task)
            task, held = [], 0
        task.append(item)
        held += item.size
    return [*cut, task] if task else cut


@dataclass(slots=True)
class ExportSummary:
    """What a run did: counts of log files by outcome, and the cache block measured over the run."""

    dataset: str
    files: int = 0          # log files found in SRC (and inputs that could not be read)
    new: int = 0
    replaced: int = 0
    unchanged: int = 0      # read again (size or time changed) but the same content: rows kept
    kept: int = 0           # exported before, unreadable now: its earlier rows kept (and it is in `unreadable`)
    skipped: int = 0        # not read: size and modification time as recorded
    unreadable: list[tuple[str, str]] = field(default_factory=list)   # (input, why)
    # read and exported, but without cache-report's figures (its logs row says why, as cacheError): what
    # cache-report itself refuses, one line, exit 2
    without_cache: list[tuple[str, str]] = field(default_factory=list)   # (input, why)
    older_generations: int = 0
    ignored: int = 0
    sessions: int = 0       # session logs in the dataset after the run
    cache_block: int = 0
    cache_block_basis: str = ""
    compacted: int = 0      # per-log files merged into one per partition folder

    def as_json(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "files": self.files, "new": self.new, "replaced": self.replaced,
                "unchanged": self.unchanged, "kept": self.kept, "skipped": self.skipped,
                "unreadable": [{"input": name, "reason": why} for name, why in self.unreadable],
                "withoutCacheFigures": [{"input": name, "reason": why} for name, why in self.without_cache],
                "olderGenerations": self.older_generations, "ignored": self.ignored, "sessions": self.sessions,
                "cacheBlock": self.cache_block, "cacheBlockBasis": self.cache_block_basis,
                "compacted": self.compacted}


def dsh_audit_version() -> str:
    try:
        return version("dsh-audit")
    except PackageNotFoundError:   # pragma: no cover - run from a source tree without metadata
        return "unknown"


def price_table_date() -> str:
    """The date of the bundled price table, which prices each call as of its time (docs/prices.md)."""
    text = resources.files("dsh_audit").joinpath("reports", "data", "deepseek-prices.json").read_text("utf-8")
    return str(json.loads(text)["asOf"])


def export(sources: Sequence[str | os.PathLike[str] | RemoteSource], root: Path, *,
           options: ExportOptions | None = None, engine: EngineChoice | None = None,
           all_generations: bool = False) -> ExportSummary:
    """Export every log below `sources` into the dataset at `root` (made if new); see the module's docstring.
    `engine`: where the logs are read (dsh_audit.engines; default this process). A dataset of a newer format is
    refused before any log is read or anything written."""
    options = options or ExportOptions()
    manifest = Dataset.checked(root)   # a --to refused before a listing (of object storage, maybe) takes its time
    # listed next: SRC that names nothing, or a pipe, is refused before a new dataset's folder is made
    found = discover_logs(list(sources), all_generations=all_generations)
    streams = [str(path) for path in found.files if isinstance(path, Path) and is_stream(path)]
    if streams:
        raise DshAuditError("export reads files, not standard input or a pipe (a log needs a name to be "
                            "exported again)", path=streams[0])
    dataset = Dataset.opened(root, manifest)
    run = len(dataset.manifest["runs"])
    summary = ExportSummary(str(root), older_generations=len(found.skipped), ignored=len(found.ignored))
    record = {"started": now(), "dshAudit": dsh_audit_version(), "inputs": [str(s) for s in sources],
              "options": {"allowEvents": list(options.allow_events), "allGenerations": all_generations},
              "priceTable": price_table_date(), "complete": False}
    dataset.manifest["runs"].append(record)
    dataset.manifest["dshAudit"] = record["dshAudit"]
    keys: list[str] = []

    def done(exported: ExportedLog) -> None:
        keys.append(exported.key)
        outcome = dataset.put(exported, run)
        setattr(summary, outcome, getattr(summary, outcome) + 1)
        if exported.error is not None:
            summary.unreadable.append((exported.file, exported.error))
        elif exported.cache_error is not None:
            summary.without_cache.append((exported.file, exported.cache_error))

    for name, label, why in _not_read(found):
        done(failed(ExportedLog(log_key(name), name, None, None, None), why, label))
    todo: list[ExportItem] = []
    for file in found.files:
        if file in found.ambiguous:
            continue
        found_in = found.found_in.get(file)
        name, status = (file.url, None) if isinstance(file, RemoteLog) else (log_name(file), _stat(file, found_in))
        key = log_key(name)
        if _as_recorded(file, status, dataset.logs.get(key)):
            keys.append(key)
            summary.skipped += 1
        else:
            size = file.size if isinstance(file, RemoteLog) else status.st_size if status is not None else None
            todo.append(ExportItem(file, found_in, options, name, size or 0))
    # forkserver: a pool worker forked from this process, whose Arrow and polars threads may hold their locks
    # while it writes, can deadlock. One task per chunk: the engine holds a few tasks' results per worker.
    choice = msgspec.structs.replace(engine or EngineChoice(), start_method="forkserver", chunk_cap=1)
    for exported_task in map_units(export_task, tasks(todo), choice):
        for exported in exported_task:
            done(exported)
    summary.files = len(keys)
    blocks = [tuple(block) for key in keys for block in dataset.logs[key]["blocks"]]
    summary.cache_block, summary.cache_block_basis = report_block([(str(label), int(size))
                                                                   for label, size in blocks])
    summary.sessions = sum(len(entry["blocks"]) for entry in dataset.logs.values())
    summary.compacted = dataset.compact()
    record.update(finished=now(), complete=True, cacheBlock=summary.cache_block,
                  cacheBlockBasis=summary.cache_block_basis, files=summary.files, new=summary.new,
                  replaced=summary.replaced, unchanged=summary.unchanged, kept=summary.kept, skipped=summary.skipped,
                  unreadable=len(summary.unreadable), compacted=summary.compacted)
    dataset.save()
    return summary


def _name(found: Found | Path) -> str:
    """What names an input that could not be read (and gives its key): its absolute path (a link's own: it is
    refused, not followed), an object's URL."""
    return found.url if isinstance(found, RemoteLog) else os.path.abspath(found)


def _not_read(found: Discovery) -> Iterator[tuple[str, str, str]]:
    """What verify_paths reports as unreadable before reading a log: folders it could not list, links with a
    log's name, directories with no log, URLs that could not be listed, generations stored twice; each by its
    name, as verify names it, and why."""
    for folder, why in sorted(found.unlisted.items()):
        yield _name(folder), str(folder), f"{folder}: {why}"
    for link, why in sorted(found.links.items()):
        yield _name(link), str(link), f"{link}: {why}"
    for directory in found.empty:
        yield _name(directory), str(directory), f"{directory}: {no_log_below(directory, found)}"
    for url, error in found.unreachable.items():
        yield url, url, str(error)
    for path, why in found.ambiguous.items():
        label = path.url if isinstance(path, RemoteLog) else str(path)
        yield _name(path), label, f"{label}: {why}"


def _stat(file: Path, found_in: Path | None) -> os.stat_result | None:
    """A local log's status, taken once as the run is planned (a link a walk found is not followed)."""
    try:
        return os.stat(file, follow_symlinks=found_in is None)
    except OSError:
        return None   # the unit says why it cannot be read


def _as_recorded(file: Found, status: os.stat_result | None, entry: dict[str, Any] | None) -> bool:
    """The file was read before and its size and modification time (`status`) are those recorded (an object:
    its size and ETag or version, as listed): it is skipped."""
    if entry is None or entry["status"] != "read":
        return False
    if isinstance(file, RemoteLog):
        return file.version is not None and (file.size, file.version) == (entry["size"], entry.get("version"))
    return status is not None and status.st_size == entry["size"] and status.st_mtime_ns == entry["mtimeNs"]
