"""Findings: what `verify` reports. One record per problem, located by log, line, seq and event type."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .text import display


@dataclass(frozen=True, slots=True)
class Finding:
    code: str                  # stable kebab-case id, e.g. "seq-gap", "replace-missing-node"
    message: str
    severity: str = "error"    # "error" | "warning" (counts only under --strict) | "info" (never fails a log)
    seq: int | None = None
    line: int | None = None
    event_type: str | None = None
    rejects: bool = False      # the reference would refuse to load or reconstruct this log
    log: str | None = None

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
