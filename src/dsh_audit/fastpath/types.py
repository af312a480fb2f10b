"""Typed decoders generated from schemas/: each generation's events as msgspec Structs, checked in C while parsing.

The generator turns the subset of JSON Schema 2020-12 that msgspec can express exactly into Python source for
msgspec Structs (closed objects forbid unknown fields, open ones ignore them; `const`/`enum` of strings become
Literals, integer bounds and string lengths and patterns become `Meta` constraints, a discriminated
`allOf: [{if: {K: const}, then: …}]` whose base enumerates exactly those constants becomes a tagged union on K).
A node it cannot express exactly becomes `Any`, checked after decoding by the verifier's own compiled yes/no check
for that node (dsh_audit.fastcheck) in the Struct's `__post_init__` (a node fastcheck cannot compile either is
never valid there: its lines are doubtful, and the log goes to the full verifier).

Each event type is one Struct for its whole line, tagged by `type`, and one decoder takes the union of them all: the
generation's envelope with `data` replaced by the type's schema, and the surface rule of
dsh_audit.vocabulary._event_check (surface types require `surfaceOp`, the others may carry neither it nor
`sourceEventSeqs`). For surface types the projected message (a user/message's data, every other type's
`data.message`) is kept as `msgspec.Raw`, its bytes as stored, and decoded by a second generated decoder: the
fast path hashes those bytes when it can prove them equal to what JSON.stringify writes (verifier.message_bytes).
Two schema shapes are decoded tighter than their schema, so that the common lines keep exact Structs (a value
only the schema admits then fails to decode: a doubt, and the full verifier reads the log): packed chunk rows
(v0/v1, `_specialize`), and the opaque extensions of format 4 — a closed object's `patternProperties` (keys such as
`plugin:result:…`, refused) and a discriminator that admits `plugin:<tag>` strings beside its enumerated tags
(such blocks, refused).
"""

from __future__ import annotations

import itertools
import keyword
import re
import sys
import types
import typing
from collections.abc import Mapping
from functools import cache, lru_cache
from typing import Any
from urllib.parse import urljoin

import msgspec

from ..codecache import compiled, generated
from ..fastcheck import ANNOTATIONS, CheckPlan, SourceCompiler, Unsupported, load_checks, resolve_pointer
from ..vocabulary import GENERATOR_FILES as SCHEMA_CODE
from ..vocabulary import _documents, _generation_documents, _root, schemas_digest, vocabulary

MAX_SAFE = 2**53 - 1
GENERATOR_FILES = (__file__, *SCHEMA_CODE)   # the code that writes the types: part of the cache's key
_DIGITS = frozenset("0123456789")
# The projected message of a surface event (dsh_audit.surface.derive_message): a user/message's data itself,
# every other surface type's data.message.
PROJECTED_AT_DATA = frozenset({"user/message"})


class _Flags:
    """Set by generated `__post_init__` hooks while a message decodes: an `Any` value that JSON.stringify might
    write differently from its stored bytes (a float, an integer beyond 2**53, an array-index key)."""

    active = False
    unplain = 0


FLAGS = _Flags()


def _is_array_index(key: str) -> bool:
    return key.isascii() and key.isdigit() and (key == "0" or key[0] != "0") and int(key) <= 2**32 - 2


