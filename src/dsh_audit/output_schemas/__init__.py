"""The JSON Schemas (draft 2020-12) of dsh-audit's own machine outputs, one file per output: NAME.schema.json,
its `$id` BASE_ID + TAG/VERSION for the tag and version the output carries ("schema" and "version"; a golden
file's "format" is TAG/VERSION). A report's JSON Lines, CSV and Parquet rows are its document's `$defs/row`.
A new output is one new file here: `audit schema` and tests/test_output_schemas.py find it by its `$id`.

dsh's own log schemas are another folder (dsh_audit.schemas). Read as plain JSON: no validator is loaded."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from ..errors import DshAuditError

BASE_ID = "https://schemas.dsh-audit.invalid/"
SUFFIX = ".schema.json"


def names() -> list[str]:
    """Every output schema's NAME, sorted."""
    return sorted(entry.name.removesuffix(SUFFIX) for entry in resources.files(__package__).iterdir()
                  if entry.name.endswith(SUFFIX))


def schema_text(name: str) -> str:
    """The schema file NAME as shipped."""
    if name not in names():
        raise DshAuditError(f"no output schema {name!r}; expected one of {', '.join(names())}")
    return resources.files(__package__).joinpath(name + SUFFIX).read_text(encoding="utf-8")


def schema(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(schema_text(name))
    return document


def schema_id(tag: str, version: int) -> str:
    """The `$id` of the schema of the output tagged `tag`, `version`."""
    return f"{BASE_ID}{tag}/{version}"


def tagged(document: dict[str, Any]) -> tuple[str, int]:
    """The tag and version a schema describes, read back from its `$id`."""
    tag, _, version = document["$id"].removeprefix(BASE_ID).rpartition("/")
    return tag, int(version)
