"""The dsh log generations (format versions) dsh-audit reads.

A generation decides how rows are decoded (packed chunk rows or one event per row, how a seeded child marks
its inherited cut) and how a request is rebuilt (where an attempt is dispatched, where the system prompt
lives, how a surface replace names its range, what a tool result is). Each of those follows from the
generation's schemas, so it is derived here, never restated; schemas/generations.json holds only what the
schemas cannot say (who wrote it, the loader's legacy upgrades, the decoders' and validators' extra rules, whether
the fast path reads it, what newer dsh's migrations refuse in it, whether a SQLite store holds it). A generation
exists because generations.json lists it: adding one is a row there and its changed schemas, no code here.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import msgspec

from .codecache import generated
from .vocabulary import GENERATOR_FILES, generations_document, known_versions, schema_at, schemas_digest, vocabulary


class Generation(msgspec.Struct, frozen=True):
    version: int
    written_by: str
    packed_chunk_rows: bool        # v0/v1: text/reasoning/tool-call chunk runs packed into one row
    dispatch: str                  # "first-chunk" (top-level assistant/chunk) | "settlement" (message or attempt)
    system_prompt: str             # "header" (request/header.system) | "surface" (system/message events)
    tool_result: str               # "user-block" (a user message holding one tool-result block) | "tool-message"
    replace_keys: tuple[str, str]  # the names of a surface replace's range endpoints
    seed_cut: str                  # "seedLength" (header) | "inherited-end-seed" (last tagged session/end-seed)
    message_prefix: bool           # header.messagePrefix may be present (legacy writers)
    assistant_sources: bool        # an assistant/message may cite its chunks by sourceEventSeqs (until its stream
    #                                is embedded, from v2: x-dsh-forbids-source-event-seqs)
    legacy_shapes: bool            # pre-identity message shapes are upgraded on load
    unique_source_ranges: bool     # range-decoded sourceEventSeqs must be unique and earlier at decode time
    error_needs_flag: bool         # a tool result carrying data.error must be flagged isError
    fast_path: bool                # verify's fast path reads it (dsh_audit.fastpath)
    # What a newer dsh's official migrations refuse in such a log, by the migration that refuses it ("v0->v1"):
    descriptor_refused_by: str | None     # a subagent/descriptor of another version than the one it accepts
    ignorable_refused_by: str | None      # an unknown event type, even marked ignorable
    early_surface_refused_by: str | None  # a surface event before the first step/start
    sqlite_store: bool             # a SQLite schema-17 session store may hold it

    @property
    def label(self) -> str:
        return f"v{self.version}"


def _derived(version: int) -> dict[str, Any]:
    """What the generation's schemas say about reading it."""
    words = vocabulary(version)
    surface_op = schema_at(version, "envelope", "properties", "surfaceOp") or {}
    [replace] = [branch["required"] for branch in surface_op.get("anyOf", []) if "required" in branch]
    header_keys = schema_at(version, "session-header", "properties") or {}
    request_header = schema_at(version, "request/header", "properties", "header", "properties") or {}
    tool_role = schema_at(version, "tool/result", "properties", "message", "properties", "role") or {}
    return {
        "packed_chunk_rows": schema_at(version, "packed-chunk-row") is not None,
        "dispatch": "first-chunk" if "assistant/chunk" in words.known_types else "settlement",
        "system_prompt": "surface" if "system/message" in words.surface_types else "header",
        "tool_result": "tool-message" if tool_role.get("const") == "tool" else "user-block",
        "replace_keys": tuple(key for key in replace if key != "op"),
        "seed_cut": "seedLength" if "seedLength" in header_keys else "inherited-end-seed",
        "message_prefix": "messagePrefix" in request_header,
        "assistant_sources": "assistant/message" not in words.forbids_sources,
    }


@cache
def _derived_facts() -> dict[int, dict[str, Any]]:
    """_derived of every known generation, kept in the code cache under the schemas' digest (and this code's):
    a run whose schemas are unchanged parses none of them to know how to read a log."""
    return generated("generation facts", schemas_digest(), (__file__, *GENERATOR_FILES),
                     lambda: {version: _derived(version) for version in known_versions()})


@cache
def generations() -> tuple[Generation, ...]:
    """Every known generation, oldest first."""
    return tuple(Generation(
        version=item["version"], written_by=item["writtenBy"], legacy_shapes=item["legacyShapes"],
        unique_source_ranges=item["uniqueSourceRanges"], error_needs_flag=item["toolResultErrorNeedsFlag"],
        fast_path=item["fastPath"], sqlite_store=item["sqliteStore"],
        descriptor_refused_by=item["migrationRefusals"].get("descriptorVersion"),
        ignorable_refused_by=item["migrationRefusals"].get("unknownIgnorable"),
        early_surface_refused_by=item["migrationRefusals"].get("surfaceBeforeFirstStep"),
        **_derived_facts()[item["version"]])
        for item in sorted(generations_document()["generations"], key=lambda item: item["version"]))


def generation(version: int) -> Generation:
    found = next((known for known in generations() if known.version == version), None)
    if found is None:
        raise KeyError(version)
    return found


def newest() -> Generation:
    return generations()[-1]


# session.jsonl is generation 0, session.vN.jsonl generation N, children insert their index:
# session.2.v3.jsonl; compression appends .zstd (dsh) or .zst. Other names say nothing about the generation.
_CANONICAL = re.compile(r"^session(?:\.(?P<child>[0-9]+))?(?:\.v(?P<version>[1-9][0-9]*))?\.jsonl(?:\.zstd?)?$")
_SUFFIX = re.compile(r"\.v(?P<version>[1-9][0-9]*)\.jsonl(?:\.zstd?)?$")


class LogName(msgspec.Struct, frozen=True):
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
