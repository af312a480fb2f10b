"""The load-time checks the reference applies to every event (envelope, message and header shapes).

Each returns a message when the reference would refuse the event, or None. Kept separate from the JSON
Schemas: these are exactly the reference's refusals, while the schemas are our fuller description.
"""

from __future__ import annotations

from typing import Any

from .generations import Generation
from .rules import tool_call_ids_problem

ENVELOPE_KEYS = frozenset({"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable"})
# The role each surface type's message must have; a v4 tool result is a tool-role message.
_ROLES = {"user/message": "user", "assistant/message": "assistant", "tool/result": "user",
          "system/message": "system", "developer/message": "developer"}


def _safe_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -(2**53) < value < 2**53


def _has_provider_model(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("provider"), str) and bool(value["provider"])
            and isinstance(value.get("model"), str) and bool(value["model"]))


def envelope_problem(event: dict[str, Any]) -> str | None:
    if not event.keys() <= ENVELOPE_KEYS:
        extra = next(key for key in event if key not in ENVELOPE_KEYS)
        return f"invalid event envelope: unexpected key {extra!r}"
    if not isinstance(event.get("type"), str):
        return "invalid event envelope: type must be a string"
    if "time" in event and not _safe_int(event["time"]):
        return "invalid event envelope: time must be a safe integer"
    if "data" not in event:
        return "invalid event envelope: data is missing"
    if "ignorable" in event and event["ignorable"] is not True:
        return "invalid event envelope: ignorable must be true when present"
    return None


def message_problem(event: dict[str, Any], generation: Generation) -> str | None:
    kind = event.get("type")
    role = _ROLES.get(str(kind))
    if role is None:
        return None
    if kind == "tool/result" and generation.tool_result == "tool-message":
        role = "tool"
    data = event.get("data")
    record = data if isinstance(data, dict) else None
    message = record if kind == "user/message" else (record or {}).get("message")
    if not isinstance(message, dict) or not isinstance(message.get("id"), str) or not message["id"]:
        return "lacks an identified message"
    if message.get("role") != role:
        return f'message must have role "{role}"'
    source = message.get("source")
    if not isinstance(source, dict) or not isinstance(source.get("kind"), str) or not source["kind"]:
        return "message has invalid source"
    content = message.get("content")
    if not isinstance(content, list):
        return "message has invalid content"
    if kind == "assistant/message":
        if source["kind"] != "model" or not _has_provider_model(source):
            return "message must have model source"
        return None
    if kind != "tool/result":
        return None
    if source["kind"] != "tool" or not isinstance(source.get("callId"), str) or not source["callId"]:
        return "message must have tool source"
    if role == "tool":
        return tool_call_ids_problem(message.get("toolCallId"), source["callId"])
    block = content[0] if content else None
    if (len(content) != 1 or not isinstance(block, dict) or block.get("type") != "tool-result"
            or not isinstance(block.get("content"), list)):
        return "message must contain one tool-result block"
    return tool_call_ids_problem(block.get("toolCallId"), source["callId"])


def header_problem(event: dict[str, Any]) -> str | None:
    if event.get("type") != "request/header":
        return None
    data = event.get("data")
    header = data.get("header") if isinstance(data, dict) else None
    config = header.get("config") if isinstance(header, dict) else None
    if not _has_provider_model(config):
        return "request/header lacks provider/model"
    assert isinstance(config, dict) and isinstance(header, dict)
    effort = config.get("reasoningEffort")
    if "reasoningEffort" in config and (not isinstance(effort, str) or not effort):
        return "request/header has an invalid reasoningEffort"
    defaults = header.get("adapterDefaults")
    if "adapterDefaults" in header and (
            not isinstance(defaults, dict)
            or any(key not in ("reasoningEffort", "maxTokens") or value is not True
                   for key, value in defaults.items())
            or any(defaults.get(flag) is True and flag not in config for flag in ("reasoningEffort", "maxTokens"))):
        return "request/header has invalid adapterDefaults"
    return None
