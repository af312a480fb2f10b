"""Side calls: a model call a product built on dsh logged as an ignorable event of its own (the lyteboat logs'
`lyteboat/aux-llm-call`: system, prompt, output, no usage), recognised by its shape, and shown by cache-report
as an unpriced call with its size counted from its text; and a log with no usage at all, whose cost is "no usage
logged", never $0. Through the library, the CLI in each format, the terminal view and the HTML report."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import orjson
import polars as pl
import pytest
from click.testing import CliRunner

from dsh_audit.cli import main
from dsh_audit.model_calls import side_call
from dsh_audit.reports.cache_report import CacheOptions, build_cache_report
from dsh_audit.tokens import count_tokens

WILD = Path(__file__).resolve().parent / "fixtures" / "wild" / "lyteboat-boat"
SESSIONS = WILD / "examples" / "agents" / "finance" / "evals" / "baseline" / "sessions"
RECORDED = WILD / "lyteboat" / "plugins" / "eval-runner" / "tests" / "fixtures" / "recorded" / "session.v4.jsonl"
NO_USAGE = SESSIONS / "out-of-scope" / "session.v4.jsonl"   # one side call, a reply without a model call
SIDE_CALLS = {"diagnosis-midlife": 2, "education-rebalance": 2, "education-without-customer": 2, "out-of-scope": 1,
              "overview-then-diagnosis": 4, "unauthorized": 1}


def logged_side_calls(path: Path) -> list[dict[str, object]]:
    """The product's events as the log holds them, read here without dsh-audit."""
    events = [orjson.loads(line) for line in path.read_bytes().splitlines()[1:]]
    return [event for event in events if event["type"] == "lyteboat/aux-llm-call"]


def counted(event: dict[str, object]) -> int:
    data = event["data"]
    assert isinstance(data, dict)
    return sum(count_tokens(data[key]) for key in ("system", "prompt", "output") if isinstance(data.get(key), str))


def test_the_twelve_real_side_calls_are_counted_unpriced_with_their_size() -> None:
    report = build_cache_report([SESSIONS])
    sides = report.requests.filter(pl.col("kind") == "side")
    assert sides.height == 12
    for log in report.logs.to_dicts():
        path = Path(log["log"])
        events = logged_side_calls(path)
        assert log["sideCalls"] == SIDE_CALLS[path.parent.name] == len(events)
        rows = sides.filter(pl.col("log") == log["log"]).to_dicts()
        assert [row["seq"] for row in rows] == [event["seq"] for event in events]
        assert [row["timeMs"] for row in rows] == [event["time"] for event in events]
        assert [row["estimatedTokens"] for row in rows] == [counted(event) for event in events]
        assert log["sideCallTokens"] == sum(counted(event) for event in events)
        assert log["otherCalls"] == 0   # a side call is not a response or a title call
    for row in sides.to_dicts():
        assert (row["provider"], row["model"]) == ("deepseek-official", "deepseek-flash")
        assert [row[key] for key in ("inputTokens", "cacheReadTokens", "outputTokens", "costUsd", "expectedBasis",
                                     "expectedCacheReadTokens", "withinBlock")] == [None] * 7
        assert (row["collapse"], row["inherited"]) == (False, False) and row["estimatedTokens"] > 0
        assert row["note"] == ("side call logged as lyteboat/aux-llm-call: a model call outside dsh's loop, not "
                               "priced (its usage is not logged)")
    [totals] = report.totals.to_dicts()
    assert (totals["sideCalls"], totals["sideCallTokens"]) == (12, int(sides["estimatedTokens"].sum()))
    assert totals["requests"] == 10   # and the loop's requests are judged as before: side calls sit outside
    loop = report.requests.filter(pl.col("kind") == "request")
    assert totals["costUsd"] == pytest.approx(float(loop["costUsd"].sum()))


def test_a_failed_side_call_is_counted_from_its_prompt() -> None:
    report = build_cache_report([RECORDED])
    rows = report.requests.filter(pl.col("kind") == "side").to_dicts()
    events = logged_side_calls(RECORDED)
    assert [row["estimatedTokens"] for row in rows] == [counted(event) for event in events]
    assert "output" in events[0]["data"] and "output" not in events[1]["data"]   # type: ignore[operator]
    assert rows[1]["note"].endswith(", and failed (data.failure: no output logged)")
    assert (rows[0]["model"], report.logs["sideCalls"][0]) == ("recorded-model", 2)


def test_the_rule_is_the_shape_not_the_name() -> None:
    def event(**data: object) -> dict[str, object]:
        return {"type": "acme/trace", "seq": 3, "time": 5, "ignorable": True, "data": data}

    call = side_call(event(prompt="p", output="o", provider="x", model="m"), 3)
    assert call is not None and (call.kind, call.provider, call.model, call.texts) == ("side", "x", "m", ("p", "o"))
    assert side_call(event(system="s", prompt="p", failure={"reason": "timeout"}), 3) is not None
    not_calls = [event(prompt="p"),                       # no outcome: a prompt template, say
                 event(system="s", output="o"),           # no prompt
                 event(prompt=["p"], output="o"),         # not text
                 event(system=1, prompt="p", output="o"),
                 {**event(prompt="p", output="o"), "ignorable": None}]
    assert [side_call(value, 3) for value in not_calls] == [None] * len(not_calls)


