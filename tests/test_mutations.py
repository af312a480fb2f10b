"""Mutation tests: each kind of tampering, applied to every corpus log it fits, is caught with its finding.

A mutation edits the committed JSON lines of a log (written to tmp_path; the corpus is never touched), then
`verify` must report the named finding and fail. Logs a mutation does not fit (no header, no tool calls, ...)
are left out of that mutation's parametrization, never skipped silently: `test_every_mutation_fits_many_logs`
checks the coverage.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conftest_reference import LOGS_ROOT, session_log_paths
from dsh_audit import open_logs, verify_path
from dsh_audit.cli import main

Lines = list[dict[str, Any]]
SURFACE = ("user/message", "assistant/message", "tool/result")


def load(relpath: str) -> Lines:
    text = (LOGS_ROOT / relpath).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def explicit(relpath: str) -> Lines:
    """The log in persisted form: one event per line with explicit seq (packed rows expanded)."""
    source = next(open_logs(LOGS_ROOT / relpath))
    events = [{"type": r.event["type"], "seq": r.seq, "time": 0,
               **{k: v for k, v in r.event.items() if k not in ("type", "seq", "time")}} for r in source.records()]
    return [source.header, *events]


def first(lines: Lines, predicate: Callable[[dict[str, Any]], bool]) -> int | None:
    return next((i for i, line in enumerate(lines) if i > 0 and predicate(line)), None)


def drop_first_header(lines: Lines) -> Lines | None:
    i = first(lines, lambda e: e["type"] == "request/header")
    if i is None or first(lines, lambda e: e["type"] == "assistant/chunk") is None:
        return None
    return lines[:i] + lines[i + 1:]


def edit_assistant_text(lines: Lines) -> Lines | None:
    """Edit the text of a completed assistant message whose chunks recorded the completed blocks."""
    ends = {line_index for line_index, e in enumerate(lines)
            if e["type"] == "assistant/chunk" and e["data"]["chunk"].get("type") == "block-end"}
    for i, e in enumerate(lines):
        content = e["data"].get("message", {}).get("content", []) if e["type"] == "assistant/message" else []
        texts = [b for b in content if isinstance(b, dict) and b.get("type") == "text"]
        if texts and ends and any(j < i for j in ends) and "interrupted" not in e["data"]:
            texts[0]["text"] += " (edited)"
            return lines
    return None


def rename_called_tool_schema(lines: Lines) -> Lines | None:
    """Change the header's tool schemas in place, with no new header event: the called tool disappears."""
    called = {b["name"] for e in lines if e["type"] == "assistant/message"
              for b in e["data"].get("message", {}).get("content", []) if b.get("type") == "tool-call"}
    for e in lines:
        tools = e["data"].get("header", {}).get("tools") if e["type"] == "request/header" else None
        if isinstance(tools, list) and all(isinstance(t, dict) for t in tools):
            for tool in tools:
                if tool.get("name") in called:
                    tool["name"] += "_renamed"
                    return lines
    return None


def delete_surface_op(lines: Lines) -> Lines | None:
    i = first(lines, lambda e: e["type"] in SURFACE and "surfaceOp" in e)
    if i is None:
        return None
    del lines[i]["surfaceOp"]
    return lines


def replace_missing_node(lines: Lines) -> Lines | None:
    i = first(lines, lambda e: e["type"] in SURFACE and e.get("surfaceOp") == "append")
    if i is None:
        return None
    lines[i]["surfaceOp"] = {"op": "replace", "start": 10**6, "end": 10**6}
    lines[i]["sourceEventSeqs"] = [0] if lines[i].get("sourceEventSeqs") is None else lines[i]["sourceEventSeqs"]
    return lines


def append_unknown_event(lines: Lines) -> Lines | None:
    return [*lines, {"type": "future/required-event", "data": {}}] if len(lines) > 1 else None


MUTATIONS: dict[str, tuple[Callable[[Lines], Lines | None], set[str]]] = {
    "drop-header": (drop_first_header, {"no-header", "instance-anchor"}),
    "edit-message": (edit_assistant_text, {"message-chunk-mismatch"}),
    "tool-schema": (rename_called_tool_schema, {"tool-undeclared"}),
    "delete-surface-op": (delete_surface_op, {"surface-op-missing"}),
    "replace-missing-node": (replace_missing_node, {"replace-missing-node"}),
    "unknown-event": (append_unknown_event, {"unknown-event"}),
}


def cases() -> list[Any]:
    found = []
    for relpath in session_log_paths():
        for name, (mutate, _) in MUTATIONS.items():
            if mutate(load(relpath)) is not None:
                found.append(pytest.param(name, relpath, id=f"{name}:{relpath}"))
    return found


def write(tmp_path: Path, lines: Lines) -> Path:
    path = tmp_path / "mutated.jsonl"
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return path


def codes_of(path: Path) -> set[str]:
    [report] = verify_path(path)
    assert report.read_error is None, report.read_error
    assert report.failed()
    return {f.code for f in report.findings if f.severity == "error"}


@pytest.mark.parametrize(("mutation", "relpath"), cases())
def test_mutation_is_detected(mutation: str, relpath: str, tmp_path: Path) -> None:
    mutate, expected = MUTATIONS[mutation]
    mutated = mutate(load(relpath))
    assert mutated is not None
    found = codes_of(write(tmp_path, mutated))
    assert found & expected, f"{mutation} on {relpath}: expected one of {expected}, got {sorted(found)}"


@pytest.mark.parametrize("relpath", [p for p in session_log_paths() if len(load(p)) > 4])
@pytest.mark.parametrize(("edit", "code"), [("duplicate", "seq-duplicate"), ("skip", "seq-gap")])
def test_duplicated_or_skipped_seq_is_detected(relpath: str, edit: str, code: str, tmp_path: Path) -> None:
    lines = explicit(relpath)
    for line in lines[3:]:
        line["seq"] += -1 if edit == "duplicate" else 1
        if edit == "duplicate":
            break
    assert code in codes_of(write(tmp_path, lines))


def test_every_mutation_fits_many_logs() -> None:
    fits: dict[str, int] = {}
    for case in cases():
        fits[case.values[0]] = fits.get(case.values[0], 0) + 1
    assert set(fits) == set(MUTATIONS)
    # Real tool schemas survive scrubbing in only two corpus logs; every other mutation fits most logs.
    assert fits.pop("tool-schema") >= 2
    assert all(count >= 70 for count in fits.values()), fits


def test_mutated_log_exits_1_through_the_cli(tmp_path: Path) -> None:
    relpath = "examples/headless-agent/tests/snapshots/compaction-recovery/session.jsonl"
    clean = CliRunner().invoke(main, ["verify", str(LOGS_ROOT / relpath)])
    assert clean.exit_code == 0, clean.output
    mutated = write(tmp_path, delete_surface_op(load(relpath)) or [])
    result = CliRunner().invoke(main, ["verify", str(mutated)])
    assert result.exit_code == 1 and "[surface-op-missing]" in result.output
