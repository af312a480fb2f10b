"""The fast path of verify (dsh_audit.fastpath) never accepts what the full verifier rejects.

Whenever the fast path accepts a log, the full verifier (the fast path switched off) must find nothing at all, no
error, warning or note, and produce the same events and the same request digests (turn, step, attempt, dispatch
seq, sha256, inherited, extends_previous, causes). Checked on every corpus log (as committed and in persisted form),
generator logs (v0 and v3, plain and zstd), the sample logs, the public generation samples, hand-made byte-level
variants of message bytes (the raw-bytes proof), and thousands of fuzzed one-line edits of a few base logs.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard
from click.testing import CliRunner

from conftest_reference import LOGS_ROOT, session_log_paths
from dsh_audit import fastpath
from dsh_audit.cli import main
from dsh_audit.errors import DshAuditError
from dsh_audit.fastpath import Decided, decide
from dsh_audit.fastpath.types import fast_types
from dsh_audit.readers import open_logs
from dsh_audit.verify import LogReport, verify_path

REPO = Path(__file__).resolve().parents[1]
GENERATOR = REPO / "benchmarks" / "generate_log.py"
SAMPLES = sorted(p for p in (REPO / "sample_logs").rglob("*.jsonl*") if p.is_file())
GENERATION_SAMPLES = sorted(p for p in (REPO / "tests" / "fixtures" / "generations").rglob("*.jsonl*") if p.is_file())
MUTANTS_PER_BASE = 1200


def full_report(path: Path) -> LogReport:
    """The full verifier alone (the fast path switched off)."""
    saved = os.environ.get(fastpath.SWITCH)
    os.environ[fastpath.SWITCH] = "0"
    try:
        reports = verify_path(path)
    finally:
        if saved is None:
            del os.environ[fastpath.SWITCH]
        else:
            os.environ[fastpath.SWITCH] = saved
    assert len(reports) == 1
    return reports[0]


def digests(requests: list[Any]) -> list[tuple[Any, ...]]:
    return [(r.turn, r.step, r.attempt, r.dispatch_seq, r.sha256, r.inherited, r.extends_previous, list(r.causes))
            for r in requests]


def verdict(path: Path) -> Decided | str:
    try:
        sources = list(open_logs(path))
    except DshAuditError as error:
        return f"unreadable: {error}"
    return decide(sources[0])


def check(path: Path) -> Decided | str:
    """The fast path's verdict on `path`; when it accepts, the full verifier must agree exactly."""
    found = verdict(path)
    if isinstance(found, Decided):
        full = full_report(path)
        assert full.read_error is None, (path, full.read_error)
        assert not full.findings, (path, [f.render() for f in full.findings])
        assert full.events == found.events, path
        assert digests(full.requests) == digests(found.requests), path
        [fast] = verify_path(path)   # the public entry point takes the fast path and reports the same
        assert fast.fast_path and not fast.findings and fast.events == full.events
        assert digests(fast.requests) == digests(full.requests)
        [lean] = verify_path(path, keep_requests=False)   # counted, not kept: memory bounded by the surface
        assert lean.fast_path and lean.request_count == full.request_count and not lean.requests
    return found


def generate(tmp: Path, name: str, *args: str) -> Path:
    out = tmp / name
    subprocess.run([sys.executable, str(GENERATOR), "--out", str(out), *args], check=True, capture_output=True,
                   cwd=REPO)
    return out


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("generated")
    return {
        "v0-once": generate(tmp, "once.jsonl", "--size", "60KB", "--compaction", "once"),
        "v0-pressure": generate(tmp, "pressure.jsonl", "--size", "60KB", "--compaction", "pressure",
                                "--context-kb", "20", "--seed", "2"),
        "v3-pressure": generate(tmp, "pressure.v3.jsonl", "--size", "60KB", "--compaction", "pressure",
                                "--context-kb", "20", "--seed", "2", "--generation", "3"),
        "v3-once": generate(tmp, "once.v3.jsonl", "--size", "60KB", "--compaction", "once", "--generation", "3"),
        "v0-zstd": generate(tmp, "zstd.jsonl.zstd", "--size", "60KB", "--compaction", "pressure",
                            "--context-kb", "20", "--seed", "3", "--zstd"),
    }


