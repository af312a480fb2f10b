"""The cache-read prediction of cache-report: each request as the DeepSeek adapter would send it, linearized
and tokenized, so that the common token prefix with the previous prompt and answer says what the provider could
have read from its cache. Scrubbed parts of a header are replaced by supplied real content or left out and named,
never guessed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..deepseek_wire import to_wire_body, wire_prompt_text
from ..errors import DshAuditError
from ..fold import RebuiltRequest
from ..tokens import token_ids


@dataclass(slots=True)
class Prompt:
    """The linear prompt of one request and of (request + its answer), as token ids."""

    ids: list[int] | None = None
    approximate: bool = True
    with_answer: list[int] | None = None
    sha256: str | None = None
    body: str | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RealHeader:
    """Real content supplied for a scrubbed header, and where it came from."""

    system: str | None = None
    tools: list[Any] | None = None
    origin: str = "supplied"


def sidecar_header(log: Path) -> RealHeader:
    """The pinned-scenario sidecars beside a log (the saved prompt gained a trailing newline: drop it)."""
    prompts = sorted(log.parent.glob("system-prompt*.expected.md"))
    schemas = sorted(log.parent.glob("tool-schemas*.expected.json"))
    system = prompts[0].read_text(encoding="utf-8").removesuffix("\n") if prompts else None
    tools: Any = json.loads(schemas[0].read_text(encoding="utf-8")) if schemas else None
    if isinstance(tools, dict):  # keyed by header reason; the first is the initial header's
        tools = next(iter(tools.values()), None)
    return RealHeader(system, tools if isinstance(tools, list) else None, "sidecar")


def _wire_request(request: RebuiltRequest, real: RealHeader) -> tuple[dict[str, Any] | None, list[str], bool]:
    """The rebuilt request as a dict; scrubbed parts are replaced by supplied real content, or dropped and
    named in the notes (then the prediction is approximate) — never guessed."""
    if request.body is None:
        return None, ["no request/header in force: nothing to predict"], True
    body: dict[str, Any] = json.loads(request.body)
    notes, approximate = [], False
    if "system" in request.placeholders:
        if real.system is not None:
            messages = body["messages"]
            if "system" in body or not messages or messages[0].get("role") != "system":
                body["system"] = real.system
            else:   # v3 on: the prompt is the system/message head, messages[0]
                messages[0] = {**messages[0], "content": [{"type": "text", "text": real.system}]}
            notes.append(f"system prompt from {real.origin} (log has {{{{system}}}})")
        else:
            notes.append("system prompt scrubbed ({{system}}): token counts exclude the real prompt")
            approximate = True
    if "tools" in request.placeholders or ("tools" in body and not _tool_objects(body["tools"])):
        if real.tools is not None:
            body["tools"] = real.tools
            notes.append(f"tools from {real.origin} (log has them scrubbed)")
        else:
            body.pop("tools", None)
            notes.append("tools scrubbed: their tokens are not counted")
            approximate = True
    if request.prefix == "scrubbed":
        notes.append("messagePrefix scrubbed: its messages are not counted")
        approximate = True
    return body, notes, approximate


def _tool_objects(tools: Any) -> bool:
    return isinstance(tools, list) and all(isinstance(tool, dict) for tool in tools)


def prompt_of(request: RebuiltRequest, answer: Any | None, real: RealHeader) -> Prompt:
    body, notes, approximate = _wire_request(request, real)
    result = Prompt(notes=notes, approximate=approximate)
    if body is None:
        return result
    try:
        wire = to_wire_body(body)
        result.ids = token_ids(wire_prompt_text(wire))
        if answer is not None:
            answered = to_wire_body({**body, "messages": [*body["messages"], answer]})
            result.with_answer = token_ids(wire_prompt_text(answered, generation_prompt=False))
    except DshAuditError as error:
        result.notes.append(f"no DeepSeek wire body: {error.message}")
        result.ids = result.with_answer = None
        result.approximate = True
        return result
    text = json.dumps(wire, ensure_ascii=False, separators=(",", ":"))
    result.sha256 = hashlib.sha256(text.encode()).hexdigest()
    result.body = text
    return result


