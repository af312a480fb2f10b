"""Every finding code verify can report, registered once: its severity, whether the reference refuses a log
that has it, and what it means in one line. A Finding with a code not listed here cannot be built; the README's
list is generated from this one (`python -m dsh_audit.finding_codes README.md`, checked by tests/test_rulebook.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec


class FindingCode(msgspec.Struct, frozen=True):
    code: str
    severity: str   # "error" | "warning" (fails a log under --strict) | "info" (never fails one)
    refuses: bool   # the reference refuses to load or reconstruct a log with it (Finding.rejects)
    summary: str


def _error(code: str, summary: str, *, refuses: bool = False) -> FindingCode:
    return FindingCode(code, "error", refuses, summary)


def _warning(code: str, summary: str) -> FindingCode:
    return FindingCode(code, "warning", False, summary)


_LISTED = (
    # the reference's load-time refusals
    _error("envelope", "an event's envelope keys are not the reference's", refuses=True),
    _error("shape", "a message or header shape the reference refuses", refuses=True),
    _error("legacy-rejected", "a legacy request/header-delta, mode/set or fallback header the reference refuses",
           refuses=True),
    _error("legacy-malformed", "a legacy event the loader's upgrade cannot read", refuses=True),
    _error("unknown-event", "an event type unknown to the harness and not marked ignorable", refuses=True),
    _error("seq-gap", "event seqs skip a number", refuses=True),
    _error("seq-duplicate", "an event seq repeats or goes back", refuses=True),
    _error("source-ranges", "range-encoded sourceEventSeqs the official decoders refuse", refuses=True),
    _error("surface-op-missing", "a surface event without its surfaceOp", refuses=True),
    _error("surface-op-invalid", "a surfaceOp that is malformed or on an event that takes none", refuses=True),
    _error("replace-missing-node", "a surface replace names a node no longer on the surface", refuses=True),
    _error("surface-provenance", "sourceEventSeqs not earlier than the event, not covering every shadowed node, "
           "or a tool-result rewrite changing more than content", refuses=True),
    _error("no-header", "a request dispatched with no request/header in force", refuses=True),
    _error("assistant-provenance", "v2 on: an assistant/message carries chunk provenance", refuses=True),
    _error("seed-marker", "v2 on: a seeded child without its inherited end-seed marker, or an unseeded log with "
           "one", refuses=True),
    _error("system-head", "v3 on: the protected system head rewritten by other than a system/message",
           refuses=True),
    _error("retired-header-system", "v3 on: a request/header still carries the retired header.system",
           refuses=True),
    _error("unsupported-projection", "v3 on: an image/offload projection dsh-audit cannot interpret",
           refuses=True),
    # invariants the reference does not enforce
    _error("schema", "the header or an event violates its own generation's JSON Schema (schemas/)"),
    _error("header-placement", "a request/header logged outside any turn"),
    _error("instance-anchor", "a loop instance not anchored by an initial/resume header, or a second initial"),
    _error("late-surface-event", "a surface event between a step's header and its dispatch"),
    _error("turn-enclosure", "turns not properly opened and closed"),
    _error("step-enclosure", "steps not properly opened and closed inside their turn"),
    _error("tool-pairing", "a tool call without its result or a result without its call (a warning when the "
           "log ends inside a turn)"),
    _error("tool-undeclared", "a tool call names a tool the header in force does not declare"),
    _error("message-chunk-mismatch", "a completed assistant message differs from the blocks its chunks completed"),
    _error("prefix-break", "a request is no append-extension of its predecessor and no logged cause explains it"),
    _error("attempt-step", "v2 on: a settlement outside its step"),
    _error("stream-record", "v2 on: a packed stream record without one dt gap per member pair, or whose "
           "member times leave the safe integers"),
    _error("system-step", "v3 on: a system prompt outside its step"),
    _error("tool-result-error", "v3 on: a tool result with error metadata not flagged isError"),
    _error("developer-header", "v4: a developer message not bound to an earlier request/header"),
    # warnings: fail a log only under --strict
    _warning("placeholder-header", "a header of normalization placeholders: the request cannot be rebuilt"),
    _warning("torn-tail", "a torn final line, dropped (names the line and bytes)"),
    _warning("open-turn", "the log ends inside a turn (names the closers the reference's crash repair appends)"),
    _warning("unknown-ignorable", "an unknown event type marked ignorable, skipped (a note when --allow-event "
             "names it)"),
    _warning("untraced-response", "a step has a response but no chunk and no request/header: no request to rebuild"),
    _warning("empty-log", "a header but no events"),
    _warning("seed-cut-unknown", "a seeded child read once: its inherited cut is unknown"),
    _warning("unlogged-model-call", "a compaction ended in error with no summary: dsh may have made a call whose "
             "usage no event holds"),
    # notes: never fail a log
    FindingCode("migration-refused", "info", False, "the official migration to a newer generation refuses a log its "
                "own generation reads, so newer dsh cannot open it"),
)
CODES: dict[str, FindingCode] = {entry.code: entry for entry in _LISTED}

README_BEGIN = "<!-- finding codes: generated from src/dsh_audit/finding_codes.py -->"
README_END = "<!-- end of finding codes -->"


def markdown_table() -> str:
    """The registry as the README lists it."""
    rows = [f"| `{entry.code}` | {entry.severity} | {'yes' if entry.refuses else ''} | {entry.summary} |"
            for entry in CODES.values()]
    return "\n".join(["| code | severity | reference refuses | meaning |", "|---|---|---|---|", *rows])


def with_table(readme: str) -> str:
    """`readme` with the text between its markers replaced by the table."""
    head, begin, rest = readme.partition(README_BEGIN)
    _, end, tail = rest.partition(README_END)
    if not begin or not end:
        raise ValueError(f"the README has no {README_BEGIN!r} … {README_END!r} section")
    return f"{head}{README_BEGIN}\n{markdown_table()}\n{README_END}{tail}"


if __name__ == "__main__":
    readme = Path(sys.argv[1])
    readme.write_text(with_table(readme.read_text(encoding="utf-8")), encoding="utf-8")
