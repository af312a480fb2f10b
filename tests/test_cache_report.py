"""cache-report: logged figures against hand counts, collapse attribution, prediction, cost, CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from dsh_audit.cli import main
from dsh_audit.deepseek_wire import DEFAULT_IMAGE_MODELS
from dsh_audit.fold import RebuiltRequest
from dsh_audit.generations import generations
from dsh_audit.readers import discover, open_logs
from dsh_audit.reports.cache_report import CacheOptions, agreement, build_cache_report, calls, log_rows, measure_block
from dsh_audit.reports.prediction import Predictor, RealHeader, answer_segment, linear_prompt, reference_prompt
from dsh_audit.reports.prices import Prices, default_table, flat_table
from dsh_audit.tokens import common_prefix_length, token_ids
from logbuilder import LogBuilder

LOGS = Path(__file__).resolve().parents[2] / "shared" / "dsh-logs"
TOOL_A = {"name": "read", "description": "read a file", "parameters": {"type": "object", "properties": {}}}
TOOL_B = {"name": "write", "description": "write a file", "parameters": {"type": "object", "properties": {}}}
needs_logs = pytest.mark.skipif(not LOGS.is_dir(), reason="shared dsh-logs corpus not present")


def usage(fresh: int, reads: int, output: int = 10) -> dict[str, int]:
    return {"inputTokens": fresh, "cacheReadTokens": reads, "outputTokens": output}


def turn(log: LogBuilder, number: int, prompt: str, reads: int, fresh: int = 300, **header: Any) -> None:
    """One turn of one step; `header` (reason=...) logs a request/header before the request."""
    log.add("turn/start", {"turn": number})
    log.add("step/start", {"turn": number, "step": 1})
    log.user(prompt)
    if header:
        log.header_event(header.pop("reason"), **header)
    log.response(number, 1, f"answer {number} " + "word " * 200, usage=usage(fresh, reads))
    log.add("step/end", {"turn": number, "step": 1})
    log.add("turn/end", {"turn": number, "reason": {"kind": "completed"}})


def rows(log: LogBuilder, **options: Any) -> list[dict[str, Any]]:
    return log_rows(log.source(), CacheOptions(**options))


def calls_of(log: LogBuilder) -> list[tuple[RebuiltRequest | None, Any]]:
    return [call if isinstance(call, tuple) else (None, None) for call in calls(log.source())]


def collapses(found: list[dict[str, Any]]) -> list[tuple[int, str | None]]:
    return [(row["turn"], row["cause"]) for row in found if row["collapse"]]


def write_jsonl(log: LogBuilder, path: Path) -> Path:
    path.write_text("\n".join(json.dumps(line) for line in [log.header, *log.events]) + "\n", encoding="utf-8")
    return path


def steady_log() -> LogBuilder:
    log = LogBuilder()
    turn(log, 1, "hello " * 100, 0, reason="initial", tools=[TOOL_A])
    turn(log, 2, "again " * 100, 512)
    return log


# -- synthetic logs: each collapse names its logged cause -------------------------------------------------
def test_mid_session_tool_change_is_the_named_cause() -> None:
    log = steady_log()
    turn(log, 3, "more", 0, reason="change", tools=[TOOL_A, TOOL_B])
    found = rows(log)
    assert collapses(found) == [(3, "header-change")]
    assert "tools" in found[-1]["causeDetail"]
    # the break is tokenized: the new tool list sits in the system area, so only part of the head is shared
    assert found[1]["expectedBasis"] == "previous-usage" and found[-1]["expectedBasis"] == "tokenized"
    assert 0 < found[-1]["expectedPrefixTokens"] < found[1]["expectedPrefixTokens"]


def test_compaction_replace_is_the_named_cause() -> None:
    log = steady_log()
    log.add("turn/start", {"turn": 3})
    log.add("step/start", {"turn": 3, "step": 1})
    log.user("summary of earlier turns", surfaceOp={"op": "replace", "start": 2, "end": 16},
             sourceEventSeqs=[2, 7, 12, 16])  # every node it shadows
    log.response(3, 1, "ok", usage=usage(200, 0))
    found = rows(log)
    assert collapses(found) == [(3, "compaction-replace")]


def test_resume_is_the_named_cause() -> None:
    log = steady_log()
    turn(log, 3, "after restart", 0, reason="resume", tools=[TOOL_A], temperature=0.5)
    found = rows(log)
    assert collapses(found) == [(3, "resume")]   # a resume with an option's drift: the prompt extends, the resume
    assert "no prefix break: seq" in found[-1]["causeDetail"] and "resume: config.temperature" in found[-1][
        "causeDetail"]                            # is the boundary, the drift is logged beside it
    drifted = steady_log()
    turn(drifted, 3, "after restart", 0, reason="resume", tools=[TOOL_B])
    assert collapses(rows(drifted)) == [(3, "resume+header-change")]   # the prompt itself changed at the resume
    quiet = steady_log()
    turn(quiet, 3, "after restart", 0, reason="resume", tools=[TOOL_A])
    assert collapses(rows(quiet)) == [(3, "resume")]


def test_a_collapse_with_no_logged_cause_is_unexplained() -> None:
    log = steady_log()
    turn(log, 3, "later", 0)
    found = rows(log)
    assert collapses(found) == [(3, "unexplained")]
    assert found[0]["cause"] == "first-request" and not found[0]["collapse"]


def server_error(log: LogBuilder, number: int) -> None:
    """One attempt the provider answered with an HTTP 500: a finish chunk with an error, no usage."""
    failure = {"message": "server error", "code": "SERVER", "status": 500}
    log.add("assistant/chunk", {"turn": number, "step": 1,
                                "chunk": {"type": "finish", "reason": {"kind": "error", "failure": failure}}})


def test_a_request_answered_with_an_error_seeds_no_expectation() -> None:
    """The provider may never have read a prompt it refused (live dsh: a retried HTTP 500 on the first request
    read nothing from the simulated cache): its retry is judged against the last answered request."""
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    log.user("hello " * 100)
    log.header_event("initial", tools=[TOOL_A])
    server_error(log, 1)
    log.response(1, 1, "answer", usage=usage(300, 0))
    log.add("step/end", {"turn": 1, "step": 1})
    log.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    first, retry = rows(log, block=64)
    assert (first["attempt"], retry["attempt"]) == (1, 2)
    assert (retry["expectedBasis"], retry["expectedCacheReadTokens"], retry["collapse"]) == (None, None, False)

    later = steady_log()   # a refused attempt after an answered request: its retry is judged against that one
    later.add("turn/start", {"turn": 3})
    later.add("step/start", {"turn": 3, "step": 1})
    later.user("third " * 100)
    server_error(later, 3)
    later.response(3, 1, "answer", usage=usage(300, 0))
    *_, refused, retried = rows(later, block=64)
    assert refused["expectedBasis"] == retried["expectedBasis"] == "previous-usage"
    assert retried["expectedPrefixTokens"] == refused["expectedPrefixTokens"] and retried["collapse"]


def test_threshold_is_configurable() -> None:
    log = steady_log()
    turn(log, 3, "later", 384)              # 384 of 512 reads: 75% of its predecessor
    assert collapses(rows(log)) == []
    assert collapses(rows(log, collapse_ratio=0.9)) == [(3, "unexplained")]


def test_expected_read_comes_from_the_previous_logged_usage() -> None:
    found = rows(steady_log(), block=64)
    first, second = found
    assert (first["expectedBasis"], first["expectedCacheReadTokens"], first["withinBlock"]) == (None, None, None)
    # a new turn: the template drops the earlier answer's reasoning, so the shared prefix is the previous prompt
    assert (second["expectedBasis"], second["expectedPrefixTokens"]) == ("previous-usage", 300 + 0)
    assert second["expectedCacheReadTokens"] == 256 and not second["approximate"]
    assert second["withinBlock"] is False        # 512 read where at most 256 (+ one block) was there to read


def test_within_a_turn_the_previous_answer_is_cached_too() -> None:
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    log.user("look " * 50)
    log.header_event("initial", tools=[TOOL_A])
    log.response(1, 1, "reading", usage=usage(700, 0, output=90), tool_calls=[("c1", "read")])
    log.tool_result(1, 1, "c1", "contents " * 40)
    log.add("step/end", {"turn": 1, "step": 1})
    log.add("step/start", {"turn": 1, "step": 2})
    log.response(1, 2, "done", usage=usage(60, 768))
    second = rows(log, block=128)[1]
    assert (second["expectedBasis"], second["expectedPrefixTokens"]) == ("previous-usage", 700 + 90)
    assert (second["expectedCacheReadTokens"], second["withinBlock"]) == (768, True)


def test_the_block_is_128_unless_a_logs_own_reads_contradict_it(tmp_path: Path) -> None:
    assert measure_block([0, 256, 384, 1280]) == 128
    assert measure_block([4096, 8192, 12288, 65536]) == 128   # a larger common factor is no evidence of a block
    assert measure_block([]) == measure_block([0, 0]) == measure_block([256]) == 128
    assert measure_block([128, 192, 0]) == 64 and measure_block([96, 160]) == 32
    report = build_cache_report([write_jsonl(steady_log(), tmp_path / "session.jsonl")])
    assert (report.block, report.totals["cacheBlock"][0]) == (128, 128)
    assert report.block_basis.startswith("default: all 65 non-zero cache reads DeepSeek reported")


def test_a_log_is_judged_the_same_alone_and_among_others(tmp_path: Path) -> None:
    """Each log by its own block. Alone, this log's one read once gave DeepSeek's documented 64 (an expected read
    of 320) and among logs reading in 256s a block of 256 (256); now 128 either way. A log whose own reads come
    in 64s is judged by 64 and named, and changes nothing for the others."""
    mine = LogBuilder()
    turn(mine, 1, "hello " * 100, 0, fresh=350, reason="initial", tools=[TOOL_A])
    turn(mine, 2, "again " * 100, 256, fresh=350)
    for folder in ("mine", "others", "odd"):
        (tmp_path / folder).mkdir()
    path = write_jsonl(mine, tmp_path / "mine" / "session.jsonl")
    others = steady_log()
    turn(others, 3, "more", 1280)
    write_jsonl(others, tmp_path / "others" / "session.jsonl")
    alone = build_cache_report([path]).requests
    assert alone["expectedCacheReadTokens"].to_list() == [None, 256]
    assert build_cache_report([tmp_path]).requests.filter(pl.col("log") == str(path)).equals(alone)
    odd = steady_log()
    turn(odd, 3, "more", 192)
    write_jsonl(odd, tmp_path / "odd" / "session.jsonl")
    together = build_cache_report([tmp_path])
    assert together.requests.filter(pl.col("log") == str(path)).equals(alone)
    assert together.block == 64 and together.block_basis.endswith(f"{tmp_path / 'odd' / 'session.jsonl'} (64)")
    assert "128, the default, in 2 log(s)" in together.block_basis


def test_segment_wise_prompt_and_prefix_equal_the_whole_text() -> None:
    log = steady_log()
    turn(log, 3, "more", 0, reason="change", tools=[TOOL_A, TOOL_B])
    requests = [request for request, _ in calls_of(log) if request is not None]
    for request in requests:
        assert linear_prompt(request, RealHeader()) == reference_prompt(request, RealHeader())

def test_placeholders_are_flagged_not_guessed() -> None:
    log = LogBuilder()
    turn(log, 1, "hi", 0, reason="initial", system="{{system}}", tools="{{tools}}")
    (first,) = rows(log)
    assert not first["approximate"]             # nothing is counted for a first request
    turn(log, 2, "and now", 0, reason="change", system="{{system:2}}", tools="{{tools}}")
    scrubbed = rows(log)[1]                      # a prompt change: counted, on what the log holds
    assert scrubbed["expectedBasis"] == "tokenized" and scrubbed["approximate"]
    assert "{{system}}" in scrubbed["note"] and "tools scrubbed" in scrubbed["note"]
    real = log_rows(log.source(), CacheOptions(system="You are helpful.", tools=[TOOL_A]))[1]
    assert not real["approximate"] and real["expectedPrefixTokens"] > scrubbed["expectedPrefixTokens"]


def test_cost_uses_published_prices_or_configured_ones() -> None:
    (row,) = rows(_one_request())   # time 0 in this log: no time logged, so the off-peak rate
    flash = default_table().models["deepseek-flash"]
    assert row["costUsd"] == pytest.approx(0.5 * (300 * flash.cache_miss + 10 * flash.output) / 1e6)
    assert (row["priceModel"], row["priceTier"]) == ("deepseek-flash (as deepseek-v4-flash)",
                                                     "off-peak (no time logged)")
    (priced,) = rows(_one_request(), prices=flat_table(Prices(cache_hit=1, cache_miss=2, output=3)))
    assert priced["costUsd"] == pytest.approx((300 * 2 + 10 * 3) / 1e6) and priced["priceModel"] == "configured"


def _one_request() -> LogBuilder:
    log = LogBuilder()
    turn(log, 1, "hi", 0, reason="initial")
    return log


# -- the shared corpus -------------------------------------------------------------------------------------
def _hand_count(log: Path) -> dict[str, int]:
    """Sum of the usage chunks, read straight off the JSON lines (no fold involved)."""
    totals = {"inputTokens": 0, "cacheReadTokens": 0, "outputTokens": 0, "requests": 0}
    for line in log.read_text(encoding="utf-8").splitlines()[1:]:
        event = json.loads(line)
        chunk = (event.get("data") or {}).get("chunk") if isinstance(event.get("data"), dict) else None
        if event.get("type") == "assistant/chunk" and isinstance(chunk, dict) and chunk.get("type") == "usage":
            totals["requests"] += 1
            for key in ("inputTokens", "cacheReadTokens", "outputTokens"):
                totals[key] += chunk["usage"].get(key, 0)
    return totals


@needs_logs
@pytest.mark.parametrize("scenario", ["apps/web/tests/snapshots/cordis-tool-round",
                                      "apps/web/tests/snapshots/permission-policy-context",
                                      "examples/acp-agent/tests/snapshots/both-mode-turn",
                                      "examples/acp-agent/tests/snapshots/pwsh-tool-turn"])
def test_logged_figures_equal_a_hand_count(scenario: str) -> None:
    log = LOGS / scenario / "session.jsonl"
    summary = build_cache_report([log]).logs.to_dicts()[0]
    expected = _hand_count(log)
    assert {key: summary[key] for key in expected} == expected


@needs_logs
def test_hit_ratio_matches_the_reference_ui() -> None:
    # apps/web plan-review's expected UI text shows "Cache hit 51%  Input 10.2K"
    summary = build_cache_report([LOGS / "apps/web/tests/snapshots/plan-review"]).logs
    assert round(summary["hitRatio"][0] * 100) == 51
    assert round((summary["inputTokens"][0] + summary["cacheReadTokens"][0]) / 100) == 102


@needs_logs
def test_every_collapse_in_the_corpus_is_attributed_and_inherited_usage_is_not_totalled() -> None:
    report = build_cache_report([LOGS])
    requests = report.requests.filter(pl.col("kind") == "request")
    assert requests.filter(pl.col("collapse") & pl.col("cause").is_null()).height == 0
    total = report.totals.to_dicts()[0]
    own = requests.filter(~pl.col("inherited"))
    assert requests.filter(pl.col("inherited")).height > 0
    assert total["requests"] == own.height
    assert total["cacheReadTokens"] == report.requests.filter(~pl.col("inherited"))["cacheReadTokens"].fill_null(
        0).sum()
    assert report.logs["costUsd"].sum() == pytest.approx(total["costUsd"])


@needs_logs
def test_on_the_corpus_segment_wise_counting_equals_counting_the_whole_texts() -> None:
    """Every corpus request: its segment-wise prompt is the one-shot linearization of its wire body, and the
    tokens it shares with its predecessor's prompt and answer are the common prefix of the two whole texts."""
    compared = 0
    for path in discover([LOGS]):
        for source in open_logs(path):
            predictor, previous = Predictor(RealHeader()), None
            for request, answer in (call for call in calls(source) if isinstance(call, tuple)):
                if request.parts is None or _image_capable(request):
                    previous = None
                    continue
                now = linear_prompt(request, RealHeader())
                assert now == reference_prompt(request, RealHeader()), f"{path} {request.turn}.{request.step}"
                if previous is not None and previous[0].model == request.model:
                    before, before_answer = previous
                    prompt = predictor.prompt(before.parts, before.model)
                    context = linear_prompt(before, RealHeader()) + (
                        "" if before_answer is None else answer_segment(before_answer, before.model, prompt.mode))
                    shared = predictor.count_shared(before, before_answer, request).prefix_tokens
                    assert shared == common_prefix_length(token_ids(context), token_ids(now)), str(path)
                    compared += 1
                previous = (request, answer)
    assert compared > 100


