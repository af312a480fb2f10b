"""`audit explain`: one mutation per cause — a header change, a compaction replace, a resume boundary, an unlogged
edit of a message — names the right event, the right message index and the right byte offset."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dsh_audit.cli import main
from dsh_audit.explain import explain_request
from dsh_audit.jsjson import dumps_bytes
from logbuilder import LogBuilder
from test_cache_report import TOOL_A, TOOL_B, steady_log, turn, write_jsonl


def explained(log: LogBuilder, turn_number: int) -> Any:
    return explain_request(log.source(), turn_number, 1, None)


def test_a_header_change_is_named_with_the_tools_divergence() -> None:
    log = steady_log()
    turn(log, 3, "more", 0, reason="change", tools=[TOOL_A, TOOL_B])
    header_seq = next(e["seq"] for e in reversed(log.events) if e["type"] == "request/header")
    result = explained(log, 3)
    assert (result.verdict, result.divergence.part) == ("explained", "tools")
    assert result.divergence.part_offset == len(dumps_bytes([TOOL_A])) - 1   # where the second tool begins
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
    cached, sent = (dumps_bytes(log.events[2]["data"]), dumps_bytes(log.events[summary]["data"]))
    offset = next(i for i, (a, b) in enumerate(zip(cached, sent, strict=False)) if a != b)
    assert result.divergence.part_offset == offset
    assert [(c.seq, c.type) for c in result.causes] == [(summary, "user/message")]


def test_a_resume_boundary_is_named_though_the_prefix_held() -> None:
    log = steady_log()
    end_seed = log.add("session/end-seed", {})
    turn(log, 3, "after restart", 0, reason="resume", tools=[TOOL_A])
    result = explained(log, 3)
    assert result.verdict == "explained" and result.divergence is None and result.appended == 1
    assert [c.type for c in result.causes] == ["session/end-seed", "request/header"]
    assert result.causes[0].seq == end_seed


def test_an_unlogged_edit_of_a_message_is_unexplained_at_that_message() -> None:
    log = steady_log()
    answer = next(e for e in log.events if e["type"] == "assistant/message")    # turn 1's answer
    block = {"type": "text", "text": answer["data"]["message"]["content"][0]["text"]}
    finish = next(i for i, e in enumerate(log.events) if e["type"] == "assistant/chunk"
                  and e["data"]["chunk"]["type"] == "finish")
    log.events.insert(finish, {"type": "assistant/chunk", "seq": 0, "time": 0, "data": {
        "turn": 1, "step": 1, "chunk": {"type": "block-end", "index": 0, "block": block}}})
    for seq, event in enumerate(log.events):
        event["seq"] = seq
    answer["data"]["message"]["content"][0]["text"] = "an answer edited after the model wrote it"
    result = explained(log, 2)
    assert (result.verdict, result.divergence.message_index, result.divergence.generated) == ("unexplained", 1, True)
    generated = dumps_bytes({**answer["data"]["message"], "content": [block]})
    edited = dumps_bytes(answer["data"]["message"])
    assert result.divergence.part_offset == next(
        i for i, (a, b) in enumerate(zip(generated, edited, strict=False)) if a != b)
    assert "edit the log does not record" in (result.needed or "")


def test_the_first_request_and_a_request_that_is_not_there(tmp_path: Path) -> None:
    log = steady_log()
    assert explained(log, 1).verdict == "first request"
    path = write_jsonl(log, tmp_path / "session.jsonl")
    result = CliRunner().invoke(main, ["explain", str(path), "9.9"])
    assert result.exit_code == 2 and "no request 9.9" in result.stderr
    assert CliRunner().invoke(main, ["explain", str(path)]).exit_code == 2


@pytest.mark.parametrize("fmt", ["text", "json"])
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
