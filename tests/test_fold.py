"""Unit tests of the projection and the request fold on hand-written minimal logs."""

from __future__ import annotations

import hashlib
import json

import pytest

from dsh_audit import LogRejected, reconstruct_source, verify_source
from dsh_audit.fold import RebuiltRequest
from logbuilder import MODEL, PROVIDER, LogBuilder


def requests_of(log: LogBuilder, **options: object) -> list[RebuiltRequest]:
    return reconstruct_source(log.source(), **options).requests  # type: ignore[arg-type]


def body(request: RebuiltRequest) -> dict[str, object]:
    assert request.body is not None
    assert hashlib.sha256(request.body).hexdigest() == request.sha256
    parsed: dict[str, object] = json.loads(request.body)
    return parsed


def codes(log: LogBuilder) -> list[str]:
    return [f.code for f in verify_source(log.source()).findings]


def two_turns() -> LogBuilder:
    log = LogBuilder()
    log.simple_turn(1, "hello", "hi there", header_reason="initial")
    log.simple_turn(2, "again", "sure")
    return log


def test_first_request_bytes_are_exact() -> None:
    first = requests_of(two_turns())[0]
    user = two_turns().events[2]["data"]
    message = json.dumps(user, separators=(",", ":"))
    expected = f'{{"provider":"{PROVIDER}","model":"{MODEL}","messages":[{message}],"system":"sys"}}'
    assert first.body == expected.encode()
    assert (first.turn, first.step, first.attempt, first.bound) == (1, 1, 1, "first-chunk")
    assert first.dispatch_seq == 4 and first.header_seq == 3


def test_second_request_appends_history_in_surface_order() -> None:
    log = two_turns()
    second = requests_of(log)[1]
    messages = body(second)["messages"]
    assert isinstance(messages, list)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1] == log.events[6]["data"]["message"]
    assert second.extends_previous and second.causes == []
    assert second.header_seq == 3   # carried forward from turn 1


