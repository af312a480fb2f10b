"""Laws of the fold, checked on random logs: folding incrementally equals folding a fresh prefix, and the
running-hash digests equal a naive rebuild of each request from scratch."""

from __future__ import annotations

import hashlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_audit import reconstruct_source
from dsh_audit.jsjson import dumps_bytes
from logbuilder import MODEL, PROVIDER, LogBuilder

ACTIONS = st.lists(st.sampled_from(["turn", "tool-step", "retry", "compact", "prune", "header", "resume"]),
                   min_size=1, max_size=12)
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8)


def build(actions: list[str], texts: list[str]) -> LogBuilder:
    log = LogBuilder()
    words = iter(texts * 50)
    for turn, action in enumerate(actions, start=1):
        log.add("turn/start", {"turn": turn})
        log.add("step/start", {"turn": turn, "step": 1})
        log.user(next(words))
        if turn == 1:
            log.header_event("initial")
        elif action == "header":
            log.header_event("change", system=f"sys {turn}", temperature=0.5 if turn % 2 else 1.0)
        elif action == "resume":
            log.add("session/end-seed", {})
            log.header_event("resume")
        if action == "retry":
            log.add("assistant/chunk", {"turn": turn, "step": 1, "chunk": {
                "type": "finish", "reason": {"kind": "error", "failure": {"message": "x", "code": "X"}}}})
        nodes = _live(log)
        if action == "compact" and len(nodes) >= 2:
            start = log.add("compaction/start", {"compactionId": f"c{turn}", "turn": turn})
            log.user(next(words), surfaceOp={"op": "replace", "start": nodes[0], "end": nodes[1]},
                     sourceEventSeqs=[start, nodes[0], nodes[1]])
        if action == "tool-step":
            call = f"call{turn}"
            log.response(turn, 1, next(words), tool_calls=[(call, "bash")])
            result = log.tool_result(turn, 1, call, next(words))
            log.add("step/end", {"turn": turn, "step": 1})
            log.add("step/start", {"turn": turn, "step": 2})
            if action == "tool-step" and turn % 2:
                data = {**log.events[result]["data"]}
                message = {**data["message"]}
                message["content"] = [{**message["content"][0], "content": [{"type": "text", "text": "pruned"}]}]
                log.add("compaction/prune", {"shadowedRange": {"start": result, "end": result},
                                             "shadowedSeqs": [result], "shadowedTokenCount": 1})
                log.add("tool/result", {**data, "message": message},
                        surfaceOp={"op": "replace", "start": result, "end": result}, sourceEventSeqs=[result])
            log.response(turn, 2, next(words))
            log.add("step/end", {"turn": turn, "step": 2})
        else:
            log.response(turn, 1, next(words), usage={"inputTokens": 3, "outputTokens": 1})
            log.add("step/end", {"turn": turn, "step": 1})
        log.add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return log


def _live(log: LogBuilder) -> list[int]:
    return _surface_nodes(log.events)


def _surface_nodes(events: list[dict[str, Any]]) -> list[int]:
    """The live surface after `events`, walked from scratch (the naive counterpart of the fold)."""
    nodes: list[int] = []
    for e in events:
        op = e.get("surfaceOp")
        if op == "append":
            nodes.append(e["seq"])
        elif isinstance(op, dict):
            i, j = nodes.index(op["start"]), nodes.index(op["end"])
            nodes[i:j + 1] = [e["seq"]]
    return nodes


def naive_body(events: list[dict[str, Any]]) -> bytes:
    """Rebuild one request from scratch: walk the surface over the prefix, fold the latest header."""
    header = next(e["data"]["header"] for e in reversed(events) if e["type"] == "request/header")
    messages = []
    for seq in _surface_nodes(events):
        e = events[seq]
        message = e["data"] if e["type"] == "user/message" else e["data"]["message"]
        if e["type"] != "assistant/message" or message["content"]:
            messages.append(message)
    request = {**header["config"], "messages": messages}
    request.update({k: header[k] for k in ("system", "tools") if header.get(k)})
    return dumps_bytes(request)


def shape(requests: list[Any]) -> list[tuple[Any, ...]]:
    return [(r.turn, r.step, r.attempt, r.dispatch_seq, r.sha256, r.body) for r in requests]


@settings(max_examples=60, deadline=None)
@given(ACTIONS, st.lists(TEXT, min_size=1, max_size=5), st.data())
def test_incremental_fold_equals_fresh_fold_of_prefix(actions: list[str], texts: list[str], data: Any) -> None:
    log = build(actions, texts)
    full = reconstruct_source(log.source()).requests
    cut = data.draw(st.integers(min_value=0, max_value=len(log.events)))
    prefix = LogBuilder()
    prefix.header, prefix.events = log.header, log.events[:cut]
    fresh = reconstruct_source(prefix.source()).requests
    assert shape(fresh) == shape([r for r in full if r.dispatch_seq < cut])


@settings(max_examples=60, deadline=None)
@given(ACTIONS, st.lists(TEXT, min_size=1, max_size=5))
def test_running_hash_equals_naive_rebuild(actions: list[str], texts: list[str]) -> None:
    log = build(actions, texts)
    for request in reconstruct_source(log.source()).requests:
        expected = naive_body(log.events[:request.dispatch_seq])
        assert request.body == expected
        assert request.sha256 == hashlib.sha256(expected).hexdigest()
    assert PROVIDER and MODEL
