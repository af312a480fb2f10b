"""What the DeepSeek adapter POSTs for a rebuilt request, and a linear form of the prompt the provider caches.

Mirrors the text-only path of `@deepseek-ai/dsh-llm-deepseek` at dsh 0.1.1-rc.2 (serialize.ts, adapter.ts)
plus the runtime's text-only image projection (dsh-llm content.ts). The image path (Files API / inline
base64, used only for image-capable catalog models) is not mirrored: such a request raises instead of
guessing.
See docs/deepseek-wire.md for the rules and their upstream sources.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from .errors import DshAuditError, LogRejected

Json = Any
WireBody = dict[str, Any]

EFFORTS = ("off", "low", "high", "max")
# The default catalog's only image-capable model (llm-deepseek index.ts DEFAULT_MODELS); every other model,
# catalogued or not, is declared text-only by the adapter.
DEFAULT_IMAGE_MODELS = frozenset({"deepseek-v4-flash-vision-exp"})
NO_OUTPUT_TEXT = "(no output)"


def text_only_image_text(attachment: Json) -> str:
    """The fixed stand-in the runtime puts where an image was, for a model that accepts text only."""
    attachment_id = str(attachment.get("attachmentId", "")) if isinstance(attachment, dict) else ""
    # JS slices by position after the 7-character "sha256:" prefix whatever the id actually starts with.
    digest = attachment_id[len("sha256:"):len("sha256:") + 8]
    return f"[image omitted because this model accepts text only; attachment sha256:{digest}]"


def _has_image(blocks: Iterable[Json]) -> bool:
    return any(
        _block_type(block) == "image"
        or (_block_type(block) == "tool-result" and _has_image(_content(block)))
        for block in blocks
    )


def _project_blocks(blocks: list[Json]) -> list[Json]:
    projected: list[Json] = []
    for block in blocks:
        kind = _block_type(block)
        if kind == "image":
            projected.append({"type": "text", "text": text_only_image_text(block.get("attachment"))})
        elif kind == "tool-result" and _has_image(_content(block)):
            projected.append({**block, "content": _project_blocks(_content(block))})
        else:
            projected.append(block)
    return projected


def project_images_for_text_model(messages: list[Json]) -> list[Json]:
    """Replace every image block, recursively through tool results, by its text-only stand-in."""
    return [
        {**message, "content": _project_blocks(_content(message))}
        if _has_image(_content(message)) else message
        for message in messages
    ]


def _block_type(block: Json) -> Any:
    return block.get("type") if isinstance(block, dict) else None


def _content(holder: Json) -> list[Json]:
    content = holder.get("content") if isinstance(holder, dict) else None
    if not isinstance(content, list):
        raise LogRejected(f"message or tool result has no content array (got {type(content).__name__})")
    return content


def _joined(blocks: list[Json], kind: str) -> str:
    """Top-level blocks of one kind, texts concatenated with no separator (no recursion)."""
    # Array.join renders a missing or null text as "".
    texts = (block.get("text") for block in blocks if _block_type(block) == kind)
    return "".join("" if text is None else str(text) for text in texts)


def _assistant(message: Json) -> Json:
    blocks = _content(message)
    wire: dict[str, Json] = {"role": "assistant", "content": _joined(blocks, "text")}
    reasoning = _joined(blocks, "reasoning")
    if reasoning:
        wire["reasoning_content"] = reasoning
    calls = [
        {"id": block.get("id"), "type": "function",
         "function": {"name": block.get("name"), "arguments": block.get("arguments")}}
        for block in blocks if _block_type(block) == "tool-call"
    ]
    if calls:
        wire["tool_calls"] = calls
    return wire


def wire_messages(messages: list[Json]) -> list[Json]:
    """History messages on the text-only path; images must already be projected away."""
    wire: list[Json] = []
    for message in messages:
        blocks = _content(message)
        if _has_image(blocks):
            raise LogRejected("the DeepSeek text-only serializer refuses image content (UNSUPPORTED_CONTENT)")
        role = message.get("role")
        if role == "developer":   # v4 tool-update notices: the runtime omits them on routes without support
            continue
        if role == "system":
            wire.append({"role": "system", "content": _joined(blocks, "text")})
        elif role == "assistant":
            wire.append(_assistant(message))
        elif role == "tool":   # v4: a tool result is a tool-role message of its own
            wire.append({"role": "tool", "tool_call_id": message.get("toolCallId"),
                         "content": _joined(blocks, "text") or NO_OUTPUT_TEXT})
        else:
            results = [block for block in blocks if _block_type(block) == "tool-result"]
            text = _joined(blocks, "text")
            if text or not results:
                wire.append({"role": "user", "content": text})
            for result in results:
                wire.append({"role": "tool", "tool_call_id": result.get("toolCallId"),
                             "content": _joined(_content(result), "text") or NO_OUTPUT_TEXT})
    return wire


def _effort(value: Json) -> str:
    if value not in EFFORTS:
        raise LogRejected(f"DeepSeek does not support reasoning effort {json.dumps(value)} "
                          "(UNSUPPORTED_REASONING_EFFORT)")
    return str(value)


def _thinking(request: Json, default_effort: str | None, deployment_thinking: str | None,
              purpose: str | None) -> dict[str, Json]:
    if purpose == "session-title":
        return {"thinking": {"type": "disabled"}}
    effort = _effort(request["reasoningEffort"]) if "reasoningEffort" in request else default_effort
    if deployment_thinking == "disabled" and effort is not None and effort != "off":
        raise LogRejected(f'DeepSeek deployment does not support reasoning effort "{effort}" '
                          "(UNSUPPORTED_REASONING_EFFORT)")
    if effort == "off":
        return {"thinking": {"type": "disabled"}}
    if effort in ("low", "high", "max"):
        return {"thinking": {"type": "enabled"}, "reasoning_effort": effort}
    return {} if deployment_thinking is None else {"thinking": {"type": deployment_thinking}}


def _tools(request: Json) -> list[Json] | None:
    tools = request.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list):
        # A scrubbed "{{tools}}" placeholder: the reference's `tools.map` would throw on it.
        raise LogRejected(f"request tools is {json.dumps(tools)[:40]}, not an array: "
                          "the wire body is unknowable")
    if not all(isinstance(tool, dict) for tool in tools):
        # Tools scrubbed to their names (some corpus snapshots): the schemas the adapter sent are not logged.
        raise LogRejected("request tools are not all schema objects (names only?): the wire body is unknowable")
    return [{"type": "function",
             "function": {"name": tool.get("name"), "description": tool.get("description"),
                          "parameters": tool.get("parameters")}}
            for tool in tools]


def _refuse_image_model(model: Json, image_models: frozenset[str]) -> None:
    if model in image_models:
        raise DshAuditError(f"model {model!r} takes images: the DeepSeek image path "
                            "(Files API / inline base64) is not mirrored")


def wire_history_message(message: Json, model: Json, *,
                         image_models: frozenset[str] = DEFAULT_IMAGE_MODELS) -> list[Json]:
    """One history message as `to_wire_body` sends it, on its own: images projected for a text-only model, then
    the wire message(s) it becomes (none, one, or a user text plus one tool message per result)."""
    if _has_image(_content(message)):
        _refuse_image_model(model, image_models)
        message = project_images_for_text_model([message])[0]
    return wire_messages([message])


def to_wire_body(request: Json, *, default_effort: str | None = None, deployment_thinking: str | None = None,
                 purpose: str | None = None, image_models: frozenset[str] = DEFAULT_IMAGE_MODELS) -> WireBody:
    """The chat-completions body for one rebuilt request, keys in the reference's order.

    `default_effort` / `deployment_thinking` are the adapter's plugin config (`reasoningEffort`, `thinking`;
    both unset by default). A logged loop request already carries its resolved effort, so they rarely matter.
    """
    if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
        raise LogRejected("request has no messages array")
    if default_effort is not None:
        _effort(default_effort)
    messages: list[Json] = request["messages"]
    if any(_has_image(_content(message)) for message in messages):
        _refuse_image_model(request.get("model"), image_models)
        messages = project_images_for_text_model(messages)
    wire: list[Json] = []
    if "system" in request:
        wire.append({"role": "system", "content": request["system"]})
    wire.extend(wire_messages(messages))
    body: WireBody = {"model": request.get("model"), "messages": wire, "stream": True,
                      "stream_options": {"include_usage": True}}
    body.update(_thinking(request, default_effort, deployment_thinking, purpose))
    tools = _tools(request)
    if tools:
        body["tools"] = tools
    for ours, theirs in (("temperature", "temperature"), ("maxTokens", "max_tokens"), ("stop", "stop")):
        if ours in request:
            body[theirs] = request[ours]
    return body


# --- Prompt linearization for cache-prefix prediction -------------------------------------------------------
# Our own approximation of the server's chat template, built from the tokenizer's added tokens. Every segment
# starts with an added token, which the tokenizer always splits on first, so the token ids of the whole prompt
# are exactly the concatenation of each segment's ids (tokens.py relies on that for its per-segment cache).

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
SYSTEM_OPEN, SYSTEM_CLOSE = "<｜begin▁sys｜>", "<｜end▁sys｜>"
CALLS_OPEN, CALLS_CLOSE = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_OPEN, CALL_SEP, CALL_CLOSE = "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"
OUTPUT_OPEN, OUTPUT_CLOSE = "<｜tool▁output▁begin｜>", "<｜tool▁output▁end｜>"


def _compact_json(value: Json) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _assistant_segment(message: Json, keep_reasoning: bool) -> str:
    parts = [ASSISTANT]
    if keep_reasoning and message.get("reasoning_content"):
        parts += [THINK_OPEN, str(message["reasoning_content"]), THINK_CLOSE]
    parts.append(str(message.get("content") or ""))
    calls = message.get("tool_calls") or []
    if calls:
        parts.append(CALLS_OPEN)
        for call in calls:
            function = call.get("function", {})
            parts += [CALL_OPEN, str(function.get("name")), CALL_SEP, str(function.get("arguments")),
                      CALL_CLOSE]
        parts.append(CALLS_CLOSE)
    parts.append(EOS)
    return "".join(parts)


def wire_prompt_segments(body: WireBody, *, history_reasoning: str = "keep",
                         generation_prompt: bool = True) -> list[str]:
    """The prompt as the provider would see it, one string per wire message, in cache order.

    Order: leading system message(s) and the tool list form the first segment (templates put tools in the
    system area, so a tool change invalidates everything after the system prompt), then one segment per
    message. `history_reasoning="drop-before-last-user"` models templates that strip reasoning of assistant
    turns older than the last user message; "keep" sends it as the wire body does.
    """
    if history_reasoning not in ("keep", "drop-before-last-user"):
        raise ValueError("history_reasoning must be 'keep' or 'drop-before-last-user', "
                         f"not {history_reasoning!r}")
    messages: list[Json] = list(body.get("messages") or [])
    leading: list[str] = []
    while messages and messages[0].get("role") == "system":
        leading.append(str(messages.pop(0).get("content") or ""))
    segments = [head_segment(leading, body.get("tools"))]
    last_user = max((i for i, message in enumerate(messages) if message.get("role") == "user"), default=-1)
    for index, message in enumerate(messages):
        keep = history_reasoning == "keep" or index > last_user
        segments.append(message_segment(message, keep_reasoning=keep))
    if generation_prompt:
        segments.append(ASSISTANT)
    return segments


def head_segment(system_texts: list[str], tools: list[Json] | None) -> str:
    """The first segment: the leading system message(s) and the tool list (templates put tools in the system
    area, so a tool change invalidates everything after the system prompt)."""
    head = BOS + "\n\n".join(system_texts)
    if tools:
        head += "\n\n## Tools\n" + "\n".join(_compact_json(tool.get("function")) for tool in tools)
    return head


def message_segment(message: Json, *, keep_reasoning: bool = True) -> str:
    """One wire message after the leading system messages, as one segment."""
    role = message.get("role")
    content = str(message.get("content") or "")
    if role == "assistant":
        return _assistant_segment(message, keep_reasoning)
    if role == "tool":
        return OUTPUT_OPEN + content + OUTPUT_CLOSE
    if role == "system":
        return SYSTEM_OPEN + content + SYSTEM_CLOSE
    return USER + content


def wire_prompt_text(body: WireBody, *, history_reasoning: str = "keep",
                     generation_prompt: bool = True) -> str:
    """`wire_prompt_segments` joined: a deterministic linear form whose prefix is what the cache can reuse."""
    return "".join(wire_prompt_segments(body, history_reasoning=history_reasoning,
                                        generation_prompt=generation_prompt))
