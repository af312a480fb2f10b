"""Reading each log generation by its own rules: names, codecs, the settlement boundary, the system prompt as a
surface node, the v4 tool-role result, directories of several generations, and the newer invariants."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dsh_audit import LogReadError, iter_requests, open_logs, reconstruct_file, verify_path
from dsh_audit.cli import main
from dsh_audit.generations import generations, parse_log_name
from dsh_audit.readers.codecs import decode_source_ranges
from dsh_audit.readers.discover import discover_logs
from dsh_audit.reports.cache_report import CacheOptions, build_cache_report
from dsh_audit.reports.header_diff import build_header_diff
from genbuilder import GenLog
from logbuilder import MODEL, PROVIDER

WIDE = {"COLUMNS": "250"}   # verify's rows and findings each on one line
NEWER = generations()[-1].version + 1   # a generation dsh-audit does not know yet


def codes(path: Path) -> list[str]:
    [report] = verify_path(path)
    assert report.read_error is None, report.read_error
    return [finding.code for finding in report.findings]


def body(path: Path, index: int = -1) -> dict[str, Any]:
    request = reconstruct_file(path).requests[index]
    assert request.body is not None
    parsed: dict[str, Any] = json.loads(request.body)
    return parsed


# -- names and codecs -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "group", "version", "canonical"), [
    ("session.jsonl", "session", 0, True),
    ("session.v3.jsonl", "session", 3, True),
    ("session.v2.jsonl.zstd", "session", 2, True),
    ("session.2.jsonl", "session.2", 0, True),
    ("session.1.v3.jsonl", "session.1", 3, True),
    ("child.replay.v3.jsonl", "child.replay", 3, False),
    ("session.v0.jsonl", "session.v0.jsonl", None, False),   # not canonical: generation 0 has no suffix
    ("notes.jsonl", "notes.jsonl", None, False),
])
def test_file_names_say_group_and_generation(name: str, group: str, version: int | None, canonical: bool) -> None:
    parsed = parse_log_name(name)
    assert (parsed.group, parsed.version, parsed.canonical) == (group, version, canonical)


def test_generations_count_up_from_v0_with_their_rules() -> None:
    known = {g.version: g for g in generations()}
    assert list(known) == list(range(len(known)))
    assert [known[v].dispatch for v in range(5)] == ["first-chunk"] * 2 + ["settlement"] * 3
    assert [known[v].system_prompt for v in range(5)] == ["header"] * 3 + ["surface"] * 2
    assert known[4].tool_result == "tool-message" and known[3].replace_keys == ("startSeq", "endSeq")


def test_what_newer_dsh_migrations_refuse_and_where_logs_are_stored() -> None:
    """generations.json's facts about published packages: the v0->v1 and v2->v3 migrations' refusals reach the
    generations below them, no later migration refuses anything, and only v0 ever lived in a SQLite store."""
    known = {g.version: g for g in generations()}
    assert [known[v].descriptor_refused_by for v in range(5)] == ["v0->v1", None, None, None, None]
    assert [known[v].ignorable_refused_by for v in range(5)] == ["v0->v1", None, "v2->v3", None, None]
    assert [known[v].early_surface_refused_by for v in range(5)] == ["v2->v3"] * 3 + [None] * 2
    assert [g.version for g in generations() if g.sqlite_store] == [0]
    assert all(g.fast_path for g in generations())


@pytest.mark.parametrize(("values", "seq", "expected"), [
    ([[9, 68]], 70, list(range(9, 69))),
    ([1, [3, 5], 8], 9, [1, 3, 4, 5, 8]),
    ([1, 2, 3], 9, [1, 2, 3]),                                      # no ranges: returned as stored
    ([[9, 3]], 20, "sourceEventSeqs range [9, 3] ends before it starts"),
    ([[1, 2, 3]], 9, "sourceEventSeqs range must be a [start, end] pair"),
    ([[1, 3], 2], 9, "sourceEventSeqs ranges must be strictly increasing"),
    ([[0, 50]], 10, "sourceEventSeqs range exceeds its event seq"),
])
def test_range_encoded_source_seqs(values: list[Any], seq: int, expected: list[int] | str) -> None:
    assert decode_source_ranges(values, seq, unique_earlier=False) == expected


def test_from_v2_ranges_must_stay_below_the_event() -> None:
    assert decode_source_ranges([[3, 7]], 6, unique_earlier=True) == \
        "sourceEventSeqs ranges must contain unique earlier seqs"
    assert decode_source_ranges([[3, 7]], 6, unique_earlier=False) == [3, 4, 5, 6, 7]


def test_a_v0_log_with_a_range_reads_as_its_expansion(tmp_path: Path) -> None:
    from logbuilder import LogBuilder

    log = LogBuilder()
    log.simple_turn(1, "hello", "hi", header_reason="initial")
    message = next(e for e in log.events if e["type"] == "assistant/message")
    plain = tmp_path / "plain" / "session.jsonl"
    ranged = tmp_path / "ranged" / "session.jsonl"
    for path, sources in ((plain, message["sourceEventSeqs"]),
                          (ranged, [[message["sourceEventSeqs"][0], message["sourceEventSeqs"][-1]]])):
        message["sourceEventSeqs"] = sources
        path.parent.mkdir()
        path.write_text("".join(json.dumps(row) + "\n" for row in [log.header, *log.events]))
    assert codes(ranged) == codes(plain) == []
    assert reconstruct_file(ranged).requests[0].sha256 == reconstruct_file(plain).requests[0].sha256


# -- the settlement boundary (v2 on) ------------------------------------------------------------------------
def test_v2_request_is_dispatched_at_its_settlement(tmp_path: Path) -> None:
    log = GenLog(2)
    usage = {"inputTokens": 10, "outputTokens": 2, "cacheReadTokens": 0}
    log.turn(1, "hello", "hi", usage=usage)
    path = log.write(tmp_path / "session.v2.jsonl")
    [request] = reconstruct_file(path).requests
    assert (request.bound, request.dispatch_seq, request.usage, request.finish) == ("settlement", 4, usage, "stop")
    assert body(path) == {"provider": PROVIDER, "model": MODEL, "messages": [log.events[2]["data"]]}
    assert codes(path) == []


def test_v2_failed_attempts_settle_as_assistant_attempt(tmp_path: Path) -> None:
    log = GenLog(2)
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    log.user(1, "hello")
    log.header_event()
    log.failed_attempt(1, 1)
    log.add("llm/retry", {"turn": 1, "step": 1, "attempt": 1, "delayMs": 0,
                          "failure": {"message": "boom", "code": "X"}})
    log.response(1, 1, "hi")
    path = log.write(tmp_path / "session.v2.jsonl")
    requests = reconstruct_file(path).requests
    assert [(r.attempt, r.finish, r.dispatch_seq) for r in requests] == [(1, "error", 4), (2, "stop", 6)]
    assert requests[0].body == requests[1].body


def test_v2_attempt_outside_its_step_is_a_finding(tmp_path: Path) -> None:
    log = GenLog(2)
    log.turn(1, "hello", "hi")
    log.failed_attempt(1, 1)   # after step/end and turn/end
    assert "attempt-step" in codes(log.write(tmp_path / "session.v2.jsonl"))


def test_v2_assistant_message_may_not_cite_chunks(tmp_path: Path) -> None:
    log = GenLog(2)
    log.turn(1, "hello", "hi")
    log.events[4]["sourceEventSeqs"] = [3]
    assert "assistant-provenance" in codes(log.write(tmp_path / "session.v2.jsonl"))


def test_v0_chunks_are_unknown_from_v2(tmp_path: Path) -> None:
    log = GenLog(2)
    log.turn(1, "hello", "hi")
    log.add("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "x"}})
    assert "unknown-event" in codes(log.write(tmp_path / "session.v2.jsonl"))


# -- seeded children (v2 on) -----------------------------------------------------------------------------
def seeded_child(tmp_path: Path, *, marker: bool = True) -> Path:
    log = GenLog(2, "child", isSeeded=True, parentSession="parent")
    log.turn(1, "inherited", "from the parent")
    log.add("session/end-seed", {"inherited": True} if marker else {})
    log.turn(2, "mine", "the child's own", reason="resume")
    return log.write(tmp_path / "session.1.v2.jsonl")


def test_v2_inherited_cut_is_the_last_tagged_end_seed(tmp_path: Path) -> None:
    requests = reconstruct_file(seeded_child(tmp_path)).requests
    assert [(r.turn, r.inherited, r.owner) for r in requests] == [(1, True, "parent"), (2, False, "child")]


def test_v2_seeded_session_without_its_marker(tmp_path: Path) -> None:
    assert "seed-marker" in codes(seeded_child(tmp_path, marker=False))


# -- the system prompt as a surface node (v3 on) ----------------------------------------------------------
def test_v3_request_carries_the_prompt_as_its_first_message(tmp_path: Path) -> None:
    log = GenLog(3)
    log.turn(1, "hello", "hi", head="You are helpful.")
    path = log.write(tmp_path / "session.v3.jsonl")
    request = body(path)
    assert list(request) == ["provider", "model", "messages"] and "system" not in request
    assert request["messages"][0] == log.events[2]["data"]["message"]
    assert codes(path) == []


def test_v3_empty_head_projects_nothing(tmp_path: Path) -> None:
    log = GenLog(3)
    log.turn(1, "hello", "hi", head=None)
    log.events.insert(2, {})   # keep seqs dense: replaced below by an empty head
    log.events[2] = {"type": "system/message", "seq": 2, "time": 0, "surfaceOp": "append", "data": {
        "turn": 1, "step": 1, "message": {"id": "h", "role": "system", "content": [],
                                          "source": {"kind": "plugin", "plugin": "@deepseek-ai/dsh-system-prompt"}}}}
    for seq, event in enumerate(log.events):
        event["seq"] = seq
    path = log.write(tmp_path / "session.v3.jsonl")
    assert [m["role"] for m in body(path)["messages"]] == ["user"]


def test_v3_prompt_change_is_a_surface_replace_named_as_the_cause(tmp_path: Path) -> None:
    log = GenLog(3)
    log.turn(1, "hello", "hi", head="first prompt")
    log.prompt_turn(2, "second prompt", replaces=2)
    path = log.write(tmp_path / "session.v3.jsonl")
    second = reconstruct_file(path).requests[1]
    assert not second.extends_previous and [c.kind for c in second.causes] == ["system-change"]
    assert json.loads(second.body or b"{}")["messages"][0]["content"][0]["text"] == "second prompt"
    assert codes(path) == []
    report = build_cache_report([path], CacheOptions(predict=False))
    assert report.requests["cause"].to_list()[1] == "system-prompt-change"
    diff = build_header_diff([path])
    changed = diff.filter(diff["field"] == "system")
    assert changed["reason"].to_list() == ["system/message"] and changed["generation"].to_list() == [3]


def test_v3_compaction_may_not_shadow_the_system_head(tmp_path: Path) -> None:
    log = GenLog(3)
    log.turn(1, "hello", "hi", head="prompt")
    summary = log.add("user/message", {"content": [{"type": "text", "text": "summary"}],
                                       "source": {"kind": "plugin", "plugin": "compact"}, "role": "user",
                                       "id": "c1"}, surfaceOp={"op": "replace", "startSeq": 2, "endSeq": 3},
                      sourceEventSeqs=[2, 3])
    assert summary == 8
    assert "system-head" in codes(log.write(tmp_path / "session.v3.jsonl"))


def test_v3_system_message_outside_any_step_is_one_line_exit_1(tmp_path: Path) -> None:
    log = GenLog(3)
    log.turn(1, "hello", "hi", head="prompt")
    log.system(1, 1, "late", replaces=2)
    path = log.write(tmp_path / "session.v3.jsonl")
    result = CliRunner().invoke(main, ["verify", str(path)], env=WIDE)
    assert result.exit_code == 1
    [line] = [line for line in result.stdout.splitlines() if "[system-step]" in line]
    assert line.startswith("    line 10, seq 8, system/message: error [system-step]")   # under the log's row


def test_v3_header_may_not_carry_the_retired_system(tmp_path: Path) -> None:
    log = GenLog(3)
    log.turn(1, "hello", "hi", head="prompt", reason=None)
    log.events.insert(4, {"type": "request/header", "data": {
        "header": {"config": {"provider": PROVIDER, "model": MODEL}, "system": "old"}, "reason": "initial"}})
    for seq, event in enumerate(log.events):
        event["seq"], event["time"] = seq, 0
    path = log.write(tmp_path / "session.v3.jsonl")
    assert "retired-header-system" in codes(path)
    [source] = open_logs(path)
    [request] = iter_requests(source, bodies=True, on_finding=lambda _finding: None)
    assert "system" not in json.loads(request.body or b"{}")   # the prompt is the head, never the stray field


def test_v3_placeholder_prompt_is_reported(tmp_path: Path) -> None:
    log = GenLog(3)
    log.turn(1, "hello", "hi", head="{{system}}")
    path = log.write(tmp_path / "session.v3.jsonl")
    assert codes(path) == ["placeholder-header"]
    assert reconstruct_file(path).requests[0].placeholders == ["system"]


# -- v4 ------------------------------------------------------------------------------------------------
def test_v4_tool_result_is_a_tool_role_message(tmp_path: Path) -> None:
    log = GenLog(4)
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    log.system(1, 1, "prompt")
    log.user(1, "run it")
    log.header_event()
    call = {"type": "tool-call", "id": "c1", "name": "run", "arguments": "{}"}
    stream = [{"type": "chunk", "time": 0, "chunk": {"type": "block-end", "index": 0, "block": call}},
              {"type": "chunk", "time": 0, "chunk": {"type": "finish", "reason": {"kind": "tool-calls"}}}]
    log.add("assistant/message", {"turn": 1, "step": 1, "message": {
        "role": "assistant", "content": [call], "source": {"kind": "model", "provider": PROVIDER, "model": MODEL},
        "id": "a1"}, "stream": stream}, surfaceOp="append")
    log.add("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "run", "arguments": "{}"})
    result = {"role": "tool", "source": {"kind": "tool", "callId": "c1"}, "toolCallId": "c1",
              "content": [{"type": "text", "text": "done"}], "id": "t1"}
    log.add("tool/result", {"turn": 1, "step": 1, "message": result}, surfaceOp="append")
    log.add("step/end", {"turn": 1, "step": 1})
    log.add("step/start", {"turn": 1, "step": 2})
    log.header_event("series")
    log.response(1, 2, "ok")
    log.add("step/end", {"turn": 1, "step": 2})
    log.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    path = log.write(tmp_path / "session.v4.jsonl")
    assert body(path)["messages"][-1] == result
    assert [c for c in codes(path) if c != "tool-undeclared"] == []


# -- directories and names -------------------------------------------------------------------------------
def make_session_dir(root: Path) -> Path:
    for version, name in ((0, "session.jsonl"), (2, "session.v2.jsonl"), (3, "session.v3.jsonl")):
        log = GenLog(version) if version else GenLog(2)
        log.header["version"] = version
        if version == 0:
            del log.header["isSeeded"]
        log.write(root / name)
    child = GenLog(0)
    child.header["version"] = 0
    del child.header["isSeeded"]
    child.write(root / "session.1.jsonl")
    return root


def test_a_session_directory_reads_each_logs_newest_generation(tmp_path: Path) -> None:
    found = discover_logs([make_session_dir(tmp_path)])
    assert [p.name for p in found.files] == ["session.1.jsonl", "session.v3.jsonl"]
    assert {p.name: q.name for p, q in found.skipped.items()} == {"session.jsonl": "session.v3.jsonl",
                                                                 "session.v2.jsonl": "session.v3.jsonl"}
    every = discover_logs([tmp_path], all_generations=True)
    assert len(every.files) == 4 and not every.skipped


def test_verify_reports_generation_and_skipped_predecessors(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["verify", str(make_session_dir(tmp_path))], env=WIDE)
    lines = result.stdout.splitlines()
    assert any(line.startswith("ok ") and "session.v3.jsonl  (v3," in line for line in lines)
    assert sum(line.startswith("skipped ") for line in lines) == 2
    assert lines[-1].endswith("2 older generation(s) skipped")


def test_a_generation_stored_twice_is_an_error_not_a_guess(tmp_path: Path) -> None:
    make_session_dir(tmp_path)
    (tmp_path / "session.v3.jsonl.zst").write_bytes((tmp_path / "session.v3.jsonl").read_bytes())
    result = CliRunner().invoke(main, ["verify", str(tmp_path)])
    assert result.exit_code == 2 and "is stored twice" in result.stdout


@pytest.mark.parametrize(("name", "version", "message"), [
    ("session.jsonl", 3, "the header says log format v3 but the file name says v0"),
    ("session.v2.jsonl", 3, "the header says log format v3 but the file name says v2"),
    (f"session.v{NEWER}.jsonl", NEWER, f"uses log format v{NEWER}, newer than any generation dsh-audit knows "
                                       f"({generations()[0].label} to {generations()[-1].label})"),
])
def test_bad_generation_is_a_one_line_read_error(tmp_path: Path, name: str, version: int, message: str) -> None:
    log = GenLog(3)
    log.header["version"] = version
    path = log.write(tmp_path / name)
    with pytest.raises(LogReadError) as raised:
        reconstruct_file(path)
    assert message in str(raised.value) and str(raised.value).startswith(f"{path}:1: ")
    result = CliRunner().invoke(main, ["verify", str(path)], env=WIDE)
    assert result.exit_code == 2 and len([line for line in result.stderr.splitlines() if line]) == 0
    assert message in result.stdout


def test_v2_seq_gap_and_bad_range_are_one_line_findings_with_their_location(tmp_path: Path) -> None:
    log = GenLog(2)
    log.turn(1, "hello", "hi")
    for event in log.events[3:]:
        event["seq"] += 1                          # a gap before the header
    log.events[2]["sourceEventSeqs"] = [[9, 3]]    # a malformed range on the user message
    path = log.write(tmp_path / "session.v2.jsonl")
    result = CliRunner().invoke(main, ["verify", str(path)], env=WIDE)
    assert result.exit_code == 1
    found = [line.strip() for line in result.stdout.splitlines() if "error [" in line]
    assert found == ["line 4, seq 2, user/message: error [source-ranges] sourceEventSeqs range [9, 3] ends "
                     "before it starts",
                     "line 5, seq 4, request/header: error [seq-gap] session event seq 4 is not contiguous; "
                     "expected 3"]


# -- drift inside v0 -------------------------------------------------------------------------------------
def test_v0_drift_after_0_1_2_is_read(tmp_path: Path) -> None:
    from logbuilder import LogBuilder

    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    log.add("model/selection", {"provider": PROVIDER, "model": MODEL})
    log.add("subagent/model-selection-policy", {"allowedModels": [{"provider": PROVIDER, "model": MODEL}]})
    log.add("step/start", {"turn": 1, "step": 1})
    log.user("hello")
    log.header_event("initial")
    log.add("request/header", {"header": {"config": {"provider": PROVIDER, "model": MODEL}, "system": "sys"},
                               "reason": "series", "startsSeries": True})
    log.response(1, 1, "hi")
    log.add("session-log-deepseek/delivery-accepted", {"sessionId": "s-1", "throughSeq": 3})
    log.add("step/end", {"turn": 1, "step": 1})
    log.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in [log.header, *log.events]))
    assert codes(path) == []


def test_the_bundled_v3_sample_is_the_v0_sample_with_its_prompt_moved_into_the_surface() -> None:
    from test_generations_differential import system_moved_back

    folder = Path(__file__).resolve().parents[1] / "sample_logs" / "compaction-recovery"
    v0 = reconstruct_file(folder / "session.jsonl", message_prefix="drop").requests
    v3 = reconstruct_file(folder / "session.v3.jsonl").requests
    assert [(r.turn, r.step, r.attempt) for r in v3] == [(r.turn, r.step, r.attempt) for r in v0] == \
        [(1, 1, 1), (1, 2, 1), (1, 2, 2)]
    assert [system_moved_back(r.body or b"") for r in v3] == [r.body for r in v0]
    assert [f.code for report in verify_path(folder) for f in report.findings] == []


@pytest.mark.parametrize(("edit", "message"), [
    ({"dt": [1]}, "text-chunks record has 1 dt gaps for 1 members"),
    ({"time0": 2**53 - 2, "dt": [5], "texts": ["a", "b"]}, "text-chunks record member times leave the safe integers"),
])
def test_a_packed_stream_record_is_checked_as_a_packed_row_is(tmp_path: Path, edit: dict[str, Any],
                                                                message: str) -> None:
    log = GenLog(2)
    log.turn(1, "hello", "hi")
    log.events[4]["data"]["stream"][1].update(edit)
    path = log.write(tmp_path / "session.v2.jsonl")
    [report] = verify_path(path)
    assert [f.render() for f in report.findings if f.code == "stream-record"] == [
        f"{path}:6: seq 4: assistant/message: error [stream-record] data.stream[1]: {message}"]


# -- malformed input of the newer generations: findings, never a crash ------------------------------------
def v4_with_developer(tmp_path: Path, header_seq: Any) -> Path:
    log = GenLog(4)
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    log.system(1, 1, "prompt")
    log.user(1, "hello")
    seq = log.header_event()
    log.add("developer/message", {"turn": 1, "step": 1, "message": {
        "source": {"kind": "tool-registry"}, "content": [{"type": "tool-addition", "toolName": "run"}],
        "role": "developer", "id": "d1"}, "headerSeq": seq if header_seq == "header" else header_seq},
        surfaceOp="append")
    log.response(1, 1, "hi")
    log.add("step/end", {"turn": 1, "step": 1})
    log.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    return log.write(tmp_path / "session.v4.jsonl")


@pytest.mark.parametrize(("header_seq", "expected"), [("header", []), (2, ["developer-header"]),
                                                      ([4], ["schema", "developer-header"]),
                                                      (True, ["schema", "developer-header"])])
def test_developer_message_binds_to_an_earlier_header(tmp_path: Path, header_seq: Any,
                                                      expected: list[str]) -> None:
    path = v4_with_developer(tmp_path, header_seq)
    assert codes(path) == expected
    messages = body(path)["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "developer"]   # kept as logged: route unknown


def test_a_settlement_without_data_is_an_envelope_finding_in_every_command(tmp_path: Path) -> None:
    log = GenLog(4)
    log.turn(1, "hello", "hi", head="prompt")
    log.events.insert(6, {"type": "assistant/attempt", "seq": 6, "time": 0})
    for seq, event in enumerate(log.events):
        event["seq"] = seq
    path = log.write(tmp_path / "session.v4.jsonl")
    assert "envelope" in codes(path)
    for command in (["cache-report", "--no-predict"], ["header-diff"]):
        result = CliRunner().invoke(main, [*command, str(path)])
        assert result.exception is None or isinstance(result.exception, SystemExit), command


@pytest.mark.parametrize("version", [2, 4])
def test_later_loaders_skip_an_unknown_event_marked_ignorable(tmp_path: Path, version: int) -> None:
    log = GenLog(version)
    log.turn(1, "hello", "hi", head="prompt" if version >= 3 else None)
    log.add("future/thing", {"x": 1}, ignorable=True)
    path = log.write(tmp_path / f"session.v{version}.jsonl")
    found = codes(path)
    # v2's successor migration (v2->v3) classifies every event, so the log gets a note too
    assert found == (["unknown-ignorable", "migration-refused"] if version == 2 else ["unknown-ignorable"])
    assert len(reconstruct_file(path).requests) == 1


def test_the_v1_loader_skips_an_unknown_event_marked_ignorable_too(tmp_path: Path) -> None:
    from logbuilder import LogBuilder

    log = LogBuilder(version=1)
    log.simple_turn(1, "hello", "hi", header_reason="initial")
    log.add("future/thing", {"x": 1}, ignorable=True)
    path = tmp_path / "session.v1.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in [log.header, *log.events]))
    assert codes(path) == ["unknown-ignorable"]


def test_a_message_prefix_never_reaches_a_request_after_v0(tmp_path: Path) -> None:
    log = GenLog(2)
    log.turn(1, "hello", "hi")
    log.events[3]["data"]["header"]["messagePrefix"] = [{"role": "user", "content": [{"type": "text",
                                                                                       "text": "PREFIX"}]}]
    path = log.write(tmp_path / "session.v2.jsonl")
    assert codes(path) == ["schema"]
    assert "PREFIX" not in json.dumps(body(path))


def test_a_range_cannot_expand_beyond_the_events_before_it(tmp_path: Path) -> None:
    log = GenLog(2)
    log.turn(1, "hello", "hi")
    log.events[2]["seq"] = 2**53 - 2                 # claims a huge seq ...
    log.events[2]["sourceEventSeqs"] = [[0, 2**53 - 3]]   # ... to cite a range that large
    path = log.write(tmp_path / "session.v2.jsonl")
    [report] = verify_path(path)
    assert any(f.code == "source-ranges" and "exceeds its event seq" in f.message for f in report.findings)


def test_an_in_history_prompt_leaves_the_head_and_its_placeholder(tmp_path: Path) -> None:
    log = GenLog(4)
    log.turn(1, "hello", "hi", head="{{system}}")
    log.prompt_turn(2, "a later prompt, appended mid-history", replaces=None)
    path = log.write(tmp_path / "session.v4.jsonl")
    second = reconstruct_file(path).requests[1]
    assert second.placeholders == ["system"] and second.extends_previous
    diff = build_header_diff([path])
    system = diff.filter(diff["field"] == "system")   # the head did not change (a scrubbed one never verifiably)
    assert system["change"].to_list() == ["unverifiable"] and system["seq"].to_list() == [12]


def test_a_v0_header_names_no_end_seed_marker(tmp_path: Path) -> None:
    from logbuilder import LogBuilder

    log = LogBuilder(isSeeded=True)
    log.simple_turn(1, "hello", "hi", header_reason="initial")
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in [log.header, *log.events]))
    assert codes(path) == []   # v0's cut is seedLength; an isSeeded flag asks for no marker
