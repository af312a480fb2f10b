"""The fast path of verify (dsh_audit.fastpath) never accepts what the full verifier rejects.

Whenever the fast path accepts a log, the full verifier (the fast path switched off) must find nothing at all, no
error, warning or note, and produce the same events and the same request digests (turn, step, attempt, dispatch
seq, sha256, inherited, extends_previous, causes). Checked on every corpus log (as committed and in persisted form),
generator logs (v0, v3 and v4, plain and zstd), the sample logs, the public generation samples, hand-made byte-level
variants of message bytes (the raw-bytes proof), and thousands of fuzzed one-line edits of a few base logs.

Format v4 besides: the native upstream snapshots and the wild lyteboat logs, as stored and in the form the fast path
may accept (placeholders made concrete, a product's own ignorable events left out), the corpus taken to v4 (the
official npm code to v3, then tests/v4_migration.py), and hand-made edits of what v4 adds (tool-role results,
developer messages bound to a header, opaque plugin extensions). Each v4 test counts the logs the fast path accepts.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import msgspec
import orjson
import pytest
import zstandard
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest_reference import LOGS_ROOT, session_log_paths
from dsh_audit import digest_spool, fastpath
from dsh_audit.cli import main
from dsh_audit.errors import DshAuditError
from dsh_audit.fastpath import Decided, decide
from dsh_audit.fastpath.types import SeqList, fast_types
from dsh_audit.generations import generations
from dsh_audit.readers import open_logs
from dsh_audit.verify import LogReport, verify_path
from official_migration import MigratedLog
from v4_migration import migrate_file

REPO = Path(__file__).resolve().parents[1]
GENERATOR = REPO / "benchmarks" / "generate_log.py"
SAMPLES = sorted(p for p in (REPO / "sample_logs").rglob("*.jsonl*") if p.is_file())
GENERATION_SAMPLES = sorted(p for p in (REPO / "tests" / "fixtures" / "generations").rglob("*.jsonl*") if p.is_file())
NATIVE_V4 = sorted((REPO / "tests" / "fixtures" / "generations" / "zq0929").rglob("*.v4.jsonl"))
WILD_ROOT = REPO / "tests" / "fixtures" / "wild"   # native v4 logs from the wild (lyteboat-boat/README.md)
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
    elif not found.startswith("unreadable"):   # no digest asked for (verify's table): the same verdict
        assert not isinstance(decide(next(iter(open_logs(path))), keep_requests=False), Decided), path
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
        "v4-pressure": generate(tmp, "pressure.v4.jsonl", "--size", "60KB", "--compaction", "pressure",
                                "--context-kb", "20", "--seed", "2", "--generation", "4"),
        "v4-once": generate(tmp, "once.v4.jsonl", "--size", "60KB", "--compaction", "once", "--generation", "4"),
        "v4-zstd": generate(tmp, "zstd.v4.jsonl.zstd", "--size", "60KB", "--compaction", "pressure",
                            "--context-kb", "20", "--seed", "3", "--zstd", "--generation", "4"),
    }


# -- generated decoders ------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", [known.version for known in generations()])
def test_every_event_type_has_a_generated_decoder(version: int) -> None:
    from dsh_audit.vocabulary import vocabulary
    types = fast_types(version)
    words = vocabulary(version)
    assert set(types.events) == set(words.known_types), types.unsupported
    assert set(types.messages) == set(words.surface_types)


@pytest.mark.skipif(os.environ.get("DSH_AUDIT_EXPECT_COMPILED") != "1",
                    reason="the pure-Python build is tested (make test-compiled tests the compiled one)")
def test_the_compiled_build_is_the_one_tested() -> None:
    """Under `make test-compiled` these suites must run against the mypyc-compiled fast path, not its sources."""
    from dsh_audit.fastpath import lines, verifier
    assert all(Path(module.__file__ or "").suffix == ".so" for module in (lines, verifier))


SEQ_ITEM = Annotated[int, msgspec.Meta(ge=0, le=2**53 - 1)]


def schema_seqs(text: bytes) -> list[int] | None:
    """sourceEventSeqs as its schema reads them: unique non-negative safe integers, else None."""
    try:
        values = msgspec.json.decode(text, type=list[SEQ_ITEM])
    except msgspec.DecodeError:
        return None
    return values if len(set(values)) == len(values) else None


@settings(max_examples=400, derandomize=True)
@given(st.one_of(
    st.tuples(st.integers(0, 2**53 - 1), st.integers(0, 2500)).map(
        lambda run: json.dumps(list(range(run[0], min(run[0] + run[1], 2**53 - 1) + 1)), separators=(",", ":"))),
    st.lists(st.integers(-3, 3000), max_size=40).map(lambda v: json.dumps(v, separators=(",", ":"))),
    st.lists(st.integers(0, 2**54), max_size=5).map(json.dumps),   # spaces, values past the bound
    st.sampled_from(["[]", "[7]", "[1,1]", "[1,3,2]", "[1,2,3,3]", "[01,2]", "[1, 2]", "[1_0,11]", "[+1,2]",
                     "[-1,0]", "[1.0,2]", "[[1],2]", "[9007199254740990,9007199254740991]",
                     "[9007199254740991,9007199254740992]", "[999,1000]", "[0,1,2,3,4,5,6,7,8,9,10]"])))
def test_a_raw_seq_list_reads_as_its_schema_says(text: str) -> None:
    """types.SeqList: a contiguous run becomes a range without decoding, anything else decodes and is checked;
    either way the same list, or a refusal where the schema refuses it."""
    read = SeqList(SEQ_ITEM, 0, 2**53 - 1)
    expected = schema_seqs(text.encode())
    if expected is None:
        with pytest.raises(ValueError):
            read(msgspec.Raw(text.encode()))
    else:
        found = read(msgspec.Raw(text.encode()))
        assert list(found) == expected
        run = len(expected) > 1 and expected[-1] - expected[0] == len(expected) - 1 \
            and expected == list(range(expected[0], expected[-1] + 1))
        if run and text == json.dumps(expected, separators=(",", ":")):
            assert type(found) is range   # read from its bytes, no integer decoded


def test_content_blocks_compare_as_the_verifier_compares_dicts() -> None:
    """Chunk blocks and message content are compared as Structs: that is dict equality only for closed Structs."""
    import typing
    for version in (known.version for known in generations()):
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


def test_rebuild_digests_kept_on_disk_and_of_one_step_are_the_folds(generated: dict[str, Path],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path keeps rebuild's digest lines until it has decided: spilled to a temporary file they are
    printed the same; with --step it keeps the requests and prints the one step's, as the fold does."""
    monkeypatch.setattr(digest_spool, "SPILL_BYTES", 1)
    runner = CliRunner()
    path = generated["v0-once"]
    assert isinstance(verdict(path), Decided)
    for step in ([], ["--step", "1.2"], ["--step", "1.2#1"]):
        fast = runner.invoke(main, ["rebuild", "--format", "digest", *step, str(path)])
        full = runner.invoke(main, ["rebuild", "--format", "digest", *step, str(path)], env={fastpath.SWITCH: "0"})
        assert fast.exit_code == 0 and fast.output, fast.output
        assert (fast.exit_code, fast.output) == (full.exit_code, full.output), step


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


