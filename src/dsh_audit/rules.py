"""The rules both verifiers apply, written once. Each predicate takes the few facts its rule reads, as both the
full verifier (dsh_audit.structure, surface and fold, on parsed dicts) and the fast verifier
(dsh_audit.fastpath.verifier, on decoded Structs) hold them, and returns what is wrong, worded as the finding
says it, or None. The full verifier reports that text under the code each docstring names; the fast verifier
words no finding, so it declines the log (fastpath.lines.Doubt) with the same text. The wording is built only
when a rule is broken; the predicates asked of every turn, step, chunk run and message allocate nothing while
their rule holds (the fast path asks them of every event of a 1 GB log)."""

from __future__ import annotations

from collections.abc import Container, Sequence
from typing import TYPE_CHECKING, Any

from .header import is_placeholder
from .readers.jsonvalue import MAX_SAFE_INTEGER

if TYPE_CHECKING:
    from .fold import Cause

# -- turns and steps (turn-enclosure, step-enclosure, system-step, attempt-step) ---------------------------------


def turn_start_problem(open_turn: Any) -> str | None:
    """turn-enclosure: a turn starts while another is open."""
    return None if open_turn is None else f"turn/start while turn {open_turn} is still open"


def turn_end_problem(turn: Any, open_turn: Any) -> str | None:
    """turn-enclosure: a turn/end closes the open turn."""
    if open_turn is not None and turn == open_turn:
        return None
    return f"turn/end for turn {turn} but the open turn is {open_turn}"


def step_left_open_problem(open_step: Any) -> str | None:
    """step-enclosure: a turn ends with a step still open."""
    return None if open_step is None else f"turn/end while step {open_step} is still open"


def step_start_turn_problem(turn: Any, open_turn: Any) -> str | None:
    """step-enclosure: a step starts inside its own turn."""
    if open_turn is not None and turn == open_turn:
        return None
    return f"step/start of turn {turn} outside that turn"


def step_start_step_problem(open_step: Any) -> str | None:
    """step-enclosure: a step starts while another is open."""
    return None if open_step is None else f"step/start while step {open_step} is still open"


def step_end_problem(turn: Any, step: Any, open_turn: Any, open_step: Any) -> str | None:
    """step-enclosure: a step/end closes the open step."""
    if open_step is not None and turn == open_turn and step == open_step:
        return None
    return f"step/end for {turn}.{step} but the open step is {open_turn}.{open_step}"


def outside_step_problem(kind: str, turn: Any, step: Any, open_turn: Any, open_step: Any) -> str | None:
    """step-enclosure: a chunk, response, tool call or tool answer belongs to the open turn and step (none open:
    it must name none)."""
    if turn == open_turn and step == open_step:
        return None
    return f"{kind} for step {turn}.{step} outside it (open step: {open_turn}.{open_step})"


def step_mismatch_problem(kind: str, turn: Any, step: Any, open_turn: Any, open_step: Any) -> str | None:
    """system-step (system/message, developer/message) and attempt-step (assistant/attempt): the event shapes
    or settles a request of the open step, so a step must be open and be the one it names."""
    if open_step is not None and turn == open_turn and step == open_step:
        return None
    return (f"{kind} for step {turn}.{step} does not match an open turn and step "
            f"(open: {open_turn}.{open_step})")


# -- headers (header-placement, instance-anchor, tool-undeclared) ---------------------------------------------


def header_placement_problem(open_turn: Any) -> str | None:
    """header-placement: a request/header is logged inside a turn."""
    return "request/header logged outside any turn" if open_turn is None else None


def anchor_problem(anchored: bool, headers_seen: int, reason: Any) -> str | None:
    """instance-anchor: a loop instance's first header is its initial one (the log's first) or a resume, and no
    later header claims to be the initial one."""
    if not anchored:
        expected = "resume" if headers_seen else "initial"
        if reason != expected:
            return f"a loop instance's first request/header must have reason '{expected}', got '{reason}'"
        return None
    return "reason 'initial' on a log that already has a request/header" if reason == "initial" else None


def declared_tools(tools: Any) -> frozenset[str] | None:
    """The tool names a header's `tools` declares; None when the log does not say (a placeholder such as
    "{{tools}}": the real tool set is not in the log)."""
    if tools is None or tools == []:
        return frozenset()
    if isinstance(tools, list) and all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools):
        return frozenset(t["name"] for t in tools)
    return None


