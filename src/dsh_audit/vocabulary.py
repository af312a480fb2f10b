"""The dsh event vocabulary of each log generation, read from the JSON Schemas shipped as `dsh_audit.schemas`.

Everything about the vocabulary (which types exist in which generation, which are surface types, which were
renamed from what, which legacy types the v0 loader upgrades or refuses) lives in the schema files' `x-dsh-*`
annotations; this module only reads them. A schema applies from the generation its `x-dsh-since` names to the
one its `x-dsh-until` names (inclusive; to the newest when absent), among those schemas/generations.json lists.
The validators are compiled once per process and generation, because a log can hold millions of events; the
jsonschema ones (and jsonschema itself) only when an event fails the fast check (dsh_audit.fastcheck), which a
valid log's events never do: most runs do not import jsonschema at all.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import cache
from itertools import islice
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

import msgspec
import orjson

from .codecache import fingerprint, generated
from .fastcheck import GENERATOR_FILES as CHECK_CODE
from .fastcheck import Check, SourceCompiler, load_checks, resolve_pointer
from .text import clip, head

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    from jsonschema import Draft202012Validator, ValidationError
    from referencing import Registry

# The code that picks each generation's schemas and writes their checks: part of the generated plans' cache key.
GENERATOR_FILES = (*CHECK_CODE, __file__)
MAX_VIOLATIONS = 5  # per event: enough to diagnose, cheap on a log that is wrong everywhere
_SHORT = 60  # longest rendering of a value inside a message


class SchemaViolation(msgspec.Struct, frozen=True):
    """One schema failure: where (a JSON pointer into the validated object) and why (one short line)."""

    pointer: str
    message: str

    def __str__(self) -> str:
        return f"{self.pointer or '/'}: {self.message}"


class Vocabulary(msgspec.Struct, frozen=True):
    """What the schema files say about event types."""

    known_types: frozenset[str]
    surface_types: frozenset[str]
    upgraded_legacy: Mapping[str, str]  # legacy type -> what the loader turns it into
    rejected_legacy: Mapping[str, str]  # legacy type -> why the loader refuses the log
    retired_legacy: Mapping[str, str]   # legacy type the loader no longer knows: refused unless ignorable
    declared_in: Mapping[str, str]  # type -> upstream file that declares it
    renamed_from: Mapping[str, str]  # type -> the name it had in the previous generation (x-dsh-renamed-from)
    forbids_sources: frozenset[str]  # surface types that may not carry sourceEventSeqs (x-dsh-forbids-source-...)


class _Compiled(msgspec.Struct, frozen=True):
    vocabulary: Vocabulary
    has_packed_row: bool   # v0/v1 only
    data_types: frozenset[str]  # every type with a schema file, legacy ones included
    fast: Mapping[str, Check]  # "envelope", "header", "packed_row" and every data type; see dsh_audit.fastcheck
    valid_event: Mapping[str, Check]  # per known type: the whole event (envelope, placement, data) in one call


class _Validators(msgspec.Struct, frozen=True):
    """The jsonschema validators of one generation: they say why an event failed its fast check."""

    envelope: Draft202012Validator
    header: Draft202012Validator
    packed_row: Draft202012Validator | None   # v0/v1 only
    data: Mapping[str, Draft202012Validator]  # every type with a schema file, legacy ones included


def schema_root() -> Traversable:
    """Where the schemas and generations.json are read from: the shipped `dsh_audit.schemas` (a test that adds a
    generation points this at a copy, in a process of its own: everything read from it is cached). Installed as
    files, it is read as files: importlib.resources, and the archive modules it loads, only for a zipped install."""
    shipped = Path(__file__).parent / "schemas"
    if shipped.joinpath("generations.json").is_file():
        return shipped
    from importlib import resources

    return resources.files("dsh_audit.schemas")


@cache
def generations_document() -> dict[str, Any]:
    """schemas/generations.json: the known generations and what about each their schemas cannot say."""
    document: dict[str, Any] = orjson.loads(schema_root().joinpath("generations.json").read_bytes())
    return document


@cache
def known_versions() -> tuple[int, ...]:
    """Every generation generations.json lists, oldest first."""
    return tuple(sorted(item["version"] for item in generations_document()["generations"]))


def _schema_files(root: Traversable) -> Iterator[Traversable]:
    for entry in root.iterdir():
        if entry.is_dir():
            yield from _schema_files(entry)
        elif entry.name.endswith(".schema.json"):
            yield entry


def load_schemas() -> dict[str, dict[str, Any]]:
    """Every schema document, keyed by its `$id`."""
    return _read_schemas()[0]


def _read_schemas() -> tuple[dict[str, dict[str, Any]], str]:
    """Every schema document by its `$id`, and the sha256 of their bytes and generations.json's: the inputs of
    the checks and types generated from them (cached under it, dsh_audit.codecache)."""
    documents: dict[str, dict[str, Any]] = {}
    texts: dict[str, bytes] = {"generations.json": schema_root().joinpath("generations.json").read_bytes()}
    for entry in _schema_files(schema_root()):
        text = entry.read_bytes()
        document = orjson.loads(text)   # the same documents as json's, in half the time (every run reads them)
        documents[document["$id"]] = document
        texts[document["$id"]] = text
    digest = hashlib.sha256()
    for name in sorted(texts):
        digest.update(b"%s\0%d\0%s" % (name.encode(), len(texts[name]), texts[name]))
    return documents, digest.hexdigest()


def schema_generations(document: dict[str, Any]) -> list[int]:
    """The generations a schema document applies to: the known ones from its `x-dsh-since` to its `x-dsh-until`
    (inclusive), or to the newest when it has none, so a new generation inherits every schema it does not change."""
    since: int = document["x-dsh-since"]
    until: int | None = document.get("x-dsh-until")
    return [version for version in known_versions() if since <= version and (until is None or version <= until)]


def _vocabulary(event_schemas: Iterable[dict[str, Any]]) -> Vocabulary:
    known: set[str] = set()
    surface: set[str] = set()
    upgraded: dict[str, str] = {}
    rejected: dict[str, str] = {}
    retired: dict[str, str] = {}
    declared: dict[str, str] = {}
    renamed: dict[str, str] = {}
    no_sources: set[str] = set()
    for schema in event_schemas:
        if schema.get("x-dsh-forbids-source-event-seqs") is True:
            no_sources.add(schema["x-dsh-type"])
        kind: str = schema["x-dsh-type"]
        declared[kind] = schema["x-dsh-declared-in"]
        if "x-dsh-renamed-from" in schema:
            renamed[kind] = schema["x-dsh-renamed-from"]
        legacy = schema.get("x-dsh-legacy")
        if legacy == "upgraded":
            upgraded[kind] = schema["x-dsh-legacy-reason"]
        elif legacy == "rejected":
            rejected[kind] = schema["x-dsh-legacy-reason"]
        elif legacy == "retired":
            retired[kind] = schema["x-dsh-legacy-reason"]
        else:
            known.add(kind)
            if schema["x-dsh-surface"]:
                surface.add(kind)
    return Vocabulary(frozenset(known), frozenset(surface), MappingProxyType(upgraded),
                      MappingProxyType(rejected), MappingProxyType(retired), MappingProxyType(declared),
                      MappingProxyType(renamed), frozenset(no_sources))


@cache
def _schemas() -> tuple[dict[str, dict[str, Any]], str]:
    return _read_schemas()


def _documents() -> dict[str, dict[str, Any]]:
    return _schemas()[0]


@cache
def schemas_digest() -> str:
    """The sha256 of every schema file and generations.json, as read. Kept in the code cache under the files'
    names, sizes, modification and change times, so a run whose schema files are untouched reads none of them
    (a change time moves at every write to a file, and no one can set it back)."""
    root = schema_root()
    if not isinstance(root, Path):   # a zipped install: its members have no change time
        return _schemas()[1]
    try:
        files = fingerprint(sorted(str(entry) for entry in (root / "generations.json", *_schema_files(root))))
    except OSError:
        return _schemas()[1]
    digest: str = generated("schemas digest", files, GENERATOR_FILES, lambda: _schemas()[1])
    return digest


def fast_checks(kind: str, roots: Callable[[], Mapping[str, dict[str, Any]]]) -> dict[str, Check]:
    """SourceCompiler's checks of `roots()`, generated once per machine for these schemas (dsh_audit.codecache):
    `kind` says which roots of which generation, the schemas' digest the rest; `roots` is called, and the schema
    files parsed, only when the cache does not hold them."""
    plan = generated(f"fastcheck {kind}", schemas_digest(), GENERATOR_FILES,
                     lambda: SourceCompiler(_documents()).plan(roots()))
    return load_checks(plan)


@cache
def _facts() -> dict[int, dict[str, Any]]:
    """What every run asks of each generation's schemas, as plain data kept in the code cache under the schemas'
    digest: a run whose schemas are unchanged parses none of them to know its vocabulary."""
    return generated("schema facts", schemas_digest(), GENERATOR_FILES,
                     lambda: {version: _facts_of(version) for version in known_versions()})


def _facts_of(generation: int) -> dict[str, Any]:
    words = _vocabulary(document for document in _generation_documents(generation) if "x-dsh-type" in document)
    plain = {name: sorted(value) if isinstance(value, frozenset) else dict(value)
             for name, value in msgspec.structs.asdict(words).items()}
    _envelope, _header, packed_row, event_schemas = _roots(generation)
    return {"vocabulary": plain, "has_packed_row": packed_row is not None,
            "data_types": sorted(document["x-dsh-type"] for document in event_schemas)}


@cache
def _registry() -> Registry[Any]:
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    return Registry().with_resources(
        (uri, Resource.from_contents(document, default_specification=DRAFT202012))
        for uri, document in _documents().items())


def _root(documents: Iterable[dict[str, Any]], stem: str, generation: int) -> dict[str, Any] | None:
    """The non-event root document (envelope, session-header, packed-chunk-row) of one generation."""
    found = [document for document in documents
             if document["$id"].rsplit("/", 1)[-1].split(".")[0] == stem
             and generation in schema_generations(document)]
    if len(found) > 1:
        raise RuntimeError(f"schemas/: {len(found)} {stem} schemas claim generation {generation}")
    return found[0] if found else None


@cache   # asked for by every schema_at: a generation's properties read a dozen sub-schemas
def _generation_documents(generation: int) -> tuple[dict[str, Any], ...]:
    mine = tuple(document for document in _documents().values() if generation in schema_generations(document))
    if not mine:
        raise KeyError(generation)
    return mine


def schema_at(generation: int, root: str, *keys: str) -> dict[str, Any] | None:
    """The sub-schema at `keys` below a root of one generation — an event type ("request/header") or a non-event
    root ("envelope", "session-header", "packed-chunk-row") — following `$ref`s; None where there is none.
    How a generation reads its logs follows from these (dsh_audit.generations)."""
    documents = _generation_documents(generation)
    found = (_root(documents, root, generation) if "/" not in root else
             next((d for d in documents if d.get("x-dsh-type") == root), None))
    if found is None:
        return None
    base: str = found["$id"]
    schema: Any = found
    for key in (None, *keys):
        if key is not None:
            schema = schema.get(key) if isinstance(schema, dict) else None
        while isinstance(schema, dict) and "$ref" in schema:   # as the fast checks follow them: no jsonschema
            schema, base = resolve_pointer(_documents(), urljoin(base, schema["$ref"]))
        if not isinstance(schema, dict):
            return None
    return dict(schema)


@cache
def vocabulary(generation: int) -> Vocabulary:
    """The event vocabulary of one log generation: the annotations only, no validator is compiled."""
    fields: dict[str, Any] = {name: frozenset(value) if isinstance(value, list) else MappingProxyType(value)
                              for name, value in _facts()[generation]["vocabulary"].items()}
    return Vocabulary(**fields)


def _roots(generation: int) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None, list[dict[str, Any]]]:
    """A generation's envelope, session-header and packed-row (v0/v1 only) schemas, and its event schemas."""
    mine = _generation_documents(generation)
    envelope, header = _root(mine, "envelope", generation), _root(mine, "session-header", generation)
    if envelope is None or header is None:
        raise RuntimeError(f"schemas/: generation {generation} lacks an envelope or a session-header schema")
    return envelope, header, _root(mine, "packed-chunk-row", generation), [
        document for document in mine if "x-dsh-type" in document]


