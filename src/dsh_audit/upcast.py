"""Upcasters: an event of an older generation lifted to the newest generation's vocabulary, one edge at a time.

The fold and the structural checks are written once, against the newest names: event types renamed at an
edge (`x-dsh-renamed-from` in the schemas, e.g. tool/code-dispatch -> tool/ptc-dispatch at v3) and the
replace range keys (`start`/`end` until v2, `startSeq`/`endSeq` from v3, schemas/generations.json).
Upcasting never touches what the model sees: message objects, headers and their bytes stay as the log's own
generation wrote them, because a rebuilt request must be that generation's native request. Where the model
view itself differs (dispatch boundary, system prompt placement) the fold follows the generation's rules.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import msgspec

from .generations import generation, generations
from .vocabulary import vocabulary

Event = dict[str, Any]


class Edge(msgspec.Struct, frozen=True):
    """What changes in the vocabulary from generation `source` to `source + 1`."""

    source: int
    renames: dict[str, str]                 # old type -> new type
    replace_keys: tuple[tuple[str, str], tuple[str, str]] | None   # (old names, new names) when they change

    def apply(self, event: Event) -> Event:
        renamed = self.renames.get(event["type"])
        if renamed is not None:
            event = {**event, "type": renamed}
        op = event.get("surfaceOp")
        if self.replace_keys is not None and type(op) is dict and op.get("op") == "replace":
            (old_start, old_end), (new_start, new_end) = self.replace_keys
            if old_start in op or old_end in op:
                lifted = {key: value for key, value in op.items() if key not in (old_start, old_end)}
                for old, new in ((old_start, new_start), (old_end, new_end)):
                    if old in op:
                        lifted[new] = op[old]
                event = {**event, "surfaceOp": lifted}
        return event


@cache
def edge(source: int) -> Edge:
    older, newer = generation(source), generation(source + 1)
    words = vocabulary(newer.version)
    renames = {old: new for new, old in words.renamed_from.items() if old in vocabulary(older.version).known_types}
    keys = None if older.replace_keys == newer.replace_keys else (older.replace_keys, newer.replace_keys)
    return Edge(source, renames, keys)


def chain(source: int) -> list[Edge]:
    """The edges from generation `source` to the newest, in order."""
    return [edge(version) for version in range(source, generations()[-1].version)]


class Lifter:
    """The whole chain from one generation as a single call. Types no edge renames skip it cheaply unless they
    carry a replace op whose keys move: the common event (a chunk, a turn boundary) is returned as it is."""

    def __init__(self, source: int) -> None:
        self.edges = [e for e in chain(source) if e.renames or e.replace_keys]
        self.renamed = frozenset(old for e in self.edges for old in e.renames)   # types some edge renames
        self.moves_keys = any(e.replace_keys for e in self.edges)

    def __call__(self, event: Event) -> Event:
        if event["type"] not in self.renamed and not (self.moves_keys and type(event.get("surfaceOp")) is dict):
            return event
        for step in self.edges:
            event = step.apply(event)
        return event


@cache
def lifter(source: int) -> Lifter:
    return Lifter(source)