# -- generated decoders ------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_event_type_has_a_generated_decoder(version: int) -> None:
    from dsh_audit.vocabulary import vocabulary
    types = fast_types(version)
    words = vocabulary(version)
    assert set(types.events) == set(words.known_types), types.unsupported
    assert set(types.messages) == set(words.surface_types)


def test_content_blocks_compare_as_the_verifier_compares_dicts() -> None:
    """Chunk blocks and message content are compared as Structs: that is dict equality only for closed Structs."""
    import typing
    for version in (0, 1, 2, 3):
        types = fast_types(version)
        seen: set[Any] = set()

        def walk(annotation: Any, seen: set[Any] = seen) -> None:
            for arg in typing.get_args(annotation):
                walk(arg)
            if isinstance(annotation, type) and hasattr(annotation, "__struct_config__") and annotation not in seen:
                seen.add(annotation)
                assert annotation.__struct_config__.forbid_unknown_fields, annotation
                for hint in typing.get_type_hints(annotation).values():
                    walk(hint)

        message = types.messages["assistant/message"].decoder.type
        walk(typing.get_type_hints(message)["content"])
        assert seen


# -- whole logs ---------------------------------------------------------------------------------------------
def test_generator_logs_take_the_fast_path(generated: dict[str, Path]) -> None:
    for name, path in generated.items():
        found = check(path)
        assert isinstance(found, Decided), (name, found)
        assert found.requests


def test_sample_and_generation_logs(tmp_path: Path) -> None:
    outcomes = Counter()
    for path in SAMPLES + GENERATION_SAMPLES:
        found = check(path)
        outcomes["accepted" if isinstance(found, Decided) else found] += 1
    assert outcomes["accepted"] >= 1, outcomes


def _persisted(relpath: str) -> list[bytes] | None:
    """A corpus log in persisted form: explicit seq and time on every event (packed rows expanded)."""
    try:
        source = next(open_logs(LOGS_ROOT / relpath))
        events = [{"type": r.event.get("type"), "seq": r.seq, "time": r.event.get("time", 0),
                   **{k: v for k, v in r.event.items() if k not in ("type", "seq", "time")}}
                  for r in source.records()]
    except (DshAuditError, StopIteration):
        return None
    return [orjson.dumps(line) for line in (source.header, *events)]


def test_corpus_logs(tmp_path: Path) -> None:
    paths = session_log_paths()
    if not paths:
        pytest.skip(f"no corpus at {LOGS_ROOT}")
    outcomes = Counter()
    for index, relpath in enumerate(paths):
        found = check(LOGS_ROOT / relpath)
        outcomes["accepted" if isinstance(found, Decided) else "fell back"] += 1
        lines = _persisted(relpath)
        if lines is not None:
            path = tmp_path / f"{index}.jsonl"
            path.write_bytes(b"\n".join(lines) + b"\n")
            found = check(path)
            outcomes["persisted accepted" if isinstance(found, Decided) else "persisted fell back"] += 1
    assert outcomes["persisted accepted"] >= 1, outcomes


def test_rebuild_digests_are_the_folds(generated: dict[str, Path]) -> None:
    """`audit rebuild --format digest` prints the fast path's digests when it accepts a log: the same bytes as the
    fold's (the fast path switched off), and the fast path was really taken on some of them."""
    runner = CliRunner()
    corpus = [LOGS_ROOT / relpath for relpath in session_log_paths()]
    taken = 0
    for path in [*generated.values(), *SAMPLES, *corpus]:
        fast = runner.invoke(main, ["rebuild", "--format", "digest", str(path)])
        full = runner.invoke(main, ["rebuild", "--format", "digest", str(path)], env={fastpath.SWITCH: "0"})
        assert (fast.exit_code, fast.output) == (full.exit_code, full.output), path
        taken += isinstance(verdict(path), Decided)
    assert taken >= len(generated) + 1, taken   # the generator logs and a sample log at least


