"""cache-report's fast path (dsh_audit.fastpath.calls) builds the very report the full walk builds.

Wherever it reads a log to the end, `build_cache_report` must give equal frames (requests, logs, totals) with it
and with DSH_AUDIT_FAST_PATH=0, under each option that changes what is read (default, --no-predict, --wire), and
the calls it hands out must equal the walk's field by field. It must be taken exactly where verify's fast path
is (counted, not only compared): on every corpus log (as committed and in persisted form), the sample and
generation logs, the generator logs (v0, v3, v4, zstd, a seeded child) and fuzzed one-line edits of them; and the
format v4 logs of tests/test_fastpath.py (native snapshots and wild logs, as stored and made acceptable, and the
corpus taken to v4).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import orjson
import pytest

from conftest_reference import LOGS_ROOT, session_log_paths
from dsh_audit import fastpath
from dsh_audit.errors import DshAuditError
from dsh_audit.fastpath import Decided, Doubt, decide
from dsh_audit.fastpath.calls import read_calls
from dsh_audit.fold import RebuiltRequest
from dsh_audit.model_calls import Call, OtherCall, answer_message
from dsh_audit.readers import open_logs
from dsh_audit.records import LogSource
from dsh_audit.reports import cache_report
from dsh_audit.reports.cache_report import CacheOptions, build_cache_report, calls
from official_migration import MigratedLog
from test_fastpath import (
    GENERATION_SAMPLES,
    NATIVE_V4,
    SAMPLES,
    _persisted,
    concrete,
    generate,
    mutants,
    wild_logs,
    without_ignorable,
)
from v4_migration import migrate_file

OPTIONS = {"default": CacheOptions(), "no-predict": CacheOptions(predict=False), "wire": CacheOptions(wire=True)}
MUTANTS_PER_BASE = 600


class Taken:
    """Counts the logs cache-report's fast path read to the end (a doubt mid-way counts nothing)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.labels: list[str] = []
        real = cache_report.fast_calls

        def counted(source: LogSource, *, message_prefix: str) -> Iterator[Call] | None:
            found = real(source, message_prefix=message_prefix)
            return None if found is None else self._through(found, source.label)

        monkeypatch.setattr(cache_report, "fast_calls", counted)

    def _through(self, found: Iterator[Call], label: str) -> Iterator[Call]:
        yield from found
        self.labels.append(label)


@pytest.fixture()
def taken(monkeypatch: pytest.MonkeyPatch) -> Taken:
    return Taken(monkeypatch)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Small logs to fuzz, and 1 MB ones: several turns, compactions with their summary calls."""
    tmp = tmp_path_factory.mktemp("generated")
    logs = {
        "v0-once": generate(tmp, "once.jsonl", "--size", "60KB", "--compaction", "once"),
        "v3-once": generate(tmp, "once.v3.jsonl", "--size", "60KB", "--compaction", "once", "--generation", "3"),
        "v0-pressure": generate(tmp, "pressure.jsonl", "--size", "1MB", "--compaction", "pressure",
                                "--context-kb", "20", "--seed", "2"),
        "v3-pressure": generate(tmp, "pressure.v3.jsonl", "--size", "1MB", "--compaction", "pressure",
                                "--context-kb", "20", "--seed", "2", "--generation", "3"),
        "v0-zstd": generate(tmp, "zstd.jsonl.zstd", "--size", "300KB", "--compaction", "pressure",
                            "--context-kb", "20", "--seed", "3", "--zstd"),
        "v4-once": generate(tmp, "once.v4.jsonl", "--size", "60KB", "--compaction", "once", "--generation", "4"),
        "v4-pressure": generate(tmp, "pressure.v4.jsonl", "--size", "1MB", "--compaction", "pressure",
                                "--context-kb", "20", "--seed", "2", "--generation", "4"),
    }
    logs["v0-seeded"] = _seeded(logs["v0-once"], tmp / "seeded.jsonl")
    logs["v0-pressure-seeded"] = _seeded(logs["v0-pressure"], tmp / "pressure-seeded.jsonl")
    logs["v0-response"] = _settled_twice(logs["v0-once"], tmp / "response.jsonl")
    logs["v3-attempt"] = _settled_twice(logs["v3-once"], tmp / "attempt.v3.jsonl")
    logs["v4-attempt"] = _settled_twice(logs["v4-once"], tmp / "attempt.v4.jsonl")
    return logs


def _seeded(parent: Path, out: Path) -> Path:
    """A v0 child of `parent`: its header's seedLength cuts the log at its middle step, so the calls before it
    are inherited."""
    header, *events = parent.read_bytes().splitlines()
    starts = [orjson.loads(line)["seq"] for line in events if b'"type":"step/start"' in line]
    child = {**orjson.loads(header), "parentSession": "f00dfeed-0000-4000-8000-000000000000",
             "seedLength": starts[len(starts) // 2]}
    out.write_bytes(b"\n".join([orjson.dumps(child), *events]) + b"\n")
    return out


def _settled_twice(base: Path, out: Path) -> Path:
    """The last step of `base` settled twice. v0: its message logged again, with usage, after the attempt closed
    (a response closing no request: a call of its own). v3: an assistant/attempt with the message's stream
    first (a failed attempt: no answer, usage from its stream). Only the log's tail moves, which nothing cites."""
    lines = base.read_bytes().splitlines()
    index = max(i for i, line in enumerate(lines) if b'"type":"assistant/message"' in line)
    message = orjson.loads(lines[index])
    if "stream" in message["data"]:
        data = message["data"]
        added = {"type": "assistant/attempt", "seq": message["seq"], "time": message["time"] - 1,
                 "data": {"turn": data["turn"], "step": data["step"], "stream": data["stream"]}}
    else:
        index += 1
        usage = {"inputTokens": 7, "outputTokens": 5, "cacheReadTokens": 64}
        added = {**message, "seq": message["seq"] + 1, "data": {**message["data"], "usage": usage}}
    moved = [orjson.dumps({**event, "seq": event["seq"] + 1}) for event in map(orjson.loads, lines[index:])]
    out.write_bytes(b"\n".join([*lines[:index], orjson.dumps(added), *moved]) + b"\n")
    return out


