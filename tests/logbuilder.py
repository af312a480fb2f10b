"""Hand-written minimal logs for unit tests: a builder that appends events with contiguous seqs."""

from __future__ import annotations

import itertools
from typing import Any

from dsh_audit.records import LogRecord, LogSource

PROVIDER, MODEL = "deepseek-official", "deepseek-v4-flash"


class LogBuilder:
    def __init__(self, session_id: str = "s-1", **header: Any) -> None:
        self.header = {"type": "session", "version": 0, "id": session_id, "createdAt": 0, "delegationDepth": 0,
                       **header}
        self.events: list[dict[str, Any]] = []
        self._ids = itertools.count(1)

    @property
    def next_seq(self) -> int:
        return len(self.events)

    def add(self, type_: str, data: Any, **envelope: Any) -> int:
        seq = self.next_seq
        self.events.append({"type": type_, "seq": seq, "time": 0, "data": data, **envelope})
        return seq

    def source(self, label: str = "test.jsonl") -> LogSource:
        records = (LogRecord(line=i + 2, seq=e["seq"], event=e, explicit_seq=True)
                   for i, e in enumerate(self.events))
        return LogSource(label=label, header=self.header, header_line=1, _events=records)

    # -- convenience -------------------------------------------------------------------------------------
    def user(self, text: str, **envelope: Any) -> int:
        envelope.setdefault("surfaceOp", "append")
        return self.add("user/message", {"content": [{"type": "text", "text": text}],
                                         "source": {"kind": "user"}, "role": "user", "id": f"u{next(self._ids)}"},
                        **envelope)

    def header_event(self, reason: str = "initial", *, system: str | None = "sys", tools: Any = None,
                     **config: Any) -> int:
        header: dict[str, Any] = {"config": {"provider": PROVIDER, "model": MODEL, **config}}
        if system is not None:
            header["system"] = system
        if tools is not None:
            header["tools"] = tools
        return self.add("request/header", {"header": header, "reason": reason})

    def response(self, turn: int, step: int, text: str, *, usage: dict[str, Any] | None = None,
                 tool_calls: list[tuple[str, str]] = ()) -> int:
        """One attempt: chunks (text delta, usage, finish) then the assistant/message citing them."""
        chunks = [self.add("assistant/chunk", {"turn": turn, "step": step,
                                               "chunk": {"type": "text-delta", "index": 0, "text": text}})]
        if usage is not None:
            chunks.append(self.add("assistant/chunk", {"turn": turn, "step": step,
                                                       "chunk": {"type": "usage", "usage": usage}}))
        chunks.append(self.add("assistant/chunk", {"turn": turn, "step": step,
                                                   "chunk": {"type": "finish", "reason": {"kind": "stop"}}}))
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        content += [{"type": "tool-call", "id": cid, "name": name, "arguments": "{}"} for cid, name in tool_calls]
        data: dict[str, Any] = {"turn": turn, "step": step, "message": {
            "role": "assistant", "content": content,
            "source": {"kind": "model", "provider": PROVIDER, "model": MODEL}, "id": f"a{next(self._ids)}"}}
        if usage is not None:
            data["usage"] = usage
        return self.add("assistant/message", data, sourceEventSeqs=chunks, surfaceOp="append")

    def tool_result(self, turn: int, step: int, call_id: str, text: str, **envelope: Any) -> int:
        envelope.setdefault("surfaceOp", "append")
        return self.add("tool/result", {"turn": turn, "step": step, "message": {
            "source": {"kind": "tool", "callId": call_id},
            "content": [{"type": "tool-result", "toolCallId": call_id,
                         "content": [{"type": "text", "text": text}], "isError": False}],
            "role": "user", "id": f"t{next(self._ids)}"}}, **envelope)

    def simple_turn(self, turn: int, prompt: str, answer: str, *, header_reason: str | None = None,
                    **header: Any) -> None:
        self.add("turn/start", {"turn": turn})
        self.add("step/start", {"turn": turn, "step": 1})
        self.user(prompt)
        if header_reason is not None:
            self.header_event(header_reason, **header)
        self.response(turn, 1, answer)
        self.add("step/end", {"turn": turn, "step": 1})
        self.add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
