"""The shipped JSON Schemas: well-formed, faithful to the upstream vocabulary, and true to the real corpus."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from dsh_audit.vocabulary import (
    SchemaViolation,
    load_schemas,
    validate_event,
    validate_header,
    validate_packed_row,
    vocabulary,
)

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"
CORPUS = Path("/work/shared/dsh-logs")
DRAFT = "https://json-schema.org/draft/2020-12/schema"

# Independent check: KNOWN_SESSION_EVENT_TYPES in upstream packages/core/session/src/known-event-types.ts.
UPSTREAM_KNOWN_TYPES = {
    "agent-preset/selected", "agent/inbox/spliced", "approval/asked", "approval/decided", "approval/policy",
    "assistant/chunk", "assistant/message", "command/done", "command/run", "compaction/end",
    "compaction/prune", "compaction/start", "compaction/summary", "feedback/record", "goal/change",
    "hook/invoked", "hook/result", "llm/retry", "llm/retry-started", "permission/preset", "plan/mode",
    "request/context", "request/header", "sandbox/mode", "schedule/change", "session/end-seed",
    "session/title", "session/title-llm-request", "step/end", "step/start", "subagent/descriptor",
    "team/member", "team/message/delivered", "team/message/queued", "team/task", "todo/write",
    "tool-workflow/agent-end", "tool-workflow/agent-start", "tool-workflow/run-end",
    "tool-workflow/run-start",
    "tool/call", "tool/code-dispatch", "tool/code-dispatch-start", "tool/result", "turn/end", "turn/start",
    "user/message", "web/deepseek-search-llm-request",
}
PACKED = {"text-chunks": "text-delta", "reasoning-chunks": "reasoning-delta",
          "tool-call-chunks": "tool-call-delta"}


def test_every_schema_is_valid_draft_2020_12() -> None:
    documents = load_schemas()
    assert len(documents) == len(list(SCHEMAS.rglob("*.schema.json")))
    for uri, document in documents.items():
        assert document["$schema"] == DRAFT, uri
        Draft202012Validator.check_schema(document)


def test_schemas_dir_holds_only_json() -> None:
    strays = [path for path in SCHEMAS.rglob("*") if path.is_file() and "__pycache__" not in path.parts
              and path.suffix != ".json" and path.name != "__init__.py"]
    assert strays == []


def test_event_files_are_named_and_annotated_by_their_type() -> None:
    for path in (SCHEMAS / "events").glob("*.schema.json"):
        document = json.loads(path.read_text())
        assert path.name == document["x-dsh-type"].replace("/", ".") + ".schema.json"
        assert isinstance(document["x-dsh-surface"], bool)
        assert document["x-dsh-declared-in"].startswith("packages/")
        assert document["description"]


def test_known_types_are_the_upstream_48() -> None:
    assert vocabulary().known_types == UPSTREAM_KNOWN_TYPES
    assert len(UPSTREAM_KNOWN_TYPES) == 48


def test_surface_types_are_exactly_three() -> None:
    assert vocabulary().surface_types == {"user/message", "assistant/message", "tool/result"}


def test_legacy_types() -> None:
    vocab = vocabulary()
    assert set(vocab.upgraded_legacy) == {"steering/message"}
    assert set(vocab.rejected_legacy) == {"request/header-delta", "mode/set"}
    assert set(vocab.retired_legacy) == {"context/message"}
    legacy = set(vocab.upgraded_legacy) | set(vocab.rejected_legacy) | set(vocab.retired_legacy)
    assert not legacy & vocab.known_types


# --- the real corpus ---------------------------------------------------------------------------------------


def _corpus_logs() -> list[Path]:
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    return [CORPUS / entry["path"] for entry in manifest["files"] if entry["kind"] == "session-log"]


def _expand(row: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """One assistant/chunk per packed member (the chunk-rows.ts layout)."""
    data = row["data"]
    if row["type"] == "tool-call-chunks":
        for fragment in data["args"]:
            chunk = {"type": "tool-call-delta", "index": data["index"], "id": data["id"]}
            if "name" in data:
                chunk["name"] = data["name"]
            chunk["argumentsDelta"] = fragment
            yield _chunk_event(data, chunk)
    else:
        for text in data["texts"]:
            chunk = {"type": PACKED[row["type"]], "index": data["index"], "text": text}
            yield _chunk_event(data, chunk)


def _chunk_event(row_data: dict[str, Any], chunk: dict[str, Any]) -> dict[str, Any]:
    return {"type": "assistant/chunk", "data": {"turn": row_data["turn"], "step": row_data["step"], "chunk": chunk}}


def _upgrade(event: dict[str, Any], seq: int) -> dict[str, Any]:
    """The trivial pre-identity upgrades the loader applies (coordinator.ts), enough for the corpus."""
    kind, data = event["type"], event["data"]
    legacy_id = f"legacy-message:test:{seq}"
    if kind == "turn/start" and "trigger" in data:
        return {**event, "data": {"turn": data["turn"]}}
    if kind == "user/message" and "id" not in data and "role" not in data:
        return {**event, "data": {**data, "id": legacy_id, "role": "user"}}
    if kind == "assistant/message" and "message" not in data and "provenance" in data:
        rest = {key: value for key, value in data.items() if key not in ("content", "provenance")}
        message = {"id": legacy_id, "role": "assistant", "content": data["content"],
                   "source": {**data["provenance"], "kind": "model"}}
        return {**event, "data": {**rest, "message": message}}
    if kind == "tool/result" and "message" not in data and "callId" in data:
        rest = {key: value for key, value in data.items() if key not in ("callId", "content", "isError")}
        block = {"type": "tool-result", "toolCallId": data["callId"], "content": data["content"],
                 "isError": data["isError"]}
        message = {"id": legacy_id, "role": "user", "content": [block],
                   "source": {"kind": "tool", "callId": data["callId"]}}
        return {**event, "data": {**rest, "message": message}}
    return event


def _read(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """Header, packed rows, and unpacked events (legacy shapes upgraded) of one committed fixture."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    for record in lines[1:]:
        if record["type"] in PACKED:
            rows.append(record)
            events.extend(_expand(record))
        else:
            events.append(_upgrade(record, len(events)))
    return lines[0], rows, events


@pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not present")
def test_corpus_validates() -> None:
    logs = _corpus_logs()
    assert len(logs) == 100
    counts: Counter[str] = Counter()
    refused_headers: dict[Path, list[SchemaViolation]] = {}
    problems: dict[tuple[Path, int], list[SchemaViolation]] = {}
    for path in logs:
        header, rows, events = _read(path)
        if header_violations := validate_header(header):
            refused_headers[path] = header_violations
        for row in rows:
            assert validate_packed_row(row) == [], path
        counts["packed rows"] += len(rows)
        for seq, event in enumerate(events):
            counts["events"] += 1
            if found := validate_event(event):
                problems[(path, seq)] = found
    print(f"\n{len(logs)} logs, {counts['events']} events, {counts['packed rows']} packed rows; "
          f"{len(refused_headers)} headers and {len(problems)} events fail the schemas")
    for (path, seq), found in problems.items():
        print(f"  {path.relative_to(CORPUS)} seq {seq}: {'; '.join(map(str, found))}")
    # Every header failure is the one the JSONL reader refuses: an acp-snapshot suite fixture with no version.
    missing_version = [SchemaViolation("/version", "missing required key")]
    assert all(found == missing_version for found in refused_headers.values())
    # Every event failure sits in such a fixture; everything else in the corpus validates cleanly.
    assert {path for path, _ in problems} <= set(refused_headers)
    assert counts["events"] > 4000


# --- negative cases ----------------------------------------------------------------------------------------

USER = {"type": "user/message", "surfaceOp": "append",
        "data": {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}, "role": "user",
                 "id": "m1"}}
HEADER = {"type": "request/header", "data": {"reason": "initial", "header": {
    "config": {"provider": "deepseek-official", "model": "deepseek-v4-flash"},
    "system": "{{system}}", "tools": "{{tools}}", "messagePrefix": ["{{messagePrefix}}"]}}}


def _with(event: dict[str, Any], pointer: str, value: Any) -> dict[str, Any]:
    copy = json.loads(json.dumps(event))
    *parents, last = pointer.strip("/").split("/")
    target = copy
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    target[last] = value
    return copy


def test_positive_examples_are_clean() -> None:
    assert validate_event(USER) == []
    assert validate_event(HEADER) == []