def test_every_wild_request_reads_the_same_expected_read_alone_and_in_its_folder() -> None:
    """education-rebalance 1.2 was expected to read 1,344 alone (two reads: block 64) and 1,280 in its folder."""
    folder = Path(__file__).resolve().parent / "fixtures" / "wild"
    together = build_cache_report([folder]).requests.filter(pl.col("kind") == "request")   # side calls aside
    judged = ["expectedCacheReadTokens", "withinBlock", "collapse", "collapseCostUsd"]
    logs = together["log"].unique(maintain_order=True).to_list()
    assert len(logs) == 5   # out-of-scope and unauthorized made no model call
    for log in logs:
        alone = build_cache_report([log]).requests.filter(pl.col("kind") == "request")
        assert alone.select(judged).equals(together.filter(pl.col("log") == log).select(judged)), log
    rebalance = together.filter(pl.col("log").str.contains("education-rebalance") & (pl.col("step") == 2))
    figures = rebalance[["expectedPrefixTokens", "expectedCacheReadTokens", "cacheReadTokens"]].row(0)
    assert figures == (1406, 1280, 1280)


def non_zero_reads(root: Path) -> list[int]:
    requests = build_cache_report([root], CacheOptions(predict=False)).requests.filter(~pl.col("inherited"))
    return [reads for reads in requests["cacheReadTokens"].drop_nulls().to_list() if reads > 0]


