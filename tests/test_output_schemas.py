"""Every machine output has a JSON Schema (dsh_audit/output_schemas), and real output keeps to it: each command in
each of its JSON, JSON Lines, CSV and Parquet formats, run in-process over the corpus, every generation's
fixtures, the wild logs and generated collapse cases, validates against the schema its own tag names."""

from __future__ import annotations

import csv
import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import polars as pl
import pytest
from click.testing import CliRunner
from jsonschema import Draft202012Validator

from conftest_reference import LOGS_ROOT
from dsh_audit import golden
from dsh_audit.cli import main
from dsh_audit.cli.cache_report import cache_report
from dsh_audit.output_schemas import BASE_ID, names, schema, schema_id, tagged
from dsh_audit.reports import cache_report as cache_module
from dsh_audit.reports import header_diff, verify_json
from dsh_audit.reports.rollup import ROLLUP_VERSION, ROLLUPS
from homebuilder import build_messy_home
from test_cache_report import write_jsonl
from test_explain_agreement import CASES

DRAFT = "https://json-schema.org/draft/2020-12/schema"
TESTS = Path(__file__).resolve().parent
ROOTS = {"corpus": LOGS_ROOT, "fixtures": TESTS / "fixtures" / "generations", "wild": TESTS / "fixtures" / "wild"}
FRAME_FORMATS = ("json", "jsonl", "csv", "parquet")
SCHEMAS = {schema(name)["$id"]: schema(name) for name in names()}
ROW_KINDS = next(p for p in cache_report.params if p.name == "rows").type
assert isinstance(ROW_KINDS, click.Choice)


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The log folders read, and one of the generated collapse cases (cache-report's and explain's verdicts)."""
    cases = tmp_path_factory.mktemp("collapses")
    for number, (build, _) in enumerate(CASES.values()):
        (cases / f"case-{number}").mkdir()
        write_jsonl(build(), cases / f"case-{number}" / "session.jsonl")
    return {name: root for name, root in ROOTS.items() if root.is_dir()} | {"collapses": cases}


def audit(*args: str, codes: tuple[int, ...] = (0, 1)) -> bytes:
    return audited(*args, codes=codes)[1]


def audited(*args: str, codes: tuple[int, ...] = (0, 1)) -> tuple[int, bytes]:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code in codes, (args, result.stderr)
    return result.exit_code, result.stdout_bytes


def validator(tag: str, version: int) -> Draft202012Validator:
    return Draft202012Validator(SCHEMAS[schema_id(tag, version)])


def valid(document: Any, tag: str, version: int, where: str = "") -> None:
    errors = [f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
              for error in validator(tag, version).iter_errors(document)]
    assert not errors, (tag, where, errors[:5])


def row_validator(tag: str, version: int) -> Draft202012Validator:
    document = SCHEMAS[schema_id(tag, version)]
    return Draft202012Validator({"$ref": "#/$defs/row", "$defs": document["$defs"]})


def documents(text: bytes) -> Iterator[Any]:
    """The JSON documents written one after another (rebuild writes one per log it reads)."""
    decoder, rest = json.JSONDecoder(), text.decode().lstrip()
    while rest:
        document, end = decoder.raw_decode(rest)
        yield document
        rest = rest[end:].lstrip()


def logs_below(root: Path) -> list[Path]:
    return sorted(path for path in root.rglob("session*.jsonl") if path.is_file())


def test_every_output_schema_is_valid_draft_2020_12_with_its_tag_in_its_id() -> None:
    assert len(SCHEMAS) == len(names()) >= 9
    for name, document in zip(names(), map(schema, names()), strict=True):
        assert document["$schema"] == DRAFT, name
        Draft202012Validator.check_schema(document)
        assert document["$id"].startswith(BASE_ID), name
        tag, version = tagged(document)
        if "properties" in document and "schema" in document["properties"]:
            assert document["properties"]["schema"]["const"] == tag, name
            assert document["properties"]["version"]["const"] == version, name


def test_the_tags_in_the_code_are_those_of_the_shipped_schemas() -> None:
    for kind in ROW_KINDS.choices:
        assert schema_id(f"dsh-audit/cache-report/{kind}", cache_module.SCHEMA_VERSION) in SCHEMAS
    assert schema_id("dsh-audit/header-diff", header_diff.SCHEMA_VERSION) in SCHEMAS
    assert schema_id(verify_json.SCHEMA, verify_json.SCHEMA_VERSION) in SCHEMAS
    assert f"{BASE_ID}{golden.FORMAT}" in SCHEMAS


def test_audit_schema_prints_each_as_shipped_and_lists_them_all() -> None:
    listing = audit("schema").decode()
    for name in names():
        tag, version = tagged(schema(name))
        assert f"{tag}/{version}" in listing
        assert json.loads(audit("schema", name)) == schema(name)
    result = CliRunner().invoke(main, ["schema", "no-such-output"])
    assert (result.exit_code, result.stdout) == (2, "")
    assert "expected one of cache-report-logs" in result.stderr


@pytest.mark.parametrize("root", [*ROOTS, "collapses"])
def test_verify_json_keeps_to_its_schema(root: str, roots: dict[str, Path]) -> None:
    if root not in roots:
        pytest.skip(f"{ROOTS[root]} is not here")
    [document] = documents(audit("verify", "--json", str(roots[root]), codes=(0, 1, 2)))
    valid(document, document["schema"], document["version"], root)
    assert document["logs"]


def test_verify_json_with_logs_left_out_by_a_filter_keeps_to_its_schema(roots: dict[str, Path]) -> None:
    [document] = documents(audit("verify", "--json", "--until", "2026-06-01", str(roots["fixtures"]),
                                 codes=(0, 1, 2)))
    valid(document, document["schema"], document["version"])
    assert document["summary"]["leftOut"] == {"--until 2026-06-01": sum(
        log["leftOutBy"] is not None for log in document["logs"])} != {"--until 2026-06-01": 0}


@pytest.mark.parametrize("root", [*ROOTS, "collapses"])
def test_rebuild_json_and_jsonl_keep_to_their_schema(root: str, roots: dict[str, Path]) -> None:
    if root not in roots:
        pytest.skip(f"{ROOTS[root]} is not here")
    rebuild = SCHEMAS[schema_id("dsh-audit/rebuild", 1)]
    bodies = Draft202012Validator({"$ref": "#/$defs/body", "$defs": rebuild["$defs"]})
    requests = stopped = 0
    for log in logs_below(roots[root]):
        code, text = audited("rebuild", "--json", str(log), codes=(0, 1, 2))
        if code and not text:   # refused at its header: nothing written
            continue
        found = list(documents(text))
        for document in found:
            valid(document, document["schema"], document["version"], str(log))
            requests += len(document["requests"])
        assert ("stopped" in found[-1]) == bool(code), log   # a rebuild that stops still ends its document
        if code:
            stopped += 1
            continue
        for line in audit("rebuild", "--format", "jsonl", str(log)).splitlines():
            bodies.validate(json.loads(line))
    assert requests
    assert stopped or root != "corpus", "the corpus holds logs dsh refuses, whose documents say where they stopped"


@pytest.mark.parametrize("root", [*ROOTS, "collapses"])
@pytest.mark.parametrize("fmt", FRAME_FORMATS)
def test_cache_report_and_header_diff_rows_keep_to_their_schema(root: str, fmt: str, roots: dict[str, Path],
                                                                 tmp_path: Path) -> None:
    """Each row kind of cache-report (the --rows choices: a new kind needs only its schema file), its --by rollups
    and header-diff,
    in every machine format; CSV's header is the row's properties in order, Parquet's metadata the tag."""
    if root not in roots:
        pytest.skip(f"{ROOTS[root]} is not here")
    runs = [(("cache-report", "--rows", kind), f"dsh-audit/cache-report/{kind}", cache_module.SCHEMA_VERSION)
            for kind in ROW_KINDS.choices]
    runs += [(("cache-report", "--by", by), "dsh-audit/cache-report/rollup", ROLLUP_VERSION) for by in ROLLUPS]
    runs += [(("header-diff",), "dsh-audit/header-diff", header_diff.SCHEMA_VERSION)]
    for run, tag, version in runs:
        out = tmp_path / f"rows.{fmt}"
        audit(*run, "--format", fmt, "--out", str(out), str(roots[root]))
        rows = row_validator(tag, version)
        if fmt == "json":
            document = json.loads(out.read_bytes())
            valid(document, document["schema"], document["version"], f"{root} {run}")
            assert (document["schema"], document["version"]) == (tag, version)
        elif fmt == "jsonl":
            for line in out.read_bytes().splitlines():
                rows.validate(json.loads(line))
        elif fmt == "csv":
            header = next(csv.reader(io.StringIO(out.read_text(encoding="utf-8"))))
            assert header == list(rows.schema["$defs"]["row"]["properties"])[:len(header)]
            assert set(rows.schema["$defs"]["row"]["required"]) <= set(header)
        else:
            frame = pl.read_parquet(out)
            for row in frame.iter_rows(named=True):
                rows.validate(row)
            metadata = pl.read_parquet_metadata(out)
            assert (metadata["dsh-audit-schema"], metadata["dsh-audit-schema-version"]) == (tag, str(version))


