"""The state and rules both verifiers share beyond the predicates of tests/test_rulebook.py: the dispatch state
(dsh_audit.fold.Dispatches), assistant provenance by generation, and the end of the log (open turn, unanswered
calls)."""

from __future__ import annotations

import pytest

from dsh_audit import rules
from dsh_audit.fold import Dispatches, end_seed_cause, header_causes, priced_usage
from dsh_audit.generations import Generation, generations
from dsh_audit.header import HeaderSnapshot, snapshot
from dsh_audit.vocabulary import vocabulary


def _header(seq: int, model: str = "m", reason: str = "initial") -> HeaderSnapshot:
    return snapshot(seq, {"reason": reason, "header": {"config": {"provider": "p", "model": model}}})


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
    extends, causes, problem = dispatches.attribute(header, 2, None)
    assert (extends, [cause.kind for cause in causes], problem) == (False, ["initial"], None)   # the first
    assert dispatches.attribute(header, 3, None) == (True, [], None)   # appended to
    assert dispatches.attribute(header, 3, 3) == (True, [], None)      # a rewrite of what was not sent yet
    assert dispatches.count == 3
    extends, causes, problem = dispatches.attribute(header, 3, 1)      # a replace changed a sent message
    assert not extends and not causes and problem is not None and "no logged event explains it" in problem
    dispatches.causes.append(end_seed_cause(9))
    extends, causes, problem = dispatches.attribute(header, 2, None)   # fewer messages, but a boundary logged
    assert not extends and [cause.kind for cause in causes] == ["end-seed"] and problem is None


def test_a_changed_model_breaks_the_prefix_unexplained_unless_its_header_is_logged() -> None:
    dispatches = Dispatches()
    first, second = _header(0), _header(5, model="other", reason="change")
    dispatches.attribute(first, 1, None)
    extends, causes, problem = dispatches.attribute(second, 1, None)
    assert not extends and not causes and problem == rules.prefix_break_problem(False, False, [])
    dispatches.causes += header_causes(second, first, 7)
    extends, causes, problem = dispatches.attribute(first, 1, None)
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