def test_empty_assistant_content_projects_no_message() -> None:
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    log.user("go")
    log.header_event()
    log.add("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "finish", "reason": {"kind": "max-tokens"}}})
    log.add("assistant/message", {"turn": 1, "step": 1, "message": {
        "role": "assistant", "content": [], "source": {"kind": "model", "provider": PROVIDER, "model": MODEL},
        "id": "empty"}}, sourceEventSeqs=[4], surfaceOp="append")
    log.add("step/end", {"turn": 1, "step": 1})
    log.add("step/start", {"turn": 1, "step": 2})
    log.response(1, 2, "done")
    requests = requests_of(log)
    assert [r.message_count for r in requests] == [1, 1]
    assert requests[1].extends_previous


def test_retry_makes_two_attempts_and_a_chunkless_step_is_bounded_at_its_message() -> None:
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    log.user("go")
    log.header_event()
    log.add("assistant/chunk", {"turn": 1, "step": 1, "chunk": {
        "type": "finish", "reason": {"kind": "error", "failure": {"message": "boom", "code": "X"}}}})
    log.response(1, 1, "ok")
    log.add("step/end", {"turn": 1, "step": 1})
    log.add("step/start", {"turn": 1, "step": 2})
    log.add("assistant/message", {"turn": 1, "step": 2, "message": {
        "role": "assistant", "content": [], "source": {"kind": "model", "provider": PROVIDER, "model": MODEL},
        "id": "m2"}}, sourceEventSeqs=[], surfaceOp="append")
    requests = requests_of(log)
    assert [(r.step, r.attempt, r.bound) for r in requests] == [
        (1, 1, "first-chunk"), (1, 2, "first-chunk"), (2, 1, "first-response-event")]
    assert requests[0].finish == "error" and requests[1].finish == "stop"
    assert requests[0].sha256 == requests[1].sha256


def compaction_log() -> tuple[LogBuilder, int]:
    log = two_turns()
    log.add("turn/start", {"turn": 3})
    log.add("step/start", {"turn": 3, "step": 1})
    start = log.add("compaction/start", {"compactionId": "c1", "turn": 3})
    summary = log.add("compaction/summary", {"compactionId": "c1", "summary": [{"type": "text", "text": "S"}],
                                              "shadowedRange": {"start": 2, "end": 6}, "shadowedSeqs": [2, 6],
                                              "shadowedTokenCount": 9, "provider": PROVIDER, "model": MODEL})
    checkpoint = log.user("checkpoint", surfaceOp={"op": "replace", "start": 2, "end": 6},
                          sourceEventSeqs=[start, summary, 2, 6])
    log.add("compaction/end", {"compactionId": "c1", "turn": 3})
    log.user("third")
    log.response(3, 1, "fine")
    log.add("step/end", {"turn": 3, "step": 1})
    log.add("turn/end", {"turn": 3, "reason": {"kind": "completed"}})
    return log, checkpoint


def test_compaction_replace_shadows_range_and_is_named_as_the_cause() -> None:
    log, checkpoint = compaction_log()
    last = requests_of(log)[-1]
    messages = body(last)["messages"]
    assert isinstance(messages, list)
    texts = [m["content"][0]["text"] for m in messages]
    assert texts == ["checkpoint", "again", "sure", "third"]
    assert not last.extends_previous
    assert [c.kind for c in last.causes] == ["replace"] and last.causes[0].seq == checkpoint


def test_replace_naming_a_missing_node_is_refused() -> None:
    log, _ = compaction_log()
    log.events[-8]["surfaceOp"] = {"op": "replace", "start": 3, "end": 6}   # seq 3 is a header, not a node
    with pytest.raises(LogRejected, match="start seq 3 not found in surface"):
        requests_of(log)
    assert "replace-missing-node" in codes(log)


def test_replace_must_cite_every_shadowed_node() -> None:
    log, _ = compaction_log()
    log.events[-8]["sourceEventSeqs"] = [2]
    assert "surface-provenance" in codes(log)


def test_header_change_is_a_cause_naming_the_fields() -> None:
    log = LogBuilder()
    log.simple_turn(1, "a", "b", header_reason="initial")
    log.simple_turn(2, "c", "d", header_reason="change", tools=[{"name": "t", "description": "", "parameters": {}}])
    second = requests_of(log)[1]
    assert not second.extends_previous
    assert [(c.kind, c.detail) for c in second.causes] == [("header-change", "change: tools")]
    assert body(second)["tools"] == [{"name": "t", "description": "", "parameters": {}}]


def test_every_config_key_reaches_the_request() -> None:
    log = LogBuilder()
    log.simple_turn(1, "a", "b", header_reason="initial", reasoningEffort="high", temperature=0.5,
                    maxTokens=100, stop=["x"])
    keys = list(body(requests_of(log)[0]))
    assert keys == ["provider", "model", "reasoningEffort", "temperature", "maxTokens", "stop", "messages",
                    "system"]


def test_empty_system_and_tools_are_absent() -> None:
    log = LogBuilder()
    log.simple_turn(1, "a", "b", header_reason="initial", system="", tools=[])
    assert list(body(requests_of(log)[0])) == ["provider", "model", "messages"]


def test_legacy_user_message_is_upgraded_with_a_synthesized_id() -> None:
    log = LogBuilder(session_id="abc")
    log.add("turn/start", {"turn": 1, "trigger": {"kind": "user"}})
    log.add("user/message", {"content": [{"type": "text", "text": "old"}], "source": {"kind": "user"}},
            surfaceOp="append")
    log.add("step/start", {"turn": 1, "step": 1})
    log.header_event()
    log.response(1, 1, "new")
    message = body(requests_of(log)[0])["messages"][0]  # type: ignore[index]
    assert list(message) == ["content", "source", "id", "role"]
    assert message["id"] == "legacy-message:abc:1"


def test_legacy_assistant_and_tool_result_shapes_are_upgraded() -> None:
    log = LogBuilder(session_id="abc")
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    log.user("go")
    log.header_event()
    log.add("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "finish", "reason": {"kind": "tool-calls"}}})
    log.add("assistant/message", {"turn": 1, "step": 1, "content": [
        {"type": "tool-call", "id": "c1", "name": "bash", "arguments": "{}"}],
        "provenance": {"provider": PROVIDER, "model": MODEL}}, sourceEventSeqs=[4], surfaceOp="append")
    log.add("tool/result", {"turn": 1, "step": 1, "callId": "c1", "content": [{"type": "text", "text": "x"}],
                            "isError": False}, surfaceOp="append")
    log.add("step/end", {"turn": 1, "step": 1})
    log.add("step/start", {"turn": 1, "step": 2})
    log.response(1, 2, "done")
    messages = body(requests_of(log)[-1])["messages"]
    assert isinstance(messages, list)
    assert messages[1] == {"id": "legacy-message:abc:5", "role": "assistant", "content": [
        {"type": "tool-call", "id": "c1", "name": "bash", "arguments": "{}"}],
        "source": {"provider": PROVIDER, "model": MODEL, "kind": "model"}}
    assert messages[2]["source"] == {"kind": "tool", "callId": "c1"}
    assert messages[2]["id"] == "legacy-message:abc:6"
    assert "tool-pairing" not in codes(log)


def prefixed(prefix: object) -> LogBuilder:
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    log.user("go")
    log.add("step/start", {"turn": 1, "step": 1})
    log.add("request/header", {"header": {"config": {"provider": PROVIDER, "model": MODEL}, "system": "s",
                                          "messagePrefix": prefix}, "reason": "initial"})
    log.response(1, 1, "ok")
    return log


def test_legacy_message_prefix_is_prepended_or_flagged_or_dropped() -> None:
    opener = {"id": "p1", "role": "user", "content": [{"type": "text", "text": "skills"}],
              "source": {"kind": "plugin", "plugin": "x"}}
    real = requests_of(prefixed([opener]))[0]
    assert real.prefix == "prepended"
    assert body(real)["messages"][0] == opener  # type: ignore[index]
    dropped = requests_of(prefixed([opener]), message_prefix="drop")[0]
    assert dropped.prefix == "dropped" and len(body(dropped)["messages"]) == 1  # type: ignore[arg-type]
    scrubbed = requests_of(prefixed(["{{messagePrefix}}"]))[0]
    assert scrubbed.prefix == "scrubbed" and scrubbed.sha256 == dropped.sha256


def test_unknown_event_refuses_unless_ignorable() -> None:
    log = two_turns()
    log.add("future/thing", {"x": 1})
    with pytest.raises(LogRejected, match="unknown to this harness"):
        requests_of(log)
    log.events[-1]["ignorable"] = True
    assert len(requests_of(log)) == 2
    # read and skipped; the note says the official v0->v1 migration would refuse it even so
    assert codes(log) == ["unknown-ignorable", "migration-refused"]


def test_seq_gap_and_legacy_header_delta_are_findings() -> None:
    log = two_turns()
    log.events[5]["seq"] = 99
    assert "seq-gap" in codes(log)
    log = two_turns()
    log.add("request/header-delta", {})
    assert "legacy-rejected" in codes(log)


def test_request_without_header_is_a_finding() -> None:
    log = LogBuilder()
    log.simple_turn(1, "a", "b")
    assert "no-header" in codes(log)


def test_clean_log_verifies_clean() -> None:
    assert codes(two_turns()) == []
    log, _ = compaction_log()
    assert codes(log) == []


def test_a_child_log_marks_its_lineage_requests_as_the_parents() -> None:
    log = LogBuilder(session_id="child", parentSession="parent", seedLength=9)
    log.simple_turn(1, "seeded", "from parent", header_reason="initial")
    log.add("session/end-seed", {})
    assert log.next_seq == 10
    log.simple_turn(2, "own", "child answer", header_reason="resume")
    first, second = requests_of(log)
    assert (first.inherited, first.owner) == (True, "parent")
    assert (second.inherited, second.owner) == (False, "child")
    assert [c.kind for c in second.causes] == ["end-seed", "resume"]


def pruned_log(*, before_sent: bool) -> tuple[LogBuilder, int]:
    """A tool result rewritten by the pruner (a single-node replace, content only): before the request that first
    sends it, or after that request."""
    tool = {"name": "read", "description": "read a file", "parameters": {"type": "object", "properties": {}}}
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    log.user("read it")
    log.header_event("initial", tools=[tool])
    log.response(1, 1, "reading", tool_calls=[("c1", "read")])
    result = log.tool_result(1, 1, "c1", "a long file " * 50)
    log.add("step/end", {"turn": 1, "step": 1})
    log.add("step/start", {"turn": 1, "step": 2})
    if not before_sent:
        log.response(1, 2, "read")
        log.add("step/end", {"turn": 1, "step": 2})
        log.add("step/start", {"turn": 1, "step": 3})
    pruned = log.tool_result(1, 1, "c1", "[pruned]", surfaceOp={"op": "replace", "start": result, "end": result},
                             sourceEventSeqs=[result])
    original = next(event for event in log.events if event.get("seq") == result)
    log.events[-1]["data"]["message"]["id"] = original["data"]["message"]["id"]   # a rewrite changes only content
    log.response(1, 3 if not before_sent else 2, "done")
    log.add("step/end", {"turn": 1, "step": 3 if not before_sent else 2})
    log.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    return log, pruned


@pytest.mark.parametrize("before_sent", [True, False], ids=["before-it-was-sent", "after-it-was-sent"])
def test_a_rewrite_of_what_no_request_sent_yet_is_an_append(before_sent: bool) -> None:
    """issue 17: the pruner rewriting a tool result before it was first sent leaves the wire an append-extension;
    a rewrite of a message an earlier request sent breaks it. Either way the replace is the logged cause."""
    log, pruned = pruned_log(before_sent=before_sent)
    assert codes(log) == []
    requests = requests_of(log, bodies=True)
    last, previous = requests[-1], requests[-2]
    assert last.extends_previous is before_sent
    assert [c.kind for c in last.causes] == ["replace"] and last.causes[0].seq == pruned
    previous_messages, messages = body(previous)["messages"], body(last)["messages"]
    assert isinstance(previous_messages, list) and isinstance(messages, list)
    assert (messages[:len(previous_messages)] == previous_messages) is before_sent   # what the wire shows
