"""Admission: what the loader of a log's generation does to each stored event before anything folds it.

It checks the envelope, upgrades v0's legacy shapes and refuses what that generation's loader refuses
(retired legacy types, unknown types, malformed messages and headers), then lifts the event to the newest
vocabulary (dsh_audit.upcast). The walker validates the admitted event against its own generation's schemas
and hands the lifted one to the fold and the checks.
"""

from __future__ import annotations

from typing import Any

from .findings import Report
from .generations import Generation
from .legacy import UPGRADABLE, LegacyUpgrader
from .rules import retired_system_problem
from .shape import envelope_problem, header_problem, message_problem
from .upcast import lifter
from .vocabulary import vocabulary

Event = dict[str, Any]


class Admission:
    def __init__(self, generation: Generation, session_id: str, report: Report) -> None:
        self.generation = generation
        self.report = report
        self.words = vocabulary(generation.version)
        self.upgrader = LegacyUpgrader(session_id) if generation.legacy_shapes else None
        self.lift = lifter(generation.version)
        # Known types that pass through untouched once the envelope is sound (chunks above all).
        self._plain_types = (self.words.known_types - UPGRADABLE - self.words.surface_types - {"request/header"}
                             - self.words.rejected_legacy.keys())
        # ... and that no upcaster renames: admitted and lifted are then the stored event itself. (A replace op
        # on a non-surface type is a finding; its keys need no lifting, as nothing folds it.)
        self._unchanged = self._plain_types - self.lift.renamed

    def admit(self, raw: Event, seq: int) -> tuple[Event | None, Event | None]:
        """(the event as its generation's loader admits it, the same lifted to the newest vocabulary);
        (None, None) when the loader refuses or skips it."""
        kind = raw.get("type")
        if type(kind) is str and kind in self._unchanged and envelope_problem(raw) is None:
            return raw, raw
        native = self._admit(raw, seq)
        return (None, None) if native is None else (native, self.lift(native))

    def _admit(self, raw: Event, seq: int) -> Event | None:
        kind = raw.get("type")
        problem = envelope_problem(raw)
        if problem:
            self.report("envelope", problem, seq=seq, event_type=str(kind), rejects=True)
            if not isinstance(kind, str) or "data" not in raw:   # nothing a check could read
                return None
        elif kind in self._plain_types:
            return raw
        rejected = self.words.rejected_legacy.get(str(kind))
        if rejected is not None:
            self.report("legacy-rejected", f"unsupported legacy {kind} event: {rejected}", seq=seq,
                        event_type=str(kind), rejects=True)
            return None
        event = raw
        if self.upgrader is not None:
            try:
                event = self.upgrader.upgrade(raw, seq)
            except Exception as error:  # LogRejected from a malformed legacy shape
                self.report("legacy-malformed", str(getattr(error, "message", error)), seq=seq,
                            event_type=str(kind), rejects=True)
                return None
        kind = event["type"]
        if kind not in self.words.known_types:
            self._unknown(event, kind, seq)
            return None
        if kind == "request/header" and isinstance(event.get("data"), dict) \
                and event["data"].get("reason") == "fallback":
            self.report("legacy-rejected", 'unsupported legacy request/header reason "fallback"', seq=seq,
                        event_type=kind, rejects=True)
            return None
        if kind in self.words.surface_types or kind == "request/header":
            problem = message_problem(event, self.generation) or header_problem(event)
            if problem:
                self.report("shape", problem, seq=seq, event_type=kind, rejects=True)
                return None
        if kind == "request/header" and (problem := retired_system_problem(
                self.generation.system_prompt == "surface", event["data"]["header"], self.generation.label)):
            # Read on (the fold ignores the field): the prompt of these requests is their system/message head.
            self.report("retired-header-system", problem, seq=seq, event_type=kind, rejects=True)
        return event

    def _unknown(self, event: Event, kind: str, seq: int) -> None:
        """Every generation's loader skips an unknown type marked `ignorable: true` (its migrations may not:
        dsh_audit.successors says so) and refuses any other."""
        if event.get("ignorable") is True:
            self.report("unknown-ignorable", f'unknown event type "{kind}" marked ignorable: skipped',
                        seq=seq, event_type=kind, severity="warning")
            return
        retired = self.words.retired_legacy.get(kind)
        self.report("unknown-event", f'event type "{kind}" is unknown to this harness '
                    f"({self.generation.label}) and not marked ignorable; refusing to interpret the log"
                    + (f" (retired legacy type: {retired})" if retired else ""),
                    seq=seq, event_type=kind, rejects=True)
