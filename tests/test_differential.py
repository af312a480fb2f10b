"""Differential test: our reconstruction against the published dsh reference, log by log.

For every corpus log the reference (tests/reference/reconstruct.mjs) either rebuilds its requests,
and ours must produce the same (turn, step, attempt, dispatch seq, header seq) sequence with the
same body digests, or refuses it, and ours must refuse it too, for the same kind of cause.
The `reference_results` fixture lives in conftest_reference.py.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pytest

from conftest_reference import LOGS_ROOT, ReferenceResult, reference_bodies, session_log_paths


@dataclass(frozen=True)
class Cause:
    """A kind of refusal: how the reference words it, and what ours must then mention."""

    name: str
    reference: re.Pattern[str]
    ours: re.Pattern[str]


# Derived from the refusals observed on the corpus (first four) and from the reference's other
# load-path messages (dsh-session-persistence coordinator), so a new kind of refusal fails loudly
# below instead of passing unchecked.
CAUSES = (
    Cause("source seq not earlier", re.compile(r"sourceEventSeqs must reference earlier events"),
          re.compile(r"sourceEventSeqs|source seq|earlier", re.I)),
    Cause("header lacks provider/model", re.compile(r"request/header .*lacks provider/model"),
          re.compile(r"provider", re.I)),
    Cause("malformed legacy turn/end", re.compile(r"malformed pre-react-loop turn/end"),
          re.compile(r"turn/end")),
    Cause("no request/header in force", re.compile(r"no request/header before dispatch"),
          re.compile(r"request/header")),
    Cause("legacy header delta / mode", re.compile(r"request/header-delta|mode/set|reason \"fallback\""),
          re.compile(r"header-delta|mode/set|fallback")),
    Cause("unknown event type", re.compile(r"unknown to this harness"), re.compile(r"unknown", re.I)),
    Cause("unsupported format version", re.compile(r"log format v\d"), re.compile(r"version", re.I)),
    Cause("unreadable JSON", re.compile(r"invalid JSON|must be a JSON object"), re.compile(r"JSON", re.I)),
)


def _ours(module: str) -> ModuleType:
    # Imported per test, so the harness self-check below still runs while the package is incomplete.
    return importlib.import_module(module)


def reference_cause(message: str) -> Cause:
    for cause in CAUSES:
        if cause.reference.search(message):
            return cause
    pytest.fail(f"unclassified reference refusal (add a Cause to test_differential.py): {message}")


def _key(request: Any) -> tuple[int, int, int, int, int | None]:
    return (request.turn, request.step, request.attempt, request.dispatch_seq, request.header_seq)


def _reference_key(request: dict[str, Any]) -> tuple[int, int, int, int, int | None]:
    return (request["turn"], request["step"], request["attempt"], request["dispatchSeq"],
            request["headerSeq"])


def _first_difference(ours: bytes, theirs: str) -> str:
    reference = theirs.encode("utf-8")
    at = next((i for i, (a, b) in enumerate(zip(ours, reference, strict=False)) if a != b),
              min(len(ours), len(reference)))
    return (f"bodies first differ at byte {at} (ours {len(ours)} bytes, reference {len(reference)}):\n"
            f"  ours:      {ours[max(0, at - 80):at + 80]!r}\n"
            f"  reference: {reference[max(0, at - 80):at + 80]!r}")


def _assert_same_requests(relpath: str, expected: ReferenceResult) -> None:
    ours = _ours("dsh_audit").reconstruct_file(LOGS_ROOT / relpath, message_prefix="drop").requests
    theirs = expected["requests"]
    assert [_key(r) for r in ours] == [_reference_key(r) for r in theirs], (
        "request sequence differs: (turn, step, attempt, dispatch seq, header seq)")
    for index, (mine, reference) in enumerate(zip(ours, theirs, strict=True)):
        if mine.sha256 != reference["sha256"]:
            body = reference_bodies(LOGS_ROOT / relpath)[index]
            pytest.fail(f"request {index} {_key(mine)}: sha256 differs from the reference\n"
                        + _first_difference(mine.body, body))


def _assert_same_refusal(relpath: str, expected: ReferenceResult) -> None:
    errors = _ours("dsh_audit.errors")
    cause = reference_cause(expected["error"])
    wanted = errors.LogReadError if expected["stage"] == "parse" else errors.LogRejected
    with pytest.raises(errors.DshAuditError) as raised:
        _ours("dsh_audit").reconstruct_file(LOGS_ROOT / relpath, message_prefix="drop")
    print(f"reference ({expected['stage']}): {expected['error']}\nours: {raised.value}")
    assert isinstance(raised.value, wanted), f"expected {wanted.__name__}, got {type(raised.value).__name__}"
    assert cause.ours.search(str(raised.value)), f"ours does not name the reference's cause: {cause.name}"


@pytest.mark.parametrize("relpath", session_log_paths(), ids=str)
def test_matches_reference(relpath: str, reference_results: dict[str, ReferenceResult]) -> None:
    expected = reference_results[relpath]
    if expected["ok"]:
        _assert_same_requests(relpath, expected)
    else:
        _assert_same_refusal(relpath, expected)


def test_reference_answers_are_well_formed(reference_results: dict[str, ReferenceResult]) -> None:
    """Harness self-check, independent of our implementation: every refusal is classified, and every
    accepted log lists attempts in dispatch order, numbered 1.. within each step."""
    for relpath, result in reference_results.items():
        if not result["ok"]:
            assert result["stage"] in {"parse", "load", "reconstruct"}, relpath
            reference_cause(result["error"])
            continue
        seqs = [r["dispatchSeq"] for r in result["requests"]]
        assert seqs == sorted(set(seqs)), relpath
        seen: dict[tuple[int, int], int] = {}
        for request in result["requests"]:
            step = (request["turn"], request["step"])
            seen[step] = seen.get(step, 0) + 1
            assert request["attempt"] == seen[step], relpath
            assert re.fullmatch(r"[0-9a-f]{64}", request["sha256"]), relpath