@pytest.mark.parametrize(("event", "pointer"), [
    (_with(USER, "/data/content/0/type", "txt"), "/data/content/0/type"),
    (_with(USER, "/data/content/0/text", 7), "/data/content/0/text"),
    (_with(USER, "/data/role", "assistant"), "/data/role"),
    ({**USER, "data": {k: v for k, v in USER["data"].items() if k != "id"}}, "/data/id"),
    ({**USER, "extra": 1}, "/extra"),
    (_with(USER, "/surfaceOp", "prepend"), "/surfaceOp"),
    (_with(USER, "/surfaceOp", {"op": "replace", "start": 1}), "/surfaceOp"),
    ({k: v for k, v in USER.items() if k != "surfaceOp"}, "/surfaceOp"),
    ({**HEADER, "surfaceOp": "append"}, "/surfaceOp"),
    (_with(HEADER, "/data/header/tools", "all of them"), "/data/header/tools"),
    (_with(HEADER, "/data/header/tools", 3), "/data/header/tools"),
    (_with(HEADER, "/data/header/messagePrefix", ["{{prefix}}"]), "/data/header/messagePrefix"),
    (_with(HEADER, "/data/reason", "fallback"), "/data/reason"),
    (_with(HEADER, "/data/header/config", {"model": "fake"}), "/data/header/config/provider"),
    (_with(HEADER, "/data/header/adapterDefaults", {"maxTokens": True}), "/data/header/config/maxTokens"),
    ({"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "done"}}}, "/data/reason/kind"),
    ({"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "aborted"}}}, "/data/reason/reason"),
    ({"type": "turn/end", "data": {"error": "model exploded"}}, "/data/turn"),
    ({"type": "assistant/chunk", "data": {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0}}},
     "/data/chunk/text"),
    ({"type": "step/start", "seq": -1, "data": {"turn": 1, "step": 1}}, "/seq"),
    ({"type": "step/start", "ignorable": False, "data": {"turn": 1, "step": 1}}, "/ignorable"),
])
def test_negative_cases_point_at_the_fault(event: dict[str, Any], pointer: str) -> None:
    found = validate_event(event)
    assert pointer in [violation.pointer for violation in found], found
    assert all("\n" not in violation.message and len(violation.message) <= 140 for violation in found)


def test_unknown_type_gets_envelope_check_only() -> None:
    assert validate_event({"type": "future/thing", "ignorable": True, "data": [1, 2]}) == []
    assert [v.pointer for v in validate_event({"type": "future/thing", "data": 1, "when": 2})] == ["/when"]


def test_header_leniency_and_refusals() -> None:
    base = {"type": "session", "version": 0, "id": "{{sessionId}}", "createdAt": 0,
            "cwd": "{{cwd}}/workspace"}
    assert validate_header(base) == []
    assert validate_header({**base, "delegationDepth": 0, "cwd": "C:\\work"}) == []
    assert [v.pointer for v in validate_header({**base, "version": 1})] == ["/version"]
    assert [v.pointer for v in validate_header({**base, "cwd": "relative/dir"})] == ["/cwd"]
    assert [v.pointer for v in validate_header({**base, "sandboxMode": "read-only"})] == ["/sandboxMode"]


def test_packed_row_rules() -> None:
    row = {"type": "tool-call-chunks", "data": {"turn": 1, "step": 1, "index": 1, "dt": [0, 1], "id": "c1",
                                                "name": "bash", "args": ["{", "}", ""]}}
    assert validate_packed_row(row) == []
    assert [v.pointer for v in validate_packed_row(_with(row, "/data/dt", [0]))] == ["/data/dt"]
    assert [v.pointer for v in validate_packed_row(_with(row, "/data/args", []))] == ["/data/args"]
    assert "/data/texts" in [v.pointer for v in validate_packed_row({**row, "type": "text-chunks"})]
    assert [v.pointer for v in validate_packed_row({**row, "seq": 3})] == ["/seq"]


# --- the fast path agrees with jsonschema ------------------------------------------------------------------


def _mutations(value: Any, depth: int = 0) -> Iterator[Any]:
    """The value with one node replaced by a value of another JSON type, or one key dropped."""
    yield from (None, 0, 1.5, True, "x", "{{tools}}", [], {}, [1, 1])
    if depth > 5:
        return
    if isinstance(value, dict):
        for key in value:
            yield {k: v for k, v in value.items() if k != key}
            for mutated in _mutations(value[key], depth + 1):
                yield {**value, key: mutated}
    elif isinstance(value, list):
        for index, item in enumerate(value[:3]):
            for mutated in _mutations(item, depth + 1):
                yield [*value[:index], mutated, *value[index + 1:]]


@pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not present")
def test_fast_checker_agrees_with_jsonschema() -> None:
    from dsh_audit.vocabulary import _compiled

    compiled = _compiled()
    assert set(compiled.fast) == {"envelope", "header", "packed_row", *compiled.data}
    samples: dict[str, list[Any]] = {}
    for path in _corpus_logs():
        header, rows, events = _read(path)
        samples.setdefault("header", []).append(header)
        samples.setdefault("packed_row", []).extend(rows[:2])
        for event in events:
            samples.setdefault("envelope", []).append(event)
            samples.setdefault(event["type"], []).append(event["data"])
    validators = {"envelope": compiled.envelope, "header": compiled.header, "packed_row": compiled.packed_row,
                  **compiled.data}
    checked = 0
    for name, instances in samples.items():
        for instance in instances[:4]:
            for candidate in [instance, *_mutations(instance)]:
                expected = next(validators[name].iter_errors(candidate), None) is None
                assert compiled.fast[name](candidate) == expected, (name, candidate)
                checked += 1
        for instance in instances[4:]:
            valid = next(validators[name].iter_errors(instance), None) is None
            assert compiled.fast[name](instance) == valid
    assert checked > 5_000
