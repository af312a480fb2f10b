"""Errors that carry a location, so every failure renders as one line naming file, line and seq."""

from __future__ import annotations


class DshAuditError(Exception):
    """Base class: anything dsh-audit raises on purpose."""

    exit_code = 2

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 seq: int | None = None, event_type: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.line = line
        self.seq = seq
        self.event_type = event_type

    def location(self) -> str:
        parts = []
        if self.path is not None:
            parts.append(self.path if self.line is None else f"{self.path}:{self.line}")
        if self.seq is not None:
            parts.append(f"seq {self.seq}")
        if self.event_type is not None:
            parts.append(self.event_type)
        return ": ".join(parts)

    def __str__(self) -> str:
        where = self.location()
        return f"{where}: {self.message}" if where else self.message


class LogReadError(DshAuditError):
    """The bytes cannot be read as a dsh log at all (missing file, not JSON, corrupt frame, bad header)."""


class LogRejected(DshAuditError):
    """The log reads, but the reference would refuse to load or reconstruct it (e.g. an unknown required
    event type, a legacy header delta, a replace naming a missing node)."""

    exit_code = 1
