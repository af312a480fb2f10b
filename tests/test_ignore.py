"""verify --ignore CODE and the project's dsh-audit.toml (`ignore = [...]`): a finding code a project accepts,
listed as a note and never failing a log, so `--strict` passes on scrubbed fixtures (placeholder headers); a
code that is not registered, and a config file dsh-audit cannot take, are one line and exit 2."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest_reference import LOGS_ROOT, require_corpus
from dsh_audit.cli import main

require_corpus()

SCRUBBED = LOGS_ROOT / "examples/acp-agent/tests/goal-snapshots/goal-round-driver/session.expected.jsonl"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def here(tmp_path: Path) -> Iterator[Path]:
    """A project folder to run from, holding the scrubbed fixture: where a config file would be."""
    (tmp_path / "session.jsonl").write_bytes(SCRUBBED.read_bytes())
    before = Path.cwd()
    os.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        os.chdir(before)


def findings(out: str) -> list[dict[str, object]]:
    [log] = json.loads(out)["logs"]
    return [finding for finding in log["findings"] if finding["code"] == "placeholder-header"]


def test_strict_fails_a_scrubbed_fixture_and_ignore_accepts_it(here: Path) -> None:
    code, out, _ = run("verify", "--strict", "--color", "never", "session.jsonl")
    assert code == 1 and "strict: 1 warning: placeholder-header" in " ".join(out.split())
    code, out, _ = run("verify", "--strict", "--ignore", "placeholder-header", "--color", "never", "session.jsonl")
    assert code == 0 and out.startswith("ok ")
    code, out, _ = run("verify", "--strict", "--ignore", "placeholder-header", "--format", "json", "session.jsonl")
    [note] = findings(out)   # still listed: a note naming why
    assert code == 0 and note["severity"] == "info" and str(note["message"]).endswith("(ignored by --ignore)")


def test_the_config_file_ignores_for_every_run_from_its_folder(here: Path) -> None:
    (here / "dsh-audit.toml").write_text('ignore = ["placeholder-header"]\n')
    code, out, _ = run("verify", "--strict", "--format", "json", "session.jsonl")
    [note] = findings(out)
    assert code == 0 and str(note["message"]).endswith("(ignored by dsh-audit.toml)")
    code, out, _ = run("verify", "--strict", "-j", "2", "--format", "json", "session.jsonl", str(here))
    assert code == 0   # the worker processes take the codes too


@pytest.mark.parametrize(("config", "said"), [
    ('ignore = ["placeholder-headr"]\n', "ignore: 'placeholder-headr' is not a finding code; did you mean "
                                         "'placeholder-header'?"),
    ('ignore = "placeholder-header"\n', "ignore must be a list of finding codes"),
    ('ignored = ["seq-gap"]\n', "unknown key 'ignored'; the keys are: ignore"),
    ('ignore = [\n"seq-gap",,\n]\n', "not a TOML file: "),
])
def test_a_config_file_it_cannot_take_is_one_line_and_exit_2(here: Path, config: str, said: str) -> None:
    (here / "dsh-audit.toml").write_text(config)
    code, out, err = run("verify", "session.jsonl")
    assert code == 2 and out == "" and "Traceback" not in err
    [line] = err.strip().split("\n")
    assert "dsh-audit.toml" in line and said in line, line
    if "TOML" in said:
        assert "line 2" in line   # where in the file


def test_a_link_planted_at_the_config_file_is_not_followed(here: Path) -> None:
    (here / "elsewhere.toml").write_text('ignore = ["placeholder-header"]\n')
    (here / "dsh-audit.toml").symlink_to(here / "elsewhere.toml")
    code, _, err = run("verify", "session.jsonl")
    assert code == 2 and "dsh-audit.toml" in err and "link" in err and "Traceback" not in err


@pytest.mark.parametrize(("code_given", "said"), [
    ("placeholder-headr", "did you mean 'placeholder-header'?"),
    ("nothing-like-it", "the codes are listed in the README"),
])
def test_a_code_that_is_not_registered_is_a_usage_error(here: Path, code_given: str, said: str) -> None:
    code, out, err = run("verify", "--ignore", code_given, "session.jsonl")
    assert code == 2 and out == "" and f"'{code_given}' is not a finding code" in err and said in err
