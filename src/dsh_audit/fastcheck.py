"""A yes/no checker for our JSON Schemas, compiled to Python source.

jsonschema spends most of its time on reference lookups and validator bookkeeping; answering "is this event
valid?" needs neither. Each schema node becomes one generated function of straight-line `if … return False`
statements, so checking a valid event costs a few attribute tests per key. Only the subset of 2020-12 our
schemas use is supported; anything else raises Unsupported and that schema is left to jsonschema. The exact
error report for an invalid event always comes from jsonschema.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urljoin

from .codecache import compiled
from .seqlist import seq_facts

Check = Callable[[Any], bool]
# What SourceCompiler generates, as plain data (dsh_audit.codecache keeps it): the source, the constants it names,
# the regular expressions it names (by pattern), and each root's function.
CheckPlan = tuple[str, dict[str, Any], dict[str, str], dict[str, str]]
GENERATOR_FILES = (__file__,)   # the code that generates it: part of the cache's key
ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "title", "description"})
_MISSING = object()
_TYPE_TESTS = {
    "object": "isinstance({v}, dict)",
    "array": "isinstance({v}, list)",
    "string": "isinstance({v}, str)",
    "boolean": "isinstance({v}, bool)",
    "null": "{v} is None",
    "number": "(isinstance({v}, (int, float)) and not isinstance({v}, bool))",
    "integer": "_is_integer({v})",
}


# The instance guard each type-specific keyword emits; once `type` has been tested it always holds.
_GUARDS = {"object": "isinstance({v}, dict)", "array": "isinstance({v}, list)", "string": "isinstance({v}, str)"}


def _drop_guard(line: str, guard: str) -> str:
    """`if G and not X: return False` -> `if not X: return False`; `if G:` -> `if True:` (keeps the block)."""
    if line.startswith(f"if {guard} and "):
        return "if " + line[len(f"if {guard} and "):]
    if line == f"if {guard}:":
        return "if True:"
    return line


class Unsupported(Exception):
    """A keyword the compiler does not implement."""


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality as jsonschema applies it: true is not 1, 1 is 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[key], b[key]) for key in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(json_equal, a, b))
    numbers = isinstance(a, int | float) and isinstance(b, int | float)
    return (numbers or type(a) is type(b)) and a == b


def _is_integer(v: Any) -> bool:
    return (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer())


def _integer_within(v: Any, low: float, high: float) -> bool:
    return _is_integer(v) and low <= v <= high


def _integers_within(values: list[Any], low: float, high: float) -> bool:
    facts = seq_facts(values)   # seq lists run to hundreds of items: one pass at C speed, shared with _unique
    if facts.all_int:
        return not values or (facts.low >= low and facts.high <= high)
    return all(_is_integer(item) and low <= item <= high for item in values)


def _unique(values: list[Any]) -> bool:
    facts = seq_facts(values)   # the common case, a list of seqs: no pairwise comparison
    if facts.all_int:
        return facts.unique
    return all(not json_equal(a, b) for i, a in enumerate(values) for b in values[i + 1:])


def resolve_pointer(documents: Mapping[str, Any], target: str) -> tuple[Any, str]:
    """The schema node `uri#/json/pointer` names among `documents`, and the uri (its base for further $refs)."""
    uri, _, fragment = target.partition("#")
    node: Any = documents[uri]
    for token in filter(None, fragment.split("/")):
        node = node[token.replace("~1", "/").replace("~0", "~")]
    return node, uri


def load_checks(plan: CheckPlan) -> dict[str, Check]:
    """The checks a plan describes, compiled (from the code cache when it holds them) and defined."""
    source, constants, patterns, entry = plan
    namespace: dict[str, Any] = {"_MISSING": _MISSING, "_is_integer": _is_integer, "_equal": json_equal,
                                 "_integers_within": _integers_within, "_integer_within": _integer_within,
                                 "_unique": _unique, **constants,
                                 **{name: re.compile(pattern) for name, pattern in patterns.items()}}
    exec(compiled(source, "<dsh_audit.fastcheck>"), namespace)
    return {name: namespace[function] for name, function in entry.items()}


class SourceCompiler:
    def __init__(self, documents: Mapping[str, dict[str, Any]]) -> None:
        self.documents = documents
        self.functions: list[str] = []
        self.constants: dict[str, Any] = {}
        self.by_key: dict[Any, str] = {}
        self.tables: list[str] = []   # dispatch tables, defined after the functions they name
        self.patterns: dict[str, str] = {}

    # -- public -----------------------------------------------------------------------------------------
    def build(self, roots: Mapping[str, dict[str, Any]]) -> dict[str, Check]:
        """One check per root schema; a root using an unsupported keyword is left out."""
        return load_checks(self.plan(roots))

    def plan(self, roots: Mapping[str, dict[str, Any]]) -> CheckPlan:
        """The checks' source and what it names, for load_checks."""
        entry: dict[str, str] = {}
        for name, document in roots.items():
            saved = (list(self.functions), dict(self.constants), dict(self.by_key), list(self.tables),
                     dict(self.patterns))
            try:
                entry[name] = self._function(document, document["$id"])
            except Unsupported:
                self.functions, self.constants, self.by_key, self.tables, self.patterns = saved
        return "\n".join([*self.functions, *self.tables]), self.constants, self.patterns, entry

    # -- schema nodes -----------------------------------------------------------------------------------
    def _constant(self, value: Any) -> str:
        name = f"_c{len(self.constants)}"
        self.constants[name] = value
        return name

    def _regex(self, pattern: str) -> str:
        re.compile(pattern)   # a pattern Python cannot compile fails here, as the schema is read
        name = f"_r{len(self.patterns)}"
        self.patterns[name] = pattern
        return name

    def _function(self, schema: Any, base: str, key: Any = None) -> str:
        key = key if key is not None else (id(schema), base)
        if key in self.by_key:
            return self.by_key[key]
        name = f"_f{len(self.by_key)}"
        self.by_key[key] = name   # before compiling the body: recursive shapes call themselves
        body = self._statements(schema, base, "v")
        self.functions.append(f"def {name}(v):\n" + "".join(f"    {line}\n" for line in body) + "    return True\n")
        return name

    def _test(self, schema: Any, base: str, v: str) -> str:
        """An expression that is true when `v` satisfies `schema`."""
        if schema is True:
            return "True"
        if schema is False:
            return "False"
        keys = set(schema) - ANNOTATIONS
        if not keys:
            return "True"
        bounds = self._integer_bounds(schema, base)
        if bounds is not None:   # seqs, times, turns: an exact int in range needs no call
            low, high = bounds
            shown = [repr(int(b)) if math.isfinite(b) and b.is_integer() else repr(b) for b in (low, high)]
            exact = " and ".join([f"type({v}) is int", *([f"{shown[0]} <= {v}"] if math.isfinite(low) else []),
                                  *([f"{v} <= {shown[1]}"] if math.isfinite(high) else [])])
            return f"(({exact}) or _integer_within({v}, {self._constant(low)}, {self._constant(high)}))"
        if keys == {"type"} and isinstance(schema["type"], str):
            return _TYPE_TESTS[schema["type"]].format(v=v)
        if keys == {"$ref"}:
            return f"{self._ref(urljoin(base, schema['$ref']))}({v})"
        return f"{self._function(schema, base)}({v})"

    def _ref(self, target: str) -> str:
        schema, base = resolve_pointer(self.documents, target)
        return self._function(schema, base, key=target)

    def _statements(self, schema: Any, base: str, v: str) -> list[str]:
        if schema is True:
            return []
        if schema is False:
            return ["return False"]
        lines: list[str] = []
        known = schema.get("type") if isinstance(schema.get("type"), str) else None
        ordered = sorted(schema.items(), key=lambda item: item[0] != "type")   # the type test first: it guards
        for keyword, arg in ordered:
            if keyword in ANNOTATIONS or keyword.startswith("x-dsh-"):
                continue
            emitted = self._keyword(keyword, arg, schema, base, v)
            if known in _GUARDS and keyword != "type":
                emitted = [_drop_guard(line, _GUARDS[known].format(v=v)) for line in emitted]
            lines += emitted
        return lines

    def _keyword(self, keyword: str, arg: Any, schema: dict[str, Any], base: str, v: str) -> list[str]:
        if keyword == "$ref":
            return [f"if not {self._ref(urljoin(base, arg))}({v}): return False"]
        if keyword == "type":
            if not isinstance(arg, str):
                raise Unsupported("type list")
            return [f"if not {_TYPE_TESTS[arg].format(v=v)}: return False"]
        if keyword == "const":
            if isinstance(arg, str):
                return [f"if not (isinstance({v}, str) and {v} == {arg!r}): return False"]
            return [f"if not _equal({v}, {self._constant(arg)}): return False"]
        if keyword == "enum":
            if all(isinstance(option, str) for option in arg):
                return [f"if not (isinstance({v}, str) and {v} in {self._constant(frozenset(arg))}): return False"]
            options = self._constant(arg)
            return [f"if not any(_equal({v}, o) for o in {options}): return False"]
        if keyword == "properties":
            lines = [f"if isinstance({v}, dict):"]
            for index, (name, sub) in enumerate(arg.items()):
                item = f"p{index}"
                test = self._test(sub, base, item)
                if test != "True":
                    lines += [f"    {item} = {v}.get({name!r}, _MISSING)",
                              f"    if {item} is not _MISSING and not {test}: return False"]
            return lines if len(lines) > 1 else []
        if keyword == "required":
            test = " and ".join(f"{name!r} in {v}" for name in arg) or "True"
            return [f"if isinstance({v}, dict) and not ({test}): return False"]
        if keyword == "additionalProperties" and arg is False:
            allowed = self._constant(frozenset(schema.get("properties", {})))
            patterns = schema.get("patternProperties", {})
            if not patterns:
                return [f"if isinstance({v}, dict) and not {v}.keys() <= {allowed}: return False"]
            either = self._regex("|".join(f"(?:{pattern})" for pattern in patterns))
            return [f"if isinstance({v}, dict) and not all(k in {allowed} or {either}.search(k) for k in {v}):"
                    " return False"]
        if keyword == "patternProperties" and all(sub is True for sub in arg.values()):
            return []   # keys it admits need no further test; additionalProperties applies the patterns
        if keyword == "items":
            bounds = self._integer_bounds(arg, base)
            if bounds is not None:   # seq lists run to thousands of items: one tight loop, no call per item
                return [f"if isinstance({v}, list) and not _integers_within({v}, {bounds[0]!r}, {bounds[1]!r}):"
                        " return False"]
            return [f"if isinstance({v}, list):",
                    f"    for x in {v}:",
                    f"        if not {self._test(arg, base, 'x')}: return False"]
        if keyword == "allOf":
            table = self._discriminated(arg, base)
            if table is not None:   # if/then per value of one key: look the branch up instead of trying each
                key, lookup = table
                return [f"if isinstance({v}, dict):",
                        f"    branch = {lookup}.get({v}.get({key!r}))",
                        f"    if branch is not None and not branch({v}): return False",
                        "else:",
                        f"    for branch in {lookup}.values():",
                        f"        if not branch({v}): return False"]
            return [f"if not {self._test(sub, base, v)}: return False" for sub in arg]
        if keyword == "anyOf":
            return [f"if not ({' or '.join(self._test(sub, base, v) for sub in arg)}): return False"]
        if keyword == "not":
            return [f"if {self._test(arg, base, v)}: return False"]
        if keyword == "if" and "else" not in schema:
            then = schema.get("then", True)
            return [f"if {self._test(arg, base, v)} and not {self._test(then, base, v)}: return False"]
        if keyword == "then" and "if" in schema:
            return []   # folded into "if"
        if keyword in ("minimum", "maximum"):
            op = "<" if keyword == "minimum" else ">"
            return [f"if {_TYPE_TESTS['number'].format(v=v)} and {v} {op} {arg!r}: return False"]
        if keyword in ("minLength", "maxLength"):
            op = "<" if keyword == "minLength" else ">"
            return [f"if isinstance({v}, str) and len({v}) {op} {arg!r}: return False"]
        if keyword in ("minItems", "maxItems"):
            op = "<" if keyword == "minItems" else ">"
            return [f"if isinstance({v}, list) and len({v}) {op} {arg!r}: return False"]
        if keyword == "maxProperties":
            return [f"if isinstance({v}, dict) and len({v}) > {arg!r}: return False"]
        if keyword == "pattern":
            regex = self._regex(arg)
            return [f"if isinstance({v}, str) and {regex}.search({v}) is None: return False"]
        if keyword == "uniqueItems" and arg is True:
            return [f"if isinstance({v}, list) and not _unique({v}): return False"]
        if keyword == "dependentRequired":
            lines = []
            for name, needs in arg.items():
                test = " and ".join(f"{need!r} in {v}" for need in needs) or "True"
                lines.append(f"if isinstance({v}, dict) and {name!r} in {v} and not ({test}): return False")
            return lines
        raise Unsupported(keyword)

    def _discriminated(self, subs: list[Any], base: str) -> tuple[str, str] | None:
        """`allOf: [{if: {properties: {K: {const: v}}, required: [K]}, then: S}, …]` as (K, {v: S})."""
        key: str | None = None
        names: dict[str, str] = {}
        for sub in subs:
            condition = sub.get("if") if isinstance(sub, dict) and set(sub) == {"if", "then"} else None
            if not isinstance(condition, dict) or set(condition) != {"properties", "required"} \
                    or len(condition["properties"]) != 1:
                return None
            ((name, rule),) = condition["properties"].items()
            if (condition["required"] != [name] or not isinstance(rule, dict) or set(rule) != {"const"}
                    or not isinstance(rule["const"], str) or key not in (None, name)):
                return None
            key = name
            names[rule["const"]] = self._function(sub["then"], base)
        if key is None:
            return None
        table = f"_t{len(self.tables)}"
        self.tables.append(f"{table} = {{{', '.join(f'{value!r}: {fn}' for value, fn in names.items())}}}")
        return key, table

    def _integer_bounds(self, schema: Any, base: str) -> tuple[float, float] | None:
        """(minimum, maximum) when `schema` (through $refs) only says "an integer in this range"."""
        while isinstance(schema, dict) and set(schema) - ANNOTATIONS == {"$ref"}:
            schema, base = resolve_pointer(self.documents, urljoin(base, schema["$ref"]))
        if not isinstance(schema, dict) or schema.get("type") != "integer":
            return None
        if not set(schema) - ANNOTATIONS <= {"type", "minimum", "maximum"}:
            return None
        return float(schema.get("minimum", float("-inf"))), float(schema.get("maximum", float("inf")))
