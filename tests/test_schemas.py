"""The shipped JSON Schemas: well-formed, one file per type and generation, faithful to the upstream
vocabulary of every log generation (schemas/generations.json), and true to the real corpus and the public samples."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from conftest_reference import LOGS_ROOT
from dsh_audit.generations import generations
from dsh_audit.vocabulary import (
    SchemaViolation,
    load_schemas,
    schema_generations,
    validate_event,
    validate_header,
    validate_packed_row,
    vocabulary,
)

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"
CORPUS = LOGS_ROOT
SAMPLES = Path(__file__).resolve().parent / "fixtures" / "generations"
DRAFT = "https://json-schema.org/draft/2020-12/schema"
BASE_ID = "https://schemas.dsh-audit.invalid/"
GENERATIONS = tuple(known.version for known in generations())
# The generations that store one event per row and mark a seeded child's cut in the log (v2 on).
EVENT_ROWS = [known.version for known in generations() if not known.packed_chunk_rows]
# Transcribed from the upstream per-generation inventories (tests/upstream_inventory.json names its sources).
INVENTORY = json.loads((Path(__file__).resolve().parent / "upstream_inventory.json").read_text())["generations"]

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


def _documents() -> dict[Path, dict[str, Any]]:
    return {path.relative_to(SCHEMAS): json.loads(path.read_text()) for path in SCHEMAS.rglob("*.schema.json")}


def test_every_schema_names_its_generations() -> None:
    """One contiguous run each: from x-dsh-since to x-dsh-until, left out when the schema still applies to the
    newest generation (so a new generation inherits every schema it does not change)."""
    for path, document in _documents().items():
        assert "x-dsh-generations" not in document, path
        since, until = document.get("x-dsh-since"), document.get("x-dsh-until", GENERATIONS[-1])
        assert since in GENERATIONS and until in GENERATIONS, path
        assert since <= until and document.get("x-dsh-until") != GENERATIONS[-1], path
        assert schema_generations(document) == list(range(since, until + 1)), path
        assert document["$id"] == BASE_ID + path.as_posix(), path


def test_event_files_are_named_by_type_and_first_generation() -> None:
    for path, document in _documents().items():
        if path.parts[0] != "events":
            continue
        kind, generations = document["x-dsh-type"], schema_generations(document)
        assert path.name == kind.replace("/", ".") + ".schema.json", path
        if len(path.parts) == 2:        # events/<type>: the shape format 0 wrote
            assert generations[0] == 0, path
        else:                           # events/v<k>/<type>: the shape from format k on
            assert len(path.parts) == 3 and path.parts[1] == f"v{generations[0]}", path
        assert isinstance(document["x-dsh-surface"], bool)
        assert document["x-dsh-declared-in"].startswith("packages/")
        assert document["description"]
        if "x-dsh-legacy" in document:  # legacy handling belongs to the v0 reader
            assert generations == [0], path


def _files_of(kind: str) -> list[dict[str, Any]]:
    return sorted((doc for doc in _documents().values() if doc.get("x-dsh-type") == kind),
                  key=lambda doc: doc["x-dsh-since"])


def test_one_home_per_type_and_generation() -> None:
    """A type's files cover disjoint generations, in one contiguous run, and agree on its surface role."""
    kinds = {doc["x-dsh-type"] for doc in _documents().values() if "x-dsh-type" in doc}
    for kind in kinds:
        files = _files_of(kind)
        covered = [g for doc in files for g in schema_generations(doc)]
        assert covered == list(range(covered[0], covered[-1] + 1)), kind
        assert len({doc["x-dsh-surface"] for doc in files}) == 1, kind
        for later in files[1:]:         # a new file only when the shape changes: it must not be a copy
            earlier = files[files.index(later) - 1]
            strip = {"$id", "x-dsh-since", "x-dsh-until", "description", "x-dsh-renamed-from"}
            assert ({k: v for k, v in later.items() if k not in strip}
                    != {k: v for k, v in earlier.items() if k not in strip}), later["$id"]


def test_renamed_types_hand_over_at_one_generation() -> None:
    renamed = {doc["x-dsh-type"]: doc for doc in _documents().values() if "x-dsh-renamed-from" in doc}
    assert set(renamed) == {"tool/ptc-dispatch", "tool/ptc-dispatch-start"}
    for kind, doc in renamed.items():
        assert doc is _files_of(kind)[0] or doc == _files_of(kind)[0]   # only on the new name's first file
        old_last = _files_of(doc["x-dsh-renamed-from"])[-1]["x-dsh-until"]
        assert old_last + 1 == doc["x-dsh-since"] == 3