def undeclared_tool_problem(declared: frozenset[str] | None, call_id: Any, name: Any) -> str | None:
    """tool-undeclared: a tool call names a tool the header in force declares (when it says which)."""
    if declared is None or (isinstance(name, str) and name in declared):
        return None
    return f"tool call {call_id!r} names tool {name!r}, which the request/header in force does not declare"


PLACEHOLDER_FIELDS = ("system", "tools", "messagePrefix")


def placeholder_problem(header: dict[str, Any]) -> str | None:
    """placeholder-header (a warning): a scrubbed log (snapshot normalization) carries "{{system}}"-style tokens,
    so the rebuilt bytes are those of the scrubbed log, not what the model saw."""
    fields = [key for key in PLACEHOLDER_FIELDS if is_placeholder(header.get(key))]
    if not fields:
        return None
    return (f"{'/'.join(fields)} are normalization placeholders: the request bytes are those of the scrubbed log, "
            "not what the model saw (reported once per log)")


def retired_system_problem(system_on_surface: bool, header: dict[str, Any], label: str) -> str | None:
    """retired-header-system: where the system prompt is a surface node (v3 on), a header carries none."""
    if not system_on_surface or "system" not in header:
        return None
    return (f"format {label} request/header carries the retired header.system; the system prompt lives in "
            "system/message events")


# -- dispatch (late-surface-event, prefix-break) ----------------------------------------------------------------
# Surface types never late though logged between a header and its dispatch: the settlement itself, and a
# developer/message (v4), which follows the header it is bound to by design.
NEVER_LATE = frozenset({"assistant/message", "developer/message"})


def is_late(kind: str, pre_dispatch: int | None, attempt_open: bool) -> bool:
    """late-surface-event, once a dispatch follows: a surface event of type `kind` logged after a step's header
    or context (`pre_dispatch`: its seq) and before that attempt's dispatch, so the request rebuilt at the
    dispatch includes what the loop built the request without."""
    return pre_dispatch is not None and not attempt_open and kind not in NEVER_LATE


def late_problem(pending_kind: str, pending_seq: int | None, dispatch: str) -> str:
    return (f"surface event logged after the step's {pending_kind} (seq {pending_seq}) but before its dispatch: "
            f"the request was built before it, yet the {dispatch} boundary includes it")


def extends(visible_count: int, changed_from: int | None, previous_count: int) -> bool:
    """Whether the first `previous_count` visible messages are still those the last request was sent with: the
    surface holds at least as many, and no replace since changed one of them (`changed_from`: the lowest visible
    index a replace changed, None: none)."""
    return visible_count >= previous_count and (changed_from is None or changed_from >= previous_count)


def prefix_break_problem(first: bool, extends_previous: bool, causes: list[Cause]) -> str | None:
    """prefix-break: a request that is not an append-extension of its predecessor has a logged cause (`causes`:
    those logged since it; the log's first header explains nothing)."""
    if first or extends_previous or any(cause.kind != "initial" for cause in causes):
        return None
    return "request is not an append-extension of its predecessor and no logged event explains it"


# -- tool calls and results (tool-pairing, tool-result-error, shape) --------------------------------------------


def tool_call_ids_problem(answered: Any, call_id: Any) -> str | None:
    """shape: a tool result names the call it answers twice (its source's callId, and its message's or its
    tool-result block's toolCallId), and the two agree."""
    return None if answered == call_id else "message has mismatched tool call ids"



def tool_pairing_problem(awaited: int | None, call_id: str) -> str | None:
    """tool-pairing: a tool/result answers a call an assistant message made (`awaited`: that message's seq,
    taken out of the unanswered calls) and not yet answered."""
    if awaited is not None:
        return None
    return (f"tool/result for call {call_id!r}, which no unanswered tool call of an assistant message awaits "
            "(never made, or answered already)")


def unanswered_call_problem(call_id: str, turn_open: bool) -> str:
    """tool-pairing, at the end of the log: a call an assistant message made that no tool/result answered (while
    the log's last turn is still open, a warning: the log was cut off)."""
    return f"tool call {call_id!r} has no tool/result" + (
        " (the turn is still open: the log was cut off; the reference's load-time repair would close it)"
        if turn_open else "")