@pytest.mark.parametrize(("root", "count"), [
    pytest.param(LOGS, 55, marks=needs_logs), (Path(__file__).resolve().parent / "fixtures" / "wild", 10)])
def test_the_default_blocks_basis_every_real_read_is_a_multiple_of_128(root: Path, count: int) -> None:
    """BLOCK_BASIS: 55 non-zero reads in the corpus, 10 in the wild logs, all multiples of 128 (not all of 256)."""
    reads = non_zero_reads(root)
    assert len(reads) == count and all(value % 128 == 0 for value in reads)
    assert any(value % 256 for value in reads)


def _image_capable(request: RebuiltRequest) -> bool:
    return request.model in DEFAULT_IMAGE_MODELS


@needs_logs
def test_on_the_corpus_the_expected_read_is_within_one_block_of_the_logged_one() -> None:
    report = build_cache_report([LOGS])
    assert (report.block, report.block_basis.startswith("default")) == (128, True)
    agreeing, compared = agreement(report)
    assert compared >= 40 and agreeing >= 0.9 * compared
    assert report.totals["unexplained"][0] == 0
    at_64 = build_cache_report([LOGS], CacheOptions(block=64))
    assert agreement(at_64)[0] < agreeing      # the measured block fits these logs better than DeepSeek's unit


