"""The checks verify runs, registered once. The walk shows each check every event (dsh_audit.walker); the fast
path (dsh_audit.fastpath) decides a log without running them, so each check names the fast twin that mirrors it.
A check registered with none makes the fast path decline every log: forgetting a twin costs speed, never a
finding. A new check is added to CHECKS, with its twin once the fast verifier mirrors it."""

from __future__ import annotations

import msgspec

from .findings import Report
from .records import LogSource
from .structure import StructureChecker
from .successors import SuccessorCheck
from .vocabulary import validate_event
from .walker import CheckType, Walked


class RegisteredCheck(msgspec.Struct, frozen=True):
    build: CheckType
    fast_twin: str | None   # what in the fast path mirrors it; None: nothing does, the fast path declines

    @property
    def name(self) -> str:
        return getattr(self.build, "__name__", repr(self.build))


class SchemaCheck:
    """Each admitted event against its own generation's schemas (packed members are expanded by us from a row
    the reader validated, so they are skipped)."""

    def __init__(self, report: Report, source: LogSource) -> None:
        self.report = report
        self.generation = source.generation.version

    def observe(self, walked: Walked) -> None:
        event, record = walked.native, walked.record
        if event is None or record is None or record.packed:
            return
        for violation in validate_event(event, self.generation):
            self.report("schema", f"{violation.pointer or '/'}: {violation.message}", seq=record.seq,
                        event_type=event.get("type"))

    def finish(self, last_seq: int | None) -> None:
        pass


CHECKS: tuple[RegisteredCheck, ...] = (
    RegisteredCheck(SchemaCheck, fast_twin="fastpath.types: decoders generated from the same schemas"),
    RegisteredCheck(StructureChecker, fast_twin="fastpath.verifier.FastVerifier: its turn, step, header, "
                    "tool-pairing and surface handlers"),
    RegisteredCheck(SuccessorCheck, fast_twin="fastpath.verifier.FastVerifier: descriptor versions and surface "
                    "events before the first step"),
)


def walk_checks() -> tuple[CheckType, ...]:
    """Every registered check, for the full verifier's walk."""
    return tuple(check.build for check in CHECKS)


def without_fast_twin() -> list[str]:
    """The registered checks no fast twin mirrors: while there is one, the fast path decides no log."""
    return [check.name for check in CHECKS if check.fast_twin is None]