def _all_roots(generation: int) -> dict[str, dict[str, Any]]:
    envelope, header, packed_row, event_schemas = _roots(generation)
    return {"envelope": envelope, "header": header, **({"packed_row": packed_row} if packed_row else {}),
            **{document["x-dsh-type"]: document for document in event_schemas}}


@cache
def _compiled(generation: int) -> _Compiled:
    # a schema SourceCompiler cannot compile is checked by jsonschema alone
    fast = fast_checks(f"v{generation}", lambda: _all_roots(generation))
    words = vocabulary(generation)
    valid_event = {kind: _event_check(fast["envelope"], fast[kind], kind in words.surface_types)
                   for kind in words.known_types if "envelope" in fast and kind in fast}
    facts = _facts()[generation]
    return _Compiled(vocabulary=words, has_packed_row=facts["has_packed_row"],
                     data_types=frozenset(facts["data_types"]),
                     fast=MappingProxyType(fast), valid_event=MappingProxyType(valid_event))


@cache
def _validators(generation: int) -> _Validators:
    from jsonschema import Draft202012Validator

    registry = _registry()

    def compile_schema(document: dict[str, Any]) -> Draft202012Validator:
        return Draft202012Validator(document, registry=registry)

    envelope, header, packed_row, event_schemas = _roots(generation)
    return _Validators(
        envelope=compile_schema(envelope),
        header=compile_schema(header),
        packed_row=compile_schema(packed_row) if packed_row else None,
        data=MappingProxyType({doc["x-dsh-type"]: compile_schema(doc) for doc in event_schemas}),
    )


