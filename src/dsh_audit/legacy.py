"""Legacy-shape upgrades the reference's persistence load applies before validation.

Read-only: the stored bytes are never touched; we upgrade the decoded event dict. Key order of the upgraded
objects follows the reference's object spreads, because rebuilt request bytes depend on it.
"""

from __future__ import annotations

from typing import Any

from .errors import LogRejected

# The event types an upgrade may rewrite or remember; every other event passes through unchanged.
UPGRADABLE = frozenset({"turn/start", "turn/end", "steering/message", "user/message", "assistant/message",
                         "tool/result"})


def legacy_message_id(session_id: str, seq: int) -> str:
    return f"legacy-message:{session_id}:{seq}"


def _is_turn_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _has_only_keys(record: dict[str, Any], required: tuple[str, ...], optional: tuple[str, ...] = ()) -> bool:
    allowed = set(required) | set(optional)
    return all(key in allowed for key in record) and all(key in record for key in required)


class LegacyUpgrader:
    """Upgrades one event at a time, remembering message ids by seq (a legacy tool/result replacement
    inherits the id of the message it replaces)."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.message_ids: dict[int, str] = {}
        self.upgraded = 0

    def _malformed(self, what: str, seq: int) -> LogRejected:
        return LogRejected(f'session "{self.session_id}" contains malformed pre-react-loop {what}', seq=seq,
                           event_type=what)

    def upgrade(self, event: dict[str, Any], seq: int) -> dict[str, Any]:
        if event.get("type") not in UPGRADABLE:   # chunks and log-only records: nothing to upgrade or remember
            return event
        original = event
        event = self._turn_start(event, seq)
        event = self._turn_end(event, seq)
        event = self._steering(event, seq)
        event = self._message(event, seq)
        if event is not original:
            self.upgraded += 1
        message_id = _message_id(event)
        if message_id is not None:
            self.message_ids[seq] = message_id
        return event

    def _turn_start(self, event: dict[str, Any], seq: int) -> dict[str, Any]:
        data = event.get("data")
        if event.get("type") != "turn/start" or not isinstance(data, dict) or "trigger" not in data:
            return event
        trigger = data["trigger"]
        if (not _is_turn_number(data.get("turn")) or not _has_only_keys(data, ("turn", "trigger"))
                or not isinstance(trigger, dict) or not isinstance(trigger.get("kind"), str)
                or not trigger["kind"]):
            raise self._malformed("turn/start", seq)
        return {**event, "data": {"turn": data["turn"]}}

    def _turn_end(self, event: dict[str, Any], seq: int) -> dict[str, Any]:
        data = event.get("data")
        if event.get("type") != "turn/end" or not isinstance(data, dict):
            return event
        reason = data.get("reason")
        if (not _is_turn_number(data.get("turn")) or not _has_only_keys(data, ("turn", "reason"))
                or not isinstance(reason, dict) or not isinstance(reason.get("kind"), str)):
            raise self._malformed("turn/end", seq)
        kind = reason["kind"]
        new_reason: dict[str, Any]
        if kind in ("completed", "blocked", "max-tokens", "interrupted"):
            if not _has_only_keys(reason, ("kind",)):
                raise self._malformed("turn/end", seq)
            return event
        if kind == "aborted":
            if "reason" in reason:
                return event
            if not _has_only_keys(reason, ("kind",)):
                raise self._malformed("turn/end", seq)
            new_reason = {"kind": "aborted", "reason": {"kind": "legacy"}}
        elif kind == "disposed":
            if not _has_only_keys(reason, ("kind",)):
                raise self._malformed("turn/end", seq)
            new_reason = {"kind": "aborted", "reason": {"kind": "disposed"}}
        elif kind == "error":
            if "error" in reason:
                return event
            new_reason = self._legacy_error_reason(reason, seq)
        else:
            return event
        return {**event, "data": {**data, "reason": new_reason}}

    def _legacy_error_reason(self, reason: dict[str, Any], seq: int) -> dict[str, Any]:
        step = reason.get("step")
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            raise self._malformed("turn/end", seq)
        failure = reason.get("failure")
        if (isinstance(failure, dict) and _has_only_keys(reason, ("kind", "step", "failure"))
                and _has_only_keys(failure, ("message", "code"), ("status", "providerRetryAfterMs", "requestId"))
                and isinstance(failure.get("message"), str) and isinstance(failure.get("code"), str)):
            return {"kind": "error", "error": failure}
        keys = ("kind", "step", "message") if "code" not in reason else ("kind", "step", "message", "code")
        code = reason.get("code")
        if (not _has_only_keys(reason, keys) or not isinstance(reason.get("message"), str)
                or (code is not None and not isinstance(code, str))):
            raise self._malformed("turn/end", seq)
        return {"kind": "error", "error": {"message": reason["message"],
                                           "code": code if isinstance(code, str) else "UNKNOWN"}}

    def _steering(self, event: dict[str, Any], seq: int) -> dict[str, Any]:
        if event.get("type") != "steering/message":
            return event
        data = event.get("data")
        if not isinstance(data, dict):
            raise self._malformed("steering/message", seq)
        wrapped = data.get("message")
        turn = data.get("turn")
        turn_ok = isinstance(turn, int) and not isinstance(turn, bool)
        if isinstance(wrapped, dict) and turn_ok and _has_only_keys(data, ("turn", "message")):
            return {**event, "type": "user/message", "data": wrapped}
        if not turn_ok or not _has_only_keys(data, ("turn", "content", "source")):
            raise self._malformed("steering/message", seq)
        message = {k: v for k, v in data.items() if k != "turn"}
        return {**event, "type": "user/message",
                "data": {**message, "id": legacy_message_id(self.session_id, seq), "role": "user"}}

    def _message(self, event: dict[str, Any], seq: int) -> dict[str, Any]:
        data = event.get("data")
        kind = event.get("type")
        if not isinstance(data, dict):
            return event
        if kind == "user/message":
            if "id" in data or "role" in data or "message" in data or "content" not in data \
                    or "source" not in data:
                return event
            return {**event, "data": {**data, "id": legacy_message_id(self.session_id, seq), "role": "user"}}
        if kind == "assistant/message":
            if "message" in data or "content" not in data or "provenance" not in data:
                return event
            rest = {k: v for k, v in data.items() if k not in ("content", "provenance")}
            provenance = data["provenance"] if isinstance(data["provenance"], dict) else {}
            rest["message"] = {
                "id": legacy_message_id(self.session_id, seq), "role": "assistant", "content": data["content"],
                "source": {**provenance, "kind": "model"},
            }
            return {**event, "data": rest}
        if kind == "tool/result":
            if "message" in data or "callId" not in data or "content" not in data or "isError" not in data:
                return event
            rest = {k: v for k, v in data.items() if k not in ("callId", "content", "isError")}
            call_id = data["callId"]
            op = event.get("surfaceOp")
            inherited = op.get("start") if isinstance(op, dict) and op.get("op") == "replace" else None
            message_id = (legacy_message_id(self.session_id, seq) if not isinstance(inherited, int)
                          else self.message_ids.get(inherited))
            message: dict[str, Any] = {"id": message_id, "role": "user", "content": [
                {"type": "tool-result", "toolCallId": call_id, "content": data["content"],
                 "isError": data["isError"]}], "source": {"kind": "tool", "callId": call_id}}
            if message_id is None:  # JS spread drops an undefined id from JSON
                del message["id"]
            rest["message"] = message
            return {**event, "data": rest}
        return event


def _message_id(event: dict[str, Any]) -> str | None:
    data = event.get("data")
    if not isinstance(data, dict):
        return None
    message = data if event.get("type") == "user/message" else data.get("message")
    if isinstance(message, dict) and isinstance(message.get("id"), str):
        return str(message["id"])
    return None
