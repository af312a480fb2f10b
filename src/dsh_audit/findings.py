"""Findings: what `verify` reports. One record per problem, located by log, line, seq and event type."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from fnmatch import fnmatchcase

import msgspec

from .errors import DshAuditError
from .finding_codes import CODES
from .text import display


class Finding(msgspec.Struct, frozen=True):
    code: str                  # stable kebab-case id registered in dsh_audit.finding_codes, e.g. "seq-gap"
    message: str
    severity: str = "error"    # "error" | "warning" (counts only under --strict) | "info" (never fails a log)
    seq: int | None = None
    line: int | None = None
    event_type: str | None = None
    rejects: bool = False      # the reference would refuse to load or reconstruct this log
    log: str | None = None

    def __post_init__(self) -> None:
        if self.code not in CODES:   # a bug of ours, not of the log: every code is registered once
            raise ValueError(f"finding code {self.code!r} is not registered in dsh_audit.finding_codes")

    def render(self) -> str:
        """One line: log text in it (a label, an event type, a quoted value) shown escaped (dsh_audit.text)."""
        where = self.log or ""
        if self.line is not None:
            where += f":{self.line}"
        parts = [p for p in (where, f"seq {self.seq}" if self.seq is not None else None, self.event_type) if p]
        return display(f"{': '.join(parts)}: {self.severity} [{self.code}] {self.message}")


# How checks report: (code, message, *, seq, event_type, rejects=False, severity="error"); see FindingSink.
Report = Callable[..., None]


def counts(finding: Finding, strict: bool) -> bool:
    """Whether a finding fails its log: errors always, warnings under --strict, notes never."""
    return severity_counts(finding.severity, strict)


def severity_counts(severity: str, strict: bool) -> bool:
    """Whether findings of this severity fail their log (`counts`)."""
    return severity == "error" or (strict and severity == "warning")


class FindingSink:
    """Locates findings: the walker moves `line` along the log; every check reports through `report`."""

    def __init__(self, label: str, emit: Callable[[Finding], None]) -> None:
        self.label = label
        self.line = 0
        self.emit = emit

    def report(self, code: str, message: str, *, seq: int | None, event_type: str | None,
               rejects: bool = False, severity: str = "error") -> None:
        self.emit(Finding(code=code, message=message, severity=severity, seq=seq, line=self.line,
                          event_type=event_type, rejects=rejects, log=self.label))


# -- --allow-event: a product's own ignorable events, accepted by --strict --------------------------------
ALLOWABLE = "unknown-ignorable"   # the one finding an allowed event type turns into a note
ALLOW_EVENTS_ENV = "DSH_AUDIT_ALLOW_EVENTS"
_PATTERN_TROUBLE = re.compile(r"[\s\x00-\x1f\x7f]")


def allowed_events(given: Iterable[str]) -> tuple[str, ...]:
    """The --allow-event patterns given and those of $DSH_AUDIT_ALLOW_EVENTS (space-separated), checked."""
    return allow_patterns(given) + allow_patterns(os.environ.get(ALLOW_EVENTS_ENV, "").split(),
                                                  origin=ALLOW_EVENTS_ENV)


def allow_patterns(patterns: Iterable[str], *, origin: str = "--allow-event") -> tuple[str, ...]:
    """The patterns as given, checked: a glob (fnmatch: *, ?, [...]) on the whole event type, case-sensitive.
    Refused, naming `origin`: an empty pattern, one with whitespace or a control character (event types have
    none, so it could match nothing), and an unclosed `[` (fnmatch would take it literally, silently)."""
    checked = []
    for pattern in patterns:
        problem = ("is empty" if not pattern else
                   "holds whitespace or a control character, which no event type has"
                   if _PATTERN_TROUBLE.search(pattern) else
                   "has a [ that is never closed" if _unclosed_bracket(pattern) else None)
        if problem is not None:
            raise DshAuditError(f"{origin}: the pattern {display(repr(pattern))} {problem}; give a glob on the "
                                "event type, e.g. 'acme/*'")
        checked.append(pattern)
    return tuple(checked)


def _unclosed_bracket(pattern: str) -> bool:
    """fnmatch's own reading: a [ opens a set closed by the first ] after it (a ] right after [ or [! is a
    member)."""
    index = 0
    while (index := pattern.find("[", index)) >= 0:
        end = index + 1
        if end < len(pattern) and pattern[end] == "!":
            end += 1
        if end < len(pattern) and pattern[end] == "]":
            end += 1
        close = pattern.find("]", end)
        if close < 0:
            return True
        index = close + 1
    return False


def allowing(patterns: Sequence[str]) -> Callable[[Finding], Finding]:
    """A finding as verify keeps it: an `unknown-ignorable` warning whose event type matches one of `patterns`
    becomes a note (listed, never failing a log, --strict or not) that names the pattern; any other finding is
    unchanged."""
    def allow(finding: Finding) -> Finding:
        if finding.code != ALLOWABLE or finding.event_type is None:
            return finding
        match = next((p for p in patterns if fnmatchcase(finding.event_type, p)), None)
        if match is None:
            return finding
        return msgspec.structs.replace(finding, severity="info", message=f"{finding.message} (allowed by {match!r})")
    return allow


def failing_rule(findings: Iterable[Finding], unlisted: dict[str, int], strict: bool) -> str:
    """What failed a log, for its FAIL line: the failing findings counted by code, and whether --strict made
    them fail ("strict: 3 warnings: unknown-ignorable ×3"); errors first, they fail it in any mode."""
    by_severity: dict[str, dict[str, int]] = {}
    for finding in findings:
        if counts(finding, strict):
            codes = by_severity.setdefault(finding.severity, {})
            codes[finding.code] = codes.get(finding.code, 0) + 1
    parts = []
    for severity, label in (("error", "error"), ("warning", "warning")):
        codes = by_severity.get(severity, {})
        unnamed = unlisted.get(severity, 0) if severity_counts(severity, strict) else 0
        total = sum(codes.values()) + unnamed
        if not total:
            continue
        named = [f"{code} ×{n}" if n > 1 else code for code, n in sorted(codes.items())]
        if unnamed:
            named.append(f"{unnamed} unlisted")
        head = f"{total} {label}{'s' if total > 1 else ''}: {', '.join(named)}"
        parts.append(f"strict: {head}" if severity == "warning" else head)
    return "; ".join(parts)


# -- --ignore: finding codes a project accepts, listed as notes ----------------------------------------------

def ignored_code_problem(code: str) -> str | None:
    """Why `code` cannot be ignored (it is no registered finding code, dsh_audit.finding_codes), or None."""
    if code in CODES:
        return None
    from difflib import get_close_matches  # here: only a code that is not one loads it

    close = get_close_matches(code, CODES, n=1)
    return (f"{display(repr(code))} is not a finding code" + (f"; did you mean {close[0]!r}?" if close else
            "; the codes are listed in the README and docs/ci.md"))


def ignoring(codes: Mapping[str, str]) -> Callable[[Finding], Finding]:
    """A finding as verify keeps it: one whose code is in `codes` (code -> where it was ignored: --ignore or the
    config file) becomes a note naming that, listed, never failing a log; any other finding is unchanged."""
    def ignore(finding: Finding) -> Finding:
        origin = codes.get(finding.code)
        if origin is None:
            return finding
        return msgspec.structs.replace(finding, severity="info", message=f"{finding.message} (ignored by {origin})")
    return ignore
