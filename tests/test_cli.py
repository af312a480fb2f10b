"""The `audit` CLI through click's CliRunner, plus one real subprocess run of the installed script."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from conftest_reference import LOGS_ROOT
from dsh_audit import reconstruct_file
from dsh_audit.cli import main
from dsh_audit.generations import generations as all_generations

SAMPLE = Path(__file__).resolve().parents[1] / "sample_logs" / "compaction-recovery" / "session.jsonl"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env={"COLUMNS": "250"})   # a verify row's error on one line
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_verify_clean_log_exits_0() -> None:
    code, out, _ = run("verify", str(SAMPLE))
    assert code == 0
    assert out.startswith("ok ") and "3 requests" in out


def test_verify_json_lists_findings_and_digests() -> None:
    code, out, _ = run("verify", "--format", "json", str(SAMPLE))
    document = json.loads(out)
    assert code == 0 and document["summary"]["requests"] == 3
    [log] = document["logs"]
    assert [r["dispatchSeq"] for r in log["requests"]] == [8, 18, 23]
    assert log["requests"][2]["causes"][0].startswith("replace@21")


def test_rebuild_jsonl_prints_exact_bytes_and_digest_matches() -> None:
    code, out, _ = run("rebuild", "--format", "jsonl", str(SAMPLE))
    lines = out.encode().splitlines()
    assert code == 0 and len(lines) == 3
    expected = reconstruct_file(SAMPLE)
    assert [hashlib.sha256(line).hexdigest() for line in lines] == [r.sha256 for r in expected.requests]
    code, digests, _ = run("rebuild", "--format", "digest", "--step", "1.2", str(SAMPLE))
    assert code == 0 and [line.split("\t")[0] for line in digests.splitlines()] == ["1.2#1", "1.2#2"]


def test_rebuild_json_is_one_annotated_document() -> None:
    code, out, _ = run("rebuild", "--step", "1.1", str(SAMPLE))
    document = json.loads(out)
    assert code == 0 and (document["schema"], document["generation"]) == ("dsh-audit/rebuild", 0)
    [request] = document["requests"]
    assert request["turn"] == 1 and request["request"]["model"] == "deepseek-v4-flash"
    assert [r["name"] for r in json.loads(run("rebuild", str(SAMPLE))[1])["requests"]] == ["1.1#1", "1.2#1", "1.2#2"]


def test_rebuild_step_takes_the_digest_form_and_refuses_a_step_that_is_not_there() -> None:
    code, out, _ = run("rebuild", "--step", "1.2#2", "--format", "digest", str(SAMPLE))
    assert code == 0 and out.startswith("1.2#2\tseq=23\t") and len(out.splitlines()) == 1
    assert len(run("rebuild", "--step", "1.2", "--format", "digest", str(SAMPLE))[1].splitlines()) == 2
    code, out, err = run("rebuild", "--step", "9.9", str(SAMPLE))
    assert code == 2 and "no request 9.9 in this log" in err and len(err.strip().splitlines()) == 1
    code, _, err = run("rebuild", "--step", "1.x", str(SAMPLE))
    assert code == 2 and "TURN.STEP#ATTEMPT" in err


def test_version_names_the_generations_read_and_the_price_table_s_date() -> None:
    code, out, _ = run("--version")
    first, generations, prices = out.splitlines()
    assert code == 0 and first.startswith("audit, version ")
    assert generations.startswith(f"log generations read: {', '.join(g.label for g in all_generations())} (")
    bundled = json.loads(resources.files("dsh_audit.reports").joinpath("data", "deepseek-prices.json").read_text())
    assert f"as of {bundled['asOf']}, " in prices and bundled["asOf"] in bundled["source"]
    periods = 1 + len(bundled.get("earlier", []))
    assert f"{periods} dated periods, the latest from {bundled['from'][:10]}" in prices


_DIRECTORY = str(SAMPLE.parents[1])


@pytest.mark.parametrize("args", [
    ("rebuild", str(SAMPLE), "--step", "99.9"),
    ("rebuild", str(SAMPLE), "--step", "1.1#9", "--format", "json"),
    ("rebuild", str(SAMPLE), "--step", "99.9", "--format", "jsonl"),
    ("rebuild", str(SAMPLE), "--step", "99.9", "--format", "digest"),
    ("explain", str(SAMPLE), "99.9", "--format", "json"),
    ("verify", _DIRECTORY, "--session", "zz", "--format", "json"),
    ("verify", str(SAMPLE), "--session", "zz", "--format", "json"),
    ("cache-report", _DIRECTORY, "--session", "zz", "--format", "json"),
    ("cache-report", str(SAMPLE), "--session", "zz", "--format", "csv"),
    ("header-diff", _DIRECTORY, "--session", "zz", "--format", "jsonl"),
    ("sessions", "--root", str(SAMPLE.parent / "no-such-root"), "--format", "json"),
], ids=lambda args: " ".join(a for a in args if "/" not in a))
def test_a_selection_that_matches_nothing_fails_before_stdout_is_written(args: tuple[str, ...]) -> None:
    """A machine document is never begun and then abandoned: the error is the only output (a given log with
    --session was an internal error before, from a session search below a file)."""
    code, out, err = run(*args)
    assert (code, out) == (2, "")
    assert len(err.strip().splitlines()) == 1 and err.startswith("audit: ")


@pytest.mark.parametrize("args", [
    ("rebuild", str(SAMPLE), "--step", "one", "--format", "json"),
    ("cache-report", str(SAMPLE), "--format", "json", "--rows", "bogus"),
    ("sessions", "--format", "json", "--limit", "0"),
])
def test_a_bad_option_fails_before_stdout_is_written(args: tuple[str, ...]) -> None:
    code, out, err = run(*args)
    assert (code, out) == (2, "") and "Error: Invalid value" in err


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such file"),
    (b"", "empty log"),
    (b'{"type":"session","version":0,"id":"x","createdAt":0}\n{"type":"turn/start",\n{"type":"x"}\n',
     "log.jsonl:2:|log.jsonl  .*\n    line 2: not valid JSON"),   # rebuild's stderr | verify's row and its error
    (b'{"type":"session","version":7,"id":"x","createdAt":0}\n', "newer than any generation dsh-audit knows"),
    (b'[1,2]\n', "session header"),
    (b'\xff\xfe\n', "UTF-8"),
])
def test_unreadable_input_is_one_line_and_exit_2(tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / "log.jsonl"
    if content is not None:
        path.write_bytes(content)
    for command in ("verify", "rebuild"):
        code, out, err = run(command, str(path))
        text = out + err
        assert code == 2, (command, text)
        assert re.search(message, text) and "Traceback" not in text


def test_truncated_last_line_is_reported_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "torn.jsonl"
    data = SAMPLE.read_bytes()
    path.write_bytes(data[: data.rindex(b"\n", 0, len(data) - 1) + 20])
    code, out, _ = run("verify", str(path))
    assert code == 0 and "[torn-tail]" in out and "[open-turn]" in out
    code, _, _ = run("verify", "--strict", str(path))
    assert code == 1


def test_wrong_type_and_unknown_event_are_findings_with_exit_1(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    lines = SAMPLE.read_text().splitlines()
    lines[2] = lines[2].replace('"turn":1', '"turn":"one"', 1)
    path.write_text("\n".join([*lines, '{"type":"newer/event","data":{}}']) + "\n")
    code, out, _ = run("verify", str(path))
    assert code == 1
    assert "[schema] /data/turn" in out and "[unknown-event]" in out
    code, _, err = run("rebuild", str(path))
    assert code == 1 and "unknown to this harness" in err and "Traceback" not in err


def test_bad_usage_exits_2() -> None:
    assert run("rebuild", "--step", "x", str(SAMPLE))[0] == 2
    assert run("verify")[0] == 2


# Each command with a json format, and a log (or directory) it reads.
JSON_COMMANDS = (("verify", str(SAMPLE)), ("rebuild", str(SAMPLE)), ("cache-report", str(SAMPLE)),
                 ("header-diff", str(SAMPLE)), ("explain", str(SAMPLE), "1.2#1"),
                 ("sessions", "--root", str(SAMPLE.parents[1])))
# These write or read a dataset: tests/test_fleet.py checks their --json on one
DATASET_JSON_COMMANDS = {"export", "query"}


def test_json_is_short_for_format_json_on_every_command_that_has_it() -> None:
    context = click.Context(main)
    commands = {name: main.get_command(context, name) for name in main.list_commands(context)}
    formats = {name: param for name, command in commands.items() if command for param in command.params
               if param.name == "fmt"}
    with_json = {name for name, param in formats.items() if "json" in getattr(param.type, "choices", ())}
    flagged = {name for name, command in commands.items() if command
               and any(param.name == "as_json" for param in command.params)}
    assert with_json == flagged == {command for command, *_ in JSON_COMMANDS} | DATASET_JSON_COMMANDS
    for command, *args in JSON_COMMANDS:
        assert run(command, "--json", *args) == run(command, "--format", "json", *args), command
        assert json.loads(run(command, "--json", "--format", "json", *args)[1])["schema"].startswith("dsh-audit/")


@pytest.mark.parametrize("other", ["table", "csv", "jsonl", "digest"])
def test_json_with_another_format_is_a_usage_error_with_nothing_on_stdout(other: str) -> None:
    for command, *args in JSON_COMMANDS:
        code, out, err = run(command, "--json", "--format", other, *args)
        assert (code, out) == (2, ""), (command, other)
        assert f"--json is --format json: it cannot go with --format {other}" in err or "Invalid value" in err

def test_directory_of_logs_and_inputs_left_untouched(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    shutil.copytree(SAMPLE.parent, root / "a")
    shutil.copytree(LOGS_ROOT / "apps/web/tests/snapshots/cordis-tool-round", root / "b")
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    code, out, _ = run("verify", str(root))
    assert code == 1 and "2 log(s), 1 failed" in out
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_installed_script_runs_in_a_real_subprocess() -> None:
    script = Path(sys.executable).with_name("audit")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "dsh_audit"]
    done = subprocess.run([*command, "rebuild", "--format", "digest", str(SAMPLE)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 3


def _complete(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The installed `audit` script run as a shell's completion runs it: click names the variable after the
    program, so `python -m dsh_audit` would not do."""
    script = Path(sys.executable).with_name("audit")
    assert script.exists(), "the editable install (make install) provides the audit script"
    return subprocess.run([str(script)], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, **env})


