"""JSON parsing with the reference's acceptance rules: orjson for speed, stdlib only for what orjson refuses
but JavaScript's JSON.parse accepts (lone UTF-16 surrogate escapes). Values nested deeper than MAX_DEPTH are
refused here, as JsonTooDeep, whichever parser read them: what parses must not overflow a recursive walk later."""

from __future__ import annotations

import json

import orjson

from dsh_audit.readers.limits import MAX_DEPTH, OverLimit
from dsh_audit.records import JSON

MAX_SAFE_INTEGER = 2**53 - 1


class JsonProblem(ValueError):
    """A line that is not one JSON value; the message says why, in a few words."""


def _refuse_constant(name: str) -> float:
    # JSON.parse has no NaN/Infinity literals; the stdlib would accept them.
    raise ValueError(f"{name} is not JSON")


class JsonTooDeep(OverLimit):
    """Valid JSON, perhaps, but nested deeper than MAX_DEPTH: a read error wherever it stands in the log (never a
    torn tail), since JSON.parse would have read it."""


def _too_deep() -> JsonTooDeep:
    return JsonTooDeep(f"JSON nested deeper than {MAX_DEPTH} levels; dsh-audit reads at most {MAX_DEPTH}")


def deeper_than(value: JSON, limit: int) -> bool:
    """Whether a parsed value nests containers deeper than `limit` levels."""
    # Iterative, over containers only: the check must not need the stack it protects.
    stack: list[tuple[JSON, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


_NOT_OPENING = bytes(byte for byte in range(256) if byte not in b"[{")


def _check_depth(data: bytes, value: JSON) -> JSON:
    # Each level opens with a bracket: a line with no more of them than the cap (nearly every line) needs no walk.
    # One translate pass keeps just the brackets; it costs about half of counting each kind.
    if (len(data) > 2 * MAX_DEPTH and len(data.translate(None, _NOT_OPENING)) > MAX_DEPTH
            and isinstance(value, dict | list) and deeper_than(value, MAX_DEPTH)):
        raise _too_deep()
    return value


def parse_json(data: bytes) -> JSON:
    """One JSON value; JsonProblem when it is not one, JsonTooDeep when it nests deeper than MAX_DEPTH."""
    try:
        return _check_depth(data, orjson.loads(data))
    except orjson.JSONDecodeError as fast_error:
        if str(fast_error).startswith(("depth limit", "recursion limit")):   # orjson stops at 1024 levels
            raise _too_deep() from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise JsonProblem(f"invalid UTF-8 at byte {bad.start}") from None
        try:
            value = json.loads(text, parse_constant=_refuse_constant)
        except RecursionError:   # the stdlib parser recurses: only nesting brings it this deep
            raise _too_deep() from None
        except ValueError:
            raise JsonProblem(f"not valid JSON ({str(fast_error).split(':')[0]})") from None
        return _check_depth(data, value)


def is_number(value: object) -> bool:
    """A JavaScript number: int or float, never bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def safe_int(value: object) -> int | None:
    """The value as an int when JavaScript's Number.isSafeInteger holds for it, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    as_int = int(value)
    return as_int if abs(as_int) <= MAX_SAFE_INTEGER else None


def js_number(value: object) -> str:
    """How JavaScript's template literal prints a number (enough for error messages)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return str(value)