def _packed_row_validator(generation: int) -> Draft202012Validator:
    validator = _validators(generation).packed_row
    assert validator is not None, "only asked for in a generation with packed rows"
    return validator


def _event_check(envelope: Check, data: Check, surface: bool) -> Check:
    """validate_event's verdict for one known type as a single yes/no call: the path every valid event takes."""
    if surface:
        def check(event: Any) -> bool:
            return envelope(event) and "surfaceOp" in event and ("data" not in event or data(event["data"]))
    else:
        def check(event: Any) -> bool:
            return (envelope(event) and "surfaceOp" not in event and "sourceEventSeqs" not in event
                    and ("data" not in event or data(event["data"])))
    return check


def _escape(token: str | int) -> str:
    return str(token).replace("~", "~0").replace("/", "~1")


def _pointer(prefix: str, path: Iterable[str | int]) -> str:
    return prefix + "".join("/" + _escape(token) for token in path)


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return clip(text, _SHORT)


_JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "array"),
               (dict, "object"), (type(None), "null"))


def _json_type(value: Any) -> str:
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), type(value).__name__)


def _violations(error: ValidationError, prefix: str) -> Iterator[SchemaViolation]:
    """Turn one jsonschema error into short violations pointing at the offending key where possible."""
    where = _pointer(prefix, error.absolute_path)
    keyword, expected, instance = error.validator, error.validator_value, error.instance
    if keyword == "required" and isinstance(instance, dict):
        # One error per missing key; recover which one from the message's leading repr.
        missing = [key for key in expected if key not in instance]
        key = next((key for key in missing if error.message.startswith(repr(key))), missing[0])
        yield SchemaViolation(f"{where}/{_escape(key)}", "missing required key")
    elif keyword == "additionalProperties" and isinstance(instance, dict):
        allowed = error.schema.get("properties", {})
        patterns = [re.compile(pattern) for pattern in error.schema.get("patternProperties", {})]
        for key in instance:
            if key not in allowed and not any(pattern.search(key) for pattern in patterns):
                yield SchemaViolation(f"{where}/{_escape(key)}", "unexpected key")
    elif keyword == "type":
        yield SchemaViolation(where, f"expected {expected}, got {_json_type(instance)}")
    elif keyword == "enum":
        yield SchemaViolation(where, f"{_short(instance)} is not one of {_short(expected)}")
    elif keyword == "const":
        yield SchemaViolation(where, f"expected {_short(expected)}, got {_short(instance)}")
    elif keyword in ("anyOf", "oneOf"):
        shown = f"{_json_type(instance)} {_short(instance)}"
        yield SchemaViolation(where, f"{shown} matches none of the allowed shapes")
    elif keyword in ("not", None):  # a `not` or `false` schema: the key must be absent
        yield SchemaViolation(where, "key not allowed")
    else:
        yield SchemaViolation(where, head(error.message.replace("\n", " "), 120))