@pytest.mark.parametrize(("shell", "registration"), [
    ("bash", "complete -o nosort -F _audit_completion audit"),
    ("zsh", "compdef _audit_completion audit"),
    ("fish", "complete --no-files --command audit"),
])
def test_shell_completion_prints_a_script_for_each_shell(shell: str, registration: str) -> None:
    done = _complete({"_AUDIT_COMPLETE": f"{shell}_source"})
    assert done.returncode == 0 and done.stderr == ""
    assert registration in done.stdout


def test_shell_completion_completes_commands_and_choices() -> None:
    done = _complete({"_AUDIT_COMPLETE": "bash_complete", "COMP_WORDS": "audit cache-report --format ",
                      "COMP_CWORD": "3"})
    assert done.returncode == 0
    assert done.stdout.splitlines() == ["plain,table", "plain,csv", "plain,json", "plain,jsonl", "plain,parquet"]
    done = _complete({"_AUDIT_COMPLETE": "bash_complete", "COMP_WORDS": "audit gold", "COMP_CWORD": "1"})
    assert done.stdout.splitlines() == ["plain,golden"]


def test_the_entry_point_takes_the_signals_before_loading_the_library() -> None:
    """Ctrl-C during start-up is caught (dsh_audit.stopping) only if nothing heavy loads before the handlers."""
    probe = ("import signal, sys, dsh_audit.entry, dsh_audit.stopping; "
             "print(sorted(m for m in ('polars', 'jsonschema', 'click', 'dsh_audit.cli', 'dsh_audit.verify') "
             "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_every_public_name_of_the_package_resolves() -> None:
    import dsh_audit

    assert dsh_audit.__all__ and all(getattr(dsh_audit, name) is not None for name in dsh_audit.__all__)
    assert set(dsh_audit.__all__) <= set(dir(dsh_audit))
    with pytest.raises(AttributeError):
        dsh_audit.no_such_name  # noqa: B018
