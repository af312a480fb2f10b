"""Byte-exact `JSON.stringify(value)` (no indentation) for values decoded from JSON text.

The reference compares messages, tools and stop lists as JSON.stringify strings (dsh-log-spec §7), so a
rebuilt request must match those strings byte for byte. Input values are what orjson/json decode: dict
(insertion ordered), list, str, int, float, bool, None.

Where orjson.dumps differs from JSON.stringify (orjson 3.x, checked against node 20):
- floats: orjson writes "1.0", "-0.0", "1e-6", "1e+16", "1e+20"; JS writes "1", "0", "0.000001",
  "10000000000000000", "100000000000000000000" (JS uses plain notation for 1e-6 <= |x| < 1e21).
- ints: JS parsed every number as a double, so |n| > 2**53 loses precision (2**53+1 -> 9007199254740992,
  2**64 -> 18446744073709552000, 10**21 -> 1e+21, >= 2**1024 - 2**970 -> Infinity -> null);
  orjson prints them exactly (or raises beyond 64 bits).
- lone surrogates (json.loads accepts "\\ud800"): orjson raises; JS writes them as lowercase \\udxxx.
- object keys that are array indices ("0", "7", ... up to 4294967294): JS objects list them first in
  ascending numeric order, whatever the text's order; orjson keeps insertion order.
String escaping is otherwise identical (\\" \\\\ \\b \\f \\n \\r \\t, other C0 as lowercase \\u00xx, DEL,
U+2028/2029 and "/" raw), and both print NaN/Infinity as null.

Fast path: orjson with OPT_STRICT_INTEGER (raises above 2**53; lone surrogates raise too), then one walk
over the containers that skips string leaves: an array-index key or any orjson error sends the value to
the pure-Python encoder; floats send orjson's output through a regex that rewrites only the float tokens
outside strings (only floats that orjson writes differently: integral ones and 1e-6 <= |x| < 1e-5).
Byte scans of the output to find floats were tried first and were slower than the walk
(digits followed by "." or "e" are common in message text).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from json.encoder import encode_basestring  # C-accelerated; escapes exactly like JS except surrogates

import orjson

__all__ = ["dumps", "dumps_bytes", "dumps_pure", "js_number"]

_MAX_SAFE_INT = 2**53
_MAX_ARRAY_INDEX = 2**32 - 2

# Raise (-> pure encoder) on ints beyond 2**53 and on types the walk below does not look into.
_ORJSON_OPTIONS = (orjson.OPT_STRICT_INTEGER | orjson.OPT_PASSTHROUGH_SUBCLASS
                   | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME)
_DIGITS = frozenset("0123456789")
# Anchored scan of escape-free output: skip structure, whole strings and integers; stop at the next float.
# The skip is atomic, written as (?=(…))\1 rather than a possessive quantifier: CPython before 3.11.5 matches
# possessive quantifiers wrongly (3.11.2, Debian's python3, captured "0" of "1.0").
_NEXT_FLOAT = re.compile(
    rb'(?=((?:[^"0-9-]+|"[^"]*"|-?[0-9]+(?![0-9.eE]))*))\1'
    rb"(-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)"
)
_SURROGATE = re.compile("[\ud800-\udfff]")
# A high+low pair held as two code points is one astral character to JS (UTF-16); the rest are lone.
_SURROGATE_PAIR_OR_LONE = re.compile("[\ud800-\udbff][\udc00-\udfff]|[\ud800-\udfff]")


def dumps_bytes(value: object) -> bytes:
    """UTF-8 bytes of JSON.stringify(value)."""
    fast = _dumps_fast(value)
    return fast if fast is not None else dumps_pure(value).encode()


def same_text(a: object, b: object) -> bool:
    """Whether JSON.stringify writes `a` and `b` alike. Values orjson writes alike are the same values in the
    same key order, so JS writes them alike too; only where orjson's texts differ (or it cannot write one) are
    the JS texts made and compared (1 and 1.0 are one number to JS, not to orjson)."""
    try:
        if orjson.dumps(a, option=_ORJSON_OPTIONS) == orjson.dumps(b, option=_ORJSON_OPTIONS):
            return True
    except orjson.JSONEncodeError:
        pass
    return dumps(a) == dumps(b)


def dumps(value: object) -> str:
    """JSON.stringify(value) as a str (lone surrogates appear escaped, so it always encodes to UTF-8)."""
    fast = _dumps_fast(value)
    return fast.decode() if fast is not None else dumps_pure(value)


def _dumps_fast(value: object) -> bytes | None:
    """orjson output made JS-exact, or None when only the pure encoder can be exact."""
    try:
        out = orjson.dumps(value, option=_ORJSON_OPTIONS)
    except orjson.JSONEncodeError:  # lone surrogate, |int| > 2**53, nesting > 255, subclass, non-JSON type
        return None
    try:
        rewrite = _needs_float_rewrite(value)
    except _ArrayIndexKey:
        return None
    return _rewrite_floats(out) if rewrite else out


class _ArrayIndexKey(Exception):
    """Raised out of the walk: only the pure encoder reorders keys."""


def _orjson_float_differs(x: float) -> bool:
    """Whether orjson writes x unlike JS. Both print the shortest round-trip digits; orjson switches to
    exponent notation below 1e-5 and from 1e16, JS below 1e-6 and from 1e21 (every double >= 2**53 is
    integral), and orjson keeps ".0" on integral values."""
    return x.is_integer() or 1e-6 <= abs(x) < 1e-5


def _needs_float_rewrite(value: object) -> bool:
    """Whether value holds a float that orjson writes unlike JS (orjson already checked the types);
    raises _ArrayIndexKey. Leaves are typed inline, so only containers cost a call."""
    found = False
    kind = type(value)
    if kind is dict:
        for key, item in value.items():  # type: ignore[attr-defined]
            if key[:1] in _DIGITS and _is_array_index(key):
                raise _ArrayIndexKey
            sub = type(item)
            if (_orjson_float_differs(item) if sub is float
                    else (sub is dict or sub is list or sub is tuple) and _needs_float_rewrite(item)):
                found = True
    elif kind is list or kind is tuple:
        for item in value:  # type: ignore[attr-defined]
            sub = type(item)
            if (_orjson_float_differs(item) if sub is float
                    else (sub is dict or sub is list or sub is tuple) and _needs_float_rewrite(item)):
                found = True
    else:
        found = kind is float and _orjson_float_differs(value)  # type: ignore[arg-type]
    return found


def _rewrite_floats(out: bytes) -> bytes:
    # Mask escaped backslashes and quotes (same length; raw NUL never occurs in JSON output), so that
    # every '"' left delimits a string and the scan needs no escape handling.
    plain = out.replace(b"\\\\", b"\0\0").replace(b'\\"', b"\0\0")
    parts: list[bytes] = []
    pos = 0
    while (match := _NEXT_FLOAT.match(plain, pos)) is not None:
        start, end = match.span(2)
        parts.append(out[pos:start])
        parts.append(js_number(float(out[start:end])).encode())
        pos = end
    if not parts:
        return out
    parts.append(out[pos:])
    return b"".join(parts)


def js_number(x: float) -> str:
    """ECMAScript Number::toString(x) for JSON: NaN and ±Infinity give "null", -0 gives "0".

    repr gives the shortest round-trip digits (the closest to x when several), as ECMAScript requires;
    only the notation differs. repr is positional for 1e-4 <= |x| < 1e16, inside JS's 1e-7 <= |x| < 1e21,
    so there only an integral ".0" goes."""
    text = repr(x)
    mantissa, _, exponent = text.partition("e")
    if not exponent:
        if text.endswith(".0"):
            return "0" if x == 0 else text[:-2]
        return text if x == x and x not in (math.inf, -math.inf) else "null"
    power = int(exponent)  # x = mantissa * 10**power, 1 <= |mantissa| < 10
    if -7 < power < 21:
        sign, digits = ("-", mantissa[1:]) if x < 0 else ("", mantissa)
        digits = digits.replace(".", "")
        if power > 0:  # repr: power >= 16 >= len(digits) - 1, so an integer padded with zeros
            return sign + digits + "0" * (power - len(digits) + 1)
        return sign + "0." + "0" * (-power - 1) + digits
    return f"{mantissa}e{'+' if power > 0 else '-'}{abs(power)}"


def dumps_pure(value: object) -> str:
    """Pure-Python JSON.stringify: the fallback of dumps(), exposed for tests and benchmarks.
    Nesting is bounded by Python's recursion limit (JSON.parse allows deeper)."""
    parts: list[str] = []
    _encode(value, parts.append)
    return "".join(parts)