def test_non_event_roots_one_per_generation() -> None:
    roots = {path.name: doc for path, doc in _documents().items() if path.parts[0] != "events"}
    assert schema_generations(roots["envelope.schema.json"]) == [0, 1, 2]
    assert schema_generations(roots["envelope.v3.schema.json"]) == list(range(3, GENERATIONS[-1] + 1))
    assert schema_generations(roots["session-header.schema.json"]) == [0, 1]
    assert schema_generations(roots["session-header.v2.schema.json"]) == EVENT_ROWS
    assert schema_generations(roots["packed-chunk-row.schema.json"]) == [0, 1]
    for stem in ("envelope", "session-header"):
        claims = Counter(g for name, doc in roots.items() if name.split(".")[0] == stem
                         for g in schema_generations(doc))
        assert claims == Counter(GENERATIONS), stem
    # Replacement endpoints are spelled start/end up to v2 and startSeq/endSeq from v3.
    for name, keys in (("envelope.schema.json", {"op", "start", "end"}),
                       ("envelope.v3.schema.json", {"op", "startSeq", "endSeq"})):
        assert set(roots[name]["properties"]["surfaceOp"]["anyOf"][1]["properties"]) == keys


@pytest.mark.parametrize("generation", GENERATIONS)
def test_vocabulary_matches_the_upstream_inventory(generation: int) -> None:
    """Our schemas declare exactly the event types upstream's inventory of that generation declares. The v0
    legacy types (upgraded, rejected or retired by the v0 reader) are the one deliberate addition: they are
    not known types, and only generation 0 has them."""
    vocab = vocabulary(generation)
    assert vocab.known_types == set(INVENTORY[str(generation)]["types"])
    assert vocab.surface_types == set(INVENTORY[str(generation)]["surface"])
    legacy = set(vocab.upgraded_legacy) | set(vocab.rejected_legacy) | set(vocab.retired_legacy)
    assert legacy == (LEGACY_TYPES if generation == 0 else set())
    from_files = {doc["x-dsh-type"] for doc in _documents().values()
                  if "x-dsh-type" in doc and generation in schema_generations(doc) and "x-dsh-legacy" not in doc}
    assert from_files == vocab.known_types


def test_inventory_transcription_is_consistent() -> None:
    counts = {g: len(INVENTORY[str(g)]["types"]) for g in GENERATIONS}
    assert counts == {0: 51, 1: 51, 2: 53, 3: 57, 4: 60}
    assert all(entry["types"] == sorted(entry["types"]) for entry in INVENTORY.values())


LEGACY_TYPES = {"steering/message", "request/header-delta", "mode/set", "context/message"}
# dsh 0.1.2 kept writing format 0 but added these three types (log-generations.md section 7.1).
V0_DRIFT_TYPES = {"model/selection", "subagent/model-selection-policy", "session-log-deepseek/delivery-accepted"}


def test_known_types_are_the_upstream_48_plus_the_v0_drift() -> None:
    assert vocabulary(0).known_types == UPSTREAM_KNOWN_TYPES | V0_DRIFT_TYPES
    assert len(UPSTREAM_KNOWN_TYPES) == 48


def test_surface_types_per_generation() -> None:
    assert vocabulary(0).surface_types == {"user/message", "assistant/message", "tool/result"}
    assert vocabulary(3).surface_types == vocabulary(2).surface_types | {"system/message"}
    assert vocabulary(4).surface_types == vocabulary(3).surface_types | {"developer/message"}


def test_legacy_types() -> None:
    vocab = vocabulary(0)
    assert set(vocab.upgraded_legacy) == {"steering/message"}
    assert set(vocab.rejected_legacy) == {"request/header-delta", "mode/set"}
    assert set(vocab.retired_legacy) == {"context/message"}
    legacy = set(vocab.upgraded_legacy) | set(vocab.rejected_legacy) | set(vocab.retired_legacy)
    assert not legacy & vocab.known_types


