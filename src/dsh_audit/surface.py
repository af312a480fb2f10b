"""The surface fold: which events are model-visible, in which order, and the message each projects to.

Nodes are event seqs in model-visible order. `append` pushes a node; `{op:'replace',startSeq,endSeq}` (spelled
`start`/`end` until v2; events arrive lifted) names two live nodes by seq and splices everything from the first
through the second, by their positions in the list (after an earlier replace, `startSeq` can be numerically
greater than `endSeq`), into the replacing event.
Each node's message is projected and serialized once, when it joins the surface.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import Any

from .jsjson import dumps_bytes
from .rules import (
    empty_sources_problem,
    head_append_problem,
    head_rewrite_problem,
    later_source_problem,
    missing_node_problem,
    reversed_replace_problem,
    tool_rewrite_problem,
    tool_rewrite_target_problem,
    uncited_nodes,
    uncited_problem,
)
from .seqlist import SeqFacts, seq_facts

# Surface types whose message projects to nothing when its content is empty (an empty system head, say).
EMPTY_PROJECTS_NOTHING = frozenset({"assistant/message", "system/message", "developer/message"})


def derive_message(event: dict[str, Any]) -> Any | None:
    """The per-event projection: the message an event contributes to every later request, or None.
    A user/message's data is its message; every other surface type wraps it in `data.message`."""
    kind = event.get("type")
    data = event.get("data")
    if kind == "user/message":
        return data
    message = data.get("message") if isinstance(data, dict) else None
    if kind in EMPTY_PROJECTS_NOTHING:
        content = message.get("content") if isinstance(message, dict) else None
        return None if isinstance(content, list) and not content else message
    return message if kind == "tool/result" else None


def _serialized(message: Any | None) -> bytes | None:
    """What the surface keeps of an event's projected message (derive_message): its bytes, None for none."""
    return None if message is None else dumps_bytes(message)


def _itself(value: Any) -> Any:
    return value


class SurfaceError(Exception):
    """A surface operation the reference refuses; the message follows the reference's wording, `code` names
    the finding."""

    def __init__(self, message: str, code: str = "surface-provenance") -> None:
        super().__init__(message)
        self.code = code


def check_provenance(event: dict[str, Any], seq: int, shadowed: list[int]) -> None:
    sources = event.get("sourceEventSeqs")
    facts: SeqFacts | None = None
    if sources is not None:
        if not isinstance(sources, list):
            raise SurfaceError(f"sourceEventSeqs on event at seq {seq} must be an array when present")
        if not sources and (problem := empty_sources_problem(event.get("type"))) is not None:
            raise SurfaceError(problem)
        facts = seq_facts(sources)   # one pass, shared with the schema check: messages cite hundreds of chunks
        if sources and (not facts.all_int or facts.low < 0 or facts.high >= 2**53):
            raise SurfaceError("sourceEventSeqs must densely contain non-negative safe integers")
        if not facts.unique:
            raise SurfaceError("sourceEventSeqs must not contain duplicates")
        if sources and (problem := later_source_problem(sources, facts.high, seq)) is not None:
            raise SurfaceError(problem)
    if shadowed:   # an append shadows nothing
        check_cited(shadowed, sources, None if facts is None else (facts.low, facts.high, facts.contiguous))


def check_cited(shadowed: list[int], sources: Any, facts: tuple[int, int, bool] | None) -> None:
    """surface-provenance: a replace cites every node it shadows; `facts`, its checked sources' (low, high,
    contiguous), None where it carries none. Both verifiers ask it (the fast one on its typed fields)."""
    missing = (uncited_nodes(shadowed, None, 0, 0, False) if facts is None
               else uncited_nodes(shadowed, sources, *facts))
    if problem := uncited_problem(missing):
        raise SurfaceError(problem)


