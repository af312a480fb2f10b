"""The official-code migration oracle on the shared corpus (docs/official-migration.md).

Pins the headline result and every refusal, so any change in the oracle, the realization or the pinned
packages is noticed. The generated v1/v2/v3 files are for reader tests; this module checks only the oracle.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from official_migration import FORMAT_DIR, TARGETS, MigratedLog

SURFACE_FIRST = "format v2 surface before first step cannot acquire a system head without changing chronology"
ATTEMPT = ("Session migration from v0 to v2 refuses the transformed artifact: "
           "assistant/attempt does not match an open turn and step")
V0_TO_V1 = "@deepseek-ai/dsh-session-format-v0-to-v1 refuses this format v0 Session: "
PROVIDER = V0_TO_V1 + 'request/header 0 header config lacks required member "provider"'


def descriptor(seq: int) -> str:
    return f"subagent/descriptor {seq} uses unsupported descriptor version 2"


ACP, HEADLESS = "examples/acp-agent/tests/snapshots/", "examples/headless-agent/tests/"
WEB, SUITE = "apps/web/tests/snapshots/", "packages/test-support/acp-snapshot/tests/fixtures/"
# log -> (first refused target, message); a log refused at target t is refused with it at every later target.
REFUSALS: dict[str, tuple[int, str]] = {
    WEB + "cordis-tool-round/session.jsonl": (1, "sourceEventSeqs exceeds its event seq"),
    SUITE + "suite/authored-error/session.jsonl": (1, V0_TO_V1 + 'turn/end 0 data has unexpected member "error"'),
    SUITE + "suite/blocked-log/session.jsonl": (1, V0_TO_V1 + 'hook/result 0 data lacks required member "turn"'),
    **{SUITE + log: (1, PROVIDER) for log in (
        "record-suite/rec-pin/session.jsonl", "record-suite/rec-pin/session.1.jsonl", "suite/pin-turn/session.jsonl",
        "suite/shared-pin/session.jsonl")},
    **{ACP + log: (1, descriptor(4)) for log in (
        "advanced-toolchain/session.1.jsonl", "advanced-toolchain/session.2.jsonl",
        "subagent-child-question-rejection/session.1.jsonl", "subagent-depth-two-rejection/session.1.jsonl",
        "subagent-depth-two-rejection/session.2.jsonl", "subagent-max-tokens-partial/session.1.jsonl",
        "subagent-multi/session.1.jsonl", "subagent-multi/session.2.jsonl", "subagent-parallel/session.1.jsonl",
        "subagent-parallel/session.2.jsonl")},
    HEADLESS + "subagent-inheritance-snapshots/parent-override/child.expected.jsonl": (1, descriptor(4)),
    **{ACP + log: (1, descriptor(0)) for log in (
        "subagent-continuable-inheritance/session.1.jsonl", "subagent-continuable/session.1.jsonl",
        "subagent-list-agents/session.1.jsonl")},
    ACP + "subagent-fork-in-process/session.1.jsonl": (1, descriptor(47)),
    **{log: (1, descriptor(3)) for log in (
        HEADLESS + "snapshots/advanced-toolchain/session.1.jsonl",
        HEADLESS + "snapshots/advanced-toolchain/session.2.jsonl",
        "examples/jsonrpc-agent/tests/snapshots/subagent-spawn-in-process/session.1.jsonl",
        "scripts/snapshots/python-sdk-single-exe/advanced/session.1.jsonl",
        "scripts/snapshots/python-sdk-single-exe/advanced/session.2.jsonl")},
    WEB + "minimal-preset/session.jsonl": (2, ATTEMPT),
    WEB + "web-search-round/session.jsonl": (2, ATTEMPT),
    **{WEB + log: (3, SURFACE_FIRST) for log in (
        "live-interactions/session.jsonl", "message-feedback-protocol/session.jsonl", "navigation-panes/seed.jsonl",
        "permission-policy-context/session.jsonl", "plan-review/session.jsonl", "pwsh-terminal/seed.jsonl",
        "question-composer/session.jsonl", "steering/session.jsonl", "turn-tail-actions/session.jsonl")},
    **{HEADLESS + log: (3, SURFACE_FIRST) for log in (
        "semantic-checkpoint-snapshots/tool-outcome-unknown/session.expected.jsonl",
        "subagent-diagnostic-snapshots/descriptorless-child/parent.expected.jsonl",
        "subagent-inheritance-snapshots/parent-override/child.replay.jsonl",
        "subagent-inheritance-snapshots/parent-override/parent.expected.jsonl",
        "workspace-context-resume-snapshots/offline-edit/session.expected.jsonl",
        "workspace-context-resume-snapshots/precedence-change/session.expected.jsonl")},
}


def refusals(migrated: dict[str, MigratedLog]) -> set[tuple[str, int, str]]:
    return {(log, t, str(m.targets[t])) for log, m in migrated.items() for t in TARGETS if not m.ok(t)}


def expected_refusals(*, descriptor_bump: bool) -> set[tuple[str, int, str]]:
    return {(log, t, message) for log, (first, message) in REFUSALS.items() for t in range(first, 4)
            if not (descriptor_bump and message.startswith("subagent/descriptor"))}


def ok_counts(migrated: dict[str, MigratedLog]) -> dict[int, int]:
    return {t: sum(m.ok(t) for m in migrated.values()) for t in TARGETS}


def test_headline_counts(official_migration: dict[str, MigratedLog]) -> None:
    assert len(official_migration) == 100
    assert ok_counts(official_migration) == {1: 73, 2: 71, 3: 56}


def test_every_refusal_is_the_documented_one(official_migration: dict[str, MigratedLog]) -> None:
    assert refusals(official_migration) == expected_refusals(descriptor_bump=False)


def test_descriptor_bump_variant(official_migration_descriptor_bump: dict[str, MigratedLog]) -> None:
    assert ok_counts(official_migration_descriptor_bump) == {1: 93, 2: 91, 3: 76}
    assert refusals(official_migration_descriptor_bump) == expected_refusals(descriptor_bump=True)


def test_generations_are_written_canonically(official_migration: dict[str, MigratedLog]) -> None:
    for migrated in official_migration.values():
        assert migrated.v0.name.startswith("session") and migrated.v0.is_file()
        for target in TARGETS:
            file = migrated.targets[target]
            if isinstance(file, Path):
                assert file.parent == migrated.v0.parent
                assert file.name == migrated.v0.name.removesuffix(".jsonl") + f".v{target}.jsonl"
                header = json.loads(file.read_text(encoding="utf-8").split("\n", 1)[0])
                assert (header["type"], header["version"]) == ("session", target)


def test_the_only_seeded_sample_keeps_its_cut(official_migration_descriptor_bump: dict[str, MigratedLog]) -> None:
    """seedLength 42 in v1 becomes a tagged end-seed at 12 in v2 and 14 in v3 (log-generations.md §2.2)."""
    seeded = official_migration_descriptor_bump[
        "examples/acp-agent/tests/snapshots/subagent-fork-in-process/session.1.jsonl"].targets
    rows = {t: [json.loads(line) for line in Path(seeded[t]).read_text(encoding="utf-8").splitlines()] for t in TARGETS}
    assert rows[1][0]["seedLength"] == 42
    for target, cut in ((2, 12), (3, 14)):
        assert rows[target][0]["isSeeded"] is True
        assert [row["seq"] for row in rows[target][1:] if row["type"] == "session/end-seed"] == [cut]


def test_stand_in_accumulator(reference_format_node: Path) -> None:
    test_file = FORMAT_DIR / "standins" / "dsh-llm" / "test" / "accumulator.test.mjs"
    done = subprocess.run([str(reference_format_node), "--test", str(test_file)], cwd=FORMAT_DIR,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