# -- the raw-bytes proof ------------------------------------------------------------------------------------
BYTE_EDITS = [
    (b'"text":"', b'"text": "'),                     # whitespace inside a message
    (b'"role":"user"', b'"role" :"user"'),
    (b'"role":"user"', b'"role":"\\u0075ser"'),        # an escape JSON.stringify would not write
    (b'"role":"assistant"', b'"role":"assistant","role":"assistant"'),   # a duplicate key
    (b'"kind":"user"', b'"kind":"user","x":1.0'),     # an open source object gains a float
    (b'"kind":"user"', b'"kind":"user","x":9007199254740993'),
    (b'"kind":"user"', b'"kind":"user","x":{"1":1,"0":2}'),   # array-index keys (JS reorders them)
    (b'"kind":"user"', b'"kind":"user","x":-0'),
    (b'"kind":"user"', b'"kind":"user","x":"a\\/b\\u001B\\u001b\\t"'),
    (b'"isError":false', b'"isError":false '),
]


@pytest.mark.parametrize("base", ["v0-once", "v3-once"])
@pytest.mark.parametrize("edit", range(len(BYTE_EDITS)))
def test_message_bytes_differing_from_json_stringify(generated: dict[str, Path], base: str, edit: int,
                                                     tmp_path: Path) -> None:
    old, new = BYTE_EDITS[edit]
    lines = generated[base].read_bytes().split(b"\n")
    hits = [i for i, line in enumerate(lines) if old in line and (b'"surfaceOp"' in line)]
    if not hits:
        pytest.skip("no message with this text")
    for i in hits[:3]:
        edited = list(lines)
        edited[i] = edited[i].replace(old, new, 1)
        path = tmp_path / f"{i}{generated[base].name}"
        path.write_bytes(b"\n".join(edited))
        check(path)


# -- fuzzed one-line edits -------------------------------------------------------------------------------------
OTHER_VALUES: list[Any] = [None, True, False, 0, -1, 1, 1.0, 1.5, 2**53, -(2**53) - 1, "", "x", "{{system}}",
                           [], [1], {}, {"type": "text", "text": "x"}]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index in sorted({0, len(value) - 1} & set(range(len(value)))):
            found += _paths(value[index], (*prefix, index))
    return found


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


def _mutate_value(rng: random.Random, event: Any) -> Any:
    paths = _paths(event)
    path = rng.choice(paths[1:] or paths)
    if not path:
        return rng.choice(OTHER_VALUES)
    parent, key = _get(event, path[:-1]), path[-1]
    old = parent[key]
    what = rng.randrange(7)
    if (what == 0 and isinstance(parent, dict)) or (what == 1 and isinstance(parent, list)):
        del parent[key]
    elif what == 2 and isinstance(old, int) and not isinstance(old, bool):
        parent[key] = old + rng.choice([1, -1, 2**53, -old - 1])
    elif what == 3 and isinstance(old, str):
        parent[key] = rng.choice([old + "x", old[:-1], "", "{{x}}", old + "\u001b", old + "/", old.upper()])
    elif what == 4 and isinstance(parent, dict):
        items = list(parent.items())
        rng.shuffle(items)
        parent.clear()
        parent.update(items)
    elif what == 5 and isinstance(parent, list):
        parent.append(old)
    else:
        parent[key] = rng.choice(OTHER_VALUES)
    return event