def _check(validator: Callable[[], Draft202012Validator], instance: Any, prefix: str = "",
           fast: Check | None = None) -> list[SchemaViolation]:
    """The first few violations of one schema; `validator` is asked for only when the fast check fails."""
    if fast is not None and fast(instance):
        return []
    found: list[SchemaViolation] = []
    for error in islice(validator().iter_errors(instance), MAX_VIOLATIONS):
        found.extend(_violations(error, prefix))
    return found[:MAX_VIOLATIONS]


def validate_document(validator: Draft202012Validator, instance: Any) -> list[SchemaViolation]:
    """A document's first few violations of one schema (a file dsh-audit reads beside the logs)."""
    return _check(lambda: validator, instance)


def validate_event(event: dict[str, Any], generation: int) -> list[SchemaViolation]:
    """Check one event as its generation defines it (v0: already legacy-upgraded): envelope, surface
    placement, and its type's data schema.

    An unknown type gets the envelope check only; whether it may be skipped is the caller's decision.
    """
    if not isinstance(event, dict):
        return [SchemaViolation("", f"expected object, got {_json_type(event)}")]
    compiled = _compiled(generation)
    kind = event.get("type")
    valid = compiled.valid_event.get(kind) if isinstance(kind, str) else None
    if valid is not None and valid(event):
        return []
    found = _check(lambda: _validators(generation).envelope, event, fast=compiled.fast.get("envelope"))
    if not isinstance(kind, str):
        return found
    if kind in compiled.vocabulary.known_types:
        if kind in compiled.vocabulary.surface_types:
            if "surfaceOp" not in event:
                found.append(SchemaViolation("/surfaceOp", "missing: required on a surface event"))
        else:
            found.extend(SchemaViolation(f"/{key}", "only surface events may carry it")
                         for key in ("surfaceOp", "sourceEventSeqs") if key in event)
    if "data" in event and kind in compiled.data_types:
        found.extend(_check(lambda: _validators(generation).data[kind], event["data"], "/data",
                            compiled.fast.get(kind)))
    return found[:MAX_VIOLATIONS]