def plain(value: Any) -> bool:
    """Whether a decoded JSON value is written by JSON.stringify exactly as msgspec writes it (same length)."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(-(2**53) <= value <= 2**53)
    if kind is dict:
        return all(not (key[:1] in _DIGITS and _is_array_index(key)) and plain(item) for key, item in value.items())
    if kind is list:
        if set(map(type, value)) <= {int}:   # seq lists: no call per item
            return not value or (min(value) >= -(2**53) and max(value) <= 2**53)
        return all(map(plain, value))
    return False


class SeqRun:
    """The last list of seqs found unique by `unique_ints`, and whether it is a contiguous run (kept so that the
    verifier's provenance checks do not describe the same list again)."""

    values: Any = None
    low = 0
    high = 0
    contiguous = False


LAST_SEQS = SeqRun()


def unique_ints(values: list[int]) -> bool:
    """uniqueItems of a decoded list of integers; a contiguous run (a message citing its chunks) costs no set."""
    count = len(values)
    if count < 2:
        return True
    first, last = values[0], values[-1]
    if last - first == count - 1 and values == list(range(first, last + 1)):
        LAST_SEQS.values, LAST_SEQS.low, LAST_SEQS.high, LAST_SEQS.contiguous = values, first, last, True
        return True
    return len(set(values)) == count


def seq_run(values: list[int] | range) -> tuple[int, int, bool]:
    """(smallest, largest, contiguous) of a non-empty list of unique integers, or of a run (SeqList)."""
    if type(values) is range:
        return values.start, values.stop - 1, True
    if LAST_SEQS.values is values:
        return LAST_SEQS.low, LAST_SEQS.high, LAST_SEQS.contiguous
    first, last = values[0], values[-1]
    if last - first == len(values) - 1 and values == list(range(first, last + 1)):
        return first, last, True
    return min(values), max(values), False


# The text of every run of seqs, a block of 1,000 at a time: block k > 0 is k's digits before each 3-digit suffix,
# written into a template of the suffixes, one extended slice per digit of k.
_FIRST_BLOCK = ",".join(map(str, range(1000))).encode()


@lru_cache(maxsize=16)
def _suffixes(width: int) -> bytes:
    """`PPP000,PPP001,…,PPP999` with `width` placeholder bytes for P."""
    return b",".join(b"\0" * width + b"%03d" % suffix for suffix in range(1000))


@lru_cache(maxsize=64)   # bounded: a log's runs move on through its seqs, a few blocks at a time
def _block(k: int) -> bytes:
    """`1000k,1000k+1,…,1000k+999` as JSON writes it."""
    if k == 0:
        return _FIRST_BLOCK
    prefix = str(k).encode()
    text = bytearray(_suffixes(len(prefix)))
    for position, digit in enumerate(prefix):
        text[position::len(prefix) + 4] = bytes((digit,)) * 1000
    return bytes(text)


def _offset(n: int) -> int:
    """Where n's digits start in its block."""
    k, i = divmod(n, 1000)
    if k:
        return i * (len(str(k)) + 4)
    return 2 * i if i < 10 else 20 + 3 * (i - 10) if i < 100 else 290 + 4 * (i - 100)


def run_text(first: int, last: int) -> bytes:
    """The JSON text of the items of the list [first, first + 1, …, last] (first <= last, both >= 0)."""
    low, high = first // 1000, last // 1000
    start, end = _offset(first), _offset(last) + len(str(last))
    if low == high:
        return _block(low)[start:end]
    return b",".join([_block(low)[start:], *map(_block, range(low + 1, high)), _block(high)[:end]])


class SeqList:
    """An envelope's `sourceEventSeqs`, decoded from its stored bytes (msgspec.Raw): a list of unique bounded
    integers. The common list, a contiguous run written as JSON.stringify writes it (a message citing its
    chunks), is recognised by comparing its bytes with the run's text and becomes a `range`, with no integer
    decoded and no set built; any other list is decoded and checked as its schema says (uniqueItems)."""

    def __init__(self, item: Any, low: int, high: int) -> None:
        self.decode = msgspec.json.Decoder(list[item]).decode
        self.low, self.high = low, high

    def __call__(self, raw: msgspec.Raw) -> range | list[int]:
        text = bytes(raw)
        last_comma = text.rfind(b",")
        if last_comma > 0 and text[:1] == b"[" and text[-1:] == b"]":
            try:   # int() is lax (spaces, signs, underscores): the text comparison below is the check
                first, last = int(text[1:text.find(b",")]), int(text[last_comma + 1:-1])
            except ValueError:
                first, last = 0, -1
            if self.low <= first < last <= self.high and last - first == text.count(b",") \
                    and text[1:-1] == run_text(first, last):
                return range(first, last + 1)
        values = self.decode(text)
        if not unique_ints(values):
            raise ValueError("schema")
        return values


class _Type(msgspec.Struct):
    source: str           # the annotation, as Python source
    closed: bool          # Struct equality is the verifier's dict equality (no open object drops keys)
    provable: bool        # msgspec writes every decoded value as JSON.stringify would (up to `Any` positions)
    json_kinds: frozenset[str]   # JSON kinds it accepts: object array string integer number boolean null
    check: str | None = None     # a check run on the decoded value (a checked Any, or uniqueItems)
    convert: str | None = None   # a SeqList that turns the raw value into its list (sourceEventSeqs)


_ANY_KINDS = frozenset({"object", "array", "string", "integer", "number", "boolean", "null"})


class _Class(msgspec.Struct):
    name: str
    fields: list[tuple[str, str, str, bool]] = msgspec.field(default_factory=list)   # attr, json name, type, required
    options: dict[str, Any] = msgspec.field(default_factory=dict)
    # attr, check, holds an Any, converter
    checks: list[tuple[str, str | None, bool, str | None]] = msgspec.field(default_factory=list)
    closed: bool = True
    provable: bool = True


class _Generator:
    def __init__(self, documents: Mapping[str, dict[str, Any]]) -> None:
        self.documents = documents
        self.classes: list[_Class] = []
        self.by_key: dict[Any, _Type] = {}
        self.check_roots: dict[str, dict[str, Any]] = {}
        self.names = itertools.count()
        self.aliases: list[tuple[str, str]] = []
        self.seq_lists: list[tuple[str, str, int, int]] = []   # SeqList name, item annotation, bounds
        self.used_aliases: set[str] = set()

    # -- schema access -------------------------------------------------------------------------------------
    def resolve(self, target: str) -> tuple[Any, str]:
        return resolve_pointer(self.documents, target)

    def deref(self, schema: Any, base: str) -> tuple[Any, str]:
        while isinstance(schema, dict) and set(schema) - ANNOTATIONS == {"$ref"} \
                and not any(k.startswith("x-fast") for k in schema):
            schema, base = self.resolve(urljoin(base, schema["$ref"]))
        return schema, base

    # -- types -------------------------------------------------------------------------------------------
    def type_of(self, schema: Any, base: str) -> _Type:
        """The annotation for a schema node; a node msgspec cannot express becomes a checked `Any`."""
        try:
            return self._exact(schema, base)
        except Unsupported:
            return self._checked_any(schema, base)

    def _checked_any(self, schema: Any, base: str) -> _Type:
        name = f"_chk{next(self.names)}"
        node = dict(schema) if isinstance(schema, dict) else {"allOf": [schema]}
        node["$id"] = base
        self.check_roots[name] = node
        return _Type("Any", False, False, _ANY_KINDS, check=name)

    def _exact(self, schema: Any, base: str) -> _Type:
        if schema is True:
            return _Type("Any", True, False, _ANY_KINDS)
        if schema is False or not isinstance(schema, dict):
            raise Unsupported("false")
        if schema.get("x-fast") == "raw":
            return _Type("Raw", False, False, _ANY_KINDS)
        if schema.get("x-fast") == "seqs":
            return self._seq_list(schema["schema"], schema["base"])
        if schema.get("x-fast") == "at":   # a node of another document, spliced in
            return self._exact(schema["schema"], schema["base"])
        if "x-fast-tag" in schema:   # a stored line: its type is the tag of one union over every line
            keys = {k for k in schema if k not in ANNOTATIONS and not k.startswith("x-")}
            return self._object(schema, base, keys, tag=tuple(schema["x-fast-tag"]))
        keys = {k for k in schema if k not in ANNOTATIONS and not k.startswith("x-")}
        if not keys:
            return _Type("Any", True, False, _ANY_KINDS)
        if keys == {"$ref"}:
            target = urljoin(base, schema["$ref"])
            if target not in self.by_key:
                alias = f"R{next(self.names)}"
                node, node_base = self.resolve(target)
                kinds = frozenset({node["type"]}) if isinstance(node, dict) and isinstance(node.get("type"), str) \
                    else _ANY_KINDS
                # A recursive use (content blocks hold tool results that hold content blocks) names an alias,
                # assuming the type closed and provable; the assumption is checked once the type is known.
                self.by_key[target] = _Type(alias, True, True, kinds)
                try:
                    found = self._exact(node, node_base)
                finally:
                    del self.by_key[target]
                if alias in self.used_aliases:
                    if not (found.closed and found.provable):
                        raise Unsupported("recursive type that is open or not provable")
                    self.aliases.append((alias, found.source))
                self.by_key[target] = found
            found = self.by_key[target]
            if found.source.startswith("R"):
                self.used_aliases.add(found.source)
            return found
        if "$ref" in keys:
            raise Unsupported("$ref beside other keywords")
        if "const" in keys:
            return self._const(schema["const"], keys)
        if "enum" in keys:
            values = schema["enum"]
            if keys != {"enum"} or not values or not all(isinstance(v, str) for v in values):
                raise Unsupported("enum")
            return _Type(f"Literal[{', '.join(map(repr, values))}]", True, True, frozenset({"string"}))
        if "anyOf" in keys:
            if keys != {"anyOf"}:
                raise Unsupported("anyOf beside other keywords")
            return self._union([self._exact(sub, base) for sub in schema["anyOf"]])
        kind = schema.get("type")
        if not isinstance(kind, str):
            raise Unsupported("untyped or multi-typed node")
        if kind == "string":
            if not keys <= {"type", "minLength", "maxLength", "pattern"}:
                raise Unsupported("string keyword")
            meta = {"min_length": schema.get("minLength"), "max_length": schema.get("maxLength"),
                    "pattern": schema.get("pattern")}
            return _Type(self._annotated("str", meta), True, True, frozenset({"string"}))
        if kind == "integer":
            if not keys <= {"type", "minimum", "maximum"}:
                raise Unsupported("integer keyword")
            low, high = schema.get("minimum"), schema.get("maximum")
            for bound in (low, high):
                if bound is not None and not (isinstance(bound, int) and not isinstance(bound, bool)):
                    raise Unsupported("non-integer bound")
            provable = low is not None and high is not None and low >= -(2**53) and high <= 2**53
            return _Type(self._annotated("int", {"ge": low, "le": high}), True, provable, frozenset({"integer"}))
        if kind == "number":
            if keys != {"type"}:
                raise Unsupported("number keyword")
            return _Type("Union[int, float]", True, False, frozenset({"integer", "number"}))
        if kind == "boolean":
            if keys != {"type"}:
                raise Unsupported("boolean keyword")
            return _Type("bool", True, True, frozenset({"boolean"}))
        if kind == "null":
            if keys != {"type"}:
                raise Unsupported("null keyword")
            return _Type("None", True, True, frozenset({"null"}))
        if kind == "array":
            if not keys <= {"type", "items", "minItems", "maxItems", "uniqueItems"}:
                raise Unsupported("array keyword")
            item = self._exact(schema["items"], base) if "items" in schema else _Type("Any", True, False,
                                                                                    _ANY_KINDS)
            unique = schema.get("uniqueItems", False)
            if unique not in (True, False) or (unique and item.json_kinds != frozenset({"integer"})):
                raise Unsupported("uniqueItems beyond integers")
            meta = {"min_length": schema.get("minItems"), "max_length": schema.get("maxItems")}
            return _Type(self._annotated(f"list[{item.source}]", meta), item.closed, item.provable,
                         frozenset({"array"}), check="_unique_ints" if unique else None)
        if kind == "object":
            return self._object(schema, base, keys)
        raise Unsupported(f"type {kind}")

    def _seq_list(self, schema: Any, base: str) -> _Type:
        """A list of unique integers with both bounds, kept as its raw bytes and turned into its list by a SeqList
        while decoding; any other schema is typed as it is. Its depth counts as a raw value's (0, where the list is
        1): one level, far below the readers' cap, on lines whose messages the cap is checked on anyway."""
        node, node_base = self.deref(schema, base)
        item, item_base = self.deref(node.get("items"), node_base) if isinstance(node, dict) else (None, base)
        if not (isinstance(node, dict) and set(node) - ANNOTATIONS == {"type", "items", "uniqueItems"}
                and node["type"] == "array" and node["uniqueItems"] is True and isinstance(item, dict)
                and set(item) - ANNOTATIONS == {"type", "minimum", "maximum"} and item["type"] == "integer"
                and all(type(item[bound]) is int for bound in ("minimum", "maximum")) and item["minimum"] >= 0):
            return self._exact(schema, base)
        name = f"_seqs{next(self.names)}"
        self.seq_lists.append((name, self._exact(item, item_base).source, item["minimum"], item["maximum"]))
        return _Type("Raw", True, True, frozenset({"array"}), convert=name)

    @staticmethod
    def _annotated(annotation: str, meta: dict[str, Any]) -> str:
        given = {key: value for key, value in meta.items() if value is not None}
        if not given:
            return annotation
        return f"Annotated[{annotation}, Meta({', '.join(f'{k}={v!r}' for k, v in given.items())})]"

    @staticmethod
    def _const(value: Any, keys: set[str]) -> _Type:
        if keys - {"const", "type"}:
            raise Unsupported("const beside other keywords")
        if isinstance(value, str):
            return _Type(f"Literal[{value!r}]", True, True, frozenset({"string"}))
        if value is True or value is False:
            return _Type(f"Literal[{value!r}]", True, True, frozenset({"boolean"}))
        raise Unsupported("non-string const")

    @staticmethod
    def _union(members: list[_Type]) -> _Type:
        seen: set[str] = set()
        for member in members:
            if member.json_kinds & seen or member.check or member.source.startswith("Any") or member.source == "Raw":
                raise Unsupported("overlapping anyOf branches")
            seen |= member.json_kinds
        # Struct members of a union must be tagged unions of one tag field or a single struct: msgspec says so
        # when the decoder is built; the caller turns that into Unsupported.
        return _Type(f"Union[{', '.join(m.source for m in members)}]",
                     all(m.closed for m in members), all(m.provable for m in members), frozenset(seen))

    def _object(self, schema: dict[str, Any], base: str, keys: set[str],
                tag: tuple[str, str] | None = None) -> _Type:
        if "allOf" in keys:
            if tag is not None:
                raise Unsupported("nested discriminator")
            return self._tagged(schema, base, keys)
        if not keys <= {"type", "properties", "required", "additionalProperties", "patternProperties"}:
            raise Unsupported("object keyword")
        properties: dict[str, Any] = dict(schema.get("properties", {}))
        required: list[str] = list(schema.get("required", []))
        extra = schema.get("additionalProperties", True)
        if extra not in (True, False):
            raise Unsupported("additionalProperties schema")
        patterns = schema.get("patternProperties", {})
        if patterns and (extra is not False or not all(sub is True for sub in patterns.values())):
            raise Unsupported("patternProperties")   # else: the closed Struct refuses what they admit (tighter)
        if tag is not None:
            key, value = tag
            if key in properties and not self._accepts(properties[key], base, value):
                raise Unsupported("variant rejects its tag")
            properties.pop(key, None)
            required = [name for name in required if name != key]
        if not properties and extra is True and not required:
            return _Type("dict[str, Any]", True, False, frozenset({"object"}))
        if any(name not in properties for name in required):
            raise Unsupported("required key without a property schema")
        cls = _Class(f"S{next(self.names)}")
        cls.options = {"forbid_unknown_fields": extra is False, "kw_only": True}
        if tag is not None:
            cls.options.update(tag_field=tag[0], tag=tag[1])
        cls.closed = extra is False
        taken: set[str] = set()
        for index, (name, sub) in enumerate(properties.items()):
            if sub is False:
                raise Unsupported("a property that must be absent")
            member = self.type_of(sub, base)
            attr = name if (name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("_")
                            and name not in taken) else f"p{index}_"
            taken.add(attr)
            annotation = member.source
            cls.fields.append((attr, name, annotation, name in required))
            anyish = member.source.startswith(("Any", "dict[str, Any]")) or "Any]" in member.source
            if member.check is not None or anyish or member.convert is not None:
                cls.checks.append((attr, member.check, anyish, member.convert))
            cls.closed = cls.closed and member.closed
            cls.provable = cls.provable and (member.provable or "Any" in member.source)
            if name[:1] in _DIGITS and _is_array_index(name):
                cls.provable = False   # JS lists array-index keys first, whatever the stored order
        self.classes.append(cls)
        return _Type(cls.name, cls.closed, cls.provable, frozenset({"object"}))

    def _accepts(self, schema: Any, base: str, value: str) -> bool:
        schema, base = self.deref(schema, base)
        if schema is True or schema == {}:
            return True
        if not isinstance(schema, dict):
            return False
        if set(schema) - ANNOTATIONS == {"const"}:
            return bool(schema["const"] == value)
        if set(schema) - ANNOTATIONS == {"enum"}:
            return value in schema["enum"]
        return False

    def _tagged(self, schema: dict[str, Any], base: str, keys: set[str]) -> _Type:
        """`{type: object, required: [K], properties: {K: {enum: [...]}}, allOf: [{if: K == c, then: S_c}]}` with
        one branch per enumerated constant: a tagged union of the S_c on K."""
        if not keys <= {"type", "properties", "required", "allOf", "additionalProperties"}:
            raise Unsupported("discriminated object keyword")
        properties = schema.get("properties", {})
        if len(properties) != 1 or schema.get("additionalProperties", True) is not True:
            raise Unsupported("discriminated object with other properties")
        ((key, rule),) = properties.items()
        if schema.get("required") != [key] or not isinstance(rule, dict):
            raise Unsupported("discriminator shape")
        rule = self._enumerated(rule)
        branches: dict[str, Any] = {}
        for sub in schema["allOf"]:
            condition = sub.get("if") if isinstance(sub, dict) and set(sub) == {"if", "then"} else None
            if not isinstance(condition, dict) or set(condition) != {"properties", "required"} \
                    or condition["required"] != [key] or set(condition["properties"]) != {key}:
                raise Unsupported("branch condition")
            const = condition["properties"][key]
            if not isinstance(const, dict) or set(const) != {"const"} or not isinstance(const["const"], str):
                raise Unsupported("branch constant")
            branches[const["const"]] = sub["then"]
        if set(branches) != set(rule["enum"]) or len(branches) != len(rule["enum"]):
            raise Unsupported("branches do not cover the enumeration exactly")
        members = []
        for value, then in branches.items():
            node, node_base = self.deref(then, base)
            if not isinstance(node, dict) or node.get("type") != "object":
                raise Unsupported("branch is not an object schema")
            cache_key = ("tagged", id(node), node_base, key, value)
            if cache_key not in self.by_key:
                node_keys = {k for k in node if k not in ANNOTATIONS and not k.startswith("x-")}
                self.by_key[cache_key] = self._object(node, node_base, node_keys, tag=(key, value))
            members.append(self.by_key[cache_key])
        return _Type(f"Union[{', '.join(m.source for m in members)}]", all(m.closed for m in members),
                     all(m.provable for m in members), frozenset({"object"}))

    @staticmethod
    def _enumerated(rule: dict[str, Any]) -> dict[str, Any]:
        """A discriminator's rule as `{enum: [...]}`: as it is, or `anyOf: [{enum}, {type: string, pattern}...]`
        with the pattern branches left out (format 4's opaque `plugin:<tag>` values: refused, so tighter)."""
        if set(rule) - ANNOTATIONS == {"enum"}:
            return rule
        branches = rule.get("anyOf") if set(rule) - ANNOTATIONS == {"anyOf"} else None
        enums = [sub for sub in branches or () if isinstance(sub, dict) and set(sub) - ANNOTATIONS == {"enum"}]
        patterns = [sub for sub in branches or () if isinstance(sub, dict)
                    and set(sub) - ANNOTATIONS == {"type", "pattern"} and sub["type"] == "string"]
        if len(enums) != 1 or len(enums) + len(patterns) != len(branches or ()):
            raise Unsupported("discriminator shape")
        return enums[0]

    # -- output ------------------------------------------------------------------------------------------
    def source(self) -> str:
        # Annotations are evaluated as each class is defined (a class is generated after the classes it uses),
        # so that msgspec and typing resolve objects rather than compile a string per field; only a recursive
        # alias, defined after every class, is named as a string.
        lines = ["from typing import Any, Literal, Union, Annotated",
                 "from msgspec import Struct, Meta, Raw, UNSET, UnsetType, field", ""]
        aliases = {alias for alias, _ in self.aliases}
        lines += [f"{name} = _SeqList({item}, {low}, {high})" for name, item, low, high in self.seq_lists]

        def forward(annotation: str) -> str:
            return re.sub(r"\bR\d+\b", lambda m: repr(m[0]) if m[0] in aliases else m[0], annotation)

        for cls in self.classes:
            options = "".join(f", {key}={value!r}" for key, value in cls.options.items())
            lines.append(f"class {cls.name}(Struct{options}):")
            for attr, name, annotation, required in cls.fields:
                annotation = forward(annotation)
                rename = "" if attr == name else f"name={name!r}"
                if required:
                    lines.append(f"    {attr}: {annotation}" + (f" = field({rename})" if rename else ""))
                else:
                    default = ", ".join(filter(None, ["default=UNSET", rename]))
                    lines.append(f"    {attr}: Union[{annotation}, UnsetType] = field({default})")
            if cls.checks:
                lines.append("    def __post_init__(self):")
                for attr, check, anyish, convert in cls.checks:
                    lines.append(f"        v = self.{attr}")
                    lines.append("        if v is not UNSET:")
                    if convert is not None:
                        lines.append(f"            self.{attr} = {convert}(v)")
                    if check is not None:
                        lines.append(f"            if not {check}(v): raise ValueError('schema')")
                    if anyish:
                        lines.append("            if _FLAGS.active and not _plain(v): _FLAGS.unplain += 1")
            if not cls.fields and not cls.checks:
                lines.append("    pass")
            lines.append("")
        lines += [f"{alias} = {annotation}" for alias, annotation in self.aliases]
        return "\n".join(lines)


class MessageType(msgspec.Struct, frozen=True):
    decoder: msgspec.json.Decoder[Any]
    provable: bool    # its Structs can be length-proved (floats and unbounded integers cannot)
    closed: bool      # equality of its Structs is the verifier's dict equality
    anyish: bool      # it holds `Any` positions, whose values are checked while decoding (types.plain)


class FastTypes(msgspec.Struct, frozen=True):
    """One generation's generated decoders."""

    generation: int
    line: msgspec.json.Decoder[Any]                        # any stored line: a tagged union on its type
    header: msgspec.json.Decoder[Any] | None               # the session header line (None: not expressible)
    events: Mapping[str, type]                             # event type -> the Struct of its whole stored line
    packed: Mapping[str, type]                             # packed chunk row tag -> its Struct (v0/v1)
    messages: Mapping[str, MessageType]                    # surface type -> decoder of its projected message
    unsupported: Mapping[str, str]                         # event type -> why it has no decoder
    closed: Mapping[str, bool]                             # event type -> its Structs compare as dicts
    chunk_classes: Mapping[str, type]                      # assistant/chunk (v0/v1): chunk type -> its Struct
    tags: Mapping[type, str]                               # every tagged Struct -> its tag
    deep: frozenset[type]                                  # line Structs whose values may nest without bound
    static_depth: Mapping[type, int]                       # Struct -> how deep its values nest, where bounded
    walks: Mapping[type, tuple[int, tuple[str, ...]]]      # other Structs -> (their bounded fields' depth, the rest)
    source: str                                            # the generated module, for inspection


def _event_schema(envelope: dict[str, Any], kind: str, data_id: str, surface: bool) -> dict[str, Any]:
    properties = dict(envelope["properties"])
    properties["type"] = {"const": kind}
    properties["data"] = {"$ref": data_id}
    required = list(envelope["required"])
    if surface:
        required.append("surfaceOp")
        if "sourceEventSeqs" in properties:
            properties["sourceEventSeqs"] = {"x-fast": "seqs", "schema": properties["sourceEventSeqs"],
                                             "base": envelope["$id"]}
    else:
        properties.pop("surfaceOp", None)
        properties.pop("sourceEventSeqs", None)
    return {**{k: v for k, v in envelope.items() if k not in ("properties", "required", "$id")},
            "properties": properties, "required": required, "x-fast-tag": ["type", kind]}


def _projected(gen: _Generator, kind: str, data: dict[str, Any], base: str) -> tuple[Any, Any] | None:
    """(the data schema with its projected message as raw bytes, the message schema)."""
    if kind in PROJECTED_AT_DATA:
        return {"x-fast": "raw"}, data
    node, node_base = gen.deref(data, base)
    if not isinstance(node, dict) or "message" not in node.get("properties", {}) or node_base != base:
        return None
    properties = {**node["properties"], "message": {"x-fast": "raw"}}
    return {**node, "properties": properties}, node["properties"]["message"]


# Packed runs are tightened past their schema: seq0 and time0 below 2**52, at most 2**20 gaps, each in [0, 2**31].
# Then every member seq and time is a safe integer by construction (the reader's rule, dsh_audit.readers.packed),
# with no pass over the gaps; a row outside these bounds is doubtful (stricter than the schema, never laxer).
_TIGHT_ANCHOR = {"type": "integer", "minimum": 0, "maximum": 2**52}
_TIGHT_GAPS = {"type": "array", "maxItems": 2**20, "items": {"type": "integer", "minimum": 0, "maximum": 2**31}}


def _specialize(row: dict[str, Any], tag: str) -> dict[str, Any] | None:
    """A packed-row schema for one of its tags: the base object with the branch for `tag` applied to `data`, and
    the anchor and gaps tightened (above)."""
    branch = None
    for sub in row.get("allOf", []):
        rule = sub["if"]["properties"]["type"]
        if tag in rule.get("enum", [rule.get("const")]):
            branch = sub["then"]
    if branch is None or set(branch) != {"properties"} or set(branch["properties"]) != {"data"}:
        return None
    data = dict(branch["properties"]["data"])
    if set(data.get("properties", {}).get("dt", {})) - ANNOTATIONS != {"type", "items"}:
        return None
    data["properties"] = {**data["properties"], "dt": _TIGHT_GAPS}
    properties = {**row["properties"], "type": {"const": tag}, "data": data, "seq0": _TIGHT_ANCHOR,
                  "time0": {**_TIGHT_ANCHOR, "minimum": -(2**52)}}
    return {**{k: v for k, v in row.items() if k != "allOf"}, "properties": properties, "x-fast-tag": ["type", tag]}


# What the generator writes for a generation, as plain data (dsh_audit.codecache keeps it): the module's source,
# each line type's annotation, each surface type's message annotation (source, provable, closed), why a type has
# none, whether each event type's Structs are closed, the session header's annotation, the checked `Any`s' names
# and the plan of their checks.
_Plan = tuple[str, dict[tuple[str, str], str], dict[str, tuple[str, bool, bool]], dict[str, str], dict[str, bool],
              str | None, list[str], CheckPlan]
# What the generated types' shapes say, by class name, found once with the plan (the walks over their type hints
# cost as much as defining them): the line types that may nest without bound, each bounded Struct's depth, each
# other Struct's walk, and which surface types' messages hold an `Any`.
_Shapes = tuple[list[str], dict[str, int], dict[str, tuple[int, tuple[str, ...]]], dict[str, bool]]


def _plan(generation: int) -> _Plan:
    documents = _documents()
    mine = _generation_documents(generation)
    envelope = _root(mine, "envelope", generation)
    row = _root(mine, "packed-chunk-row", generation)
    assert envelope is not None
    words = vocabulary(generation)
    gen = _Generator(documents)
    annotations: dict[tuple[str, str], str] = {}
    message_types: dict[str, _Type] = {}
    unsupported: dict[str, str] = {}
    closed: dict[str, bool] = {}
    by_type = {document["x-dsh-type"]: document for document in mine if "x-dsh-type" in document}
    for kind in sorted(words.known_types):
        document = by_type[kind]
        data_id = document["$id"]
        surface = kind in words.surface_types
        saved = (len(gen.classes), dict(gen.by_key), dict(gen.check_roots))
        try:
            event = _event_schema(envelope, kind, data_id, surface)
            if surface:
                projected = _projected(gen, kind, document, data_id)
                if projected is None:
                    raise Unsupported("surface data without a message property")
                data_schema, message_schema = projected
                message_types[kind] = gen._exact(message_schema, data_id)
                event["properties"]["data"] = {"x-fast": "at", "schema": data_schema, "base": data_id}
            typed = gen._exact(event, envelope["$id"])
            annotations[("event", kind)] = typed.source
            closed[kind] = typed.closed
        except Unsupported as why:
            del gen.classes[saved[0]:]
            gen.by_key, gen.check_roots = saved[1], saved[2]
            message_types.pop(kind, None)
            unsupported[kind] = str(why)
    session = _root(mine, "session-header", generation)
    try:
        header_annotation = gen._exact(session, session["$id"]).source if session is not None else None
    except Unsupported:
        header_annotation = None
    if row is not None:
        for tag in row["properties"]["type"]["enum"]:
            specialized = _specialize(row, tag)
            try:
                if specialized is None:
                    raise Unsupported("packed row branch")
                annotations[("packed", tag)] = gen._exact(specialized, row["$id"]).source
            except Unsupported as why:
                unsupported[tag] = str(why)
    checks = SourceCompiler(documents).plan(gen.check_roots)
    messages = {kind: (message.source, message.provable, message.closed) for kind, message in message_types.items()}
    return gen.source(), annotations, messages, unsupported, closed, header_annotation, list(gen.check_roots), checks


def _planned(generation: int) -> tuple[_Plan, _Shapes]:
    plan = _plan(generation)
    return plan, _shapes(plan, _module(generation, plan))


def _module(generation: int, plan: _Plan) -> dict[str, Any]:
    """The generated module's namespace, defined."""
    source, _, _, _, _, _, checked, check_plan = plan
    module = types.ModuleType(f"dsh_audit.fastpath._generated_v{generation}")
    checks = load_checks(check_plan) if checked else {}
    module.__dict__.update(checks, _plain=plain, _FLAGS=FLAGS, _unique_ints=unique_ints, _SeqList=SeqList)
    for name in set(checked) - set(checks):   # fastcheck cannot check it either: such a value is always doubtful
        module.__dict__[name] = _never
    sys.modules[module.__name__] = module
    exec(compiled(source, f"<{module.__name__}>"), module.__dict__)
    return module.__dict__


def _shapes(plan: _Plan, namespace: dict[str, Any]) -> _Shapes:
    _, annotations, message_types, _, _, _, _, _ = plan
    lines = {namespace[annotation] for annotation in annotations.values()}
    deep = sorted(cls.__name__ for cls in lines if _unbounded(cls, frozenset()))
    depths: dict[type, int | None] = {}
    for cls in namespace.values():
        if isinstance(cls, type) and issubclass(cls, msgspec.Struct):
            _static_depth(cls, depths, frozenset())
    static = {cls.__name__: depth for cls, depth in depths.items() if depth is not None}
    walks: dict[str, tuple[int, tuple[str, ...]]] = {}
    for cls, depth in depths.items():
        if depth is None:   # unbounded: its bounded fields' depth, and the fields to walk
            hints = _hints(cls)
            names: tuple[str, ...] = cls.__struct_fields__  # type: ignore[attr-defined]
            fixed = [_static_depth(hints[name], depths, frozenset()) for name in names]
            walks[cls.__name__] = (1 + max((d for d in fixed if d is not None), default=0),
                                   tuple(name for name, d in zip(names, fixed, strict=True) if d is None))
    anyish = {kind: _anyish(eval(message[0], namespace), set()) for kind, message in message_types.items()}
    return deep, static, walks, anyish


def _build(generation: int) -> FastTypes:
    plan, (deep_names, static_names, walk_names, anyish) = generated(
        f"fast types v{generation}", f"{schemas_digest()} msgspec {msgspec.__version__}", GENERATOR_FILES,
        lambda: _planned(generation))
    source, annotations, message_types, unsupported, closed, header_annotation, _, _ = plan
    unsupported = dict(unsupported)
    namespace = _module(generation, plan)

    def decoder(annotation: str) -> msgspec.json.Decoder[Any]:
        return msgspec.json.Decoder(eval(annotation, namespace))

    events: dict[str, type] = {}
    packed: dict[str, type] = {}
    messages: dict[str, MessageType] = {}
    for (what, kind), annotation in annotations.items():
        try:
            decoder(annotation)
            if what == "event" and kind in message_types:
                message_source, provable, message_closed = message_types[kind]
                built = decoder(message_source)
                messages[kind] = MessageType(built, provable, message_closed, anyish[kind])
        except (TypeError, ValueError) as why:   # msgspec refuses the type (an ambiguous union, say)
            unsupported[kind] = f"msgspec: {why}"
            continue
        (events if what == "event" else packed)[kind] = namespace[annotation]
    line = msgspec.json.Decoder(typing.Union[tuple([*events.values(), *packed.values()])])  # noqa: UP007
    header = decoder(header_annotation) if header_annotation is not None else None
    tags = {cls: str(cls.__struct_config__.tag) for cls in namespace.values()
            if isinstance(cls, type) and issubclass(cls, msgspec.Struct) and cls.__struct_config__.tag is not None}
    chunk_classes: dict[str, type] = {}
    if "assistant/chunk" in events:
        union = _hints(_hints(events["assistant/chunk"])["data"])["chunk"]
        for member in typing.get_args(union):
            chunk_classes[member.__struct_config__.tag] = member
    deep = frozenset(cls for cls in [*events.values(), *packed.values()] if cls.__name__ in deep_names)
    static = {namespace[name]: depth for name, depth in static_names.items()}
    walks = {namespace[name]: (depth, fields) for name, (depth, fields) in walk_names.items()}
    return FastTypes(generation, line, header, events, packed, messages, unsupported, closed, chunk_classes, tags,
                     deep, static, walks, source)


def _static_depth(annotation: Any, memo: dict[type, int | None], path: frozenset[type]) -> int | None:
    """How deep a value of a generated type nests (a Struct or list is one level), or None when unbounded."""
    origin = typing.get_origin(annotation)
    if annotation is msgspec.Raw:   # a surface event's message: checked once decoded
        return 0
    if annotation is Any or annotation is dict or origin is dict:
        return None
    if origin is typing.Literal:
        return 0
    if origin is list:
        inner = _static_depth(typing.get_args(annotation)[0], memo, path)
        return None if inner is None else inner + 1
    if origin is not None:   # a Union (get_type_hints strips Annotated)
        found = [_static_depth(arg, memo, path) for arg in typing.get_args(annotation)]
        known = [depth for depth in found if depth is not None]
        return None if len(known) < len(found) else max(known, default=0)
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        if annotation in memo:
            return memo[annotation]
        if annotation in path:
            return None
        fields = [_static_depth(hint, memo, path | {annotation})
                  for hint in _hints(annotation).values()]
        bounded = [d for d in fields if d is not None]
        depth = None if len(bounded) < len(fields) else 1 + max(bounded, default=0)
        if not path or depth is not None:
            memo[annotation] = depth
        return depth
    return 0


def _anyish(annotation: Any, seen: set[type]) -> bool:
    """Whether a generated type holds an `Any` (or free-form object) position anywhere."""
    origin = typing.get_origin(annotation)
    if annotation is Any or annotation is dict or origin is dict:
        return True
    if origin is typing.Literal:
        return False
    if origin is not None:
        return any(_anyish(arg, seen) for arg in typing.get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct) and annotation not in seen:
        seen.add(annotation)
        return any(_anyish(hint, seen) for hint in _hints(annotation).values())
    return False


def _unbounded(annotation: Any, path: frozenset[type]) -> bool:
    """Whether values of a generated type may nest without bound (through Any, raw bytes or recursion): only their
    lines need the readers' depth cap checked."""
    origin = typing.get_origin(annotation)
    if annotation is Any or annotation is msgspec.Raw or annotation is dict or origin is dict:
        return True
    if origin is typing.Literal:
        return False
    if origin is not None:
        return any(_unbounded(arg, path) for arg in typing.get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        if annotation in path:
            return True
        return any(_unbounded(hint, path | {annotation}) for hint in _hints(annotation).values())
    return False


# A generated type's hints, resolved once: the depth and shape walks below ask for each type's many times.
_hints = cache(typing.get_type_hints)


def _never(value: Any) -> bool:
    return False


@cache
def fast_types(generation: int) -> FastTypes:
    return _build(generation)


__all__ = ["FLAGS", "FastTypes", "MessageType", "fast_types", "plain", "seq_run", "unique_ints"]