def _mutate_bytes(rng: random.Random, line: bytes) -> bytes | None:
    what = rng.randrange(6)
    if what == 0:
        return line[:rng.randrange(len(line))] if line else None
    if what == 1:
        spots = [i for i, byte in enumerate(line) if byte in b":,"]
        if not spots:
            return None
        i = rng.choice(spots) + 1
        return line[:i] + b" " + line[i:]
    if what == 2:
        return line.replace(b"/", b"\\/", 1)
    if what == 3:
        return line.replace(b"e", b"\\u0065", 1)
    if what == 4:
        return line.replace(b'":"', b'":"\\u001F', 1)
    seq = line.find(b'"seq":')
    return None if seq < 0 else line[:seq + 6] + b"1" + line[seq + 6:]


def _moved(lines: list[bytes], rng: random.Random) -> list[bytes] | None:
    """One event moved elsewhere, seqs renumbered to stay contiguous and the references that name seqs
    (sourceEventSeqs, replace endpoints) renumbered with them: an order the writer never produced, with every
    other invariant intact, for the ordering rules (late surface events, enclosure, pairing, dispatch)."""
    try:
        events = [json.loads(line) for line in lines[1:]]
    except ValueError:
        return None
    if len(events) < 3:
        return None
    moved = events.pop(rng.randrange(len(events)))
    events.insert(rng.randrange(len(events) + 1), moved)
    renumbered: dict[int, int] = {}
    position = 0
    for event in events:
        key = "seq0" if "seq0" in event else "seq"
        old = event.get(key)
        width = len(event["data"].get("texts") or event["data"].get("args") or [0]) if key == "seq0" else 1
        if isinstance(old, int):
            renumbered.update({old + k: position + k for k in range(width)})
            event[key] = position
        position += width
    for event in events:
        if isinstance(event.get("sourceEventSeqs"), list):
            event["sourceEventSeqs"] = [renumbered.get(s, s) if isinstance(s, int) else s
                                        for s in event["sourceEventSeqs"]]
        op = event.get("surfaceOp")
        if isinstance(op, dict):
            for end in ("start", "end", "startSeq", "endSeq"):
                if isinstance(op.get(end), int):
                    op[end] = renumbered.get(op[end], op[end])
    return [lines[0], *(json.dumps(e, separators=(",", ":"), ensure_ascii=False).encode() for e in events)]


def mutants(lines: list[bytes], rng: random.Random, count: int) -> list[list[bytes]]:
    found = []
    body = [i for i, line in enumerate(lines) if line.strip()]
    while len(found) < count:
        i = rng.choice(body)
        edited = list(lines)
        kind = rng.randrange(11)
        if kind == 10:
            moved = _moved(lines, rng)
            if moved is None:
                continue
            edited = moved
        elif kind < 6:
            try:
                event = json.loads(lines[i])
            except ValueError:
                continue
            edited[i] = json.dumps(_mutate_value(rng, event), separators=(",", ":"), ensure_ascii=False).encode()
        elif kind < 8:
            mutated = _mutate_bytes(rng, lines[i])
            if mutated is None or mutated == lines[i]:
                continue
            edited[i] = mutated
        elif kind == 8:
            del edited[i]
        elif i + 1 < len(lines):
            edited[i], edited[i + 1] = edited[i + 1], edited[i]
        else:
            edited.insert(i, lines[i])
        found.append(edited)
    return found


@pytest.mark.parametrize("base", ["v0-once", "v0-pressure", "v3-pressure", "v3-once"])
def test_fuzzed_one_line_edits(generated: dict[str, Path], base: str, tmp_path: Path) -> None:
    source = generated[base]
    lines = source.read_bytes().split(b"\n")[:-1]
    rng = random.Random(f"fastpath-{base}")
    outcomes: Counter[str] = Counter()
    path = tmp_path / source.name
    for edited in mutants(lines, rng, MUTANTS_PER_BASE):
        path.write_bytes(b"\n".join(edited) + b"\n")
        found = check(path)
        outcomes["accepted" if isinstance(found, Decided) else "fell back"] += 1
    # Both outcomes occur: edits the full verifier accepts (reordered keys, whitespace, escapes) and the rest.
    assert outcomes["accepted"] >= 10 and outcomes["fell back"] >= MUTANTS_PER_BASE // 2, outcomes


