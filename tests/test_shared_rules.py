"""The state and rules both verifiers share beyond the predicates of tests/test_rulebook.py: the dispatch state
(dsh_audit.fold.Dispatches), assistant provenance by generation, and the end of the log (open turn, unanswered
calls)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from dsh_audit import rules
from dsh_audit.fold import Dispatches, end_seed_cause, header_causes, priced_usage
from dsh_audit.generations import Generation, generations
from dsh_audit.header import HeaderSnapshot, snapshot
from dsh_audit.jsjson import dumps_bytes
from dsh_audit.surface import Surface, SurfaceError, derive_message
from dsh_audit.vocabulary import vocabulary


def _header(seq: int, model: str = "m", reason: str = "initial") -> HeaderSnapshot:
    return snapshot(seq, {"reason": reason, "header": {"config": {"provider": "p", "model": model}}})


class _Sent:
    """What Dispatches.attribute reads of a surface: its visible messages and what a replace changed since the last
    request, which it settles."""

    def __init__(self, count: int, changed_from: int | None) -> None:
        self.visible, self.changed_from = [b"{}"] * count, changed_from

    def settled(self) -> None:
        self.changed_from = None


def _sent(count: int, changed_from: int | None) -> Any:
    return _Sent(count, changed_from)


def test_attempts_are_numbered_within_a_step_and_an_untraced_response_is_none() -> None:
    dispatches = Dispatches()
    assert dispatches.chunkless((1, 1))
    assert [dispatches.number((1, 1)), dispatches.number((1, 1)), dispatches.number((1, 2))] == [1, 2, 1]
    assert not dispatches.chunkless((1, 1))
    dispatches.step_started()
    assert dispatches.chunkless((1, 1)) and dispatches.number((1, 1)) == 1
    dispatches.untraced((1, 3))
    assert not dispatches.chunkless((1, 3)) and dispatches.number((1, 3)) == 1


def test_a_request_extends_the_last_one_until_the_prompt_or_its_messages_change() -> None:
    dispatches = Dispatches()
    header = _header(0)
    dispatches.causes += header_causes(None, header, 0)
    extends, causes, problem = dispatches.attribute(header, _sent(2, None))
    assert (extends, [cause.kind for cause in causes], problem) == (False, ["initial"], None)   # the first
    assert dispatches.attribute(header, _sent(3, None)) == (True, [], None)   # appended to
    assert dispatches.attribute(header, _sent(3, 3)) == (True, [], None)      # a rewrite of what was not sent yet
    assert dispatches.count == 3
    changed = _sent(3, 1)
    extends, causes, problem = dispatches.attribute(header, changed)      # a replace changed a sent message
    assert changed.changed_from is None   # settled: the next request is compared with this one
    assert not extends and not causes and problem is not None and "no logged event explains it" in problem
    dispatches.causes.append(end_seed_cause(9))
    extends, causes, problem = dispatches.attribute(header, _sent(2, None))   # fewer messages, but a boundary logged
    assert not extends and [cause.kind for cause in causes] == ["end-seed"] and problem is None


def test_a_changed_model_breaks_the_prefix_unexplained_unless_its_header_is_logged() -> None:
    dispatches = Dispatches()
    first, second = _header(0), _header(5, model="other", reason="change")
    dispatches.attribute(first, _sent(1, None))
    extends, causes, problem = dispatches.attribute(second, _sent(1, None))
    assert not extends and not causes and problem == rules.prefix_break_problem(False, False, [])
    dispatches.causes += header_causes(second, first, 7)
    extends, causes, problem = dispatches.attribute(first, _sent(1, None))
    assert not extends and [cause.kind for cause in causes] == ["model-change"] and problem is None
    assert dispatches.previous_header is first and dispatches.previous_count == 1


@pytest.mark.parametrize("generation", generations(), ids=lambda generation: generation.label)
def test_assistant_provenance_follows_the_schemas(generation: Generation) -> None:
    forbidden = "assistant/message" in vocabulary(generation.version).forbids_sources
    assert generation.assistant_sources is not forbidden
    problem = rules.assistant_sources_problem(generation.assistant_sources, True, generation.label)
    assert (problem is not None) is forbidden
    assert rules.assistant_sources_problem(generation.assistant_sources, False, generation.label) is None
    if problem is not None:
        assert problem.startswith(f"format {generation.label} assistant/message carries sourceEventSeqs")


def test_the_end_of_a_log_is_worded_once() -> None:
    assert rules.open_turn_problem(None) is None
    assert rules.open_turn_problem(3) == "log ends inside turn 3: the session was cut off"
    assert rules.unanswered_call_problem("c1", False) == "tool call 'c1' has no tool/result"
    assert rules.unanswered_call_problem("c1", True).startswith("tool call 'c1' has no tool/result (the turn is "
                                                                 "still open")


def test_a_request_is_priced_with_the_usage_its_generation_puts_first() -> None:
    logged, streamed = {"input": 1}, {"input": 2}
    assert priced_usage(True, logged, streamed) is logged and priced_usage(True, None, streamed) is streamed
    assert priced_usage(False, logged, streamed) is streamed and priced_usage(False, logged, None) is logged
    assert priced_usage(True, None, None) is None and priced_usage(False, None, None) is None


def _tool_event(seq: int, content: str, **envelope: Any) -> dict[str, Any]:
    message = {"role": "tool", "toolCallId": "c1", "content": content, "source": {"callId": "c1"}}
    return {"type": "tool/result", "seq": seq, "data": {"turn": 1, "step": 1, "message": message}, **envelope}


def test_both_engines_surfaces_are_one_whether_fed_parsed_events_or_what_the_fast_path_holds() -> None:
    """The full verifier's append/replace and the fast path's push/splice (stored bytes, a tool/result's line
    read only to check a rewrite) leave the same nodes, messages, head and changed index, and refuse alike."""
    events = [
        {"type": "system/message", "seq": 0, "data": {"message": {"role": "system", "content": "be brief"}}},
        {"type": "user/message", "seq": 1, "data": {"role": "user", "content": "hi"}},
        _tool_event(2, "ok"),
        {"type": "user/message", "seq": 3, "data": {"role": "user", "content": "more"}},
        _tool_event(4, "shorter", surfaceOp={"op": "replace", "startSeq": 2, "endSeq": 2}, sourceEventSeqs=[2]),
    ]
    full = Surface(protect_head=True)
    fast = Surface(protect_head=True, tool_data=lambda line: orjson.loads(line)["data"])
    for event in events:
        seq, op = event["seq"], event.get("surfaceOp")
        message = derive_message(event)
        stored = None if message is None else dumps_bytes(message)
        line = orjson.dumps(event)
        if op is None:
            full.append(seq, event)
            fast.push(seq, event["type"], stored, line)
        else:
            assert full.replace(seq, event, op) == fast.splice(seq, event["type"], op["startSeq"], op["endSeq"],
                                                               lambda shadowed: None, stored, line) == [2]
    for surface in (full, fast):
        assert surface.nodes == [0, 1, 4, 3] and surface.head_is_system and surface.generation == 1
        assert surface.changed_from == 2 and list(surface.tool_results) == [4]
    assert full.visible == fast.visible
    edited = _tool_event(5, "x", surfaceOp={"op": "replace", "startSeq": 4, "endSeq": 4}, sourceEventSeqs=[4])
    edited["data"]["step"] = 2   # a rewrite may change only the content
    with pytest.raises(SurfaceError, match="may change only content") as refused:
        full.replace(5, edited, edited["surfaceOp"])
    with pytest.raises(SurfaceError, match="may change only content"):
        fast.splice(5, "tool/result", 4, 4, lambda shadowed: None, b"{}", orjson.dumps(edited))
    assert refused.value.code == "surface-provenance"
    headless = Surface(protect_head=True)
    headless.push(0, "user/message", b"{}")
    with pytest.raises(SurfaceError) as late:
        headless.push(1, "system/message", b"{}")
    assert late.value.code == "system-head" and str(late.value) == rules.head_append_problem(False)
