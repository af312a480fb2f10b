"""Hostile input: no reader, fold or CLI path may crash on arbitrary bytes. The only exceptions allowed out of
`open_logs`, `verify_path` and `iter_requests` are DshAuditErrors (one-line, located), and the CLI never shows a
traceback. Seeds are real corpus logs; mutations are made at the JSON level (every value of an event replaced by
a value of each other JSON type, one at a time) and at the byte level (hypothesis, and atheris when installed).

Runtime is bounded for CI: derandomized hypothesis with fixed example counts, a fixed atheris run count.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest_reference import LOGS_ROOT, require_corpus
from dsh_audit.cli import main
from dsh_audit.errors import DshAuditError, LogReadError
from dsh_audit.readers import open_logs
from dsh_audit.readers.jsonl import open_lines
from dsh_audit.reconstruct import iter_requests
from dsh_audit.verify import verify_path, verify_source

require_corpus()

# Small logs covering legacy shapes, tool calls with tool/call events, resume seeds, surface replaces, packed rows.
SEEDS = [
    "apps/web/tests/snapshots/pwsh-terminal/seed.jsonl",
    "examples/headless-agent/tests/semantic-checkpoint-snapshots/tool-outcome-unknown/session.expected.jsonl",
    "examples/acp-agent/tests/snapshots/lsp-definition/session.jsonl",
    "examples/headless-agent/tests/snapshots/compaction-recovery/session.jsonl",
    "examples/acp-agent/tests/snapshots/hook-codex-promptsubmit-context/session.jsonl",
]
# One value of each JSON type; a field is replaced by every one whose type differs from its own.
OTHER_TYPES: list[Any] = [None, True, -1, 1.5, "", "{{system}}", [], [1, "a"], {}, {"type": "x"}]
BIG = 2**60   # an integer past Number.MAX_SAFE_INTEGER


def seed_lines(relpath: str) -> list[bytes]:
    return [line for line in (LOGS_ROOT / relpath).read_bytes().splitlines() if line.strip()]


def in_memory(lines: list[bytes], label: str = "fuzz.jsonl") -> Any:
    return open_lines(label, iter((n, line, True) for n, line in enumerate(lines, 1)), lambda: None, lambda: None)


def exercise(lines: list[bytes]) -> None:
    """Every library entry point over the lines; only DshAuditError may escape."""
    with contextlib.suppress(DshAuditError):    # a mutated header line is refused when the log is opened
        verify_source(in_memory(lines))
    with contextlib.suppress(DshAuditError):
        for _ in iter_requests(in_memory(lines), bodies=True):
            pass


def json_type(value: Any) -> str:
    return "number" if isinstance(value, int | float) and not isinstance(value, bool) else type(value).__name__


def value_paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Paths to every value (the first three items of an array), the whole object included."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from value_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:3]):
            yield from value_paths(item, (*prefix, index))


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = json.loads(json.dumps(value))
    target = copy
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = new
    return copy


@pytest.mark.parametrize("relpath", SEEDS)
def test_every_field_with_every_other_json_type(relpath: str) -> None:
    lines = seed_lines(relpath)
    tried = 0
    for index, line in enumerate(lines):
        value = json.loads(line)
        for path in value_paths(value):
            old = replaced(value, (), value)
            for key in path:
                old = old[key]
            for new in [*OTHER_TYPES, BIG]:
                if json_type(new) == json_type(old) and new is not BIG:
                    continue
                mutated = list(lines)
                mutated[index] = json.dumps(replaced(value, path, new)).encode()
                exercise(mutated)
                tried += 1
    assert tried > 500   # the seed really was mutated field by field


# -- regressions: inputs that crashed before the fix ----------------------------------------------------------

def _corpus_with(relpath: str, index: int, edit: dict[str, Any]) -> list[bytes]:
    lines = seed_lines(relpath)
    value = json.loads(lines[index])
    value.update(edit)
    lines[index] = json.dumps(value).encode()
    return lines


def test_regression_list_valued_type_is_a_read_error_not_a_type_error() -> None:
    lines = _corpus_with(SEEDS[2], 1, {"type": []})
    with pytest.raises(LogReadError, match="no string type"):
        list(in_memory(lines).records())


def _edit_first(lines: list[bytes], matches: Callable[[bytes], bool], edit: Callable[[Any], None]) -> None:
    """Apply `edit` to the decoded first line that `matches`, in place."""
    index = next(i for i, line in enumerate(lines) if matches(line))
    value = json.loads(lines[index])
    edit(value)
    lines[index] = json.dumps(value).encode()


def _codes(lines: list[bytes]) -> set[str]:
    return {f.code for f in verify_source(in_memory(lines)).findings}


def test_regression_list_valued_step_is_a_finding() -> None:
    lines = seed_lines(SEEDS[2])
    _edit_first(lines, lambda line: json.loads(line)["type"] == "step/start",
                lambda value: value["data"].update(step=[]))
    assert "step-enclosure" in _codes(lines)


def test_regression_null_in_source_event_seqs_is_a_finding() -> None:
    lines = seed_lines(SEEDS[2])
    _edit_first(lines, lambda line: b'"assistant/message"' in line and b"sourceEventSeqs" in line,
                lambda value: value.update(sourceEventSeqs=[None, *value["sourceEventSeqs"]]))
    assert "surface-provenance" in _codes(lines)


def test_regression_list_valued_tool_name_is_an_undeclared_tool() -> None:
    lines = seed_lines(SEEDS[2])

    def rename_tool_call(value: Any) -> None:
        block = next(b for b in value["data"]["message"]["content"] if b["type"] == "tool-call")
        block["name"] = ["lsp"]

    _edit_first(lines, lambda line: b'"assistant/message"' in line and b'"tool-call"' in line, rename_tool_call)
    _edit_first(lines, lambda line: b'"request/header"' in line,
                lambda value: value["data"]["header"].update(tools=[{"name": "lsp", "description": "",
                                                                     "inputSchema": {}}]))
    assert "tool-undeclared" in _codes(lines)


# -- named hostile shapes, each with its verdict -------------------------------------------------------------

HEADER = b'{"type":"session","version":0,"id":"s","createdAt":0,"delegationDepth":0}'
TURN = b'{"type":"turn/start","data":{"turn":1}}'


@pytest.mark.parametrize(("content", "code", "needle"), [
    (b"\xff\xfe\xfd\n", 2, "invalid UTF-8"),
    (HEADER + b"\n\xc3\x28\n" + TURN + b"\n", 2, "line 2: invalid UTF-8"),   # under the log's UNREADABLE row
    (b"not json at all\n", 2, "session header"),
    (TURN + b"\n", 2, "not a session header"),                                   # header line missing
    (HEADER + b"\n" + HEADER + b"\n", 1, "[envelope]"),                          # header line duplicated
    (HEADER.replace(b'"version":0', b'"version":5') + b"\n", 2, "newer than any generation"),  # unknown, newer
    (HEADER + b'\n{"type":"future/event","data":{}}\n', 1, "[unknown-event]"),     # a newer event type
    (HEADER + b'\n{"type":"future/event","data":{},"ignorable":true}\n', 0, "[unknown-ignorable]"),
    (HEADER + b'\n{"type":"turn/start","seq":0,"data":{"turn":1}}\n{"type":"turn/end","seq":0,"data":{"turn":1,'
     b'"reason":{"kind":"completed"}}}\n', 1, "[seq-duplicate]"),
    (HEADER + b'\n{"type":"turn/start","seq":0,"data":{"turn":1}}\n{"type":"turn/end","seq":5,"data":{"turn":1,'
     b'"reason":{"kind":"completed"}}}\n', 1, "[seq-gap]"),
    (HEADER + b'\n{"type":"turn/start","seq":"0","data":{"turn":1}}\n', 2, "seq must be a non-negative"),
    (HEADER + b"\n" + TURN + b'\n{"type":"turn/e', 0, "[torn-tail]"),            # truncated final line
    (HEADER + b'\n{"type":"user/message","data":"' + b"x" * 3_000_000 + b'"}\n', 1, "[shape]"),  # a huge line
    (HEADER + b"\n" + b"[" * 100_000 + b"\n" + TURN + b"\n", 2, "line 2: seq 0: JSON nested deeper than 200"),
])
def test_hostile_input_gives_one_line_and_the_right_exit(content: bytes, code: int, needle: str,
                                                         tmp_path: Path) -> None:
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(content)
    result = CliRunner().invoke(main, ["verify", str(path)], env={"COLUMNS": "250"})
    text = result.stdout + result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == code, text
    assert needle in text and "Traceback" not in text
    if code == 2:
        [report] = verify_path(path)
        assert report.read_error is not None and "\n" not in report.read_error
    assert path.read_bytes() == content


# -- byte-level fuzzing with hypothesis --------------------------------------------------------------------

CORPUS = {relpath: (LOGS_ROOT / relpath).read_bytes() for relpath in SEEDS}
FUZZ = settings(max_examples=150, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def mutated_log(draw: st.DrawFn) -> bytes:
    """A corpus log after a few byte-level edits: flips, inserted junk, deleted or duplicated ranges, a cut."""
    data = bytearray(CORPUS[draw(st.sampled_from(SEEDS))])
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.integers(0, len(data)))
        edit = draw(st.sampled_from(["flip", "insert", "delete", "duplicate", "cut", "newline"]))
        if edit == "flip" and where < len(data):
            data[where] ^= 1 << draw(st.integers(0, 7))
        elif edit == "insert":
            data[where:where] = draw(st.binary(min_size=1, max_size=12))
        elif edit == "delete":
            del data[where:where + draw(st.integers(1, 64))]
        elif edit == "duplicate":
            data[where:where] = data[where:where + draw(st.integers(1, 200))]
        elif edit == "cut":
            del data[where:]
        else:
            data[where:where] = b"\n"
    return bytes(data)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def check_file(path: Path) -> None:
    for report in verify_path(path):
        assert report.read_error is None or "\n" not in report.read_error
    try:
        for source in open_logs(path):
            for _ in iter_requests(source, bodies=True):
                pass
    except DshAuditError as error:
        assert str(error) and "\n" not in str(error).strip()


@FUZZ
@given(data=mutated_log())
def test_byte_mutations_never_crash_the_readers(data: bytes, scratch: Path) -> None:
    path = scratch / "mutated.jsonl"
    path.write_bytes(data)
    check_file(path)
    assert path.read_bytes() == data


@FUZZ
@given(data=st.binary(max_size=600))
def test_arbitrary_bytes_after_a_valid_header(data: bytes, scratch: Path) -> None:
    path = scratch / "junk.jsonl"
    path.write_bytes(HEADER + b"\n" + data)
    check_file(path)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8)
EVENT_TYPES = ["user/message", "assistant/message", "assistant/chunk", "tool/result", "tool/call", "turn/start",
               "turn/end", "step/start", "step/end", "request/header", "session/end-seed", "text-chunks",
               "tool-call-chunks", "request/header-delta", "steering/message"]


@FUZZ
@given(position=st.integers(0, 60), kind=st.sampled_from(EVENT_TYPES), data=JSON_VALUES,
       envelope=st.dictionaries(st.sampled_from(["seq", "time", "surfaceOp", "sourceEventSeqs", "ignorable",
                                                 "seq0", "time0"]), JSON_VALUES, max_size=3))
def test_arbitrary_event_inserted_into_a_real_log(position: int, kind: str, data: Any, envelope: dict[str, Any]
                                                  ) -> None:
    lines = seed_lines(SEEDS[3])
    event = json.dumps({"type": kind, "data": data, **envelope}).encode()
    lines.insert(min(position, len(lines) - 1) + 1, event)
    exercise(lines)


@settings(max_examples=40, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=mutated_log())
def test_cli_never_shows_a_traceback(data: bytes, scratch: Path) -> None:
    path = scratch / "cli.jsonl"
    path.write_bytes(data)
    for command in (["verify", "--strict"], ["rebuild", "--format", "digest"]):
        result = CliRunner().invoke(main, [*command, str(path)])
        assert result.exception is None or isinstance(result.exception, SystemExit), (command, result.exception)
        assert result.exit_code in (0, 1, 2)
        assert "Traceback" not in result.stdout + result.stderr
    assert path.read_bytes() == data


# -- atheris (coverage-guided), when installed ------------------------------------------------------------

ATHERIS_HARNESS = textwrap.dedent("""
    import sys, tempfile, pathlib
    import atheris
    with atheris.instrument_imports():
        from dsh_audit.errors import DshAuditError
        from dsh_audit.readers import open_logs
        from dsh_audit.reconstruct import iter_requests
        from dsh_audit.verify import verify_path
    path = pathlib.Path(tempfile.mkdtemp()) / "fuzz.jsonl"

    def one_input(data: bytes) -> None:
        path.write_bytes(data)
        verify_path(path)
        try:
            for source in open_logs(path):
                for _ in iter_requests(source, bodies=True):
                    pass
        except DshAuditError:
            pass

    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
