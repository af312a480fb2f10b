"""Log text made safe to show or store: JSON strings may hold lone surrogates (a JS string can), which UTF-8
(a terminal, a file, Arrow's strings) cannot."""

from __future__ import annotations

import re
from typing import Any

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def printable(text: str) -> str:
    """Lone surrogates as \\uXXXX escapes: valid in JSON text and printable on a UTF-8 terminal."""
    return _LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def printable_row(row: dict[str, Any]) -> dict[str, Any]:
    """A report row with every string made printable."""
    return {key: printable(value) if isinstance(value, str) else value for key, value in row.items()}