# -- CLI -----------------------------------------------------------------------------------------------------
def test_cli_formats_and_exit_codes(tmp_path: Path) -> None:
    log = steady_log()
    turn(log, 3, "later", 0)
    path = write_jsonl(log, tmp_path / "session.jsonl")
    runner = CliRunner()
    table = runner.invoke(main, ["cache-report", str(path)])
    assert table.exit_code == 0 and "unexplained" in table.output
    failing = runner.invoke(main, ["cache-report", str(path), "--fail-on-unexplained", "--format", "json"])
    assert failing.exit_code == 1
    assert "3.1#1" in failing.stderr and "audit explain" in failing.stderr
    parsed = json.loads(failing.stdout)
    assert (parsed["schema"], parsed["version"], len(parsed["rows"])) == ("dsh-audit/cache-report/requests", 4, 3)
    out = tmp_path / "report.parquet"
    assert runner.invoke(main, ["cache-report", str(tmp_path), "--out", str(out)]).exit_code == 0
    assert pl.read_parquet(out).height == 3
    csv = runner.invoke(main, ["cache-report", str(path), "--format", "csv", "--rows", "logs"])
    assert csv.exit_code == 0 and csv.stdout.splitlines()[0].startswith("log,generation,")
    assert len(csv.stdout.splitlines()) == 2