""")


def test_atheris_finds_no_crash(tmp_path: Path) -> None:
    pytest.importorskip("atheris")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for number, data in enumerate(CORPUS.values()):
        (corpus / f"seed{number}").write_bytes(data)
    harness = tmp_path / "harness.py"
    harness.write_text(ATHERIS_HARNESS)
    done = subprocess.run([sys.executable, str(harness), "-runs=3000", "-seed=1", "-max_len=8192",
                           f"-artifact_prefix={tmp_path}/", str(corpus)], capture_output=True, text=True,
                          timeout=300, check=False, env={**os.environ, "PYTHONHASHSEED": "0"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Done 3000 runs" in done.stderr


# -- lone surrogates (legal in JSON.parse input) reach the terminal escaped, never as an encoding crash ------

LONE_SURROGATE_LOG = HEADER + b'\n{"type":"x\\ud800","data":{}}\n'


def test_lone_surrogate_in_finding_text_table_output(tmp_path: Path) -> None:
    path = tmp_path / "surrogate.jsonl"
    path.write_bytes(LONE_SURROGATE_LOG)
    result = CliRunner().invoke(main, ["verify", str(path)])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == 1 and "[unknown-event]" in result.stdout


def test_lone_surrogate_in_a_message_rebuild_json(tmp_path: Path) -> None:
    lines = seed_lines(SEEDS[2])
    user = next(i for i, line in enumerate(lines) if b'"type":"user/message"' in line and b"surfaceOp" in line)
    lines[user] = lines[user].replace(b'"text":"', b'"text":"\\ud800', 1)
    path = tmp_path / "surrogate.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    result = CliRunner().invoke(main, ["rebuild", str(path)])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == 0 and json.loads(result.stdout)["requests"]


def test_regression_chunk_without_data_is_an_envelope_finding() -> None:
    """Found by atheris: an assistant/chunk whose envelope lacks `data` reached the chunk observer."""
    lines = seed_lines(SEEDS[0])
    index = next(i for i, line in enumerate(lines) if b'"assistant/chunk"' in line)
    lines[index] = b'{"type":"assistant/chunk"}'
    report = verify_source(in_memory(lines))
    assert any(f.code == "envelope" and "data is missing" in f.message for f in report.findings)
