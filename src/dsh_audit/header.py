"""The request header (EpochHeader): canonical form, equality, and the parts of a request it contributes.

The reference keeps `config` exactly as logged, keeps `adapterDefaults` only when a flag is true, keeps
`system`/`tools` only when non-empty, and drops every other key (including the legacy `messagePrefix`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from .jsjson import dumps, same_text

PLACEHOLDER_PREFIX = "{{"


def _js_nonempty(value: Any) -> bool:
    """`value !== undefined && value.length > 0` in JS: only strings and arrays have a length."""
    return isinstance(value, (str, list)) and len(value) > 0


def is_placeholder(value: Any) -> bool:
    """A snapshot-normalization token such as "{{system}}" or ["{{messagePrefix}}"]."""
    if isinstance(value, str):
        return value.startswith(PLACEHOLDER_PREFIX) and value.endswith("}}")
    if isinstance(value, list):
        return any(isinstance(item, str) and is_placeholder(item) for item in value)
    return False


def system_text(message: Any) -> str:
    """A system/message's prompt (v3 on) as one string: its text blocks, joined as the adapter sends them."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return ""
    return "".join(str(block.get("text", "")) for block in content
                   if isinstance(block, dict) and block.get("type") == "text")


def canonical_header(header: dict[str, Any], *, system: bool = True) -> dict[str, Any]:
    """The header as the reference compares and sends it. `system=False` (v3 on): the prompt is a surface
    node, so a stray header.system (which dsh refuses) never reaches the request."""
    canonical: dict[str, Any] = {"config": header.get("config")}
    defaults = header.get("adapterDefaults")
    if isinstance(defaults, dict) and (defaults.get("reasoningEffort") is True or defaults.get("maxTokens") is True):
        canonical["adapterDefaults"] = defaults
    if system and _js_nonempty(header.get("system")):
        canonical["system"] = header["system"]
    if _js_nonempty(header.get("tools")):
        canonical["tools"] = header["tools"]
    return canonical


class HeaderSnapshot(msgspec.Struct, frozen=True):
    """One `request/header` event, folded: canonical header plus its pre-serialized request parts."""

    seq: int
    reason: str
    header: dict[str, Any]          # canonical
    raw: dict[str, Any]             # as logged (keeps legacy messagePrefix for the legacy mode)
    config_bytes: bytes             # `"provider":"x","model":"y",` — the config keys of the request, comma-terminated
    tail_bytes: bytes               # `,"system":…,"tools":…}` closing the request after the messages array
    placeholders: tuple[str, ...]   # fields logged as a normalization placeholder: the real content is unknown

    @property
    def message_prefix(self) -> Any:
        return self.raw.get("messagePrefix")


def snapshot(seq: int, data: dict[str, Any], *, system: bool = True, prefix: bool = True) -> HeaderSnapshot:
    """One header, folded. `system`/`prefix` False: the log's generation has no header.system (v3 on) or no
    messagePrefix (v1 on), so a stray one (a schema finding) never reaches a request."""
    raw = data.get("header")
    raw = raw if isinstance(raw, dict) else {}
    if not prefix and "messagePrefix" in raw:
        raw = {key: value for key, value in raw.items() if key != "messagePrefix"}
    canonical = canonical_header(raw, system=system)
    config = canonical["config"] if isinstance(canonical["config"], dict) else {}
    config_bytes = b"".join(f"{dumps(key)}:{dumps(value)},".encode() for key, value in config.items())
    tail = "".join(f',"{key}":{dumps(canonical[key])}' for key in ("system", "tools") if key in canonical)
    placeholders = tuple(key for key in ("system", "tools", "messagePrefix")
                         if (system or key != "system") and is_placeholder(raw.get(key)))
    return HeaderSnapshot(seq=seq, reason=str(data.get("reason")), header=canonical, raw=raw,
                          config_bytes=config_bytes, tail_bytes=(tail + "}").encode(), placeholders=placeholders)


def same_envelope(a: HeaderSnapshot | None, b: HeaderSnapshot | None) -> bool:
    """Whether two header snapshots give a request the same envelope and prepended messages."""
    return a is not None and b is not None and (a is b or (
        header_equals(a.header, b.header) and a.message_prefix == b.message_prefix))


# What a request/header holds beside the prompt: request options. The provider's prefix cache is on the prompt
# (DeepSeek's Context Caching guide, api-docs.deepseek.com/guides/kv_cache: hits are prefixes of the messages,
# persisted at the end of the user input and of the output; it names no request parameter), so a change of
# these alone never breaks it (docs/cache-report.md).
OPTION_KEYS = ("reasoningEffort", "temperature", "maxTokens", "stop")
OPTION_FIELDS = frozenset({*(f"config.{key}" for key in OPTION_KEYS), "adapterDefaults"})


def same_prompt(a: HeaderSnapshot | None, b: HeaderSnapshot | None) -> bool:
    """Whether two header snapshots give the provider the same prompt: provider and model, system, tools and the
    prepended messages, request options (OPTION_FIELDS) aside."""
    if a is None or b is None:
        return False
    if a is b:
        return True
    ca, cb = a.header.get("config") or {}, b.header.get("config") or {}
    if not isinstance(ca, dict) or not isinstance(cb, dict):
        return same_text(ca, cb) and same_envelope(a, b)
    return (all(_same_json(ca, cb, key) for key in ("provider", "model"))
            and a.header.get("system") == b.header.get("system")
            and same_text(a.header.get("tools") or [], b.header.get("tools") or [])
            and a.message_prefix == b.message_prefix)


def header_equals(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Field-wise equality as the reference defines it; key order matters inside tool schemas."""
    ca, cb = a.get("config") or {}, b.get("config") or {}
    if not isinstance(ca, dict) or not isinstance(cb, dict):
        return same_text(ca, cb)
    for key in ("provider", "model", "reasoningEffort", "temperature", "maxTokens", "stop"):
        if not _same_json(ca, cb, key):
            return False
    da, db = a.get("adapterDefaults") or {}, b.get("adapterDefaults") or {}
    for flag in ("reasoningEffort", "maxTokens"):
        if da.get(flag) != db.get(flag):
            return False
    if a.get("system") != b.get("system"):
        return False
    return same_text(a.get("tools") or [], b.get("tools") or [])


def _same_json(a: dict[str, Any], b: dict[str, Any], key: str) -> bool:
    """Same presence and same JSON text: JS `===` on scalars (1 and 1.0 are one number; true is not 1)."""
    if (key in a) != (key in b):
        return False
    return key not in a or same_text(a[key], b[key])


def changed_fields(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Top-level names of what differs between two canonical headers (config keys as `config.<key>`)."""
    changed: list[str] = []
    cb, ca = before.get("config") or {}, after.get("config") or {}
    if isinstance(cb, dict) and isinstance(ca, dict):
        for key in dict.fromkeys([*cb, *ca]):
            if not _same_json(cb, ca, key):
                changed.append(f"config.{key}")
    elif not same_text(cb, ca):
        changed.append("config")
    changed.extend(key for key in ("adapterDefaults", "system", "tools") if not _same_json(before, after, key))
    return changed
