"""JSON parsing with the reference's acceptance rules: orjson for speed, stdlib only for what orjson refuses
but JavaScript's JSON.parse accepts (lone UTF-16 surrogate escapes)."""

from __future__ import annotations

import json

import orjson

from dsh_audit.records import JSON

MAX_SAFE_INTEGER = 2**53 - 1


class JsonProblem(ValueError):
    """A line that is not one JSON value; the message says why, in a few words."""


def _refuse_constant(name: str) -> float:
    # JSON.parse has no NaN/Infinity literals; the stdlib would accept them.
    raise ValueError(f"{name} is not JSON")


def parse_json(data: bytes) -> JSON:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as fast_error:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise JsonProblem(f"invalid UTF-8 at byte {bad.start}") from None
        try:
            return json.loads(text, parse_constant=_refuse_constant)
        except (ValueError, RecursionError):
            raise JsonProblem(f"not valid JSON ({str(fast_error).split(':')[0]})") from None


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
