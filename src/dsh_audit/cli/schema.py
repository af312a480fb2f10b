"""`audit schema`: the JSON Schemas of dsh-audit's machine outputs (dsh_audit.output_schemas), listed, or one
printed as shipped, for a consumer to validate what it reads or to generate its types."""

from __future__ import annotations

import click

from . import EXIT_CLEAN


@click.command(epilog="""\b
Examples:
  audit schema                              every schema's NAME, and the tag/version of its output
  audit schema verify > verify.schema.json  the schema of `audit verify --format json`
  audit schema cache-report-requests        a row of cache-report's requests (JSON, JSON Lines, CSV, Parquet)
Exit codes: 0 printed, 2 no schema of that NAME.""")
@click.argument("name", required=False)
def schema(name: str | None) -> int:
    """Print the JSON Schema (draft 2020-12) of one machine output, or with no NAME list them all.

    Each output names its schema: "schema" and "version" in a JSON document (a golden file's "format"), the
    Parquet metadata dsh-audit-schema and dsh-audit-schema-version; the schema's $id ends in TAG/VERSION."""
    from ..output_schemas import names, schema_text, tagged
    from ..output_schemas import schema as load

    if name is not None:
        click.echo(schema_text(name), nl=False)
        return EXIT_CLEAN
    for each in names():
        tag, version = tagged(load(each))
        click.echo(f"{each:<22} {tag}/{version}")
    return EXIT_CLEAN
