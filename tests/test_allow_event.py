"""verify --allow-event PATTERN (and $DSH_AUDIT_ALLOW_EVENTS): a product's own ignorable events, accepted by
--strict and still listed; and a FAIL line that names the rule that failed the log. On the lyteboat logs
(tests/fixtures/wild), whose only strict failures are their `lyteboat/aux-llm-call` events, but for the two
replies written without a model call (`untraced-response`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from dsh_audit.cli import main
from dsh_audit.errors import DshAuditError
from dsh_audit.findings import ALLOW_EVENTS_ENV, Finding, allow_patterns, allowing, failing_rule

WILD = Path(__file__).resolve().parent / "fixtures" / "wild" / "lyteboat-boat"
SESSIONS = WILD / "examples" / "agents" / "finance" / "evals" / "baseline" / "sessions"
OVERVIEW = SESSIONS / "overview-then-diagnosis" / "session.v4.jsonl"
UNTRACED = {"out-of-scope", "unauthorized"}   # a reply the product wrote without a model call: a warning of its own


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_strict_fails_the_wild_logs_naming_the_rule() -> None:
    code, out, _ = run("verify", "--strict", "--color", "never", str(OVERVIEW))
    assert code == 1
    assert "(v4, 43 events, 4 requests; strict: 4 warnings: unknown-ignorable ×4)" in " ".join(out.split())
    code, out, _ = run("verify", "--color", "never", str(OVERVIEW))   # not strict: the same log passes
    assert code == 0 and out.startswith("ok ")


def test_allow_event_lets_strict_accept_the_products_events_and_lists_them() -> None:
    code, out, _ = run("verify", "--strict", "--allow-event", "lyteboat/*", "--format", "json", str(SESSIONS))
    document = json.loads(out)
    verdicts = {Path(log["log"]).parent.name: log["ok"] for log in document["logs"]}
    assert verdicts == {name: name not in UNTRACED for name in verdicts} and len(verdicts) == 6
    assert code == 1   # the two untraced replies still fail under --strict
    allowed = [f for log in document["logs"] for f in log["findings"] if f["code"] == "unknown-ignorable"]
    assert len(allowed) == 12 and {f["severity"] for f in allowed} == {"info"}
    assert all(f["message"].endswith("(allowed by 'lyteboat/*')") and f["eventType"] == "lyteboat/aux-llm-call"
               for f in allowed)
    assert document["summary"]["notes"] == 12 and document["summary"]["warnings"] == 2
    assert {Path(log["log"]).parent.name: log["failedBy"] for log in document["logs"]} == {
        name: "strict: 1 warning: untraced-response" if name in UNTRACED else None for name in verdicts}


def test_a_pattern_that_matches_nothing_changes_nothing() -> None:
    code, out, _ = run("verify", "--strict", "--allow-event", "acme/*", "--allow-event", "lyteboat/aux",
                       "--color", "never", str(OVERVIEW))
    assert code == 1 and "strict: 4 warnings: unknown-ignorable ×4" in " ".join(out.split())


def test_the_environment_variable_is_read_space_separated_and_adds_to_the_option() -> None:
    code, out, _ = run("verify", "--strict", "--color", "never", str(OVERVIEW),
                       env={ALLOW_EVENTS_ENV: "acme/*  lyteboat/aux-*"})
    assert code == 0 and "info ×4 [unknown-ignorable]" in out


@pytest.mark.parametrize(("given", "why"), [
    ("", "is empty"), ("lyte boat/*", "holds whitespace"), ("a\x1bb", "control character"),
    ("lyteboat/[abc", "never closed"), ("[!]", "never closed"),
])
def test_a_bad_pattern_is_one_line_and_exit_2(given: str, why: str) -> None:
    code, out, err = run("verify", "--allow-event", given, str(OVERVIEW))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("audit: --allow-event: the pattern ") and why in err
    assert "\x1b" not in err


def test_a_bad_pattern_in_the_environment_names_the_variable() -> None:
    code, out, err = run("verify", str(OVERVIEW), env={ALLOW_EVENTS_ENV: "ok/* broken["})
    assert code == 2 and out == ""
    assert err == f"audit: {ALLOW_EVENTS_ENV}: the pattern 'broken[' has a [ that is never closed; give a glob " \
                  "on the event type, e.g. 'acme/*'\n"


def test_junit_failure_names_the_rule(tmp_path: Path) -> None:
    report = tmp_path / "verify.xml"
    code, _, _ = run("verify", "--strict", "--junit", str(report), str(SESSIONS))
    assert code == 1
    failures = {case.get("classname", "").rsplit("/", 1)[-1]: case.find("failure")
                for case in ET.parse(report).getroot().iter("testcase")}
    message = failures["overview-then-diagnosis"]
    assert message is not None and message.get("message") == "strict: 4 warnings: unknown-ignorable ×4"
    code, _, _ = run("verify", "--strict", "--allow-event", "lyteboat/*", "--junit", str(report), str(SESSIONS))
    failures = {case.get("classname", "").rsplit("/", 1)[-1]: case.find("failure")
                for case in ET.parse(report).getroot().iter("testcase")}
    assert {name for name, failure in failures.items() if failure is not None} == UNTRACED
    message = failures["unauthorized"]
    assert message is not None and message.get("message") == "strict: 1 warning: untraced-response"


def test_through_the_installed_command_in_parallel() -> None:
    """As a CI job runs it: a process of its own, the logs verified by workers (-j 2), which get the patterns."""
    env = {**os.environ, ALLOW_EVENTS_ENV: "lyteboat/*"}
    done = subprocess.run([sys.executable, "-m", "dsh_audit", "verify", "--strict", "-j", "2", "--color", "never",
                           str(WILD / "lyteboat")], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert "info ×2 [unknown-ignorable]" in done.stdout and "(allowed by 'lyteboat/*')" in done.stdout
    done = subprocess.run([sys.executable, "-m", "dsh_audit", "verify", "--strict", "-j", "2",
                           "--allow-event", "[", str(SESSIONS)], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1


def test_the_rule_counts_errors_apart_from_strict_warnings() -> None:
    error = Finding("seq-gap", "gap", seq=3)
    warning = Finding("torn-tail", "torn", severity="warning")
    note = Finding("migration-refused", "refused", severity="info")
    findings = [error, error, warning, note]
    assert failing_rule(findings, {}, strict=False) == "2 errors: seq-gap ×2"
    assert failing_rule(findings, {"warning": 5}, strict=True) == (
        "2 errors: seq-gap ×2; strict: 6 warnings: torn-tail, 5 unlisted")


def test_allowing_touches_only_matching_unknown_ignorable_warnings() -> None:
    allow = allowing(allow_patterns(["acme/*"]))
    matching = Finding("unknown-ignorable", "skipped", severity="warning", event_type="acme/side")
    assert allow(matching) == Finding("unknown-ignorable", "skipped (allowed by 'acme/*')", severity="info",
                                      event_type="acme/side")
    other = Finding("unknown-ignorable", "skipped", severity="warning", event_type="ACME/side")   # case counts
    assert allow(other) is other
    unknown = Finding("unknown-event", "refused", event_type="acme/side", rejects=True)   # not ignorable: refused
    assert allow(unknown) is unknown
    with pytest.raises(DshAuditError):
        allow_patterns(["a b"])


def test_the_report_allows_the_same_events_as_verify(tmp_path: Path) -> None:
    """audit report's verify section reads --allow-event and $DSH_AUDIT_ALLOW_EVENTS as verify does: the product's
    events are notes there, not warnings; a bad pattern is one line, exit 2, before any work."""
    pages = {}
    for name, args, env in (("plain", [], None), ("option", ["--allow-event", "lyteboat/*"], None),
                            ("variable", [], {ALLOW_EVENTS_ENV: "lyteboat/*"})):
        code, _, _ = run("report", str(OVERVIEW), "-o", str(tmp_path / f"{name}.html"), *args, env=env)
        assert code == 0
        pages[name] = (tmp_path / f"{name}.html").read_text(encoding="utf-8")
    assert "4 warning [unknown-ignorable]" in pages["plain"]
    for name in ("option", "variable"):
        assert "4 info [unknown-ignorable]" in pages[name] and "warning [unknown-ignorable]" not in pages[name], name
        assert "(allowed by &#x27;lyteboat/*&#x27;)" in pages[name], name   # the page escapes the quotes
    code, out, err = run("report", str(OVERVIEW), "-o", str(tmp_path / "bad.html"), "--allow-event", "a b")
    assert (code, out) == (2, "") and err.count("\n") == 1 and "--allow-event: the pattern 'a b'" in err
    assert not (tmp_path / "bad.html").exists()
