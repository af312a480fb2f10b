"""What newer dsh releases would do with an older log. dsh upgrades a session's log on open with the official
format migrations; where those refuse a log that its own generation reads fine, a newer dsh cannot open the
session at all. verify says so as a note (severity "info": it never fails a log, since the log is valid in its
generation). Measured against the pinned official packages on the corpus (docs/official-migration.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .findings import Report
from .records import LogSource
from .vocabulary import vocabulary

if TYPE_CHECKING:
    from .walker import Walked

SUPPORTED_DESCRIPTOR = 3   # the only subagent/descriptor version the v0->v1 migration accepts


class SuccessorCheck:
    """A walk check: the refusals of the v0->v1 and v2->v3 migrations that a log of an older generation meets.
    The edges are named by version here: they are facts about two published packages, not about a format."""

    def __init__(self, report: Report, source: LogSource) -> None:
        self.report = report
        self.generation = source.generation
        words = vocabulary(self.generation.version)
        self.surface_types, self.known_types = words.surface_types, words.known_types
        self.step_seen = False
        self.noted: set[str] = set()   # one note per refusal and log

    def observe(self, walked: Walked) -> None:
        event, record = walked.event, walked.record
        if record is None:
            return
        if event is None:
            self._unknown_ignorable(record.event, record.seq)
            return
        kind, data = event["type"], event.get("data")
        if kind == "step/start":
            self.step_seen = True
        elif (kind == "subagent/descriptor" and self.generation.descriptor_refused_by and isinstance(data, dict)
              and data.get("version") != SUPPORTED_DESCRIPTOR):
            self._note("descriptor", f"dsh 0.1.3 and later cannot open this log: the official v0→v1 migration "
                       f"accepts subagent/descriptor version {SUPPORTED_DESCRIPTOR} only, this one is version "
                       f"{data.get('version')!r}", record.seq, kind)
        elif kind in self.surface_types and not self.step_seen and self.generation.early_surface_refused_by:
            self._note("head", "dsh 0.1.5 and later cannot open this log: the official v2→v3 migration puts the "
                       "system prompt after the first step/start and refuses a surface event logged before it",
                       record.seq, kind)

    def _unknown_ignorable(self, raw: dict[str, object], seq: int) -> None:
        """Both migrations that classify every event refuse an unknown one, even marked ignorable."""
        kind = raw.get("type")
        if raw.get("ignorable") is not True or not isinstance(kind, str) or kind in self.known_types:
            return
        if self.generation.ignorable_refused_by == "v0->v1":
            self._note("unknown", "dsh 0.1.3 and later cannot open this log: the official v0→v1 migration refuses "
                       f"unknown event types even when ignorable ({kind!r})", seq, kind)
        elif self.generation.ignorable_refused_by == "v2->v3":
            self._note("unknown", "dsh 0.1.5 and later cannot open this log: the official v2→v3 migration refuses "
                       f"unclassified events even when ignorable ({kind!r})", seq, kind)

    def _note(self, key: str, message: str, seq: int, kind: str) -> None:
        if key not in self.noted:
            self.noted.add(key)
            self.report("migration-refused", message, seq=seq, event_type=kind, severity="info")

    def finish(self, last_seq: int | None) -> None:
        pass
