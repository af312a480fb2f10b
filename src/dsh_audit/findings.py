"""Findings: what `verify` reports. One record per problem, located by log, line, seq and event type."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Finding:
    code: str                  # stable kebab-case id, e.g. "seq-gap", "replace-missing-node"
    message: str
    severity: str = "error"    # "error" | "warning" (warnings count only under --strict)
    seq: int | None = None
    line: int | None = None
    event_type: str | None = None
    rejects: bool = False      # the reference would refuse to load or reconstruct this log
    log: str | None = None

    def render(self) -> str:
        where = self.log or ""
        if self.line is not None:
            where += f":{self.line}"
        parts = [p for p in (where, f"seq {self.seq}" if self.seq is not None else None, self.event_type) if p]
        return f"{': '.join(parts)}: {self.severity} [{self.code}] {self.message}"