def test_assistant_messages_cite_no_sources_from_v2() -> None:
    """From v2 an assistant/message embeds its stream and must omit sourceEventSeqs; the schema file says so."""
    for doc in _files_of("assistant/message"):
        assert doc.get("x-dsh-forbids-source-event-seqs", False) == (doc["x-dsh-since"] >= 2)


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
        if header_violations := validate_header(header, 0):
            refused_headers[path] = header_violations
        for row in rows:
            assert validate_packed_row(row, 0) == [], path
        counts["packed rows"] += len(rows)
        for seq, event in enumerate(events):
            counts["events"] += 1
            if found := validate_event(event, 0):
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
    assert validate_event(USER, 0) == []
    assert validate_event(HEADER, 0) == []


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
    found = validate_event(event, 0)
    assert pointer in [violation.pointer for violation in found], found
    assert all("\n" not in violation.message and len(violation.message) <= 140 for violation in found)


def test_unknown_type_gets_envelope_check_only() -> None:
    assert validate_event({"type": "future/thing", "ignorable": True, "data": [1, 2]}, 0) == []
    assert [v.pointer for v in validate_event({"type": "future/thing", "data": 1, "when": 2}, 0)] == ["/when"]


def test_header_leniency_and_refusals() -> None:
    base = {"type": "session", "version": 0, "id": "{{sessionId}}", "createdAt": 0,
            "cwd": "{{cwd}}/workspace"}
    assert validate_header(base, 0) == []
    assert validate_header({**base, "delegationDepth": 0, "cwd": "C:\\work"}, 0) == []
    assert validate_header({**base, "version": 1}, 1) == []     # v0 and v1 share the physical header
    assert [v.pointer for v in validate_header({**base, "version": 2}, 0)] == ["/version"]
    assert [v.pointer for v in validate_header({**base, "cwd": "relative/dir"}, 0)] == ["/cwd"]
    assert [v.pointer for v in validate_header({**base, "sandboxMode": "read-only"}, 0)] == ["/sandboxMode"]


@pytest.mark.parametrize("generation", EVENT_ROWS)
def test_v2_header_requires_is_seeded_and_refuses_seed_length(generation: int) -> None:
    header = {"type": "session", "version": generation, "id": "s", "createdAt": 0, "cwd": "/w",
              "isSeeded": False, "delegationDepth": 0}
    assert validate_header(header, generation) == []
    assert [v.pointer for v in validate_header({k: v for k, v in header.items() if k != "isSeeded"},
                                               generation)] == ["/isSeeded"]
    assert [v.pointer for v in validate_header({**header, "seedLength": 3}, generation)] == ["/seedLength"]
    assert [v.pointer for v in validate_header({**header, "version": 1}, generation)] == ["/version"]


def test_packed_row_rules() -> None:
    row = {"type": "tool-call-chunks", "data": {"turn": 1, "step": 1, "index": 1, "dt": [0, 1], "id": "c1",
                                                "name": "bash", "args": ["{", "}", ""]}}
    assert validate_packed_row(row, 0) == []
    assert [v.pointer for v in validate_packed_row(_with(row, "/data/dt", [0]), 0)] == ["/data/dt"]
    assert [v.pointer for v in validate_packed_row(_with(row, "/data/args", []), 0)] == ["/data/args"]
    assert "/data/texts" in [v.pointer for v in validate_packed_row({**row, "type": "text-chunks"}, 0)]
    assert [v.pointer for v in validate_packed_row({**row, "seq": 3}, 0)] == ["/seq"]


# --- what changes between generations -------------------------------------------------------------------

CONFIG = {"provider": "deepseek-official", "model": "deepseek-v4-flash"}
MODEL = {"kind": "model", "provider": "deepseek-official", "model": "deepseek-v4-flash"}
TEXT_RUN = {"type": "text-chunks", "time0": 5, "index": 0, "dt": [], "texts": ["hi"]}


def _assistant(content: list[Any], **data: Any) -> dict[str, Any]:
    message = {"id": "a1", "role": "assistant", "content": content, "source": MODEL}
    return {"type": "assistant/message", "surfaceOp": "append",
            "data": {"turn": 1, "step": 1, "message": message, **data}}


def _header(**header: Any) -> dict[str, Any]:
    return {"type": "request/header", "data": {"reason": "initial", "header": {"config": CONFIG, **header}}}


def _tool_result_v4(**message: Any) -> dict[str, Any]:
    return {"type": "tool/result", "surfaceOp": "append", "data": {"turn": 1, "step": 1, "message": {
        "id": "t1", "role": "tool", "toolCallId": "c1", "content": [{"type": "text", "text": "ok"}],
        "source": {"kind": "tool", "callId": "c1"}, **message}}}