def validate_header(header: dict[str, Any], generation: int) -> list[SchemaViolation]:
    """Check a JSONL session header line."""
    return _check(lambda: _validators(generation).header, header, fast=_header_check(generation))


@cache
def _header_check(generation: int) -> Check | None:
    """The session header's fast check alone: verify's fast path checks the header, and its own types the
    events, so it need not compile every event schema's check (_compiled)."""
    return fast_checks(f"v{generation} header", lambda: {"header": _roots(generation)[1]}).get("header")


def validate_packed_row(row: dict[str, Any], generation: int) -> list[SchemaViolation]:
    """Check a packed chunk row, including the rule a schema cannot say: one dt gap between members."""
    compiled = _compiled(generation)
    if not compiled.has_packed_row:
        return [SchemaViolation("", f"format v{generation} has no packed chunk rows")]
    found = _check(lambda: _packed_row_validator(generation), row, fast=compiled.fast.get("packed_row"))
    data = row.get("data") if isinstance(row, dict) else None
    if isinstance(data, dict) and isinstance(data.get("dt"), list):
        members = data.get("args" if row.get("type") == "tool-call-chunks" else "texts")
        if isinstance(members, list) and members and len(data["dt"]) != len(members) - 1:
            found.append(SchemaViolation("/data/dt", f"expected {len(members) - 1} gaps for {len(members)} "
                                                     f"members, got {len(data['dt'])}"))
    return found[:MAX_VIOLATIONS]
