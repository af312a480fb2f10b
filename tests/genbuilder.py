"""Hand-written minimal logs of the settlement generations (v2, v3, v4), written to disk as a dsh writer
would: header line, one event per row with explicit seq and time, chunks embedded in their settlement."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from logbuilder import MODEL, PROVIDER

SYSTEM_SOURCE = {"v3": {"kind": "plugin", "plugin": "@deepseek-ai/dsh-system-prompt"},
                 "v4": {"kind": "system-prompt"}}


class GenLog:
    def __init__(self, version: int, session_id: str = "s-1", **header: Any) -> None:
        self.version = version
        self.header: dict[str, Any] = {"type": "session", "version": version, "id": session_id, "createdAt": 0,
                                       "isSeeded": False, "delegationDepth": 0, **header}
        self.events: list[dict[str, Any]] = []
        self._ids = 0

    def _id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}{self._ids}"

    def add(self, type_: str, data: Any, **envelope: Any) -> int:
        seq = len(self.events)
        self.events.append({"type": type_, "seq": seq, "time": 0, "data": data, **envelope})
        return seq

    def write(self, path: Path) -> Path:
        rows = [self.header, *self.events]
        path.write_text("".join(json.dumps(row, separators=(",", ":")) + "\n" for row in rows), encoding="utf-8")
        return path

    # -- events ------------------------------------------------------------------------------------------
    def user(self, turn: int, text: str) -> int:
        return self.add("user/message", {"content": [{"type": "text", "text": text}], "source": {"kind": "user"},
                                         "role": "user", "id": self._id("u")}, surfaceOp="append")

    def system(self, turn: int, step: int, text: str | None, *, replaces: int | None = None) -> int:
        """A system/message head (v3 on); `replaces` names the head it rewrites."""
        source = SYSTEM_SOURCE["v4" if self.version >= 4 else "v3"]
        content = [] if text is None else [{"type": "text", "text": text}]
        data = {"turn": turn, "step": step, "message": {"id": self._id("sys"), "role": "system",
                                                        "source": source, "content": content}}
        if replaces is None:
            return self.add("system/message", data, surfaceOp="append")
        return self.add("system/message", data, surfaceOp={"op": "replace", "startSeq": replaces,
                                                           "endSeq": replaces}, sourceEventSeqs=[replaces])

    def header_event(self, reason: str = "initial", *, system: str | None = None, **config: Any) -> int:
        header: dict[str, Any] = {"config": {"provider": PROVIDER, "model": MODEL, **config}}
        if system is not None:
            header["system"] = system
        return self.add("request/header", {"header": header, "reason": reason})

    @staticmethod
    def stream(text: str, *, finish: str = "stop", usage: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        block = {"type": "text", "text": text}
        records: list[dict[str, Any]] = [
            {"type": "chunk", "time": 0, "chunk": {"type": "block-start", "index": 0, "blockType": "text"}},
            {"type": "text-chunks", "time0": 0, "index": 0, "dt": [], "texts": [text]},
            {"type": "chunk", "time": 0, "chunk": {"type": "block-end", "index": 0, "block": block}}]
        if usage is not None:
            records.append({"type": "chunk", "time": 0, "chunk": {"type": "usage", "usage": usage}})
        reason: dict[str, Any] = {"kind": finish}
        if finish == "error":
            reason["failure"] = {"message": "boom", "code": "X"}
        records.append({"type": "chunk", "time": 0, "chunk": {"type": "finish", "reason": reason}})
        return records

    def response(self, turn: int, step: int, text: str, *, usage: dict[str, Any] | None = None) -> int:
        data: dict[str, Any] = {"turn": turn, "step": step, "message": {
            "role": "assistant", "content": [{"type": "text", "text": text}],
            "source": {"kind": "model", "provider": PROVIDER, "model": MODEL}, "id": self._id("a")}}
        if usage is not None:
            data["usage"] = usage
        data["stream"] = self.stream(text, usage=usage)
        return self.add("assistant/message", data, surfaceOp="append")

    def failed_attempt(self, turn: int, step: int) -> int:
        return self.add("assistant/attempt", {"turn": turn, "step": step,
                                              "stream": self.stream("partial", finish="error")})

    def turn(self, turn: int, prompt: str, answer: str, *, head: str | None = None, reason: str | None = "initial",
             usage: dict[str, Any] | None = None) -> None:
        """A one-step turn; from v3 `head` is appended as the system/message head after step/start."""
        self.add("turn/start", {"turn": turn})
        self.add("step/start", {"turn": turn, "step": 1})
        if head is not None:
            self.system(turn, 1, head)
        self.user(turn, prompt)
        if reason is not None:
            self.header_event(reason)
        self.response(turn, 1, answer, usage=usage)
        self.add("step/end", {"turn": turn, "step": 1})
        self.add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})

    def prompt_turn(self, turn: int, prompt: str, *, replaces: int | None) -> None:
        """A turn whose step logs a new system prompt first: replacing the head `replaces`, or (None) appended
        mid-history as an in-history route does; then a `series` header, as the loop logs them."""
        self.add("turn/start", {"turn": turn})
        self.add("step/start", {"turn": turn, "step": 1})
        self.system(turn, 1, prompt, replaces=replaces)
        self.user(turn, "again")
        self.header_event("series")
        self.response(turn, 1, "ok")
        self.add("step/end", {"turn": turn, "step": 1})
        self.add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