def open_turn_problem(open_turn: Any) -> str | None:
    """open-turn (a warning): the log ends inside a turn, so it was cut off. The full verifier's finding goes on
    to say what the reference's crash repair would append (structure.CrashRepair), state the fast path does not
    keep: it declines in these words, the finding's first."""
    return None if open_turn is None else f"log ends inside turn {open_turn}: the session was cut off"


def flags_error(message: Any) -> bool:
    """A tool result message flagged as an error: v4 on the message, v3 on its one tool-result block."""
    if not isinstance(message, dict):
        return False
    if message.get("role") == "tool":
        return message.get("isError") is True
    content = message.get("content")
    block = content[0] if isinstance(content, list) and content and isinstance(content[0], dict) else {}
    return block.get("isError") is True


def unflagged_error_problem(needs_flag: bool, message: Any) -> str | None:
    """tool-result-error: a tool/result carrying error metadata flags its message as an error, in the
    generations that need the flag. Asked only of a result with error metadata."""
    if not needs_flag or flags_error(message):
        return None
    return "tool/result carries error metadata for a result not flagged isError"


# -- responses and their streams (message-chunk-mismatch, stream-record, developer-header) ---------------------


def matches_chunks(interrupted: bool, finish_kind: str | None) -> bool:
    """Whether a completed message must equal the blocks its chunks completed: not an interrupted one, and only
    after a finish that completes its blocks."""
    return not interrupted and finish_kind in ("stop", "tool-calls")


def cited_blocks(ordered: list[tuple[int, Any]], sources: Any, low: int, high: int, contiguous: bool) -> list[Any]:
    """The completed blocks (seq, block; in seq order) that a message's sourceEventSeqs cite: a contiguous run
    (`low`..`high`, the usual citation) needs no set."""
    if contiguous:
        return [block for seq, block in ordered if low <= seq <= high]
    try:
        cited = set(sources)
    except TypeError:   # unhashable entries (a surface-provenance finding already): skip them
        cited = {s for s in sources if isinstance(s, int)}
    return [block for seq, block in ordered if seq in cited]


def chunk_mismatch_problem(settles: bool, blocks: list[Any], content: Any) -> str | None:
    """message-chunk-mismatch: a completed message's content is exactly the blocks its cited chunks (v2 on: its
    stream) completed, in order."""
    if not blocks or blocks == content:
        return None
    if settles:
        return ("assistant/message content differs from the blocks its stream completed: the logged message was "
                "edited, or its stream was")
    return ("assistant/message content differs from the blocks its cited chunks completed: the logged message "
            "was edited, or its chunks were")


def packed_record_problem(kind: Any, members: int, gaps: Sequence[int], time0: int | None) -> str | None:
    """stream-record: what the schema cannot say about a packed stream record (v2 on), as the v0 codec says it
    of a packed row: one dt gap between consecutive members, and member times that stay safe integers."""
    if len(gaps) != members - 1:
        return f"{kind} record has {len(gaps)} dt gaps for {members} members"
    if time0 is not None and gaps and not -MAX_SAFE_INTEGER <= time0 + sum(gaps) <= MAX_SAFE_INTEGER:
        return f"{kind} record member times leave the safe integers"
    return None