@pytest.mark.parametrize("base", ["v0-once", "v3-once", "v4-once"])
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


@pytest.mark.parametrize("base", ["v0-once", "v0-pressure", "v3-pressure", "v3-once", "v4-pressure", "v4-once"])
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


def test_a_replace_heavy_log_is_decided_by_the_fast_path_as_the_full_verifier_decides_it(tmp_path: Path) -> None:
    """Both engines keep one surface (surface.Surface), whose replaces cost what they shadow: a log of 3,000
    replaces needs no budget to leave to the full verifier, and the fast path's digests are the full verifier's."""
    scale = REPO / "benchmarks" / "scale_cases.py"
    log = tmp_path / "replaces.jsonl"
    subprocess.run([sys.executable, str(scale), "replaces", "--count", "3000", "--out", str(log)], check=True,
                   capture_output=True, cwd=REPO)
    assert isinstance(check(log), Decided)
    [report] = verify_path(log)
    assert report.fast_path and not report.findings and report.request_count == 1


# -- format v4 ------------------------------------------------------------------------------------------------
CONCRETE_PROMPT = "You are dsh, a coding agent working in the user's repository. Be brief."


def _rows(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(row, separators=(",", ":"), ensure_ascii=False).encode() + b"\n" for row in rows)


def concrete(data: bytes) -> bytes:
    """A scrubbed log (upstream's snapshot normalization) as the fast path may accept it: a concrete prompt where
    "{{system}}" stands, a schema for each tool it calls where "{{tools}}" stands, and, where its rows carry no
    seq and time (a projected snapshot), the persisted form (seq = row index, time 0)."""
    header, *events = _rows(data)
    if events and not any("seq" in event for event in events):
        events = [{"type": e["type"], "seq": i, "time": 0, **{k: v for k, v in e.items() if k != "type"}}
                  for i, e in enumerate(events)]
    called = sorted({e["data"]["name"] for e in events if e["type"] == "tool/call"} or {"bash"})
    tools = json.dumps([{"name": name, "description": f"The {name} tool.", "parameters": {"type": "object"}}
                        for name in called]).encode()
    return _jsonl([header, *events]).replace(b'"{{system}}"', json.dumps(CONCRETE_PROMPT).encode()) \
        .replace(b'"{{tools}}"', tools)