def test_lone_surrogates_in_log_text_reach_every_format_escaped(tmp_path: Path) -> None:
    log = LogBuilder(session_id="s\ud800")
    turn(log, 1, "hello \udc00", 0, reason="initial", tools=[TOOL_A])
    turn(log, 2, "again", 512, reason="change", tools=[TOOL_A], **{"k\ud800": "v\udfff"})
    path = write_jsonl(log, tmp_path / "session.jsonl")
    document = CliRunner().invoke(main, ["cache-report", "--format", "json", str(path)])
    assert document.exit_code == 0 and json.loads(document.output)["rows"][0]["sessionId"] == "s\\ud800"
    csv = CliRunner().invoke(main, ["header-diff", "--format", "csv", str(path)])
    assert csv.exit_code == 0 and ",s\\ud800," in csv.output
    assert CliRunner().invoke(main, ["cache-report", str(path)]).exit_code == 0
    assert "config.k\\ud800" in CliRunner().invoke(main, ["header-diff", str(path)]).output


def test_cli_unreadable_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "session.jsonl"
    bad.write_text("not json\n", encoding="utf-8")
    for target in (bad, tmp_path / "missing.jsonl"):
        result = CliRunner().invoke(main, ["cache-report", str(target)])
        assert result.exit_code == 2
        assert result.stderr.startswith("audit: ") and len(result.stderr.strip().splitlines()) == 1