class Surface:
    """Live surface nodes with their serialized messages. Memory is bounded by the live surface.

    With `protect_head` (v3 on, where the system prompt is a surface node): a system/message at node 0 is the
    protected head. Only a system/message over exactly that node may rewrite it (so compactions start after
    it), and a system/message joins a non-empty surface only behind such a head.

    A replace costs what it shadows, not what the surface holds: each live node has an order key (strictly
    increasing along the surface; a replacing node takes its first shadowed node's key), so a node's position
    is a dictionary lookup and a bisection, and `visible` is spliced, never rebuilt. `visible` is changed in
    place unless it was handed out by `pinned_visible` since it was last copied: then a replace swaps in a new
    list, so a list handed out keeps the messages it had (RequestParts relies on it). Appends are always in
    place, which a holder of the list does not see past its own count.

    Both verifiers keep their surface here: the full one hands `append` and `replace` the parsed event; the fast
    one (fastpath.verifier) checks the event's provenance on its typed fields and hands `push` and `splice` the
    projected message as it holds it (its stored bytes), and each tool/result's line, which `tool_data` reads
    only when a rewrite is checked."""

    def __init__(self, *, protect_head: bool = False, tool_data: Callable[[Any], Any] | None = None) -> None:
        self.protect_head = protect_head
        # what a kept tool/result becomes for the rewrite checks (by default, it is its data)
        self._tool_data: Callable[[Any], Any] = tool_data if tool_data is not None else _itself
        self.head_is_system = False
        self.head_message: Any = None   # the system head's message (v3 on), while node 0 is one
        self.nodes: list[int] = []
        self.messages: dict[int, bytes | None] = {}     # node seq -> serialized message (None: projects nothing)
        self.tool_results: dict[int, Any] = {}          # node seq -> its data (or what tool_data reads it from)
        self.generation = 0                              # bumps on every replace
        self.changed_from: int | None = None   # the lowest `visible` index a replace changed since `settled()`
        self.visible: list[bytes] = []                   # serialized messages in surface order
        self._keys: list[int] = []           # order key of each node, parallel to `nodes`
        self._visible_keys: list[int] = []   # order key of the node behind each message, parallel to `visible`
        self._key_of: dict[int, int] = {}    # live node seq -> key of its first occurrence
        self._repeated: set[int] = set()     # seqs live more than once (a malformed log repeats seqs)
        self._next_key = 0
        self._pinned = False

    def settled(self) -> None:
        """A request was sent: `changed_from` now says which of the messages it holds a replace changed (a
        replace of only what came after them, a tool result rewritten before it was ever sent, changes none)."""
        self.changed_from = None

    def pinned_visible(self) -> list[bytes]:
        """`visible`, for a holder that keeps it: the next replace leaves this list's messages as they are."""
        self._pinned = True
        return self.visible

    def append(self, seq: int, event: dict[str, Any]) -> None:
        check_provenance(event, seq, [])
        empty, message = not self.nodes, derive_message(event)
        self.push(seq, event.get("type"), _serialized(message), event.get("data"))
        if empty:
            self._took_head(message)

    def push(self, seq: int, kind: Any, message: Any, tool: Any = None) -> None:
        """Append node `seq`, an event of type `kind` whose provenance was checked: `message` its serialized
        projection (None: it projects nothing), `tool` what a tool/result keeps for rewrite checks."""
        if self.protect_head:
            system = kind == "system/message"
            if not self.nodes:
                self.head_is_system = system
            elif system and (problem := head_append_problem(self.head_is_system)):
                raise SurfaceError(problem, "system-head")
        self.messages[seq] = message
        if kind == "tool/result":
            self.tool_results[seq] = tool
        key = self._next_key
        self._next_key += 1
        self.nodes.append(seq)
        self._keys.append(key)
        self._enter(seq, key)
        if message is not None:
            self.visible.append(message)
            self._visible_keys.append(key)

    def _enter(self, seq: int, key: int) -> None:
        first = self._key_of.get(seq)
        if first is None:
            self._key_of[seq] = key
        else:
            self._key_of[seq] = min(first, key)
            self._repeated.add(seq)

    def _position(self, seq: int) -> int | None:
        """Where the first live node `seq` is, as list.index would say; None when it is not live."""
        key = self._key_of.get(seq)
        return None if key is None else bisect_left(self._keys, key)

    def replace(self, seq: int, event: dict[str, Any], op: dict[str, Any]) -> list[int]:
        start = op["startSeq"]
        at_head = bool(self.nodes) and self.nodes[0] == start   # node 0 is where start is first live
        message = derive_message(event)
        shadowed = self.splice(seq, event.get("type"), start, op["endSeq"],
                               lambda shadowed: check_provenance(event, seq, shadowed), _serialized(message),
                               event.get("data"))
        if at_head:
            self._took_head(message)
        return shadowed

    def _took_head(self, message: Any | None) -> None:
        """The event that projects `message` is node 0 now (appended to an empty surface, or replacing from node
        0): with a protected head, keep its message while it is a system head."""
        if self.protect_head:
            self.head_message = message if self.head_is_system else None

    def splice(self, seq: int, kind: Any, start: Any, end: Any, cited: Callable[[list[int]], None], message: Any,
               tool: Any = None) -> list[int]:
        """Replace the live nodes from `start` through `end` (by position) with node `seq`, an event of type
        `kind` (`message`, `tool`: as `push` takes them); `cited` checks its provenance against the nodes it
        shadows, raising SurfaceError. Returns those nodes."""
        i = self._position(start)
        if i is None:
            raise SurfaceError(missing_node_problem("start", start), "replace-missing-node")
        j = self._position(end)
        if j is None:
            raise SurfaceError(missing_node_problem("end", end), "replace-missing-node")
        if problem := reversed_replace_problem(start, i, end, j):
            raise SurfaceError(problem)
        shadowed = self.nodes[i:j + 1]
        cited(shadowed)
        if problem := head_rewrite_problem(kind, i, j, self.head_is_system):
            raise SurfaceError(problem, "system-head")
        if kind == "tool/result":
            if problem := tool_rewrite_target_problem(shadowed, self.tool_results):
                raise SurfaceError(problem)
            read = self._tool_data
            if problem := tool_rewrite_problem(read(self.tool_results[shadowed[0]]), read(tool)):
                raise SurfaceError(problem)
            self.tool_results[seq] = tool
        self.messages[seq] = message
        if i == 0 and self.protect_head:
            self.head_is_system = kind == "system/message"
        key, last = self._keys[i], self._keys[j]
        self.nodes[i:j + 1] = [seq]
        self._keys[i:j + 1] = [key]
        for node in shadowed:
            self.messages.pop(node, None)
            self.tool_results.pop(node, None)
            if node not in self._repeated:
                del self._key_of[node]
        if self._repeated:
            self._requeue(shadowed)
        self._enter(seq, key)
        self.generation += 1
        low, high = bisect_left(self._visible_keys, key), bisect_right(self._visible_keys, last)
        joined = [] if message is None else [message]
        if joined or high > low:   # the messages from `low` on are not those any earlier request was sent
            self.changed_from = low if self.changed_from is None else min(self.changed_from, low)
        self._visible_keys[low:high] = [key] if joined else []
        if self._pinned:   # a holder keeps the old list as it is: copy, once until it is handed out again
            self.visible = [*self.visible[:low], *joined, *self.visible[high:]]
            self._pinned = False
        else:
            self.visible[low:high] = joined
        return shadowed

    def _requeue(self, shadowed: list[int]) -> None:
        """A malformed log's repeated seqs: point each shadowed one at its first remaining occurrence (a scan, on
        this path only)."""
        for node in shadowed:
            if node in self._repeated:
                positions = [k for k, live in enumerate(self.nodes) if live == node]
                if positions:
                    self._key_of[node] = self._keys[positions[0]]
                    if len(positions) == 1:
                        self._repeated.discard(node)
                else:
                    self._key_of.pop(node, None)
                    self._repeated.discard(node)