def _encode(value: object, emit: Callable[[str], None]) -> None:
    kind = type(value)
    if kind is str:
        emit(_js_string(value))  # type: ignore[arg-type]
    elif kind is dict:
        emit("{")
        first = True
        for key, item in _js_key_order(value):  # type: ignore[arg-type]
            if not isinstance(key, str):
                raise TypeError(f"JSON object keys must be str, not {type(key).__name__}")
            emit(_js_string(key) + ":" if first else "," + _js_string(key) + ":")
            first = False
            _encode(item, emit)
        emit("}")
    elif kind is list or kind is tuple:
        emit("[")
        for index, item in enumerate(value):  # type: ignore[arg-type]
            if index:
                emit(",")
            _encode(item, emit)
        emit("]")
    elif value is None:
        emit("null")
    elif value is True:
        emit("true")
    elif value is False:
        emit("false")
    elif isinstance(value, int):
        emit(_js_int(value))
    elif isinstance(value, float):
        emit(js_number(value))
    elif isinstance(value, str):
        emit(_js_string(str(value)))
    elif isinstance(value, dict | list | tuple):
        _encode(dict(value) if isinstance(value, dict) else list(value), emit)
    else:
        raise TypeError(f"not a JSON value: {type(value).__name__}")


def _js_int(value: int) -> str:
    if -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT:
        return int.__repr__(value)
    try:
        return js_number(float(value))  # JSON.parse read it as the nearest double (correctly rounded)
    except OverflowError:
        return "null"  # JSON.parse gave ±Infinity


def _js_string(text: str) -> str:
    quoted: str = encode_basestring(text)
    if _SURROGATE.search(quoted) is not None:
        quoted = _SURROGATE_PAIR_OR_LONE.sub(_fix_surrogate, quoted)
    return quoted


def _fix_surrogate(match: re.Match[str]) -> str:
    found = match.group()
    if len(found) == 2:
        high, low = ord(found[0]), ord(found[1])
        return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
    return f"\\u{ord(found):04x}"


def _is_array_index(key: str) -> bool:
    return (key.isascii() and key.isdigit() and (key == "0" or key[0] != "0")
            and int(key) <= _MAX_ARRAY_INDEX)


def _js_key_order(obj: dict[str, object]) -> Iterable[tuple[str, object]]:
    """Own-key order of the object JSON.parse built: array indices ascending, then the rest as inserted."""
    if not any(key[:1].isdigit() and _is_array_index(key) for key in obj if isinstance(key, str)):
        return obj.items()
    indexed = sorted((key for key in obj if isinstance(key, str) and _is_array_index(key)), key=int)
    named = [key for key in obj if not (isinstance(key, str) and _is_array_index(key))]
    return [(key, obj[key]) for key in indexed + named]