def test_no_predict_keeps_logged_figures_collapses_and_causes() -> None:
    log = steady_log()
    turn(log, 3, "later", 0)
    predicted, logged_only = rows(log), rows(log, predict=False)
    assert collapses(logged_only) == collapses(predicted) == [(3, "unexplained")]
    for full, lean in zip(predicted, logged_only, strict=True):
        assert (lean["cacheReadTokens"], lean["inputTokens"], lean["cause"]) == (
            full["cacheReadTokens"], full["inputTokens"], full["cause"])
    tool_change = steady_log()
    turn(tool_change, 3, "more", 0, reason="change", tools=[TOOL_A, TOOL_B])
    lean = rows(tool_change, predict=False)[-1]
    assert lean["expectedBasis"] is None and "not tokenized" in lean["note"]


def test_the_same_event_has_the_same_cause_in_every_generation(tmp_path: Path) -> None:
    """issue 17, item 5: a model switch (the persona names the model, so the prompt changes too) is one event,
    named alike whether the prompt is the header's system (v0) or a replaced system/message head (v3, v4)."""
    from genbuilder import GenLog

    v0 = LogBuilder()
    v0.simple_turn(1, "hello", "hi", header_reason="initial", system="You are model A.")
    v0.simple_turn(2, "again", "sure", header_reason="change", system="You are model B.", model="model-b")
    named = {0: [row["cause"] for row in rows(v0)]}
    for version in (known.version for known in generations() if known.system_prompt == "surface"):
        log = GenLog(version)
        log.turn(1, "hello", "hi", head="You are model A.")
        head = next(e["seq"] for e in log.events if e["type"] == "system/message")
        log.add("turn/start", {"turn": 2})
        log.add("step/start", {"turn": 2, "step": 1})
        log.system(2, 1, "You are model B.", replaces=head)
        log.user(2, "again")
        log.header_event("change", model="model-b")
        log.response(2, 1, "sure")
        log.add("step/end", {"turn": 2, "step": 1})
        log.add("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
        path = log.write(tmp_path / f"session.v{version}.jsonl")
        named[version] = [row["cause"] for row in build_cache_report([path]).requests.to_dicts()]
    assert named[0] == named[3] == named[4] == ["first-request", "system-prompt-change+model-change"], named


def test_a_logs_first_request_is_first_request_whatever_set_up_its_prompt(tmp_path: Path) -> None:
    """The official v3 migration of a live dsh log replaces the system/message head before the first request:
    nothing was sent before it, so that replace is detail, not a cause (v0 reads first-request there too)."""
    from genbuilder import GenLog

    log = GenLog(3)
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    log.system(1, 1, "You are model A.", replaces=log.system(1, 1, None))
    log.user(1, "hello")
    log.header_event("initial")
    log.response(1, 1, "hi")
    first = build_cache_report([log.write(tmp_path / "session.v3.jsonl")]).requests.row(0, named=True)
    assert first["cause"] == "first-request" and "system/message replaced" in first["causeDetail"]


@pytest.mark.parametrize("name", ["session.jsonl", "session.v3.jsonl"])
def test_calls_are_listed_in_dispatch_order(name: str) -> None:
    """issue 17, item 4: the compaction an overflow triggered comes after the failed request that caused it (v0
    hands a request out only when it closes, after the compaction was logged)."""
    sample = Path(__file__).resolve().parents[1] / "sample_logs" / "compaction-recovery" / name
    found = build_cache_report([sample]).requests.to_dicts()
    assert [row["seq"] for row in found] == sorted(row["seq"] for row in found)
    assert [row["kind"] for row in found] == ["request", "request", "compaction", "request"]


def rejected_compaction_log() -> LogBuilder:
    """A compaction dsh made the summary call for and then rejected: compaction/start, an error end, no summary."""
    log = steady_log()
    log.add("turn/start", {"turn": 3})
    log.add("step/start", {"turn": 3, "step": 1})
    log.add("compaction/start", {"compactionId": "c9", "turn": 3})
    log.add("compaction/end", {"compactionId": "c9", "turn": 3,
                               "error": "summary is not smaller than the shadowed content"})
    log.user("next")
    log.response(3, 1, "ok", usage={"inputTokens": 10, "outputTokens": 2, "cacheReadTokens": 512})
    log.add("step/end", {"turn": 3, "step": 1})
    log.add("turn/end", {"turn": 3, "reason": {"kind": "completed"}})
    return log


@pytest.mark.parametrize("fast", ["1", "0"], ids=["fast path on", "fast path off"])
def test_a_rejected_compaction_summary_is_a_call_said_unpriced(fast: str, monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    """issue 17, item 4: the call was made, its usage is in no event: verify warns (in both engines), cache-report
    lists it as a compaction call that is not priced."""
    from dsh_audit import verify_path

    monkeypatch.setenv("DSH_AUDIT_FAST_PATH", fast)
    path = write_jsonl(rejected_compaction_log(), tmp_path / "session.jsonl")
    [report] = verify_path(path)
    [warning] = [f for f in report.findings if f.code == "unlogged-model-call"]
    assert warning.severity == "warning" and "summary is not smaller" in warning.message
    assert "at most the 4 message(s)" in warning.message and not report.failed()
    [row] = [r for r in build_cache_report([path]).requests.to_dicts() if r["kind"] == "compaction"]
    assert row["costUsd"] is None and "not priced" in row["note"] and "no usage logged" in row["note"]


def test_logs_stacked_as_they_are_read_report_as_if_each_were_kept(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """build_cache_report stacks the logs' frames every _STACK_EVERY logs through Arrow IPC: its rows, per-log
    rows and totals are those it gives when no log is stacked, dtypes included."""
    from polars.testing import assert_frame_equal

    from dsh_audit.reports import cache_report

    for k in range(7):
        log = LogBuilder(session_id=f"s-{k}")
        turn(log, 1, "hello " * 100, 0, reason="initial", tools=[TOOL_A])
        turn(log, 2, "again " * 100, 512)
        if k % 3 == 0:   # a tool change, then a collapse with no cause
            turn(log, 3, "more", 0, reason="change", tools=[TOOL_A, TOOL_B])
            turn(log, 4, "again " * 100, 640)
            turn(log, 5, "later", 0)
        write_jsonl(log, tmp_path / f"s-{k}.jsonl")
    monkeypatch.setattr(cache_report, "_STACK_EVERY", 10**6)
    kept = build_cache_report([tmp_path])
    monkeypatch.setattr(cache_report, "_STACK_EVERY", 2)
    stacked = build_cache_report([tmp_path])
    assert kept.logs.height == 7 and kept.totals["unexplained"][0] > 0
    for kind in ("requests", "logs", "totals"):
        assert_frame_equal(stacked.rows(kind), kept.rows(kind))