# -- the report ---------------------------------------------------------------------------------------------
def _verify_takes_it(path: Path) -> bool:
    """Whether verify's fast path accepts `path`."""
    try:
        sources = list(open_logs(path))
    except DshAuditError:
        return False
    return len(sources) == 1 and isinstance(decide(sources[0]), Decided)


def compare(path: Path, taken: Taken, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Whether the fast path read `path` (under every option alike); its report equals the walk's either way."""
    read = set()
    for name, chosen in OPTIONS.items():
        monkeypatch.delenv(fastpath.SWITCH, raising=False)
        taken.labels.clear()
        try:
            fast = build_cache_report([path], chosen)
        except DshAuditError:   # unreadable: the walk refuses it too
            monkeypatch.setenv(fastpath.SWITCH, "0")
            with pytest.raises(DshAuditError):
                build_cache_report([path], chosen)
            return False
        read.add(bool(taken.labels))
        monkeypatch.setenv(fastpath.SWITCH, "0")
        taken.labels.clear()
        full = build_cache_report([path], chosen)
        assert not taken.labels, "DSH_AUDIT_FAST_PATH=0 must switch cache-report's fast path off"
        for kind in ("requests", "logs", "totals"):
            assert fast.rows(kind).equals(full.rows(kind)), (path, name, kind)
        assert (fast.block, fast.block_basis) == (full.block, full.block_basis)
    assert len(read) == 1, path
    return read.pop()


def test_generator_logs(generated: dict[str, Path], taken: Taken, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, path in generated.items():
        assert _verify_takes_it(path), name
        assert compare(path, taken, monkeypatch), name


def test_corpus_sample_and_generation_logs(tmp_path: Path, taken: Taken, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = list(SAMPLES + GENERATION_SAMPLES)
    for index, relpath in enumerate(session_log_paths()):
        paths.append(LOGS_ROOT / relpath)
        lines = _persisted(relpath)
        if lines is not None:
            paths.append(tmp_path / f"{index}.jsonl")
            paths[-1].write_bytes(b"\n".join(lines) + b"\n")
    outcomes: Counter[str] = Counter()
    for path in paths:
        read = compare(path, taken, monkeypatch)
        assert read == _verify_takes_it(path), path
        outcomes["fast" if read else "walked"] += 1
    assert outcomes["fast"] >= (4 if session_log_paths() else 1), outcomes


def test_v4_logs(official_migration: dict[str, MigratedLog], tmp_path: Path, taken: Taken,
                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The v4 logs of tests/test_fastpath.py: native snapshots and wild logs as stored and made acceptable (concrete
    placeholders; the product's ignorable events left out), and the corpus taken to v4, made concrete."""
    paths: list[Path] = []
    for index, path in enumerate([*NATIVE_V4, *wild_logs()]):
        made = without_ignorable(path.read_bytes()) if b'"ignorable":true' in path.read_bytes() \
            else concrete(path.read_bytes())
        (tmp_path / str(index)).mkdir()
        paths += [path, tmp_path / str(index) / path.name]
        paths[-1].write_bytes(made)
    for index, (_, log) in enumerate(sorted(official_migration.items())):
        v3 = log.targets.get(3)
        if isinstance(v3, Path) and log.ok(3):
            v4 = migrate_file(v3, tmp_path / f"c{index:03d}")
            v4.write_bytes(concrete(v4.read_bytes()))
            paths.append(v4)
    outcomes: Counter[str] = Counter()
    for path in paths:
        read = compare(path, taken, monkeypatch)
        assert read == _verify_takes_it(path), path
        outcomes["fast" if read else "walked"] += 1
    assert outcomes["fast"] >= 45, outcomes


# -- the calls, field by field ----------------------------------------------------------------------------------
def _facts(call: Call) -> Any:
    """What a call says: every RebuiltRequest field but `line` (the fast path counts no lines) and `sha256` (no
    cache-report output shows a digest, so the fast path computes none), the body its parts make as a value
    (cache-report parses it; the fast path keeps a message's stored bytes where they hold JSON.stringify's value,
    whatever their spelling), and the answering message itself."""
    if isinstance(call, OtherCall):
        return call
    request, answer = call
    facts = {field.name: getattr(request, field.name) for field in fields(RebuiltRequest)
             if field.name not in ("line", "parts", "sha256")}
    facts["body"] = None if request.parts is None else json.dumps(json.loads(request.parts.body()))   # in order
    facts["answer"] = answer_message(answer)
    return facts


def fast_facts(path: Path) -> list[Any] | None:
    """The fast path's calls of `path`, or None where it doubts (as verify's must then)."""
    try:
        [source] = open_logs(path)
        return [_facts(call) for call in read_calls(source, "legacy")]
    except (DshAuditError, Doubt):
        return None


def walked_facts(path: Path) -> list[Any]:
    return [_facts(call) for call in calls(next(iter(open_logs(path))))]


def test_calls_agree_field_by_field(generated: dict[str, Path]) -> None:
    kinds: Counter[str] = Counter()
    for name, path in generated.items():
        found = fast_facts(path)
        assert found is not None, name
        assert found == walked_facts(path), name
        kinds.update(f"other {call.kind}" if isinstance(call, OtherCall) else
                     "no answer" if call["answer"] is None else "request" for call in found)
        kinds.update(f"inherited {type(call).__name__}" for call in found
                     if (call.inherited if isinstance(call, OtherCall) else call["inherited"]))
    assert kinds["other compaction"] and kinds["other response"] and kinds["no answer"], kinds
    assert kinds["inherited dict"] and kinds["inherited OtherCall"], kinds


@pytest.mark.parametrize("base", ["v0-once", "v3-once", "v0-seeded", "v4-once"])
def test_fuzzed_one_line_edits(generated: dict[str, Path], base: str, tmp_path: Path) -> None:
    """Edits the fast path still accepts (reordered keys, moved events, changed usage or times...) must change
    its calls exactly as they change the walk's; and it must doubt wherever verify's fast path does."""
    lines = generated[base].read_bytes().split(b"\n")[:-1]
    rng = random.Random(f"cache-fastpath-{base}")
    outcomes: Counter[str] = Counter()
    path = tmp_path / generated[base].name
    for edited in mutants(lines, rng, MUTANTS_PER_BASE):
        path.write_bytes(b"\n".join(edited) + b"\n")
        found = fast_facts(path)
        assert (found is not None) == _verify_takes_it(path)
        if found is not None:
            assert found == walked_facts(path), edited
        outcomes["fast" if found is not None else "walked"] += 1
    assert outcomes["fast"] >= 5 and outcomes["walked"] >= 5, outcomes