FILE_BLOCK = {"type": "file", "attachment": {"attachmentId": "f1", "name": "a.txt", "bytes": 3}}
SYSTEM_SOURCE_V3 = {"kind": "plugin", "plugin": "@deepseek-ai/dsh-system-prompt"}
SYSTEM_V3 = {"type": "system/message", "surfaceOp": "append", "data": {"turn": 1, "step": 1, "message": {
    "id": "s1", "role": "system", "content": [], "source": SYSTEM_SOURCE_V3}}}


@pytest.mark.parametrize(("generation", "event"), [
    (0, _with(HEADER, "/data/reason", "series")),                         # dsh 0.1.2 still wrote format 0
    (0, {"type": "model/selection", "data": {"provider": "p", "model": "m", "reasoningEffort": "high"}}),
    (0, {"type": "session-log-deepseek/delivery-accepted", "data": {"sessionId": "s", "throughSeq": 4}}),
    (1, {"type": "session-log-deepseek/delivery-accepted",
         "data": {"sessionId": "s", "throughSeq": 4, "sessionFormatVersion": 1}}),
    (2, _assistant([FILE_BLOCK], stream=[TEXT_RUN])),
    (2, {"type": "assistant/attempt", "data": {"turn": 1, "step": 1, "stream": [TEXT_RUN]}}),
    (2, _header(system="{{system}}", tools="{{tools}}")),
    (2, {"type": "session/end-seed", "data": {"inherited": True}}),
    (3, SYSTEM_V3),
    (3, _header(tools="{{tools}}")),
    (3, {"type": "tool/ptc-dispatch-start", "data": {"rootCallId": "r", "parentCallId": "r", "subCallId": "r:ptc:1",
                                                      "name": "bash", "arguments": {}}}),
    (4, _tool_result_v4(isError=True)),
    (4, _with(_header(tools=[{"name": "x", "description": "", "parameters": {}}]),
              "/data/header/tools/0/deferLoading", True)),
    (4, {"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "forked"}}}),
    (4, {"type": "developer/message", "surfaceOp": "append", "data": {"turn": 1, "step": 1, "headerSeq": 2,
         "message": {"id": "d1", "role": "developer", "source": {"kind": "tool-registry"},
                     "content": [{"type": "tool-addition", "toolName": "search"}]}}}),
])
def test_generation_positive_examples(generation: int, event: dict[str, Any]) -> None:
    assert validate_event(event, generation) == []


@pytest.mark.parametrize(("generation", "event", "pointer"), [
    (0, {"type": "session-log-deepseek/delivery-accepted",
         "data": {"sessionId": "s", "throughSeq": 4, "sessionFormatVersion": 0}}, "/data/sessionFormatVersion"),
    (1, HEADER, "/data/header/messagePrefix"),                                   # v1 drops the request prefix
    (1, _assistant([FILE_BLOCK]), "/data/message/content/0/type"),               # file blocks arrive in v2
    (2, _assistant([]), "/data/stream"),                                         # v2 embeds the stream
    (2, {"type": "session/end-seed", "data": {"inherited": False}}, "/data/inherited"),
    (2, {"type": "team/task", "data": {"version": 1, "teamId": "t", "task": {
        "id": "k", "revision": 1, "subject": "", "description": "", "status": "pending", "blockedBy": [],
        "writeScopes": []}}}, "/data/version"),
    (3, _header(system="{{system}}"), "/data/header/system"),                   # v3 moves the prompt out
    (3, _header(tools=[]), "/data/header/tools"),                                # empty tools are omitted in v3
    (3, {"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "forked"}}}, "/data/reason/kind"),
    (3, _with(SYSTEM_V3, "/surfaceOp", {"op": "replace", "start": 0, "end": 0}), "/surfaceOp"),
    (4, _header(system=""), "/data/header/system"),                              # refused even when empty
    (4, _tool_result_v4(role="user"), "/data/message/role"),
    (4, _tool_result_v4(content=[{"type": "tool-result", "toolCallId": "c1", "content": []}]),
     "/data/message/content/0/type"),
    (4, {"type": "user/message", "surfaceOp": "append", "data": {"id": "u", "role": "user", "content": [],
         "source": {"kind": "plugin", "plugin": "x"}}}, "/data/source/kind"),   # plugin wrappers retired in v4
])
def test_generation_negative_cases(generation: int, event: dict[str, Any], pointer: str) -> None:
    found = validate_event(event, generation)
    assert any(violation.pointer.startswith(pointer) for violation in found), found


@pytest.mark.parametrize(("kind", "since", "until"), [
    ("assistant/chunk", 0, 1),
    ("tool/code-dispatch", 0, 2),
    ("tool/ptc-dispatch", 3, None),
    ("system/message", 3, None),
    ("developer/message", 4, None),
])
def test_types_arrive_and_leave(kind: str, since: int, until: int | None) -> None:
    for generation in GENERATIONS:
        present = since <= generation and (until is None or generation <= until)
        assert (kind in vocabulary(generation).known_types) == present, generation


def test_packed_rows_end_with_v1() -> None:
    row = {"type": "text-chunks", "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "texts": ["a"]}}
    assert validate_packed_row(row, 1) == []
    assert validate_packed_row(row, 2) != []


# --- the public sample logs (tests/fixtures/generations, collected from upstream-derived trees) ------------

# Samples from the wangnaiyu fork are not held to upstream's v4: its "v4" files still write v3-style user-role
# tool results and plugin sources (upstream's native v4 admission refuses both), and its v5 is fork-only.
FORK_SAMPLES = "wangnaiyu"


def _sample_logs() -> list[Path]:
    return sorted(SAMPLES.rglob("*.jsonl")) if SAMPLES.is_dir() else []


@pytest.mark.skipif(not _sample_logs(), reason="public sample logs not present")
def test_public_samples_validate_as_their_generation() -> None:
    problems = []
    checked: Counter[int] = Counter()
    for path in _sample_logs():
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        generation = lines[0].get("version")
        if generation not in EVENT_ROWS:     # v0 samples are covered by the corpus; v5 is fork-only
            continue
        problems += [(path, 0, "session", v) for v in validate_header(lines[0], generation)]
        for index, event in enumerate(lines[1:], start=1):
            if isinstance(event.get("sourceEventSeqs"), list):      # logical form: decode range pairs
                seqs = [s for item in event["sourceEventSeqs"]
                        for s in (range(item[0], item[1] + 1) if isinstance(item, list) else [item])]
                event = {**event, "sourceEventSeqs": seqs}
            checked[generation] += 1
            problems += [(path, index, event["type"], v) for v in validate_event(event, generation)]
    unexpected = [p for p in problems if p[0].relative_to(SAMPLES).parts[0] != FORK_SAMPLES]
    assert unexpected == [], unexpected[:10]
    assert checked[2] and checked[3]


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
    from dsh_audit.vocabulary import _compiled, _validators

    compiled, schemas = _compiled(0), _validators(0)
    assert set(compiled.fast) == {"envelope", "header", "packed_row", *schemas.data}
    samples: dict[str, list[Any]] = {}
    for path in _corpus_logs():
        header, rows, events = _read(path)
        samples.setdefault("header", []).append(header)
        samples.setdefault("packed_row", []).extend(rows[:2])
        for event in events:
            samples.setdefault("envelope", []).append(event)
            samples.setdefault(event["type"], []).append(event["data"])
    validators = {"envelope": schemas.envelope, "header": schemas.header, "packed_row": schemas.packed_row,
                  **schemas.data}
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


@pytest.mark.parametrize("generation", EVENT_ROWS)
def test_fast_checker_agrees_with_jsonschema_in_later_generations(generation: int) -> None:
    """The same agreement on the public samples of each later generation (their own schemas, the v4 tool-role
    result's patternProperties included), every event's data and its mutations."""
    from dsh_audit.vocabulary import _compiled, _validators

    compiled, schemas = _compiled(generation), _validators(generation)
    samples: dict[str, list[Any]] = {}
    for path in _sample_logs():
        if path.relative_to(SAMPLES).parts[0] == FORK_SAMPLES:
            continue
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if lines[0].get("version") != generation:
            continue
        samples.setdefault("header", []).append(lines[0])
        for event in lines[1:]:
            samples.setdefault("envelope", []).append(event)
            samples.setdefault(event["type"], []).append(event["data"])
    validators = {"envelope": schemas.envelope, "header": schemas.header, **schemas.data}
    checked = 0
    for name, instances in samples.items():
        for instance in instances[:3]:
            for candidate in [instance, *_mutations(instance)]:
                expected = next(validators[name].iter_errors(candidate), None) is None
                assert compiled.fast[name](candidate) == expected, (name, candidate)
                checked += 1
    assert "tool/result" in samples and checked > 1_000