def test_cache_report_with_wire_bodies_keeps_to_its_schema(roots: dict[str, Path]) -> None:
    document = json.loads(audit("cache-report", "--json", "--wire", str(roots["collapses"])))
    valid(document, document["schema"], document["version"])
    assert any(row["wireBody"] for row in document["rows"])


@pytest.mark.parametrize("root", [*ROOTS, "collapses"])
def test_explain_json_keeps_to_its_schema_on_every_request(root: str, roots: dict[str, Path]) -> None:
    if root not in roots:
        pytest.skip(f"{ROOTS[root]} is not here")
    explained: set[tuple[str, bool]] = set()
    for log in logs_below(roots[root]):
        for line in audit("rebuild", "--format", "digest", str(log), codes=(0, 1, 2)).decode().splitlines():
            name = line.split("\t")[0]
            document = json.loads(audit("explain", "--json", str(log), name, codes=(0, 1, 2)) or b"null")
            if document is not None:   # a request of a child log rebuild reads with its parent's
                valid(document, document["schema"], document["version"], f"{log} {name}")
                explained.add((document["verdict"], document["unexplained"]))
    assert explained
    if root == "collapses":
        assert {("first request", False), ("explained", False), ("unlogged", True)} <= explained


def test_sessions_json_keeps_to_its_schema(tmp_path: Path, roots: dict[str, Path]) -> None:
    home = build_messy_home(tmp_path / "home")
    for root in (home, roots["collapses"]):
        [document] = documents(audit("sessions", "--json", "--root", str(root)))
        valid(document, document["schema"], document["version"], str(root))
        assert document["sessions"]


@pytest.mark.parametrize("root", [*ROOTS, "collapses"])
@pytest.mark.parametrize("full", [False, True])
def test_the_golden_file_keeps_to_its_schema(root: str, full: bool, roots: dict[str, Path], tmp_path: Path) -> None:
    if root not in roots:
        pytest.skip(f"{ROOTS[root]} is not here")
    # without the fixture of a generation newer than any known: golden update refuses a folder it cannot read all of
    copy = shutil.copytree(roots[root], tmp_path / "logs", symlinks=True, ignore=shutil.ignore_patterns("*.v5.jsonl"))
    audit("golden", "update", str(copy), *(["--full"] if full else []))
    document = json.loads((copy / golden.GOLDEN_NAME).read_bytes())
    tag, _, version = document["format"].rpartition("/")
    valid(document, tag, int(version), root)
