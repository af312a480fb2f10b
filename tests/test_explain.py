"""`audit explain`: one mutation per cause — a header change, a compaction replace, a resume boundary, an unlogged
edit of a message — names the right event, the right message index and the right byte offset on the wire; a
message that differs only as logged is listed apart; a request the adapter cannot render is compared as logged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dsh_audit.cli import main
from dsh_audit.deepseek_wire import to_wire_body, wire_history_message, wire_prompt_segments
from dsh_audit.explain import LoggedOnly, explain_request
from dsh_audit.jsjson import dumps_bytes
from dsh_audit.tokens import count_tokens
from dsh_audit.walker import Walker
from logbuilder import MODEL, LogBuilder
from test_cache_report import TOOL_A, TOOL_B, steady_log, turn, write_jsonl

COMPACTED = ["source.kind", "source.plugin", "source.compactionId", "id"]   # message 0, alike on the wire


def explained(log: LogBuilder, turn_number: int) -> Any:
    return explain_request(log.source(), turn_number, 1, None)


def on_wire(message: dict[str, Any]) -> bytes:
    """A logged user or assistant message as the DeepSeek adapter sends it (one wire message)."""
    [wire] = wire_history_message(message, MODEL)
    return dumps_bytes(wire)


def first_difference(a: bytes, b: bytes) -> int:
    return next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)


def compacted_log(**header: Any) -> LogBuilder:
    """Turns 1 and 2, then a compaction that rewrites message 0 with the same text (only its logged id and
    source change) and a replace that edits message 2: the wire first differs at message 2."""
    log = LogBuilder()
    turn(log, 1, "hello " * 100, 0, reason="initial", **{"tools": [TOOL_A], **header})
    turn(log, 2, "again " * 100, 512)
    first, second = (e["seq"] for e in log.events if e["type"] == "user/message")
    log.add("turn/start", {"turn": 3})
    log.add("step/start", {"turn": 3, "step": 1})
    summary = log.user("hello " * 100, surfaceOp={"op": "replace", "start": first, "end": first},
                       sourceEventSeqs=[first])
    log.events[summary]["data"]["source"] = {"kind": "plugin", "plugin": "compact", "compactionId": "c2"}
    log.user("again, edited", surfaceOp={"op": "replace", "start": second, "end": second}, sourceEventSeqs=[second])
    log.response(3, 1, "ok")
    return log


def rebuilt_body(log: LogBuilder, turn_number: int) -> Any:
    """The logged request body of turn `turn_number`'s first request."""
    walked = Walker(log.source(), bodies=True, on_finding=lambda _finding: None)
    return next(json.loads(w.closed.body) for w in walked if w.closed is not None and w.closed.turn == turn_number)


def test_a_header_change_is_named_with_the_tools_divergence() -> None:
    log = steady_log()
    turn(log, 3, "more", 0, reason="change", tools=[TOOL_A, TOOL_B])
    header_seq = next(e["seq"] for e in reversed(log.events) if e["type"] == "request/header")
    result = explained(log, 3)
    assert (result.verdict, result.divergence.part) == ("explained", "tools")
    tools = dumps_bytes(to_wire_body({"messages": [], "tools": [TOOL_A]})["tools"])
    assert result.divergence.part_offset == len(tools) - 1   # where the second tool begins, on the wire
    assert [(c.seq, c.type) for c in result.causes] == [(header_seq, "request/header")]
    assert "tools" in result.causes[0].reason


def test_a_compaction_replace_is_named_with_the_replaced_message() -> None:
    log = steady_log()
    log.add("turn/start", {"turn": 3})
    log.add("step/start", {"turn": 3, "step": 1})
    summary = log.user("summary of earlier turns", surfaceOp={"op": "replace", "start": 2, "end": 16},
                       sourceEventSeqs=[2, 7, 12, 16])
    log.response(3, 1, "ok")
    result = explained(log, 3)
    assert (result.verdict, result.divergence.part, result.divergence.message_index) == ("explained", "message", 0)
    assert result.divergence.wire_index == 1   # after the header's system prompt
    cached, sent = on_wire(log.events[2]["data"]), on_wire(log.events[summary]["data"])
    assert result.divergence.part_offset == first_difference(cached, sent)
    assert [(c.seq, c.type) for c in result.causes] == [(summary, "user/message")]


def test_a_resume_boundary_is_named_though_the_prefix_held() -> None:
    log = steady_log()
    end_seed = log.add("session/end-seed", {})
    turn(log, 3, "after restart", 0, reason="resume", tools=[TOOL_A])
    result = explained(log, 3)
    assert result.verdict == "explained" and result.divergence is None and result.appended == 1
    assert [c.type for c in result.causes] == ["session/end-seed", "request/header"]
    assert result.causes[0].seq == end_seed


def edit_first_answer_unlogged(log: LogBuilder) -> tuple[dict[str, Any], dict[str, Any]]:
    """Turn 1's answer edited after the model generated it: its block-end chunk says what the model wrote, and no
    event says it changed. The answer's event (edited) and the block the model generated."""
    answer = next(e for e in log.events if e["type"] == "assistant/message")
    block = {"type": "text", "text": answer["data"]["message"]["content"][0]["text"]}
    finish = next(i for i, e in enumerate(log.events) if e["type"] == "assistant/chunk"
                  and e["data"]["chunk"]["type"] == "finish")
    log.events.insert(finish, {"type": "assistant/chunk", "seq": 0, "time": 0, "data": {
        "turn": 1, "step": 1, "chunk": {"type": "block-end", "index": 0, "block": block}}})
    for seq, event in enumerate(log.events):
        event["seq"] = seq
    answer["data"]["message"]["content"][0]["text"] = "an answer edited after the model wrote it"
    return answer, block


