"""Every corpus log, migrated forward by the official format packages (tests/official_migration.py), read back by
dsh-audit in its own generation and compared request by request with the v0 rebuild of the same log.

* v1 and v2 rebuild byte-equal to v0, and no more requests: the two chunkless responses that v0 cannot bound
  (untraced-response) settle in v2 with an empty stream and still no header in force, so neither has one;
* v3 rebuilds its native request (the prompt is messages[0], a system/message; no top-level `system`), which
  equals the v0 rebuild once that prompt is moved back into `system`.
Requests are aligned by turn.step#attempt, never by seq: v2 renumbers densely and v3 inserts events.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_audit import LogRejected, reconstruct_file, verify_path
from dsh_audit.jsjson import dumps_bytes
from official_migration import MigratedLog

Key = tuple[int, int, int]


def bodies(path: Path) -> dict[Key, bytes]:
    rebuilt = reconstruct_file(path, message_prefix="drop").requests
    found = {(r.turn, r.step, r.attempt): r.body or b"" for r in rebuilt}
    assert len(found) == len(rebuilt), f"{path}: two requests share a turn.step#attempt"
    return found


def baseline(log: MigratedLog) -> dict[Key, bytes] | None:
    try:
        return bodies(log.v0)
    except LogRejected:
        return None


def system_moved_back(body: bytes) -> bytes:
    """A v3 request as v0 would send it: the leading system message's text as top-level `system`."""
    request: dict[str, Any] = json.loads(body)
    messages = request["messages"]
    system = ""
    if messages and messages[0].get("role") == "system":
        system = "".join(block["text"] for block in messages.pop(0)["content"] if block.get("type") == "text")
    assert all(m.get("role") != "system" for m in messages), "a system message after the head"
    moved: dict[str, Any] = {}
    for key, value in request.items():
        moved[key] = value
        if key == "messages" and system:
            moved["system"] = system
    return dumps_bytes(moved)


def migrated(official_migration: dict[str, MigratedLog], target: int) -> list[tuple[str, MigratedLog]]:
    return [(name, log) for name, log in official_migration.items() if log.ok(target)]


@pytest.mark.parametrize("target", [1, 2])
def test_v1_and_v2_rebuild_byte_equal_to_v0(official_migration: dict[str, MigratedLog], target: int) -> None:
    compared = 0
    for name, log in migrated(official_migration, target):
        expected = baseline(log)
        if expected is None:
            continue
        path = log.targets[target]
        assert isinstance(path, Path)
        got = bodies(path)
        assert set(got) == set(expected), name
        for key, body in expected.items():
            assert got[key] == body, f"{name} v{target} {key}: differs from the v0 rebuild"
            compared += 1
    assert compared == 172


def test_v3_rebuilds_its_native_request_equal_to_v0_with_the_prompt_moved_back(
        official_migration: dict[str, MigratedLog]) -> None:
    compared = 0
    for name, log in migrated(official_migration, 3):
        expected = baseline(log)
        if expected is None:
            continue
        path = log.targets[3]
        assert isinstance(path, Path)
        got = bodies(path)
        assert set(got) == set(expected), name
        for key, body in expected.items():
            native = json.loads(got[key])
            assert "system" not in native, f"{name} {key}: a v3 request has no top-level system"
            assert got[key] != body
            assert system_moved_back(got[key]) == body, f"{name} v3 {key}: differs from the v0 rebuild"
            compared += 1
    assert compared == 145


@pytest.mark.parametrize("target", [1, 2, 3])
def test_migrated_logs_verify_as_their_v0_original(official_migration: dict[str, MigratedLog], target: int) -> None:
    """What the official code writes, dsh-audit reads in that generation with the verdict it gives the v0
    original: the same pass or fail, and nothing that only the newer generation's reading finds."""
    for name, log in migrated(official_migration, target):
        path = log.targets[target]
        assert isinstance(path, Path)
        [v0], [report] = verify_path(log.v0), verify_path(path)
        assert report.generation == target and report.read_error is None, name
        new_codes = {f.code for f in report.findings} - {f.code for f in v0.findings}
        assert not new_codes, f"{name} v{target}: {[f.render() for f in report.findings]}"
        assert report.failed() == v0.failed(), name


# Each official refusal and the finding dsh-audit gives the same log: an error where the log breaks a rule of its
# own generation, a note (severity info) where only the migration refuses what v0 reads and writes.
REFUSAL_FINDINGS = {
    "sourceEventSeqs exceeds its event seq": "surface-provenance",
    "assistant/attempt does not match an open turn and step": "step-enclosure",
    'header config lacks required member "provider"': "shape",
    'turn/end 0 data has unexpected member "error"': "legacy-malformed",
    'hook/result 0 data lacks required member "turn"': "schema",
    "uses unsupported descriptor version 2": "migration-refused",
    "surface before first step cannot acquire a system head": "migration-refused",
}


def test_every_official_refusal_is_a_finding_of_the_same_cause(official_migration: dict[str, MigratedLog]) -> None:
    refused = 0
    for name, log in official_migration.items():
        [report] = verify_path(log.v0)
        notes = {f.message.split(":")[0] for f in report.findings if f.code == "migration-refused"}
        first = next((message for message in log.targets.values() if isinstance(message, str)), None)
        if first is None:
            assert not notes, f"{name}: migrates to v3, yet noted as refused"
            continue
        refused += 1
        [code] = [code for cause, code in REFUSAL_FINDINGS.items() if cause in first]
        assert code in {f.code for f in report.findings}, f"{name}: refused ({first}) without {code}"
        if log.ok(1):   # reached v1, so not the descriptor
            assert not any("0.1.3" in note for note in notes), name
    assert refused == 44
