"""What the DeepSeek adapter POSTs for a rebuilt request, and a linear form of the prompt the provider caches.

Mirrors the text-only path of `@deepseek-ai/dsh-llm-deepseek` at dsh 0.1.1-rc.2 (serialize.ts, adapter.ts)
plus the runtime's text-only image projection (dsh-llm content.ts). The image path (Files API / inline
base64, used only for image-capable catalog models) is not mirrored: such a request raises instead of
guessing.
See docs/deepseek-wire.md for the rules and their upstream sources.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
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


# --- The prompt the provider tokenizes: DeepSeek V4's chat template ----------------------------------------
# Rendered from the template DeepSeek publishes with the V4 model weights (encoding/encoding_dsv4.py of
# deepseek-ai/DeepSeek-V4-Flash), written here from its rules: the system prompt with the tool block after it,
# consecutive user and tool messages merged into one user turn (a tool result as <tool_result>…</tool_result>,
# parts joined by a blank line), tool calls in DSML, and the reasoning of an assistant message kept when the
# request has tools or the message follows the last user turn (docs/deepseek-wire.md). The API does not publish
# what it adds around this; cache-report's prompt count adds the framing fitted on real usage (reports.prediction).

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
DSML = "｜DSML｜"
RESULT_OPEN, RESULT_CLOSE = "<tool_result>", "</tool_result>"
JOINT = "\n\n"   # between the parts of one user turn, and before the tool block and the tool calls
USER_SIDE = frozenset({"user", "tool"})   # the roles the template merges into one user turn

MAX_EFFORT_PREAMBLE = (
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root "
    "cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial "
    "scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n")
TOOLS_PREAMBLE = f"""## Tools

You have access to a set of tools to help answer the user's question. You can invoke tools by writing a \
"<{DSML}tool_calls>" block like the following:

<{DSML}tool_calls>
<{DSML}invoke name="$TOOL_NAME">
<{DSML}parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</{DSML}parameter>
...
</{DSML}invoke>
<{DSML}invoke name="$TOOL_NAME2">
...
</{DSML}invoke>
</{DSML}tool_calls>

String parameters should be specified as is and set `string="true"`. For all other types (numbers, booleans, \
arrays, objects), pass the value in JSON format and set `string="false"`.

If thinking_mode is enabled (triggered by {THINK_OPEN}), you MUST output your complete reasoning inside \
{THINK_OPEN}...{THINK_CLOSE} BEFORE any tool calls or final response.

Otherwise, output directly after {THINK_CLOSE} with tool calls or final response.

### Available Tool Schemas