def test_an_unlogged_edit_of_a_message_is_unlogged_at_that_message() -> None:
    log = steady_log()
    answer, block = edit_first_answer_unlogged(log)
    result = explained(log, 2)
    assert (result.verdict, result.divergence.message_index, result.divergence.generated) == ("unlogged", 1, True)
    generated = on_wire({**answer["data"]["message"], "content": [block]})
    edited = on_wire(answer["data"]["message"])
    assert result.divergence.part_offset == first_difference(generated, edited)
    assert "edit the log does not record" in (result.needed or "")


def test_the_first_request_and_a_request_that_is_not_there(tmp_path: Path) -> None:
    log = steady_log()
    assert explained(log, 1).verdict == "first request"
    path = write_jsonl(log, tmp_path / "session.jsonl")
    result = CliRunner().invoke(main, ["explain", str(path), "9.9"])
    assert result.exit_code == 2 and "no request 9.9" in result.stderr and result.stderr.count("\n") == 1
    assert CliRunner().invoke(main, ["explain", str(path)]).exit_code == 2


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_cli_exit_codes_and_formats(tmp_path: Path, fmt: str) -> None:
    log = steady_log()
    turn(log, 3, "more", 0, reason="change", tools=[TOOL_A, TOOL_B])
    path = write_jsonl(log, tmp_path / "session.jsonl")
    result = CliRunner().invoke(main, ["explain", str(path), "3.1#1", "--format", fmt])
    assert result.exit_code == 0
    if fmt == "json":
        document = json.loads(result.stdout)
        assert document["verdict"] == "explained" and document["divergence"]["part"] == "tools"
    else:
        assert "first divergence: tools" in result.stdout and "logged: seq" in result.stdout


def test_a_message_alike_on_the_wire_is_logged_only_and_the_divergence_is_the_next_change() -> None:
    """The compaction gave message 0 a new id and source, not new text: the wire first differs at message 2."""
    result = explained(compacted_log(), 3)
    divergence = result.divergence
    assert (result.verdict, result.basis, divergence.part, divergence.message_index) == ("explained", "wire",
                                                                                        "message", 2)
    assert divergence.wire_index == 3   # the header's system prompt is wire message 0
    assert divergence.part_offset == len(b'{"role":"user","content":"again')
    assert result.logged_only == [LoggedOnly(0, COMPACTED)]
    assert [c.type for c in result.causes] == ["user/message", "user/message"]
    wire = to_wire_body(rebuilt_body(compacted_log(), 2))   # request 2.1: messages 0..2 as the cache holds them
    prompt = wire_prompt_segments(wire, generation_prompt=False)
    ahead = count_tokens("".join(prompt[:3]))   # the head (system, tools), messages 0 and 1
    assert ahead <= divergence.token_offset < ahead + count_tokens(prompt[3])
    assert divergence.body_offset == dumps_bytes(wire).index(b'"again ') + len(b'"again')


@pytest.mark.parametrize(("config", "why"), [
    ({"provider": "openrouter"}, 'provider "openrouter" is not one DeepSeek\'s adapter serves'),
    ({"tools": "{{tools}}"}, 'request tools is "{{tools}}", not an array: the wire body is unknowable')])
def test_a_request_the_adapter_cannot_render_is_compared_as_logged(config: dict[str, Any], why: str) -> None:
    result = explained(compacted_log(**config), 3)
    assert (result.basis, result.divergence.part, result.divergence.message_index) == ("logged", "message", 0)
    assert result.divergence.wire_index is None and result.logged_only == []
    assert result.note == f"compared as logged, not on the wire: {why}"


def test_the_human_and_json_views_carry_the_wire_and_the_logged_only_messages(tmp_path: Path) -> None:
    path = write_jsonl(compacted_log(), tmp_path / "session.jsonl")
    text = CliRunner().invoke(main, ["explain", str(path), "3.1", "--color", "never"], env={"COLUMNS": "200"})
    assert text.exit_code == 0
    lines = text.stdout.splitlines()
    assert lines[1] == "no usage logged: what the provider read from its cache is unknown"   # cache-report's verdict
    assert lines[2] == "sent 0 ms after 2.1#1; cache block 128 tokens"   # the builder logs every event at time 0
    assert lines[3].startswith("first divergence: message 2, wire message 3, byte 31 of it (byte ")
    assert "of the wire body), after " in lines[3]
    assert lines[4] == '  cached:  {"role":"user","content":"' + "again " * 7 + "aga…"
    assert lines[5] == '  request: {"role":"user","content":"again, edited"}'
    assert lines[6] == f"logged only, alike on the wire: message 0 ({', '.join(COMPACTED)})"
    document = json.loads(CliRunner().invoke(main, ["explain", str(path), "3.1", "--format", "json"]).stdout)
    assert (document["basis"], document["note"], document["divergence"]["wire_index"]) == ("wire", None, 3)
    assert document["logged_only"] == [{"message_index": 0, "fields": COMPACTED}]
    foreign = write_jsonl(compacted_log(provider="openrouter"), tmp_path / "foreign.jsonl")
    fallback = CliRunner().invoke(main, ["explain", str(foreign), "3.1", "--color", "never"], env={"COLUMNS": "200"})
    assert fallback.exit_code == 0
    assert fallback.stdout.splitlines()[1] == ('compared as logged, not on the wire: provider "openrouter" is not '
                                               "one DeepSeek's adapter serves")
    assert "first divergence: message 0, byte 657 of it (byte " in fallback.stdout
    assert "of the request body)" in fallback.stdout and "logged only" not in fallback.stdout