def without_ignorable(data: bytes) -> bytes:
    """A log without its unknown ignorable events (a product's own records, which the loaders skip), seqs dense
    again and every reference renumbered (provenance, replace ranges, headerSeq, title seqs)."""
    header, *events = _rows(concrete(data) if b'"seq"' not in data else data)
    kept = [event for event in events if event.get("ignorable") is not True]
    new = {event["seq"]: i for i, event in enumerate(kept)}
    for event in kept:
        event["seq"] = new[event["seq"]]
        if "sourceEventSeqs" in event:
            event["sourceEventSeqs"] = [new[s] for s in event["sourceEventSeqs"]]
        op, data_ = event.get("surfaceOp"), event["data"]
        if isinstance(op, dict):
            op["startSeq"], op["endSeq"] = new[op["startSeq"]], new[op["endSeq"]]
        if "headerSeq" in data_:
            data_["headerSeq"] = new[data_["headerSeq"]]
        if event["type"] == "session/title":
            data_["messageSeqs"] = [new[s] for s in data_["messageSeqs"]]
    return _jsonl([header, *kept])


def wild_logs() -> list[Path]:
    return sorted(WILD_ROOT.rglob("session*.v4.jsonl"))


def _written(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_native_v4_snapshots(tmp_path: Path) -> None:
    """As committed (scrubbed, projected: no seq) the fast path declines them all; made concrete it accepts every
    one but the seeded fork child (its cut needs a second pass), developer message, tool errors and retries
    included."""
    outcomes: Counter[str] = Counter()
    for index, path in enumerate(NATIVE_V4):
        assert not isinstance(check(path), Decided), path
        found = check(_written(tmp_path / str(index) / path.name, concrete(path.read_bytes())))
        outcomes["accepted" if isinstance(found, Decided) else found] += 1
    assert outcomes == {"accepted": len(NATIVE_V4) - 1, "seeded child (its cut needs a second pass)": 1}, outcomes


def test_wild_v4_logs(tmp_path: Path) -> None:
    """The lyteboat logs (dsh 0.2 against the real DeepSeek API): as copied, each holds the product's own ignorable
    events, which the full verifier reports (`unknown-ignorable`, a warning), so the fast path declines them all.
    Without those events, it accepts each log that has a request to rebuild (developer message, request/context,
    tool results with meta, Chinese text); the two replies written without a model call stay warnings
    (`untraced-response`) and are declined."""
    paths = wild_logs()
    assert len(paths) == 7, paths
    outcomes: Counter[str] = Counter()
    for index, path in enumerate(paths):
        assert not isinstance(check(path), Decided), path
        codes = {(f.code, f.severity) for f in full_report(path).findings}
        assert ("unknown-ignorable", "warning") in codes and codes <= {
            ("unknown-ignorable", "warning"), ("untraced-response", "warning")}, (path, codes)
        stripped = _written(tmp_path / str(index) / path.name, without_ignorable(path.read_bytes()))
        found = check(stripped)
        outcomes["accepted" if isinstance(found, Decided) else found] += 1
        if not isinstance(found, Decided):
            assert {f.code for f in full_report(stripped).findings} == {"untraced-response"}, path
    assert outcomes == {"accepted": len(paths) - 2, "no header in force": 2}, outcomes


def test_corpus_taken_to_v4(official_migration: dict[str, MigratedLog], tmp_path: Path) -> None:
    """Every corpus log the official code takes to v3, migrated on to v4 (tests/v4_migration.py): as migrated, and
    made concrete (nearly all hold a scrubbed "{{system}}" prompt, which the fast path declines)."""
    outcomes: Counter[str] = Counter()
    for index, (_, log) in enumerate(sorted(official_migration.items())):
        if not log.ok(3):
            continue
        v3 = log.targets[3]
        assert isinstance(v3, Path)
        v4 = migrate_file(v3, tmp_path / f"{index:03d}")
        outcomes["as migrated accepted" if isinstance(check(v4), Decided) else "as migrated declined"] += 1
        found = check(_written(tmp_path / f"{index:03d}c" / v4.name, concrete(v4.read_bytes())))
        outcomes["concrete accepted" if isinstance(found, Decided) else "concrete declined"] += 1
    assert outcomes["as migrated accepted"] >= 1 and outcomes["concrete accepted"] >= 40, outcomes


def _v4_event(lines: list[bytes], kind: str, nth: int = 0) -> int:
    return [i for i, line in enumerate(lines) if f'"type":"{kind}"'.encode() in line][nth]


def _edit(index_of: Any, change: Any) -> Any:
    """An edit of one event of the v4 base log: `index_of(lines)` finds its line, `change(event, lines)` edits it."""
    def apply(lines: list[bytes]) -> list[bytes]:
        i = index_of(lines)
        event = json.loads(lines[i])
        change(event, lines)
        return [*lines[:i], json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode(), *lines[i + 1:]]
    return apply


def _developer(change: Any) -> Any:
    return _edit(lambda lines: _v4_event(lines, "developer/message"), change)


def _tool_result(change: Any) -> Any:
    return _edit(lambda lines: _v4_event(lines, "tool/result"), change)


def _set(path: tuple[Any, ...], value: Any) -> Any:
    def change(event: dict[str, Any], lines: list[bytes]) -> None:
        _get(event, path[:-1])[path[-1]] = value
    return change


def _drop(path: tuple[Any, ...]) -> Any:
    def change(event: dict[str, Any], lines: list[bytes]) -> None:
        del _get(event, path[:-1])[path[-1]]
    return change


def _initial_header(event: dict[str, Any], lines: list[bytes]) -> None:
    event["data"]["headerSeq"] = json.loads(lines[_v4_event(lines, "request/header")])["seq"]


def _removal_only(header_seq: bool) -> Any:
    def change(event: dict[str, Any], lines: list[bytes]) -> None:
        event["data"]["message"]["content"] = [{"type": "tool-removal", "toolName": "bash"}]
        if not header_seq:
            del event["data"]["headerSeq"]
    return change


def _wrapped(event: dict[str, Any], lines: list[bytes]) -> None:
    message = event["data"]["message"]
    event["data"]["message"] = {"source": message["source"], "content": [
        {"type": "tool-result", "toolCallId": message["toolCallId"], "content": message["content"]}],
        "role": "user", "id": message["id"]}


def _error(flagged: bool) -> Any:
    def change(event: dict[str, Any], lines: list[bytes]) -> None:
        event["data"]["error"] = {"name": "ToolError", "code": "TOOL_FAILED"}
        event["data"]["message"]["isError"] = flagged
    return change


def _developer_before_its_header(lines: list[bytes]) -> list[bytes]:
    """The developer message logged just before the header it names, seqs swapped: it names a later event."""
    i = _v4_event(lines, "developer/message")
    header, developer = json.loads(lines[i - 1]), json.loads(lines[i])
    assert header["type"] == "request/header"
    header["seq"], developer["seq"] = developer["seq"], header["seq"]
    developer["data"]["headerSeq"] = header["seq"]
    dumped = [json.dumps(e, separators=(",", ":"), ensure_ascii=False).encode() for e in (developer, header)]
    return [*lines[:i - 1], *dumped, *lines[i + 1:]]


# (edit, whether the fast path accepts the result, the full verifier's finding codes)
V4_EDITS: dict[str, tuple[Any, bool, set[str]]] = {
    # Any earlier header will do: whether it declares the added tool is not checked (docs/v4.md, "Not verified").
    "headerSeq names an earlier header lacking the added tool": (_developer(_initial_header), True, set()),
    "headerSeq names no header": (_developer(_set(("data", "headerSeq"), 0)), False, {"developer-header"}),
    "headerSeq missing on an addition": (_developer(_drop(("data", "headerSeq"))), False, {"developer-header"}),
    "a removal only, no headerSeq": (_developer(_removal_only(False)), True, set()),
    "a removal only, with headerSeq": (_developer(_removal_only(True)), False, {"developer-header"}),
    "developer message projecting nothing": (
        _developer(lambda event, lines: (event["data"]["message"].update(content=[]),
                                         event["data"].pop("headerSeq"))), True, set()),
    "developer message outside its step": (
        _developer(lambda event, lines: event["data"].update(step=event["data"]["step"] + 1)), False,
        {"system-step"}),
    "developer message before its header": (_developer_before_its_header, False, {"developer-header"}),
    "toolCallId other than the source's callId": (
        _tool_result(_set(("data", "message", "toolCallId"), "call_other")), False, {"shape", "tool-pairing"}),
    "an error result not flagged": (_tool_result(_error(False)), False, {"tool-result-error"}),
    "an error result flagged": (_tool_result(_error(True)), True, set()),
    "a v3 wrapper result": (_tool_result(_wrapped), False, {"shape", "tool-pairing"}),
    "a tool-result block in tool content": (
        _tool_result(lambda event, lines: event["data"]["message"]["content"].append(
            {"type": "tool-result", "toolCallId": "x", "content": []})), False, {"schema"}),
    # Opaque v4 extensions the schemas admit: the fast path's decoders refuse them (stricter, never laxer).
    "a plugin:result key on a tool result": (_tool_result(_set(("data", "message", "plugin:result:note"), "n")),
                                             False, set()),
    "a plugin block in a user message": (
        _edit(lambda lines: _v4_event(lines, "user/message"),
              lambda event, lines: event["data"]["content"].append({"type": "plugin:shiny", "x": 1})), False, set()),
    "a plugin source on the system head": (
        _edit(lambda lines: _v4_event(lines, "system/message"),
              _set(("data", "message", "source"), {"kind": "plugin", "plugin": "x"})), False, {"schema"}),
}


@pytest.mark.parametrize("name", sorted(V4_EDITS))
def test_v4_edits(generated: dict[str, Path], name: str, tmp_path: Path) -> None:
    """What v4 adds, edited by hand in a v4 generator log: each edit gets the verdict and the findings expected."""
    edit, accepted, codes = V4_EDITS[name]
    lines = generated["v4-once"].read_bytes().split(b"\n")[:-1]
    path = _written(tmp_path / "session.v4.jsonl", b"\n".join(edit(lines)) + b"\n")
    found = check(path)
    assert isinstance(found, Decided) == accepted, (name, found)
    assert {f.code for f in full_report(path).findings} == codes, name


@pytest.mark.parametrize("before_sent", [True, False], ids=["before-it-was-sent", "after-it-was-sent"])
def test_a_rewrite_before_a_node_is_sent_extends_in_both_engines(before_sent: bool, tmp_path: Path) -> None:
    """issue 17: extends_previous asks whether the predecessor's messages are still the prefix, in both engines."""
    from test_fold import pruned_log

    log, _ = pruned_log(before_sent=before_sent)
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in [log.header, *log.events]) + "\n", encoding="utf-8")
    found = check(path)
    assert isinstance(found, Decided), found
    assert list(found.requests)[-1].extends_previous is before_sent
