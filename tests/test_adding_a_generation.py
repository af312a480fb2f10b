"""Adding a generation is a row: a copy of the shipped schemas with one more row in generations.json (a v5 that
changes nothing, so every schema still applying to the newest generation applies to it too) is read by the code
as it stands. The copy is put in place through vocabulary.schema_root, in a process of its own (everything read
from the schemas is cached for the life of a process)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_audit import LogReadError, reconstruct_file
from dsh_audit.generations import newest
from genbuilder import GenLog

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"

# Runs with the copy as the schema root: the generations, the vocabulary, the derived rules, the fast path's
# verdict and verify's report of a log written in the new generation.
PROBE = """
import json, sys

import msgspec
from pathlib import Path

import dsh_audit.vocabulary as vocabulary
vocabulary.schema_root = lambda: Path(sys.argv[1])

from dsh_audit.fastpath import Decided, decide
from dsh_audit.generations import generation, generations
from dsh_audit.readers import open_log
from dsh_audit.verify import verify_path

log, new, old = Path(sys.argv[2]), generation(int(sys.argv[3])), generation(int(sys.argv[3]) - 1)
[report] = verify_path(log)
print(json.dumps({
    "versions": [known.version for known in generations()],
    "rules_differ": [field.name for field in msgspec.structs.fields(old)
                     if getattr(new, field.name) != getattr(old, field.name)],
    "same_vocabulary": vocabulary.vocabulary(new.version) == vocabulary.vocabulary(old.version),
    "fast_path": new.fast_path,
    "decided": isinstance(decide(open_log(log)), Decided),
    "report": [report.generation, report.read_error, [finding.code for finding in report.findings],
               report.request_count],
}))
"""


def with_a_new_row(root: Path, version: int) -> Path:
    """The shipped schemas, copied, and a row for `version` that says what the newest one says."""
    copy = root / "schemas"
    shutil.copytree(SCHEMAS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    table = json.loads((copy / "generations.json").read_text(encoding="utf-8"))
    row = {**table["generations"][-1], "version": version, "writtenBy": "a dsh not yet released"}
    table["generations"].append(row)
    (copy / "generations.json").write_text(json.dumps(table, indent=2), encoding="utf-8")
    return copy


def written_in(path: Path, version: int) -> Path:
    """A one-turn log of the newest generation, its header naming `version`."""
    log = GenLog(newest().version)
    log.turn(1, "hello", "hi", head="You are a coding agent.")
    log.header["version"] = version
    return log.write(path)


def test_a_row_in_generations_json_is_all_a_new_generation_needs(tmp_path: Path) -> None:
    version = newest().version + 1
    log = written_in(tmp_path / f"session.v{version}.jsonl", version)
    with pytest.raises(LogReadError, match=f"uses log format v{version}, newer than any generation"):
        reconstruct_file(log)   # the shipped schemas do not know it

    run = subprocess.run([sys.executable, "-c", PROBE, str(with_a_new_row(tmp_path, version)), str(log),
                          str(version)], capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    seen: dict[str, Any] = json.loads(run.stdout)
    assert seen["versions"] == list(range(version + 1))
    assert seen["rules_differ"] == ["version", "written_by"]   # every derived rule follows from the schemas
    assert seen["same_vocabulary"] and seen["fast_path"] and seen["decided"]
    assert seen["report"] == [version, None, [], 1]