"""
TOOLS_CLOSING = "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n"


@dataclass(frozen=True, slots=True)
class TemplateMode:
    """What of a request's options the template reads. Thinking is on unless the body disables it: V4 thinks by
    default (the corpus's bodies without `thinking` were answered with reasoning tokens)."""

    thinking: bool = True
    tools: bool = False      # with tools, every assistant message keeps its reasoning
    max_effort: bool = False


def template_mode(body: WireBody) -> TemplateMode:
    thinking = (body.get("thinking") or {}).get("type") != "disabled"
    return TemplateMode(thinking, bool(body.get("tools")), thinking and body.get("reasoning_effort") == "max")


def _json(value: Json) -> str:
    return json.dumps(value, ensure_ascii=False)


def tools_block(tools: list[Json]) -> str:
    schemas = "\n".join(_json(tool.get("function")) for tool in tools)
    return TOOLS_PREAMBLE + schemas + TOOLS_CLOSING


def head_segment(system_texts: Sequence[str], tools: list[Json] | None, mode: TemplateMode = TemplateMode()) -> str:
    """The first segment: the leading system message(s), run together as the template renders each, with the tool
    block after the first (an empty one stands in when there is none)."""
    texts = list(system_texts) or [""]
    if tools:
        texts[0] += JOINT + tools_block(tools)
    return BOS + (MAX_EFFORT_PREAMBLE if mode.max_effort else "") + "".join(texts)


def _parameters(arguments: Json) -> str:
    """A call's arguments as DSML parameters: a JSON object's members, anything else (or JSON nested too deep to
    read back) as one `arguments`."""
    try:
        values = json.loads(arguments) if isinstance(arguments, str) else None
        return _dsml_parameters(values) if isinstance(values, dict) else _dsml_parameters({"arguments": arguments})
    except (ValueError, RecursionError):
        return _dsml_parameters({"arguments": arguments})


def _dsml_parameters(values: dict[str, Json]) -> str:
    return "\n".join(f'<{DSML}parameter name="{name}" string="{"true" if isinstance(value, str) else "false"}">'
                     f'{value if isinstance(value, str) else _json(value)}</{DSML}parameter>'
                     for name, value in values.items())


def _calls(calls: list[Json]) -> str:
    invokes = []
    for call in calls:
        function = call.get("function") or {}
        invokes.append(f'<{DSML}invoke name="{function.get("name")}">\n{_parameters(function.get("arguments"))}\n'
                       f"</{DSML}invoke>")
    return f"{JOINT}<{DSML}tool_calls>\n" + "\n".join(invokes) + f"\n</{DSML}tool_calls>"


def render_message(message: Json, before: str | None, after: str | None, later_user: bool,
                   mode: TemplateMode) -> str:
    """One wire message after the leading system messages, given the roles of the wire messages around it
    (`before`, `after`: None at either end) and whether a user or tool message follows it anywhere later. A
    segment ends where the template puts an added token or a blank line, so a prompt's token ids are its
    segments' ids joined (a part that itself starts with whitespace and a line break is the exception)."""
    role = message.get("role")
    content = str(message.get("content") or "")
    if role == "assistant":
        keep = mode.thinking and (mode.tools or not later_user)
        reasoning = str(message.get("reasoning_content") or "") + THINK_CLOSE if keep else ""
        calls = message.get("tool_calls")
        return reasoning + content + (_calls(calls) if calls else "") + EOS
    if role not in USER_SIDE:   # a later system message: its text as it is
        return content
    text = (USER if before not in USER_SIDE else "") + (
        RESULT_OPEN + content + RESULT_CLOSE if role == "tool" else content)
    if after in USER_SIDE:
        return text + JOINT
    if after in (None, "assistant"):   # the turn ends: the assistant's turn opens, thinking or not
        return text + ASSISTANT + (THINK_OPEN if mode.thinking and (mode.tools or not later_user) else THINK_CLOSE)
    return text


def render_messages(messages: list[Json], mode: TemplateMode, *, before: str | None = None,
                    after: str | None = None, later_user: bool = False) -> list[str]:
    """`render_message` for a run of wire messages, given the roles around the run and whether a user or tool
    message follows it."""
    rendered = []
    for index in range(len(messages) - 1, -1, -1):   # backwards, to know what follows each
        message = messages[index]
        rendered.append(render_message(
            message, messages[index - 1].get("role") if index else before,
            messages[index + 1].get("role") if index + 1 < len(messages) else after, later_user, mode))
        later_user = later_user or message.get("role") in USER_SIDE
    return rendered[::-1]


def wire_prompt_segments(body: WireBody, *, generation_prompt: bool = True) -> list[str]:
    """The prompt as the provider renders it, in cache order: the head (leading system messages and the tool
    block), then one string per wire message. `generation_prompt=False` leaves off the assistant-turn opener
    that ends a prompt after a user or tool message (what the provider caches of a prompt is followed by the
    answer it generated)."""
    messages: list[Json] = list(body.get("messages") or [])
    leading: list[str] = []
    while messages and messages[0].get("role") == "system":
        leading.append(str(messages.pop(0).get("content") or ""))
    mode = template_mode(body)
    segments = [head_segment(leading, body.get("tools"), mode), *render_messages(messages, mode)]
    if not generation_prompt and messages and messages[-1].get("role") in USER_SIDE:
        segments[-1] = segments[-1].removesuffix(ASSISTANT + THINK_OPEN).removesuffix(ASSISTANT + THINK_CLOSE)
    return segments


def wire_prompt_text(body: WireBody, *, generation_prompt: bool = True) -> str:
    """`wire_prompt_segments` joined: the text whose token prefix the provider's cache can reuse."""
    return "".join(wire_prompt_segments(body, generation_prompt=generation_prompt))
