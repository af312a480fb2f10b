"""The dsh log generations (format versions) dsh-audit reads, as schemas/generations.json states them.

A generation decides how rows are decoded (packed chunk rows or one event per row, how a seeded child marks
its inherited cut) and how a request is rebuilt (where an attempt is dispatched, where the system prompt
lives, how a surface replace names its range). The event vocabulary of each generation is in the event
schemas themselves (`x-dsh-generations`, read by dsh_audit.vocabulary).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class Generation:
    version: int
    written_by: str
    packed_chunk_rows: bool        # v0/v1: text/reasoning/tool-call chunk runs packed into one row
    dispatch: str                  # "first-chunk" (top-level assistant/chunk) | "settlement" (message or attempt)
    system_prompt: str             # "header" (request/header.system) | "surface" (system/message events)
    tool_result: str               # "user-block" (a user message holding one tool-result block) | "tool-message"
    replace_keys: tuple[str, str]  # the names of a surface replace's range endpoints
    seed_cut: str                  # "seedLength" (header) | "inherited-end-seed" (last tagged session/end-seed)
    message_prefix: bool           # header.messagePrefix may be present (legacy writers)
    legacy_shapes: bool            # pre-identity message shapes are upgraded on load
    unknown_ignorable: str         # an unknown type marked ignorable: "skip" | "refuse"
    unique_source_ranges: bool     # range-decoded sourceEventSeqs must be unique and earlier at decode time

    @property
    def label(self) -> str:
        return f"v{self.version}"


def _document() -> dict[str, Any]:
    try:
        text = resources.files("dsh_audit.schemas").joinpath("generations.json").read_text(encoding="utf-8")
    except ModuleNotFoundError:   # a source checkout that was never installed
        text = (Path(__file__).resolve().parents[2] / "schemas" / "generations.json").read_text(encoding="utf-8")
    document: dict[str, Any] = json.loads(text)
    return document


@cache
def generations() -> tuple[Generation, ...]:
    """Every known generation, oldest first."""
    return tuple(Generation(
        version=item["version"], written_by=item["writtenBy"], packed_chunk_rows=item["packedChunkRows"],
        dispatch=item["dispatch"], system_prompt=item["systemPrompt"], tool_result=item["toolResult"],
        replace_keys=tuple(item["replaceKeys"]),
        seed_cut=item["seedCut"], message_prefix=item["messagePrefix"], legacy_shapes=item["legacyShapes"],
        unknown_ignorable=item["unknownIgnorable"], unique_source_ranges=item["uniqueSourceRanges"])
        for item in _document()["generations"])


def generation(version: int) -> Generation:
    known = generations()
    if not 0 <= version < len(known):
        raise KeyError(version)
    return known[version]


def newest() -> Generation:
    return generations()[-1]


# session.jsonl is generation 0, session.vN.jsonl generation N, children insert their index:
# session.2.v3.jsonl; compression appends .zstd (dsh) or .zst. Other names say nothing about the generation.
_CANONICAL = re.compile(r"^session(?:\.(?P<child>[0-9]+))?(?:\.v(?P<version>[1-9][0-9]*))?\.jsonl(?:\.zstd?)?$")
_SUFFIX = re.compile(r"\.v(?P<version>[1-9][0-9]*)\.jsonl(?:\.zstd?)?$")


@dataclass(frozen=True, slots=True)
class LogName:
    """What a file name says: its log group (main session or child index) and generation, when it says."""

    group: str          # "session", "session.2", or the name itself for a non-canonical file
    version: int | None
    canonical: bool


def parse_log_name(name: str) -> LogName:
    match = _CANONICAL.match(name)
    if match:
        child = match["child"]
        return LogName("session" if child is None else f"session.{child}", int(match["version"] or 0), True)
    suffix = _SUFFIX.search(name)
    if suffix:   # replay fixtures: child.replay.v3.jsonl
        return LogName(name[:suffix.start()], int(suffix["version"]), False)
    return LogName(name, None, False)
