"""dsh_audit.jsjson against hand rules and, differentially, against node's JSON.stringify(JSON.parse(text))."""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import random
import shutil
import struct
import subprocess
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest_reference import LOGS_ROOT
from dsh_audit import jsjson
from dsh_audit.jsjson import dumps, dumps_bytes, dumps_pure, js_number, same_text

NODE_SCRIPT = Path(__file__).parent / "js" / "stringify.mjs"
LOGS_DIR = LOGS_ROOT


def node_stringify(texts: list[bytes]) -> list[str | None]:
    """JSON.stringify(JSON.parse(text)) for each text, from one node process; None where JSON.parse threw."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node not found on PATH: the JSON.stringify differential tests need Node.js (v20+)")
    assert all(b"\n" not in text for text in texts)
    proc = subprocess.run([node, str(NODE_SCRIPT)], input=b"\n".join(texts) + b"\n",
                          capture_output=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    lines = proc.stdout.decode("utf-8").split("\n")  # not splitlines(): U+2028 is raw in the output
    assert lines.pop() == ""
    assert len(lines) == len(texts)
    return [line[1:] if line.startswith("=") else None for line in lines]


# --- hand cases: (python value, JSON.stringify output, whether json.dumps(value) is valid JSON for node)
HAND_CASES: list[tuple[object, str, bool]] = [
    # strings
    ('"\\/', '"\\"\\\\/"', True),
    ("\b\f\n\r\t", '"\\b\\f\\n\\r\\t"', True),
    ("\x00\x01\x0b\x1f", '"\\u0000\\u0001\\u000b\\u001f"', True),
    ("\x7f\x80\u2028\u2029\ufeff", '"\x7f\x80\u2028\u2029\ufeff"', True),
    ("é中😀", '"é中😀"', True),
    ("\ud800", '"\\ud800"', True),
    ("a\udfffb\udbff", '"a\\udfffb\\udbff"', True),
    ("\udc00\ud800", '"\\udc00\\ud800"', True),  # low then high: two lone surrogates
    ("\ud83d\ude00", '"😀"', True),  # a pair held as two code points is one character to JS
    # integers
    (0, "0", True),
    (-7, "-7", True),
    (2**53, "9007199254740992", True),
    (2**53 + 1, "9007199254740992", True),
    (-(2**53) - 1, "-9007199254740992", True),
    (2**60, "1152921504606847000", True),
    (2**64, "18446744073709552000", True),
    (10**21 - 1, "1e+21", True),
    (10**21, "1e+21", True),
    (123456789012345678901234567890, "1.2345678901234568e+29", True),
    (2**1024 - 2**970 - 1, "1.7976931348623157e+308", True),
    (2**1024 - 2**970, "null", True),  # rounds to Infinity
    (-(2**1100), "null", True),
    # floats
    (1.0, "1", True),
    (-0.0, "0", True),
    (100.0, "100", True),
    (0.1, "0.1", True),
    (-123.456, "-123.456", True),
    (1e-7, "1e-7", True),
    (1.5e-7, "1.5e-7", True),
    (0.000001, "0.000001", True),
    (0.0000015, "0.0000015", True),
    (9.9e-6, "0.0000099", True),
    (1.5e-5, "0.000015", True),
    (-0.0001, "-0.0001", True),
    (9.5e15, "9500000000000000", True),
    (1000000000000000.5, "1000000000000000.5", True),
    (1e16, "10000000000000000", True),
    (1.2345678901234568e20, "123456789012345680000", True),
    (9.999999999999999e20, "999999999999999900000", True),
    (1e21, "1e+21", True),
    (1.5e300, "1.5e+300", True),
    (5e-324, "5e-324", True),
    (2.2250738585072014e-308, "2.2250738585072014e-308", True),
    (1.7976931348623157e308, "1.7976931348623157e+308", True),
    (float("nan"), "null", False),
    (float("inf"), "null", False),
    (float("-inf"), "null", False),
    # literals and containers
    (None, "null", True),
    (True, "true", True),
    (False, "false", True),
    ([], "[]", True),
    ({}, "{}", True),
    ({"a": [1, {"b": None}], "": ""}, '{"a":[1,{"b":null}],"":""}', True),
    ([1.5, {"x": "1.5e3 -2.0", "y": -2.5e-8}, [3, 4.0]], '[1.5,{"x":"1.5e3 -2.0","y":-2.5e-8},[3,4]]', True),
    ({"k\ud800": 1.0}, '{"k\\ud800":1}', True),
    # escaped quotes and backslashes must not derail the float rewrite
    (['"', "1.0", 2.0, "\\", "-3.0e5", -4.0], '["\\"","1.0",2,"\\\\","-3.0e5",-4]', True),
    ({"a\"b": 1.0, "c\\": [1e-7, "\\\"", 1e16]}, '{"a\\"b":1,"c\\\\":[1e-7,"\\\\\\"",10000000000000000]}', True),
    # key order: array indices (up to 2**32 - 2) first, ascending; the rest in insertion order
    ({"b": 1, "2": 2, "1": 3, "01": 4, "4294967294": 5, "4294967295": 6, "-1": 7, "1.5": 8, "0": 9},
     '{"0":9,"1":3,"2":2,"4294967294":5,"b":1,"01":4,"4294967295":6,"-1":7,"1.5":8}', True),
    ({"\\": {"10": 0, "9": 0}}, '{"\\\\":{"9":0,"10":0}}', True),
]


def _nested_lists(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth):
        value = [value]
    return value


HAND_CASES.append((_nested_lists(400), "[" * 401 + "]" * 401, True))  # deeper than orjson's 255 limit


@pytest.mark.parametrize(("value", "expected", "_valid_json"), HAND_CASES)
def test_hand_case(value: object, expected: str, _valid_json: bool) -> None:
    assert dumps(value) == expected
    assert dumps_pure(value) == expected
    assert dumps_bytes(value) == expected.encode()


def test_hand_cases_agree_with_node() -> None:
    cases = [(value, expected) for value, expected, valid_json in HAND_CASES if valid_json]
    results = node_stringify([json.dumps(value).encode() for value, _ in cases])
    assert [expected for _, expected in cases] == results


def test_js_number_on_floats_from_text() -> None:
    assert [js_number(float(text)) for text in ("1E2", "-0", "1e400", "0.1e-5", "1e-6")] == [
        "100", "0", "null", "0.000001", "0.000001"]


def test_orjson_floats_kept_as_is_match_js() -> None:
    """The fast path keeps orjson's text for floats outside integral / [1e-6, 1e-5); it must be JS's."""
    rng = random.Random(2019)
    bit_patterns = (struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(100_000))
    decimals = (float(f"{rng.randrange(1, 10 ** rng.randint(1, 17))}e{rng.randint(-40, 0)}")
                for _ in range(100_000))
    kept = [x for x in itertools.chain(bit_patterns, decimals)
            if math.isfinite(x) and not jsjson._orjson_float_differs(x)]
    assert len(kept) > 130_000
    assert [x for x in kept if orjson.dumps(x).decode() != js_number(x)] == []


def test_non_json_values_are_refused() -> None:
    with pytest.raises(TypeError, match="not a JSON value: object"):
        dumps(object())
    with pytest.raises(TypeError, match="keys must be str"):
        dumps({1: 2})


# --- property test: hypothesis values, one node run for the whole batch
_SPECIAL_CHARS = st.sampled_from([*'"\\/\b\f\n\r\t\x00\x01\x1f\x7f\x80\u2028\u2029\ufeff\uffff😀é\u0300',
                                   *"0159.eE-+:,{}[] ", "\ud800", "\udbff", "\udc00", "\udfff"])
_CHARS = st.one_of(_SPECIAL_CHARS, st.characters(exclude_categories=()))  # () keeps surrogates (Cs)
_TEXT = st.text(_CHARS, max_size=12)
_KEYS = st.one_of(
    _TEXT,
    st.from_regex(r"\A(0|[1-9][0-9]{0,10})\Z"),
    st.sampled_from(["4294967294", "4294967295", "01", "-1", "1.5", "__proto__", " 1", "１"]),
)
_FLOATS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-(2**70), 2**70).map(float),
    st.floats(min_value=-1e-5, max_value=1e-5, allow_nan=False),
    st.sampled_from([1e21, 9.999999999999999e20, 1e-7, 9.99999999999999e-8, 1e-6, 0.1 + 0.2]),
)
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(-(2**1100), 2**1100),
                     _FLOATS, _TEXT)
JSON_VALUES = st.recursive(
    _SCALARS,
    lambda children: st.lists(children, max_size=6) | st.dictionaries(_KEYS, children, max_size=6),
    max_leaves=30,
)


def _collect(strategy: st.SearchStrategy[object], count: int) -> list[object]:
    """Draw `count` values; the comparison happens afterwards so node runs once for all of them."""
    drawn: list[object] = []

    @settings(max_examples=count, database=None, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(strategy)
    def draw(value: object) -> None:
        drawn.append(value)

    draw()
    return drawn


def _mismatches(texts: list[bytes], expected: list[str | None]) -> list[tuple[bytes, str, str | None]]:
    """(text, ours, node's) for every text where a decode-and-dumps route disagrees with node."""
    wrong = []
    for text, want in zip(texts, expected, strict=True):
        parsed = json.loads(text)
        routes = [dumps(parsed), dumps_pure(parsed), dumps_bytes(parsed).decode()]
        with contextlib.suppress(orjson.JSONDecodeError):  # orjson refuses lone surrogates and 1e400
            routes.append(dumps(orjson.loads(text)))
        wrong.extend((text, got, want) for got in routes if got != want)
    return sorted(wrong, key=lambda case: len(case[0]))


def test_matches_node_on_generated_values() -> None:
    values = _collect(JSON_VALUES, 1500)
    texts = [json.dumps(value).encode() for value in values]  # ASCII; lone surrogates become \udxxx
    expected = node_stringify(texts)
    assert None not in expected
    assert _mismatches(texts, expected)[:5] == []


def test_matches_node_on_number_literals() -> None:
    literal = st.from_regex(r"\A-?(0|[1-9][0-9]{0,25})(\.[0-9]{1,25})?([eE][-+]?[0-9]{1,3})?\Z")
    arrays = st.lists(literal, min_size=1, max_size=8).map(lambda parts: "[" + ",".join(parts) + "]")
    texts = [text.encode() for text in _collect(arrays, 800)]  # type: ignore[union-attr]
    expected = node_stringify(texts)
    assert None not in expected
    assert _mismatches(texts, expected)[:5] == []


def test_matches_node_on_every_log_line() -> None:
    if not LOGS_DIR.is_dir():
        pytest.fail(f"log corpus not found at {LOGS_DIR} (set DSH_LOGS)")
    texts: list[bytes] = []
    for path in sorted(LOGS_DIR.rglob("*.jsonl")):
        for line in path.read_bytes().split(b"\n"):
            try:
                orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # blank or unparsable line
            texts.append(line)
    assert len(texts) > 1000
    expected = node_stringify(texts)
    wrong = [(text, dumps(value), want) for text, want in zip(texts, expected, strict=True)
             if dumps(value := orjson.loads(text)) != want or dumps_pure(value) != want]
    assert wrong[:3] == []
    fast = sum(jsjson._dumps_fast(orjson.loads(text)) is not None for text in texts)
    assert fast / len(texts) > 0.99  # the orjson path, not the pure encoder, carries real logs


@pytest.mark.parametrize(("a", "b", "same"), [
    ({"x": 1}, {"x": 1.0}, True),            # one number to JS, two texts to orjson
    ({"x": 1}, {"x": True}, False),
    ({"1": "a", "b": 2}, {"b": 2, "1": "a"}, True),   # JS lists array-index keys first
    ({"b": 2, "a": 1}, {"a": 1, "b": 2}, False),      # otherwise key order is kept
    ([2**60], [2**60], True),                # past what orjson writes: the JS texts are compared
    ("\ud800", "\ud800", True),
    (None, None, True),
])
def test_same_text_is_json_stringify_s_equality(a: object, b: object, same: bool) -> None:
    assert same_text(a, b) is same
    assert (dumps(a) == dumps(b)) is same