def developer_header_problem(data: Any, header_seqs: Container[int]) -> str | None:
    """developer-header (v4): a developer/message with tool additions names, by headerSeq, an earlier
    request/header (one of `header_seqs`), and carries no headerSeq without them. Whether that header declares
    the added tools is not checked (docs/v4.md, "Not verified")."""
    message = data.get("message") if isinstance(data, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    adds = any(isinstance(block, dict) and block.get("type") == "tool-addition"
               for block in (content if isinstance(content, list) else ()))
    header_seq = data.get("headerSeq") if isinstance(data, dict) else None
    if adds and not (type(header_seq) is int and header_seq in header_seqs):
        return f"developer/message adds tools but its headerSeq {header_seq!r} names no earlier request/header"
    if not adds and header_seq is not None:
        return "developer/message must omit headerSeq without tool additions"
    return None


# -- the surface (surface-provenance, replace-missing-node, system-head) ---------------------------------------


def assistant_sources_problem(allowed: bool, cited: bool, label: str) -> str | None:
    """assistant-provenance: an assistant/message cites its chunks by sourceEventSeqs (`cited`) only where its
    generation (`label`) allows it (`allowed`: until v2, which embeds the stream in the message instead)."""
    if allowed or not cited:
        return None
    return (f"format {label} assistant/message carries sourceEventSeqs; from v2 its chunks are embedded in "
            "data.stream instead")


def empty_sources_problem(kind: Any) -> str | None:
    """surface-provenance: an empty sourceEventSeqs, which only an assistant/message may carry."""
    if kind == "assistant/message":
        return None
    return "sourceEventSeqs must not be empty except on assistant/message"


def later_source_problem(sources: list[Any], high: int, seq: int) -> str | None:
    """surface-provenance: sourceEventSeqs (`high`: its largest) cite only events before the citing one."""
    if high < seq:
        return None
    later = next(source for source in sources if source >= seq)
    return f"sourceEventSeqs must reference earlier events: {later} >= current seq {seq}"


def missing_node_problem(end: str, node: Any) -> str:
    """replace-missing-node: a replace's start or end (`end`) names a node no longer on the surface."""
    return f"surface replace: {end} seq {node} not found in surface"


def reversed_replace_problem(start: Any, i: int, end: Any, j: int) -> str | None:
    """surface-provenance: a replace's start node (at index `i`) is not after its end node (at `j`)."""
    return None if i <= j else f"surface replace: start seq {start} (index {i}) is after end seq {end} (index {j})"


def uncited_nodes(shadowed: list[int], sources: Any, low: int, high: int, contiguous: bool) -> list[int]:
    """The shadowed nodes a replace's sourceEventSeqs (None: absent) does not cite; a contiguous run
    (`low`..`high`) needs no set."""
    if sources is None:
        return shadowed
    if contiguous:
        return [node for node in shadowed if not low <= node <= high]
    cited = set(sources)
    return [node for node in shadowed if node not in cited]


def uncited_problem(missing: list[int]) -> str | None:
    """surface-provenance: a replace cites every node it shadows."""
    if not missing:
        return None
    return ("surface replace: sourceEventSeqs must include every shadowed surface node; "
            f"missing {', '.join(map(str, missing))}")


def head_append_problem(head_is_system: bool) -> str | None:
    """system-head (v3 on), asked of a system/message appended to a non-empty surface: it joins only behind a
    system head."""
    if head_is_system:
        return None
    return "system/message requires a protected first surface head (a system/message at node 0)"


def head_rewrite_problem(kind: Any, start_index: int, end_index: int, head_is_system: bool) -> str | None:
    """system-head (v3 on): only a system/message over exactly node 0 rewrites a system head."""
    if start_index or not head_is_system or (kind == "system/message" and not end_index):
        return None
    return ("surface replace: node 0 holds the system prompt and may be rewritten only by a system/message over "
            "exactly that node")


def tool_rewrite_target_problem(shadowed: list[int], tool_results: Container[int]) -> str | None:
    """surface-provenance: a tool/result replacement rewrites exactly one live tool/result."""
    if len(shadowed) != 1:
        return "tool/result surface replacement must rewrite exactly one current node"
    if shadowed[0] not in tool_results:
        return "tool/result surface replacement must target a current tool/result"
    return None


def masked_tool_result(data: Any) -> Any:
    """A tool/result's data with its result content masked (what a rewrite may change): the first result
    block's content, or from v4, where the result is a tool-role message, the message content itself."""
    if not isinstance(data, dict) or not isinstance(data.get("message"), dict):
        return data
    message = data["message"]
    if message.get("role") == "tool":
        return {**data, "message": {**message, "content": None}}
    content = message.get("content")
    first = content[0] if isinstance(content, list) and content and isinstance(content[0], dict) else {}
    return {**data, "message": {**message, "content": [{**first, "content": None}]}}


def tool_rewrite_problem(before: Any, after: Any) -> str | None:
    """surface-provenance: a tool/result replacement changes only the result's content (`before`, `after`: the
    two events' data)."""
    if masked_tool_result(before) == masked_tool_result(after):
        return None
    return "tool/result surface replacement may change only content"