def test_zstd_torn_frame_falls_back(generated: dict[str, Path], tmp_path: Path) -> None:
    data = generated["v0-zstd"].read_bytes()
    torn = tmp_path / "torn.jsonl.zstd"
    torn.write_bytes(data[:-7])
    assert not isinstance(verdict(torn), Decided)
    check(torn)
    plain = tmp_path / "plain.jsonl"
    with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as reader:
        plain.write_bytes(reader.read())
    assert isinstance(check(plain), Decided) == isinstance(check(generated["v0-zstd"]), Decided)


def test_msgspec_writes_every_string_as_json_stringify() -> None:
    """The raw-bytes proof rests on it: every code point but the surrogates (which msgspec refuses to decode)."""
    import msgspec

    from dsh_audit.jsjson import dumps_bytes
    text = "".join(map(chr, [*range(0xD800), *range(0xE000, 0x110000)]))
    assert msgspec.json.encode(text) == dumps_bytes(text)
    assert msgspec.json.encode([0, -1, 2**53, -(2**53), True, False, None, {"a": ""}]) == \
        dumps_bytes([0, -1, 2**53, -(2**53), True, False, None, {"a": ""}])


def _nested_result(depth: int) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": "x"}
    for _ in range(depth):
        block = {"type": "tool-result", "toolCallId": "call_nested", "content": [block]}
    return block


@pytest.mark.parametrize("depth", [3, 100, 255, 300])
def test_deep_messages_meet_the_readers_depth_cap(generated: dict[str, Path], depth: int, tmp_path: Path) -> None:
    """A user message nesting tool-result blocks: within the readers' depth cap both verifiers read it alike;
    past it the readers refuse the line, and the fast path must leave the log to them."""
    limits = pytest.importorskip("dsh_audit.readers.limits")
    lines = generated["v0-once"].read_bytes().split(b"\n")[:-1]
    i = next(i for i, line in enumerate(lines) if line.startswith(b'{"type":"user/message"'))
    event = json.loads(lines[i])
    event["data"]["content"].append(_nested_result(depth))
    lines[i] = json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()
    path = tmp_path / "deep.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    found = check(path)
    if 4 + 2 * depth > limits.MAX_DEPTH:   # line, data, content, the outer block; two levels a nesting
        assert not isinstance(found, Decided)
        assert full_report(path).read_error is not None


def test_lines_over_the_line_cap_fall_back(generated: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    limits = pytest.importorskip("dsh_audit.readers.limits")
    path = tmp_path / "long.jsonl"
    path.write_bytes(generated["v0-once"].read_bytes())
    longest = max(len(line) for line in path.read_bytes().split(b"\n"))
    monkeypatch.setenv(limits.LINE_ENV, str(longest - 1))
    assert not isinstance(check(path), Decided)
    monkeypatch.setenv(limits.LINE_ENV, str(longest))
    assert isinstance(check(path), Decided)


def test_a_replace_heavy_log_is_left_to_the_linear_full_verifier(tmp_path: Path) -> None:
    """The fast path's surface costs O(surface) per replace: past its budget it doubts, and the full
    verifier (whose surface is linear) decides, with the same verdict a clean log gets."""
    scale = REPO / "benchmarks" / "scale_cases.py"
    log = tmp_path / "replaces.jsonl"
    subprocess.run([sys.executable, str(scale), "replaces", "--count", "3000", "--out", str(log)], check=True,
                   capture_output=True, cwd=REPO)
    assert not isinstance(verdict(log), Decided)
    [report] = verify_path(log)
    assert not report.fast_path and not report.findings and report.request_count == 1