def renamed(tmp_path: Path, path: Path, replace: tuple[bytes, bytes] = (b"", b"")) -> Path:
    """The log with its product's events under another product's name (and one more edit)."""
    data = path.read_bytes().replace(b'"lyteboat/aux-llm-call"', b'"acme/model-trace"').replace(*replace)
    out = tmp_path / path.parent.name / path.name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    return out


def test_another_products_events_of_the_same_shape_are_side_calls_and_both_engines_agree(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = renamed(tmp_path, SESSIONS / "overview-then-diagnosis" / "session.v4.jsonl")
    fast = build_cache_report([path])
    monkeypatch.setenv("DSH_AUDIT_FAST_PATH", "0")
    walked = build_cache_report([path])
    for kind in ("requests", "logs", "totals"):
        assert fast.rows(kind).equals(walked.rows(kind)), kind
    assert fast.logs["sideCalls"][0] == 4 and "acme/model-trace" in fast.logs["notes"][0]
    no_output = renamed(tmp_path / "x", SESSIONS / "unauthorized" / "session.v4.jsonl", (b'"output":', b'"said":'))
    assert build_cache_report([no_output]).logs["sideCalls"][0] == 0   # no outcome: no call recorded


def test_a_log_without_usage_has_no_cost_in_every_format(tmp_path: Path) -> None:
    report = build_cache_report([NO_USAGE])
    [log] = report.logs.to_dicts()
    assert (log["requests"], log["sideCalls"], log["costUsd"]) == (0, 1, None)
    assert report.totals["costUsd"][0] is None
    runner = CliRunner()
    for rows in ("logs", "totals"):
        done = runner.invoke(main, ["cache-report", "--rows", rows, "--format", "json", str(NO_USAGE)])
        document = json.loads(done.stdout)
        assert (document["version"], document["rows"][0]["costUsd"]) == (4, None)
        done = runner.invoke(main, ["cache-report", "--rows", rows, "--format", "csv", str(NO_USAGE)])
        assert next(csv.DictReader(io.StringIO(done.stdout)))["costUsd"] == ""
    out = tmp_path / "logs.parquet"
    assert runner.invoke(main, ["cache-report", "--rows", "logs", "--out", str(out), str(NO_USAGE)]).exit_code == 0
    frame = pl.read_parquet(out)
    assert frame.schema["costUsd"] == pl.Float64 and frame["costUsd"][0] is None
    assert frame.schema["sideCalls"] == pl.Int64 and frame["sideCallTokens"][0] == log["sideCallTokens"]
    table = runner.invoke(main, ["cache-report", "--color", "never", str(NO_USAGE)], env={"COLUMNS": "200"})
    assert "cost no usage logged" in table.stdout and "cost $0" not in table.stdout


def test_the_terminal_view_names_the_side_calls() -> None:
    report = build_cache_report([SESSIONS])
    tokens = int(report.totals["sideCallTokens"][0])
    done = CliRunner().invoke(main, ["cache-report", "--color", "never", str(SESSIONS)], env={"COLUMNS": "200"})
    assert done.exit_code == 0
    text = " ".join(done.stdout.replace("  ·  ", " · ").split())   # undone the view's wrapping
    assert f"6 log(s), 10 request(s) (12 side calls, unpriced, ~{tokens / 1000:.1f}K tokens): hit " in text
    overview = report.logs.filter(pl.col("log").str.contains("overview-then-diagnosis")).to_dicts()[0]
    assert f"4 request(s) · 4 side calls, unpriced, ~{overview['sideCallTokens'] / 1000:.1f}K tokens" in text
    assert text.count("side @") == 12 and text.count("unpriced") >= 12 + 6 + 1
    assert text.count("cost no usage logged") == 2   # the two logs whose one reply was written without a call


def test_the_html_report_names_the_side_calls_and_the_missing_usage(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    done = CliRunner().invoke(main, ["report", str(SESSIONS), "-o", str(page)])
    assert done.exit_code == 0, done.output
    html = page.read_text(encoding="utf-8")
    assert "12 side calls, unpriced, ~" in html and "1 side call, unpriced, ~" in html
    assert "cost no usage logged" in html and ">no usage logged</td>" in html   # its session's row of the table


def test_no_predict_counts_them_but_not_their_size() -> None:
    report = build_cache_report([SESSIONS], CacheOptions(predict=False))
    sides = report.requests.filter(pl.col("kind") == "side")
    assert sides.height == 12 and sides["estimatedTokens"].null_count() == 12
    assert report.totals["sideCallTokens"][0] is None and report.totals["sideCalls"][0] == 12
    assert all("side call's size not counted (--no-predict: no tokenizer)" in note for note in sides["note"])


def test_explain_names_the_side_calls_since_the_predecessor() -> None:
    path = SESSIONS / "overview-then-diagnosis" / "session.v4.jsonl"
    runner = CliRunner()
    wanted = {"1.1#1": [6, 7], "1.2#1": [], "2.1#1": [28, 29], "2.2#1": []}
    for name, seqs in wanted.items():
        done = runner.invoke(main, ["explain", "--format", "json", str(path), name])
        assert done.exit_code == 0 and json.loads(done.stdout)["side_calls"] == seqs, name
    done = runner.invoke(main, ["explain", "--color", "never", str(path), "2.1#1"], env={"COLUMNS": "200"})
    assert "side calls logged since 1.2#1: seq 28, 29, the product's own calls to the model" in done.stdout
    done = runner.invoke(main, ["explain", "--color", "never", str(path), "1.2#1"], env={"COLUMNS": "200"})
    assert "side calls" not in done.stdout
